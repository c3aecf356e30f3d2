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

        let intact = try t.damageMarker()
        try compare("a damaged marker", 1)
        try t.restoreMarker(intact)

        try t.sync(t.a)
        try FileManager.default.removeItem(atPath: t.server)
        try ServerLifeTests.copyTree(backup, t.server)
        try compare("a server behind this device", 1)
    }

    /// An agent stopped with SIGSTOP holds the folder and answers nothing: `sync` and `diff` give up after the
    /// silence limit, say that the agent does not answer and how to go on (exit 1), and make no sync of their own
    /// (the server gets nothing, the lock stays the agent's). Following the fix (SIGCONT) works.
    @Test func aStoppedAgentIsSaidNotToAnswer() throws {
        let t = try TwoDevices("door-stopped")
        try t.write(t.a, "a.md", "one\n")
        try t.sync(t.a)
        let agent = try Self.startAgent(t, t.a)
        defer { Self.stop(agent) }
        #expect(kill(agent.pid, SIGSTOP) == 0)
        #expect(eventually(10) { processIsStopped(agent.pid) })
        try t.write(t.a, "edit.md", "written while the agent is stopped\n")
        let entries = try ServerLifeTests.entries(t.server).count

        let started = Date()
        let commands = [
            try NotesyncProcess(["sync", "--notes", t.a], scratch: t.scratch.path),
            try NotesyncProcess(["diff", "--notes", t.a], scratch: t.scratch.path)
        ]
        let limit = Double(AgentSocket.silenceLimit.components.seconds)
        let gaveUp = eventually(limit + 20) { commands.allSatisfy { !$0.process.isRunning } }
        #expect(gaveUp, "a command still waits for the stopped agent")
        for command in commands where command.process.isRunning { kill(command.pid, SIGKILL) }
        let results = commands.map { $0.wait() }
        let waited = Date().timeIntervalSince(started)
        #expect(waited >= limit - 1, "gave up after \(waited) s")
        for result in results {
            #expect(
                result.status == 1 && result.stderr.contains("has not answered")
                    && result.stderr.contains("kill -CONT \(agent.pid)"),
                "\(result.status): \(result.stdout) \(result.stderr)")
        }
        #expect(try ServerLifeTests.entries(t.server).count == entries, "a command synced beside the stopped agent")
        #expect(t.read(t.a, "edit.md") != nil)
        #expect((try? FolderLock(NotesFolder(root: t.a))) == nil, "the stopped agent no longer holds the folder")
        #expect(processIsStopped(agent.pid))

        // The fix, followed: the agent goes on, answers the next command, and survives the answers it owes to the
        // commands that gave up.
        #expect(kill(agent.pid, SIGCONT) == 0)
        let again = try t.run(["sync", "--notes", t.a])
        #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
        #expect(try logChanges(t.server, "edit.md").count == 1)
        #expect(agent.process.isRunning, "\(agent.stderrText.suffix(2000))")
    }

    /// `status` tells the truth about a running agent: online while it syncs, SYNC STOPPED while a gap or another
    /// server stops its syncs (never "online"), online again once the gap is sealed.
    @Test func statusSaysWhenTheAgentsSyncIsStopped() throws {
        let t = try TwoDevices("door-status")
        try t.write(t.a, "a.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let agent = try Self.startAgent(t, t.a, ["--poll-interval", "0.2", "--gap-grace", "0"])
        defer { Self.stop(agent) }
        #expect(eventually(40) { Self.agentLine(t, t.a).contains("), online;") }, "\(Self.agentLine(t, t.a))")

        // An entry lost before the agent read it (it is stopped meanwhile): the agent's syncs stop at the gap.
        #expect(kill(agent.pid, SIGSTOP) == 0)
        try t.write(t.b, "x.md", "in the entry that goes missing\n")
        try t.sync(t.b)
        let lost = try #require(ServerLifeTests.entries(t.server).max { $0.key < $1.key }?.value)
        try t.write(t.b, "y.md", "after the gap\n")
        try t.sync(t.b)
        #expect(unlink(lost) == 0)
        #expect(kill(agent.pid, SIGCONT) == 0)
        #expect(
            eventually(20) { Self.agentLine(t, t.a).contains("SYNC STOPPED") }, "\(Self.agentLine(t, t.a)) \(agent.stderrText.suffix(2000))"
        )
        #expect(!Self.agentLine(t, t.a).contains("online"))
        #expect(try t.run(["status", "--notes", t.a]).stdout.contains("gap"))

        try t.expectOK(["server", "fsck", t.server, "--repair", "--gap-age", "0"])
        #expect(eventually(40) { Self.agentLine(t, t.a).contains("), online;") }, "\(Self.agentLine(t, t.a))")

        let away = t.server + ".away"
        #expect(rename(t.server, away) == 0)
        try t.expectOK(["server", "init", t.server])
        #expect(eventually(20) { Self.agentLine(t, t.a).contains("SYNC STOPPED") }, "\(Self.agentLine(t, t.a))")
        try FileManager.default.removeItem(atPath: t.server)
        #expect(rename(away, t.server) == 0)
        #expect(eventually(40) { Self.agentLine(t, t.a).contains("), online;") }, "\(Self.agentLine(t, t.a))")
    }
}
