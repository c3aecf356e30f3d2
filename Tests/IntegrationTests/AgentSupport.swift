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
import Testing

/// Polls `condition` every 20 ms until it holds or `seconds` pass; returns whether it held.
func eventually(_ seconds: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

/// Two devices with a running agent each.
final class TwoAgents {
    let devices: TwoDevices
    var agentA: NotesyncProcess?
    var agentB: NotesyncProcess?

    convenience init(_ label: String) throws {
        try self.init(devices: TwoDevices(label))
    }

    /// Agents on devices the caller prepared (e.g. with the server moved onto a filesystem the test mounted); with
    /// `onlyA`, device B has none (it syncs one-shot).
    init(devices: TwoDevices, onlyA: Bool = false, extra: [String] = []) throws {
        self.devices = devices
        agentA = try start(devices.a, extra: extra)
        agentB = onlyA ? nil : try start(devices.b, extra: extra)
    }

    /// Starts an agent and waits until it has done its first sync. It gets the devices' environment (an S3
    /// server's credentials and endpoint) and `environment`.
    func start(_ folder: String, environment: [String: String] = [:], extra: [String] = []) throws -> NotesyncProcess {
        try? FileManager.default.removeItem(atPath: folder + "/.notesync/status.json")
        let agent = try NotesyncProcess(
            ["watch", "--notes", folder, "--log-level", "debug"] + extra, scratch: devices.scratch.path,
            environment: devices.environment.merging(environment) { _, new in new })
        let started = eventually(30) { FileManager.default.fileExists(atPath: folder + "/.notesync/status.json") }
        #expect(started, "the agent did not start: \(agent.stderrText)")
        return agent
    }

    /// Stops both agents with SIGTERM and checks they exit 0.
    func stop() {
        for agent in [agentA, agentB].compactMap({ $0 }) where agent.process.isRunning {
            agent.process.terminate()
            let result = agent.wait()
            #expect(result.status == 0, "agent exit \(result.status): \(result.stderr.suffix(2000))")
        }
    }

    deinit {
        for agent in [agentA, agentB].compactMap({ $0 }) where agent.process.isRunning {
            kill(agent.pid, SIGKILL)
            agent.process.waitUntilExit()
        }
    }

    /// The agents' logs, for a failure's message: each agent's lines but the debug ones, the last 60.
    func logs() -> String {
        [("A", agentA), ("B", agentB)].compactMap { label, agent in
            agent.map { agent in
                let lines = agent.stderrText.split(separator: "\n").filter { !$0.contains(" debug ") }.suffix(60)
                return "agent \(label):\n" + lines.joined(separator: "\n")
            }
        }.joined(separator: "\n")
    }

    /// Every change the server's log holds for `name`.
    func serverChanges(_ name: String) throws -> [RecordChange] {
        try logChanges(devices.server, name)
    }
}

extension NotesyncProcess {
    var stderrText: String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }
}

/// Runs a terminal program in a pseudo-terminal and types `keys` into it (nano, emacs -nw, vim need a tty).
func typeInto(_ command: [String], keys: String, in directory: String) throws -> Int32 {
    let script = """
        import os, pty, sys, time, select, termios
        keys = bytes.fromhex(sys.argv[1]); cmd = sys.argv[2:]
        pid, fd = pty.fork()
        if pid == 0:
            os.environ["TERM"] = "xterm"
            os.execvp(cmd[0], cmd)
        def drain(t):
            end = time.time() + t
            got = False
            while time.time() < end:
                r, _, _ = select.select([fd], [], [], 0.02)
                if r:
                    try: got = bool(os.read(fd, 65536)) or got
                    except OSError: return got
            return got
        def raw():
            try: return not (termios.tcgetattr(fd)[3] & termios.ICANON)
            except termios.error: return False
        # Keys typed before the editor owns the terminal are lost (emacs flushes pending input when it sets the
        # terminal up) or read by the line discipline (^C, ^S): wait for raw mode, then for the screen to be drawn.
        start = time.time()
        while time.time() < start + 30 and not raw(): drain(0.05)
        while time.time() < start + 30 and drain(0.4): pass
        for k in keys:
            os.write(fd, bytes([k])); drain(0.01)
        deadline = time.time() + 15
        while time.time() < deadline:
            p, status = os.waitpid(pid, os.WNOHANG)
            if p: sys.exit(os.waitstatus_to_exitcode(status))
            drain(0.05)
        os.kill(pid, 9); sys.exit(124)
        """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", script, Data(keys.utf8).map { String(format: "%02x", $0) }.joined()] + command
    process.currentDirectoryURL = URL(fileURLWithPath: directory)
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

/// Runs a shell command line in `directory` and returns its exit status.
@discardableResult
func shell(_ command: String, in directory: String) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    process.arguments = ["-c", command]
    process.currentDirectoryURL = URL(fileURLWithPath: directory)
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}
