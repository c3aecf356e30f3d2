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

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Connect a notes folder to a server directory.",
        discussion: """
            Keeps the local state in NOTES/.notesync/ (never synced). The server must already be a notesync \
            server unless --create-server is given (with --encrypt: an encrypted one).
            An encrypted server asks for its passphrase once (or the recovery key; --passphrase-file or \
            NOTESYNC_PASSPHRASE for scripts); the key is kept in NOTES/.notesync/vault-key (mode 600). Run on a \
            notes folder already synced with that server but without its key, init only keeps the key.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Option(help: "The notes folder (created if missing).") var notes: String
    @Option(help: "The server: a folder (local, or an NFS/SMB/sshfs mount), or s3://BUCKET/PREFIX.") var server: String
    @OptionGroup var location: EndpointOption
    @Option(help: "This device's name in conflict copies (default: the host name).") var deviceName: String?
    @Option(
        help: ArgumentHelp(
            "The largest note this device syncs (default \(FileSizeLimit.default); 0: no limit); see `notesync config`.",
            valueName: "size"))
    var maxFileSize: String?
    @Flag(help: "Make the server directory a new server if it is not one yet.") var createServer = false
    @Flag(help: "With --create-server: make it an encrypted server (`notesync server init --encrypt`).") var encrypt = false
    @OptionGroup var secret: PassphraseOptions
    @Flag(name: .shortAndLong, help: "Show no progress line (a terminal shows one for work longer than a second).")
    var quiet = false

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            var setup = FolderSetup(
                notes: notes, server: server, deviceName: deviceName ?? ProcessInfo.processInfo.hostName)
            setup.endpoint = location.endpoint
            setup.maxFileSize = try maxFileSize.map(FileSizeLimit.init(parsing:))
            setup.createServer = createServer
            setup.encrypt = encrypt
            setup.secrets = secret.secrets
            // A large folder takes a while to walk: a progress line on a terminal.
            let line = ProgressLine.start(quiet: quiet)
            setup.progress = line?.progress
            var drawing = line != nil
            func endLine() {
                if drawing { line?.finish() }
                drawing = false
            }
            defer { endLine() }
            let outcome = try setup.run(logger: logger) { notice in
                switch notice {
                case .stateMovedAside(let reason, let aside):
                    print("the local state could not be read (\(reason)); moved it to \(aside) and starting afresh: every note stays")
                case .walked:
                    endLine()
                case .serverCreated(let root, let recovery):
                    print("created a new server in \(DisplayName.escape(root))")
                    if let recovery { ServerInit.printRecovery(recovery) }
                }
            }
            switch outcome {
            case .keptKey(let serverID, let keyFile):
                print("kept the key of encrypted server \(serverID) in \(DisplayName.escape(keyFile)); every note is as it was")
            case .connected(let notes, let server, _, let name):
                print(
                    "notes folder \(DisplayName.escape(notes)) is now synced with \(DisplayName.escape(server)) as device \"\(name)\""
                )
                print("next: `notesync sync --notes \(notes)` (or `notesync diff` to see what it would do)")
            }
            return ExitCodes.ok
        }
    }
}
