import Foundation
import NoteSync
import Testing

/// The command line while an agent runs, through the real binary: a command the agent serves exits as it would
/// alone, whatever stops the sync; a command whose agent does not answer says so and does nothing; `status` says
/// what the agent's sync came to.
@Suite struct AgentDoorTests {
    /// Starts `notesync watch` on `folder` and waits until its first sync is done (its status file is written).
    static func startAgent(_ t: TwoDevices, _ folder: String, _ extra: [String] = []) throws -> NotesyncProcess {
        try? FileManager.default.removeItem(atPath: folder + "/.notesync/status.json")
        let agent = try NotesyncProcess(["watch", "--notes", folder] + extra, scratch: t.scratch.path)
        let started = eventually(30) { FileManager.default.fileExists(atPath: folder + "/.notesync/status.json") }
        #expect(started, "the agent did not start: \(agent.stderrText)")
        return agent
    }

    static func stop(_ agent: NotesyncProcess) {
        guard agent.process.isRunning else { return }
        kill(agent.pid, SIGCONT)
        agent.process.terminate()
        let result = agent.wait()
        #expect(result.status == 0, "agent exit \(result.status): \(result.stderr.suffix(2000))")
    }

    /// The agent line of `notesync status`.
    static func agentLine(_ t: TwoDevices, _ folder: String) -> String {
        let status = (try? t.run(["status", "--notes", folder]))?.stdout ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix("agent:") }.map(String.init) ?? ""
    }

    /// For each condition that stops a sync (a gap, another server, an empty folder or none at the server path, a
    /// damaged marker, a server behind the device), `sync`, `diff`, `restore` and `status` exit with the same code
    /// while an agent runs (and serves the first three) as they do alone.
    @Test func aCommandTheAgentServesExitsAsItWouldAlone() throws {
        let t = try TwoDevices("door-codes")
        try t.write(t.a, "a.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let backup = t.scratch.path + "/backup"
        try ServerLifeTests.copyTree(t.server, backup)
        let commands: [[String]] = [["sync"], ["diff"], ["restore", "a.md", "--version", "1"], ["status"]]

        func compare(_ condition: String, _ expected: Int32) throws {
            let alone = try commands.map { try t.run($0 + ["--notes", t.a]) }
            let agent = try Self.startAgent(t, t.a)
            defer { Self.stop(agent) }
            for (command, alone) in zip(commands, alone) {
                #expect(alone.status == expected, "\(condition): \(command) alone exited \(alone.status): \(alone.stderr)")
                let served = try t.run(command + ["--notes", t.a])
                #expect(
                    served.status == alone.status,
                    "\(condition): \(command) exited \(served.status) with the agent, \(alone.status) alone: \(served.stdout) \(served.stderr)"
                )
            }
        }

        // A gap: B's first entry lost, its second there.
        try t.write(t.b, "x.md", "in the entry that goes missing\n")
        try t.sync(t.b)
        let lost = try #require(ServerLifeTests.entries(t.server).max { $0.key < $1.key }?.value)
        try t.write(t.b, "y.md", "after the gap\n")
        try t.sync(t.b)
        let aside = t.scratch.path + "/entry-aside"
        #expect(rename(lost, aside) == 0)
        try compare("a gap in the log", 1)
        #expect(rename(aside, lost) == 0)

        let away = t.server + ".away"
        #expect(rename(t.server, away) == 0)
        try compare("no server folder", 3)
        try FileManager.default.createDirectory(atPath: t.server, withIntermediateDirectories: false)
        try compare("an empty folder at the server path", 3)
        try FileManager.default.removeItem(atPath: t.server)
        try t.expectOK(["server", "init", t.server])
        try compare("another server at the path", 1)
        try FileManager.default.removeItem(atPath: t.server)
        #expect(rename(away, t.server) == 0)

        let marker = ServerLayout(root: t.server).marker
        let intact = try Data(contentsOf: URL(fileURLWithPath: marker))
        unlink(marker)
        try Data("{ not json".utf8).write(to: URL(fileURLWithPath: marker))
        try compare("a damaged marker", 1)
        unlink(marker)
        try intact.write(to: URL(fileURLWithPath: marker))

        try t.sync(t.a)
        try FileManager.default.removeItem(atPath: t.server)
        try ServerLifeTests.copyTree(backup, t.server)
        try compare("a server behind this device", 1)
    }
}
