import ArgumentParser
import Foundation
import Logging
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// Where the passphrase of an encrypted server comes from: `--passphrase-file`, else `NOTESYNC_PASSPHRASE`, else a
/// prompt on the terminal (echo off). Never from an argument: it would show in `ps` and the shell's history.
struct PassphraseOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "For an encrypted server: read the passphrase (or the recovery key) from this file (one trailing newline "
                + "is dropped). Default: NOTESYNC_PASSPHRASE, else asked on the terminal.",
            valueName: "file"))
    var passphraseFile: String?

    /// The shortest passphrase a new server accepts.
    static let minimumLength = 8

    /// Whether a passphrase was given by file or environment: it can be read without asking.
    var isGiven: Bool {
        passphraseFile != nil || ProcessInfo.processInfo.environment["NOTESYNC_PASSPHRASE"]?.isEmpty == false
    }

    /// The passphrase, from the file, the environment or the terminal; `purpose` is shown at the prompt.
    func passphrase(purpose: String) throws -> String {
        if let passphraseFile {
            guard let data = try FileIO.read(passphraseFile, limit: 1 << 16) else {
                throw NoteSyncError(
                    .usage, path: passphraseFile, "does not exist", fix: "give the file that holds the passphrase")
            }
            var text = String(decoding: data, as: UTF8.self)
            if text.hasSuffix("\r\n") {
                text.removeLast(2)
            } else if text.hasSuffix("\n") {
                text.removeLast()
            }
            guard !text.isEmpty else {
                throw NoteSyncError(.usage, path: passphraseFile, "is empty", fix: "write the passphrase in it")
            }
            return text
        }
        if let text = ProcessInfo.processInfo.environment["NOTESYNC_PASSPHRASE"], !text.isEmpty { return text }
        guard let text = Self.prompt("\(purpose): ") else {
            throw NoteSyncError(
                .key, path: nil, "the server is encrypted and no passphrase was given (no terminal to ask on)",
                fix: "give it with --passphrase-file FILE or in NOTESYNC_PASSPHRASE")
        }
        return text
    }

    /// The passphrase of a new server (or a new passphrase): from the file, else (with `fromEnvironment`) from
    /// NOTESYNC_PASSPHRASE, else asked twice on a terminal; at least ``minimumLength`` characters.
    func newPassphrase(fromEnvironment: Bool = true) throws -> String {
        let text: String
        if passphraseFile != nil
            || (fromEnvironment && ProcessInfo.processInfo.environment["NOTESYNC_PASSPHRASE"]?.isEmpty == false)
        {
            text = try passphrase(purpose: "")
        } else {
            guard let first = Self.prompt("new passphrase for the server: "), let second = Self.prompt("the same again: ")
            else {
                throw NoteSyncError(
                    .usage, path: nil, "a new passphrase is needed, and there is no terminal to ask on",
                    fix: fromEnvironment
                        ? "give it with --passphrase-file FILE or in NOTESYNC_PASSPHRASE"
                        : "give it with --new-passphrase-file FILE")
            }
            guard first == second else {
                throw NoteSyncError(.usage, path: nil, "the two passphrases differ", fix: "run the command again")
            }
            text = first
        }
        guard text.count >= Self.minimumLength else {
            throw NoteSyncError(
                .usage, path: passphraseFile, "the passphrase is shorter than \(Self.minimumLength) characters",
                fix: "choose a longer one: several words are easy to remember and hard to guess")
        }
        return text
    }

    /// The passphrases these options give, for the library's use cases: by file or environment, or asked on the
    /// terminal when needed.
    var secrets: Secrets {
        let options = self
        return Secrets(
            isGiven: options.isGiven, newPassphrase: { try options.newPassphrase() },
            passphrase: { try options.passphrase(purpose: $0) })
    }

    /// Opens the server at `root`; an encrypted one with its key (the passphrase asked for when not given).
    func open(_ root: String, endpoint: String?, device: String, logger: Logger) throws -> ServerStore {
        try secrets.open(root, endpoint: endpoint, device: device, logger: logger)
    }

    /// One line read from the terminal with echo off; nil when there is no terminal.
    static func prompt(_ text: String) -> String? {
        let tty = Glibc.open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard tty >= 0 else { return nil }
        defer { close(tty) }
        _ = text.withCString { write(tty, $0, strlen($0)) }
        var saved = termios()
        let hasTerminal = tcgetattr(tty, &saved) == 0
        if hasTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(tty, TCSAFLUSH, &quiet)
        }
        defer {
            if hasTerminal { tcsetattr(tty, TCSAFLUSH, &saved) }
            _ = "\n".withCString { write(tty, $0, 1) }
        }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(tty, &byte, 1) == 1 && byte != 0x0A && bytes.count < 4096 { bytes.append(byte) }
        if bytes.last == 0x0D { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
