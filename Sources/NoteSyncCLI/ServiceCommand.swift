import ArgumentParser
import Foundation
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// `notesync service install|uninstall|status`: the agent as a systemd user service, one instance of the template
/// unit `notesync@.service` per notes folder, named by the folder's path (`systemd-escape --path`).
struct ServiceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "service",
        abstract: "Run the agent as a systemd user service, one per notes folder.",
        discussion: """
            `install` writes the template unit notesync@.service (this binary's path, `watch --notes %f`) into \
            ~/.config/systemd/user, then enables and starts the instance of the notes folder, e.g. \
            notesync@home-ann-Notes.service: it runs at every login and restarts after a failure. `status` shows \
            the unit's state and its last log lines; `uninstall` stops and disables it. Where systemd user \
            services are not available (no systemctl, or no user manager, as in most containers), each says so, \
            prints the command to run instead and exits 1.
            """,
        subcommands: [ServiceInstallCommand.self, ServiceUninstallCommand.self, ServiceStatusCommand.self]
    )
}

struct ServiceInstallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Install, enable and start the agent of the notes folder as a systemd user service.")

    @OptionGroup var folderOptions: FolderOptions

    func run() throws {
        try reportingErrors {
            let folder = try folderOptions.folder()
            let systemd = try SystemdUser.available(for: folder)
            let unit = SystemdUser.unitName(folder)
            let wasActive = systemd.isActive(unit)
            if !wasActive {
                // An agent started by hand holds the folder: the service would fail to start, again and again.
                do { _ = try FolderLock(folder) } catch let error as NoteSyncError where error.kind == .locked {
                    throw NoteSyncError(
                        .locked, path: folder.root, "an agent (`notesync watch`) already runs on this notes folder",
                        fix: "stop it (`kill PID`; `notesync status` shows it), then run `notesync service install` again")
                }
            }
            let binary = SystemdUser.runningBinary()
            try FileIO.makeDirectories(systemd.unitDirectory)
            let template = systemd.unitDirectory + "/" + SystemdUser.templateName
            try Data(SystemdUser.templateUnit(binary: binary).utf8).write(to: URL(fileURLWithPath: template), options: .atomic)
            try systemd.run(["daemon-reload"])
            try systemd.run(["enable", "--now", unit])
            // A unit that ran already runs the binary it started with: started again, it runs this one.
            if wasActive { try systemd.run(["restart", unit]) }
            print("installed \(template)")
            print("enabled and started \(unit): `\(binary) watch --notes \(shellQuoted(folder.root))`, at every login")
            print("state: `notesync service status --notes \(shellQuoted(folder.root))`; logs: `journalctl --user -u \(unit) -f`")
            print("to keep it running while you are logged out: `loginctl enable-linger \(NSUserName())`")
            return ExitCodes.ok
        }
    }
}

struct ServiceUninstallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "uninstall",
        abstract: "Stop and disable the agent's systemd user service for the notes folder.")

    @OptionGroup var folderOptions: FolderOptions

    func run() throws {
        try reportingErrors {
            let folder = try folderOptions.serviceFolder()
            let systemd = try SystemdUser.available(for: folder)
            let unit = SystemdUser.unitName(folder)
            try systemd.run(["disable", "--now", unit])
            print("stopped and disabled \(unit)")
            // The template goes with the last notes folder that uses it.
            let template = systemd.unitDirectory + "/" + SystemdUser.templateName
            if systemd.enabledInstances().isEmpty, FileIO.lstatInfo(template) != nil {
                unlink(template)
                print("removed \(template)")
            }
            try systemd.run(["daemon-reload"])
            return ExitCodes.ok
        }
    }
}

struct ServiceStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the state of the notes folder's agent service and its last log lines.",
        discussion: "Exit code 0 when the service runs, 1 otherwise.")

    @OptionGroup var folderOptions: FolderOptions

    func run() throws {
        try reportingErrors {
            let folder = try folderOptions.serviceFolder()
            let systemd = try SystemdUser.available(for: folder)
            let unit = SystemdUser.unitName(folder)
            let status = systemd.capture(systemd.systemctl, ["--user", "status", "--no-pager", "--lines=0", unit])
            print(status.output.trimmingCharacters(in: .newlines))
            if let journalctl = SystemdUser.which("journalctl") {
                print("\nlast log lines (journalctl --user -u \(unit) -n 20):")
                let log = systemd.capture(journalctl, ["--user", "-u", unit, "-n", "20", "--no-pager"])
                print(log.output.trimmingCharacters(in: .newlines))
            }
            return systemd.isActive(unit) ? ExitCodes.ok : ExitCodes.failure
        }
    }
}

extension FolderOptions {
    /// The notes folder a service is for: as ``folder()``, but `--notes` may name a folder that is no longer a
    /// notes folder (its service is still uninstalled, or shown).
    func serviceFolder() throws -> NotesFolder {
        if let notes { return NotesFolder(root: notes) }
        return try folder()
    }
}

/// `systemctl --user` and the unit files of the user's manager.
struct SystemdUser {
    static let templateName = "notesync@.service"

    let systemctl: String
    /// `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`.
    let unitDirectory: String

    /// The user's systemd, or an error that says it is not there, with the command to run instead.
    static func available(for folder: NotesFolder) throws -> SystemdUser {
        let environment = ProcessInfo.processInfo.environment
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSHomeDirectory() + "/.config"
        guard let systemctl = which("systemctl") else {
            throw unavailable(folder, "systemd is not installed here (no systemctl on PATH)")
        }
        let systemd = SystemdUser(systemctl: systemctl, unitDirectory: config + "/systemd/user")
        let probe = systemd.capture(systemctl, ["--user", "show-environment"])
        guard probe.status == 0 else {
            let reason = probe.output.split(separator: "\n").first.map(String.init) ?? "exit \(probe.status)"
            throw unavailable(folder, "`systemctl --user` has no user manager to talk to (\(reason))")
        }
        return systemd
    }

    static func unavailable(_ folder: NotesFolder, _ reason: String) -> NoteSyncError {
        let command = "\(shellQuoted(runningBinary())) watch --notes \(shellQuoted(folder.root))"
        return NoteSyncError(
            .io, "systemd user services are not available: \(reason)",
            fix: """
                run the agent yourself instead:
                    \(command)
                  or start it at every login: add this line to ~/.profile (a second agent on the folder exits at once):
                    mkdir -p ~/.local/state && nohup \(command) >>~/.local/state/notesync-watch.log 2>&1 &
                """)
    }

    /// `notesync@<path, as systemd-escape --path makes it>.service`.
    static func unitName(_ folder: NotesFolder) -> String { "notesync@" + escapePath(folder.root) + ".service" }

    /// `systemd-escape --path`: slashes trimmed and made `-`; every byte but ASCII letters, digits, `:`, `_` and
    /// `.` (and a leading `.`) written as `\xNN`.
    static func escapePath(_ path: String) -> String {
        let trimmed = path.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
        if trimmed.isEmpty { return "-" }
        var out = ""
        for (index, byte) in trimmed.utf8.enumerated() {
            let allowed =
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "_") || (byte == UInt8(ascii: ".") && index > 0)
            if byte == UInt8(ascii: "/") {
                out += "-"
            } else if allowed {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += String(format: "\\x%02x", byte)
            }
        }
        return out
    }

    /// The template unit: this binary's path, the notes folder from the instance name (`%f`: `/` + the unescaped
    /// instance).
    static func templateUnit(binary: String) -> String {
        let exec = "\"" + binary.replacingOccurrences(of: "%", with: "%%").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        return """
            # notesync agent, one instance per notes folder: notesync@<the folder's path, escaped by
            # `systemd-escape --path`>.service. Written by `notesync service install`; `notesync service uninstall`
            # removes it with the last instance.
            [Unit]
            Description=notesync agent: keep %f in sync with its server folder
            After=network-online.target remote-fs.target

            [Service]
            Type=simple
            ExecStart=\(exec) watch --notes "%f"
            Restart=on-failure
            RestartSec=5
            # SIGTERM: the agent finishes the sync in flight and exits 0.
            KillSignal=SIGTERM
            TimeoutStopSec=30

            [Install]
            WantedBy=default.target

            """
    }

    /// The absolute path of the running binary (what the unit starts).
    static func runningBinary() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// An executable on PATH.
    static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    func isActive(_ unit: String) -> Bool { capture(systemctl, ["--user", "is-active", "--quiet", unit]).status == 0 }

    /// The instances enabled in the unit directory (their links in `*.wants/`).
    func enabledInstances() -> [String] {
        let wants = (try? FileManager.default.contentsOfDirectory(atPath: unitDirectory)) ?? []
        return wants.filter { $0.hasSuffix(".wants") }.flatMap { directory in
            ((try? FileManager.default.contentsOfDirectory(atPath: unitDirectory + "/" + directory)) ?? [])
                .filter { $0.hasPrefix("notesync@") && $0 != Self.templateName }
        }
    }

    /// `systemctl --user ARGS`; a failure is an error with systemctl's own words.
    func run(_ arguments: [String]) throws {
        let result = capture(systemctl, ["--user"] + arguments)
        guard result.status == 0 else {
            throw NoteSyncError(
                .io,
                "`systemctl --user \(arguments.joined(separator: " "))` failed (exit \(result.status)): "
                    + result.output.trimmingCharacters(in: .whitespacesAndNewlines),
                fix: "see `systemctl --user status` and `journalctl --user -xe`")
        }
    }

    /// Runs a program; its exit status and its output (stdout and stderr together).
    func capture(_ executable: String, _ arguments: [String]) -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return (127, "\(executable): \(error)") }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// A word as a POSIX shell reads it: quoted only when it has to be.
func shellQuoted(_ word: String) -> String {
    let plain = word.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "/._-+:@%=,".unicodeScalars.contains($0) }
    if plain && !word.isEmpty { return word }
    return "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
