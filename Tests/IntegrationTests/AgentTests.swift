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

/// Two real agents on one server folder, driven by real editors and by hostile timing.
@Suite(.serialized) struct AgentTests {
    enum Editor: String, CaseIterable, CustomStringConvertible {
        case vim, nano, emacs, sedInPlace, renameOver, renameOverLate, truncateAndWrite, gioSave
        var description: String { rawValue }
    }

    static func available(_ editor: Editor) -> Bool {
        let tool: String
        switch editor {
        case .vim: tool = "/usr/bin/vim"
        case .nano: tool = "/usr/bin/nano"
        case .emacs: tool = "/usr/bin/emacs"
        case .gioSave: tool = "/usr/bin/gio"
        default: return true
        }
        return FileManager.default.isExecutableFile(atPath: tool)
    }

    func edit(_ editor: Editor, in directory: String) throws {
        switch editor {
        case .vim:
            #expect(try typeInto(["vim", "--clean", "note.md"], keys: "Goadded by vim\u{1B}:wq\r", in: directory) == 0)
        case .nano:
            #expect(try typeInto(["nano", "note.md"], keys: "added by nano \u{0F}\r\u{18}", in: directory) == 0)
        case .emacs:
            #expect(
                try typeInto(["emacs", "-nw", "-Q", "note.md"], keys: "\u{1B}>added by emacs\u{18}\u{13}\u{18}\u{03}", in: directory) == 0)
        case .sedInPlace:
            #expect(try shell("sed -i 's/line one/LINE ONE (sed)/' note.md", in: directory) == 0)
        case .renameOver:
            #expect(try shell("printf 'replaced by rename\\n' > .note.md.new && mv .note.md.new note.md", in: directory) == 0)
        case .renameOverLate:
            // The temp is quiet for 100 ms before the rename (a slow tool, a loaded machine): five times the settle,
            // a quarter of the wait for a name that reads as a temp.
            #expect(
                try shell("printf 'replaced by a late rename\\n' > .note.md.new && sleep 0.1 && mv .note.md.new note.md", in: directory)
                    == 0)
        case .truncateAndWrite:
            #expect(try shell("printf 'truncated and rewritten\\n' > note.md", in: directory) == 0)
        case .gioSave:
            #expect(try shell("printf 'saved by gio\\n' | gio save note.md", in: directory) == 0)
        }
    }

    @Test(arguments: Editor.allCases)
    func anEditorsSaveArrivesExactlyWithoutLitterOrTransientDelete(_ editor: Editor) throws {
        try #require(Self.available(editor), "\(editor) is not installed: scripts/test installs it")
        let agents = try TwoAgents("editor-\(editor)")
        defer { agents.stop() }
        let t = agents.devices
        try t.write(t.a, "note.md", "line one\nline two\n")
        #expect(eventually { t.read(t.b, "note.md") == "line one\nline two\n" }, "the first version did not arrive")

        try edit(editor, in: t.a)
        let saved = try Data(contentsOf: URL(fileURLWithPath: t.a + "/note.md"))
        #expect(saved != Data("line one\nline two\n".utf8), "\(editor) did not save")
        #expect(
            eventually { (try? Data(contentsOf: URL(fileURLWithPath: t.b + "/note.md"))) == saved },
            "B did not receive exactly the saved bytes: \(t.read(t.b, "note.md") ?? "nil")")
        // Give litter a chance to travel, then check none did.
        #expect(eventually(2) { false } == false)
        #expect(try Set(t.notes(t.b).keys) == ["note.md"], "editor litter reached the other device")
        let changes = try agents.serverChanges("note.md")
        #expect(!changes.contains { $0.op == .delete }, "a transient delete reached the server")
        let store = try ServerStore(root: t.server, device: "checker", logger: .init(label: "t"))
        var zone = ZoneState()
        try store.fetch(into: &zone)
        #expect(zone.heads.keys.map(\.string) == ["note.md"], "only the note is a record: \(zone.heads.keys)")
    }

    /// `mv` of a note and of a folder of most notes while both agents run: one move each in the log (the two names
    /// of a rename settle together), no mass delete held, the other device renames its files, and its trash stays
    /// empty.
    @Test func renamesMadeWhileTheAgentsRunArriveAsRenames() throws {
        let agents = try TwoAgents("agent-moves")
        defer { agents.stop() }
        let t = agents.devices
        for index in 0..<12 { try t.write(t.a, "work/n\(index).md", "note \(index)\n") }
        try t.write(t.a, "x.md", "x\n")
        #expect(eventually { (try? t.notes(t.b).count) == 13 }, "the notes did not arrive")

        #expect(rename(t.a + "/x.md", t.a + "/y.md") == 0)
        #expect(eventually { t.read(t.b, "y.md") == "x\n" && t.read(t.b, "x.md") == nil }, "the rename did not arrive")
        #expect(rename(t.a + "/work", t.a + "/job") == 0)
        #expect(eventually { (try? t.notes(t.b).keys.filter { $0.hasPrefix("job/") }.count) == 12 }, "the folder did not arrive")
        #expect(eventually { FileIO.lstatInfo(t.b + "/work") == nil })
        let saves = try agents.serverChanges("y.md")
        #expect(saves.count == 1 && saves[0].movedFrom == "x.md", "\(saves)")
        #expect(try agents.serverChanges("job/n3.md").first?.movedFrom == "work/n3.md")
        #expect(FileIO.lstatInfo(t.b + "/.notesync/trash") == nil, "nothing went to the trash")
        let status = try t.expectOK(["status", "--notes", t.a]).stdout
        #expect(!status.contains("HELD"), "\(status)")
    }

    /// A note's Unicode twin made while both agents run (`café.md` in NFC, then in NFD beside it): the agent's
    /// partial scan of the one path inotify names sees the other twin too, and does what a one-shot sync does: one
    /// keeps the name, the other becomes a conflict copy, and both texts reach the other device and stay there
    /// through later edits of each; the server holds two records, and a served sync has nothing left to do.
    @Test func unicodeTwinsMadeUnderTheAgentsBothArrive() throws {
        let agents = try TwoAgents("agent-twins")
        defer { agents.stop() }
        let t = agents.devices
        func texts(_ folder: String) -> Set<String> {
            Set(((try? t.notes(folder)) ?? [:]).values.map { String(decoding: $0, as: UTF8.self) })
        }
        try t.write(t.a, "caf\u{E9}.md", "composed\n")
        #expect(eventually { t.read(t.b, "caf\u{E9}.md") == "composed\n" }, "\(agents.logs())")
        try t.write(t.a, "cafe\u{301}.md", "decomposed\n")
        #expect(eventually { texts(t.b) == ["composed\n", "decomposed\n"] }, "both twins' texts: \(agents.logs())")
        // Each twin is a note of its own now: an edit of either reaches B and overwrites nothing of the other.
        try t.write(t.a, "cafe\u{301}.md", "decomposed, edited\n")
        #expect(eventually { texts(t.b) == ["composed\n", "decomposed, edited\n"] }, "\(agents.logs())")
        let copy = try #require(try t.notes(t.a).first { $0.value == Data("composed\n".utf8) }?.key)
        try t.write(t.a, copy, "composed, edited\n")
        #expect(eventually { texts(t.b) == ["composed, edited\n", "decomposed, edited\n"] }, "\(agents.logs())")
        #expect(try serverHeads(t.server).values.filter { !$0.deleted }.count == 2)
        let served = try t.expectOK(["sync", "--notes", t.a])
        #expect(served.stdout.contains("nothing to do"), "\(served.stdout)")
        #expect(texts(t.a) == ["composed, edited\n", "decomposed, edited\n"])
    }

    /// A note rewritten every 0.1 s for 3 s (an autosave) with `--pace 1`: the other device ends with the last text,
    /// and the server gained a few versions, not thirty (CommitPacerTests: the first save after a quiet spell goes at once).
    @Test func autosaveIsPacedAndTheLastSaveArrives() throws {
        let t = try TwoDevices("agent-pace")
        try t.write(t.a, "draft.md", "start\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let agents = try TwoAgents(devices: t, extra: ["--pace", "1"])
        defer { agents.stop() }
        let before = try agents.serverChanges("draft.md").count
        let started = ContinuousClock.now
        for index in 0..<30 {
            try t.write(t.a, "draft.md", "start\nsave \(index)\n")
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(eventually { t.read(t.b, "draft.md") == "start\nsave 29\n" }, "the last save did not arrive")
        // On a loaded machine the saves take longer than 3 s, and the agent may fall behind them: the bound is one
        // commit per second from the first save until the last arrived, plus the first (at once) and the last (after
        // the loop); unpaced, it would be about thirty.
        let took = (ContinuousClock.now - started).components
        let seconds = Double(took.seconds) + Double(took.attoseconds) / 1e18
        let versions = try agents.serverChanges("draft.md").count - before
        let most = Int(seconds.rounded(.up)) + 2
        #expect(
            versions >= 2 && versions <= most && versions < 20,
            """
            \(versions) versions for 30 saves, the last arrived after \(seconds) s, at a pace of 1 s (at most \(most)); \
            agent A said: \(agents.agentA?.stderrText.split(separator: "\n").filter { !$0.contains("debug") }.suffix(60) ?? [])
            """)
    }

    /// The agents run gc by themselves: the first to start takes the lease and compacts, the other leaves it.
    @Test func oneAgentRunsGCByItself() throws {
        let t = try TwoDevices("agent-gc")
        for index in 0..<5 {
            try t.write(t.a, "n.md", "version \(index)\n")
            try t.sync(t.a)
        }
        let agents = try TwoAgents(devices: t)
        defer { agents.stop() }
        let layout = ServerLayout(root: t.server)
        #expect(eventually { FileIO.lstatInfo(layout.gcLease) != nil }, "no agent took the lease")
        #expect(eventually { ((try? FileIO.list(layout.snapshotsDirectory)) ?? []).count == 1 }, "no snapshot")
        try t.write(t.b, "m.md", "from b\n")
        #expect(eventually { t.read(t.a, "m.md") == "from b\n" })
        agents.stop()
        let ran = [agents.agentA, agents.agentB].compactMap { $0 }.filter { $0.stderrText.contains("agent.gc.finished") }
        #expect(ran.count == 1, "exactly one agent ran gc")
        #expect(try t.expectOK(["server", "fsck", t.server]).stdout.contains("0 findings"))
    }

    @Test func aDeepTreeMadeFasterThanWatchesAreAddedArrivesWhole() throws {
        let agents = try TwoAgents("deep-tree")
        defer { agents.stop() }
        let t = agents.devices
        try shell(
            """
            mkdir -p d1/d2/d3/d4/d5 && for d in d1 d1/d2 d1/d2/d3 d1/d2/d3/d4 d1/d2/d3/d4/d5; do \
            for i in 1 2 3 4; do echo "$d $i" > $d/n$i.md; done; done
            """, in: t.a)
        let expected = try t.notes(t.a)
        #expect(expected.count == 20)
        #expect(
            eventually { (try? t.notes(t.b)) == expected },
            "missing on B: \(Set(expected.keys).subtracting((try? t.notes(t.b))?.keys ?? [:].keys))\n\(agents.logs())")
    }

    @Test func anOverflowingEventQueueTriggersARescanAndEverythingArrives() throws {
        let agents = try TwoAgents("overflow")
        defer { agents.stop() }
        let t = agents.devices
        try t.write(t.a, "x.md", "x\n")
        try t.write(t.a, "y.md", "y\n")
        #expect(eventually { t.read(t.b, "y.md") == "y\n" })
        let agentA = try #require(agents.agentA)
        kill(agentA.pid, SIGSTOP)
        let limit =
            (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 16384
        try shell(
            """
            python3 -c '
            import os
            for i in range(40): open(f"before-{i}.md", "w").write(f"before {i}\\n")
            for i in range(\(limit / 2 + 500)):
                os.utime("x.md"); os.utime("y.md")
            for i in range(40): open(f"after-{i}.md", "w").write(f"after {i}\\n")
            '
            """, in: t.a)
        kill(agentA.pid, SIGCONT)
        let expected = try t.notes(t.a)
        #expect(expected.count == 82)
        #expect(eventually(60) { (try? t.notes(t.b)) == expected }, "not everything arrived after the overflow")
        #expect(agentA.stderrText.contains("watch.overflow"), "the test must really overflow the queue")
    }

    @Test func anAgentKilledMidStreamLosesNothingAfterRestart() throws {
        let agents = try TwoAgents("sigkill")
        defer { agents.stop() }
        let t = agents.devices
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/bin/bash")
        writer.arguments = ["-c", "for i in $(seq 1 120); do echo \"note $i\" > n$i.md; sleep 0.01; done"]
        writer.currentDirectoryURL = URL(fileURLWithPath: t.a)
        try writer.run()
        usleep(useconds_t.random(in: 200_000...900_000))
        let agentA = try #require(agents.agentA)
        kill(agentA.pid, SIGKILL)
        agentA.process.waitUntilExit()
        writer.waitUntilExit()
        agents.agentA = try agents.start(t.a)
        let expected = try t.notes(t.a)
        #expect(expected.count == 120)
        #expect(eventually(60) { (try? t.notes(t.b)) == expected }, "after the restart not everything converged")
        let fsck = try t.run(["server", "fsck", t.server])
        let unexpected = fsck.stdout.split(separator: "\n").filter { $0.contains(": ") && !$0.hasPrefix("temp file:") }
        #expect(unexpected.isEmpty, "\(unexpected)")
    }

    @Test func theServerGoingAwayQueuesEditsAndTheAgentResumesByItself() throws {
        let agents = try TwoAgents("server-away")
        defer { agents.stop() }
        let t = agents.devices
        try t.write(t.a, "kept.md", "v1\n")
        #expect(eventually { t.read(t.b, "kept.md") == "v1\n" })

        try FileManager.default.moveItem(atPath: t.server, toPath: t.server + ".away")
        try t.write(t.a, "kept.md", "v2 while away\n")
        for index in 0..<5 { try t.write(t.a, "away-\(index).md", "written while the server was away \(index)\n") }
        #expect(
            eventually {
                guard let data = try? Data(contentsOf: URL(fileURLWithPath: t.a + "/.notesync/status.json")),
                    let status = try? JSONDecoder().decode(AgentStatus.self, from: data)
                else { return false }
                return !status.online && status.pending >= 6
            }, "the agent should report itself offline with the edits pending")
        let status = try t.run(["status", "--notes", t.a])
        #expect(status.stdout.contains("OFFLINE"), "\(status.stdout)")
        #expect(t.read(t.b, "kept.md") == "v1\n", "nothing is deleted or changed on B meanwhile")

        try FileManager.default.moveItem(atPath: t.server + ".away", toPath: t.server)
        let expected = try t.notes(t.a)
        #expect(eventually(60) { (try? t.notes(t.b)) == expected }, "the agent did not resume by itself")
    }
}
