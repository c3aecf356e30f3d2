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
import Testing

/// `notesync service install|status|uninstall`: against the real user manager where one runs, against a
/// `systemctl` that records what it is asked everywhere, and the message where systemd is not there.
@Suite(.serialized)
struct ServiceTests {
    /// A notes folder to make a service for.
    static func notesFolder(_ scratch: Scratch) throws -> String {
        let notes = NotesFolder(root: scratch.path + "/My Notes").root
        let result = try notesync(
            ["init", "--notes", notes, "--server", scratch.path + "/server", "--create-server"], scratch: scratch.path)
        try #require(result.status == 0, "\(result.stderr)")
        return notes
    }

    @Test func withoutSystemdItSaysSoAndPrintsTheCommandToRun() throws {
        let scratch = try Scratch("service-none")
        let notes = try Self.notesFolder(scratch)
        for command in ["install", "status", "uninstall"] {
            let result = try NotesyncProcess(
                ["service", command, "--notes", notes], scratch: scratch.path, environment: ["PATH": scratch.path + "/no-bin"]
            ).wait()
            #expect(result.status == 1, "\(command): \(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains("systemd user services are not available"), "\(result.stderr)")
            #expect(result.stderr.contains("no systemctl on PATH"), "\(result.stderr)")
            #expect(result.stderr.contains("\(try notesyncBinary()) watch --notes '\(notes)'"), "\(result.stderr)")
            #expect(result.stderr.contains("~/.profile"), "\(result.stderr)")
        }
    }

    /// With systemctl installed but no user manager (a container, a session without one): the same message, with
    /// systemctl's reason.
    @Test func withoutAUserManagerItSaysSo() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemctl") else {
            print("ServiceTests: skipped: no /usr/bin/systemctl here")
            return
        }
        guard try runTool("/usr/bin/systemctl", ["--user", "show-environment"]).status != 0 else {
            print("ServiceTests: skipped the no-manager case: a systemd user manager runs here")
            return
        }
        let scratch = try Scratch("service-nomanager")
        let notes = try Self.notesFolder(scratch)
        let result = try notesync(["service", "install", "--notes", notes], scratch: scratch.path)
        #expect(result.status == 1)
        #expect(result.stderr.contains("`systemctl --user` has no user manager"), "\(result.stderr)")
        #expect(result.stderr.contains("watch --notes '\(notes)'"), "\(result.stderr)")
    }

    /// The unit written and the systemctl calls made, with a systemctl and a journalctl that record them.
    @Test func installWritesTheTemplateAndEnablesTheFoldersInstance() throws {
        let scratch = try Scratch("service-fake")
        let notes = try Self.notesFolder(scratch)
        let bin = scratch.path + "/bin"
        let log = scratch.path + "/calls.log"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let systemctl = """
            #!/bin/sh
            echo "$*" >>'\(log)'
            case "$*" in
            *show-environment*) echo HOME=/root ;;
            *is-active*) [ -f '\(scratch.path)/active' ] || exit 3 ;;
            *"enable --now"*) touch '\(scratch.path)/active' ;;
            *"disable --now"*) rm -f '\(scratch.path)/active' ;;
            *" status "*) echo "fake status of the unit"; echo "   Active: active (running)" ;;
            esac
            exit 0
            """
        let journalctl = "#!/bin/sh\necho \"journal $*\" >>'\(log)'\necho 'fake journal line'\n"
        for (name, text) in [("systemctl", systemctl), ("journalctl", journalctl)] {
            try Data(text.utf8).write(to: URL(fileURLWithPath: bin + "/" + name))
            chmod(bin + "/" + name, 0o755)
        }
        let environment = ["PATH": bin + ":/usr/bin:/bin", "XDG_CONFIG_HOME": scratch.path + "/config"]
        // As `systemd-escape --path` names it.
        let unit =
            "notesync@"
            + String(notes.dropFirst()).replacingOccurrences(of: "-", with: "\\x2d").replacingOccurrences(of: " ", with: "\\x20")
            .replacingOccurrences(of: "/", with: "-")
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-escape") {
            let escaped = try runTool("/usr/bin/systemd-escape", ["--path", "--template=notesync@.service", notes])
            #expect(escaped.stdout.trimmingCharacters(in: .newlines) == unit + ".service")
        }

        let install = try NotesyncProcess(["service", "install", "--notes", notes], scratch: scratch.path, environment: environment).wait()
        #expect(install.status == 0, "\(install.stdout) \(install.stderr)")
        #expect(install.stdout.contains(unit + ".service"), "\(install.stdout)")
        let template = try String(contentsOfFile: scratch.path + "/config/systemd/user/notesync@.service", encoding: .utf8)
        #expect(template.contains("ExecStart=\"\(try notesyncBinary())\" watch --notes \"%f\""), "\(template)")
        #expect(template.contains("WantedBy=default.target"))
        var calls = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(calls.contains("--user daemon-reload"), "\(calls)")
        #expect(calls.contains("--user enable --now \(unit).service"), "\(calls)")

        let status = try NotesyncProcess(["service", "status", "--notes", notes], scratch: scratch.path, environment: environment).wait()
        #expect(status.status == 0, "\(status.stdout) \(status.stderr)")
        #expect(status.stdout.contains("fake status of the unit") && status.stdout.contains("fake journal line"), "\(status.stdout)")
        calls = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(calls.contains("journal --user -u \(unit).service -n 20 --no-pager"), "\(calls)")

        let uninstall = try NotesyncProcess(["service", "uninstall", "--notes", notes], scratch: scratch.path, environment: environment)
            .wait()
        #expect(uninstall.status == 0, "\(uninstall.stdout) \(uninstall.stderr)")
        calls = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(calls.contains("--user disable --now \(unit).service"), "\(calls)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/config/systemd/user/notesync@.service"))
        let after = try NotesyncProcess(["service", "status", "--notes", notes], scratch: scratch.path, environment: environment).wait()
        #expect(after.status == 1)
    }

    /// Against the real user manager, where one runs: installed, running, stopped and gone again.
    @Test func installsWithTheRealUserManager() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemctl"),
            try runTool("/usr/bin/systemctl", ["--user", "show-environment"]).status == 0
        else {
            print("ServiceTests: skipped the real service: no systemd user manager runs here (`systemctl --user` fails)")
            return
        }
        let scratch = try Scratch("service-real")
        let notes = try Self.notesFolder(scratch)
        let install = try notesync(["service", "install", "--notes", notes], scratch: scratch.path)
        #expect(install.status == 0, "\(install.stdout) \(install.stderr)")
        defer { _ = try? notesync(["service", "uninstall", "--notes", notes], scratch: scratch.path) }
        var running = false
        for _ in 0..<50 where !running {
            running = AgentStatus.read(NotesFolder(root: notes)) != nil
            if !running { usleep(100_000) }
        }
        #expect(running, "the service's agent did not start")
        let status = try notesync(["service", "status", "--notes", notes], scratch: scratch.path)
        #expect(status.status == 0, "\(status.stdout) \(status.stderr)")
        let uninstall = try notesync(["service", "uninstall", "--notes", notes], scratch: scratch.path)
        #expect(uninstall.status == 0, "\(uninstall.stdout) \(uninstall.stderr)")
    }
}
