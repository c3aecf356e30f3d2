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

/// The safety rails on every path, through the real binary: the mass-delete guard (one-shot and agent), restore,
/// folders that cannot nest, other tools kept out of `.notesync/`, and fixes that work when followed.
@Suite struct SafetyRailTests {
    static func makeNotes(_ t: TwoDevices, count: Int, in folder: String) throws {
        for index in 0..<count { try t.write(t.a, "\(folder)/n\(index).md", "note \(index)\n") }
    }

    static func deleteEntries(_ server: String) throws -> Int {
        var deletes = 0
        for (_, path) in try ServerLifeTests.entries(server) {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            let entry = try SealedFile.open(data, kind: "entry", as: LogEntry.self)
            deletes += entry.changes.filter { $0.op == .delete }.count
        }
        return deletes
    }

    /// `rm -r` of most notes, one-shot: the deletes are held whole (exit 1, none on the server), every other change
    /// syncs; `diff --allow-mass-delete` previews them; `sync --allow-mass-delete` makes them, all at once.
    @Test func aMassDeleteIsHeldWholeUntilApproved() throws {
        let t = try TwoDevices("rails-mass-delete")
        try Self.makeNotes(t, count: 8, in: "old")
        try t.write(t.a, "keep.md", "kept\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try FileManager.default.removeItem(atPath: t.a + "/old")
        try t.write(t.a, "keep.md", "kept and edited\n")

        let held = try t.run(["sync", "--notes", t.a])
        #expect(held.status == 1, "\(held.stdout) \(held.stderr)")
        #expect(held.stderr.contains("8 of 9 notes are gone") && held.stderr.contains("--allow-mass-delete"), "\(held.stderr)")
        #expect(try Self.deleteEntries(t.server) == 0, "a held delete reached the server")
        try t.sync(t.b)
        #expect(t.read(t.b, "keep.md") == "kept and edited\n", "the other changes did not sync")
        #expect(try t.notes(t.b).count == 9)
        let status = try t.run(["status", "--notes", t.a])
        #expect(status.stdout.contains("8 local deletes HELD"), "\(status.stdout)")

        let preview = try t.run(["diff", "--notes", t.a])
        #expect(preview.status == 0 && !preview.stdout.contains("old/n0.md"), "\(preview.stdout)")
        // As JSON, the warning says what it is: a script tells held deletes from other warnings without the text.
        let json = try t.run(["diff", "--notes", t.a, "--json"])
        let report = try JSONDecoder().decode(SyncReport.self, from: Data(json.stdout.utf8))
        #expect(report.heldDeletes == 8 && report.warnings.map(\.kind) == [.deletesHeld], "\(json.stdout)")
        // Another device edits four of them: they come back here, and the four still gone, now fewer than half
        // the notes, stay held (not pushed by the next plain sync).
        for index in 0..<4 { try t.write(t.b, "old/n\(index).md", "edited on B\n") }
        try t.sync(t.b)
        let fewer = try t.run(["sync", "--notes", t.a])
        #expect(fewer.status == 1 && fewer.stderr.contains("4 of 9 notes are gone"), "\(fewer.stdout) \(fewer.stderr)")
        #expect(try Self.deleteEntries(t.server) == 0, "deletes held before were pushed without approval")
        #expect(t.read(t.a, "old/n0.md") == "edited on B\n")

        let approved = try t.run(["diff", "--notes", t.a, "--allow-mass-delete"])
        #expect(
            approved.status == 0 && approved.stdout.contains("old/n4.md") && approved.stdout.contains("old/n7.md"),
            "\(approved.stdout)")
        #expect(try Self.deleteEntries(t.server) == 0, "a preview committed deletes")

        try t.expectOK(["sync", "--notes", t.a, "--allow-mass-delete"])
        #expect(try Self.deleteEntries(t.server) == 4)
        try t.sync(t.b)
        #expect(try t.notes(t.b).keys.sorted() == ["keep.md", "old/n0.md", "old/n1.md", "old/n2.md", "old/n3.md"])
        #expect(!(try t.run(["status", "--notes", t.a]).stdout.contains("HELD")))
    }

    /// With agents on both devices: an `rm -r` of most notes is held whole by the agent (nothing committed, the
    /// other device keeps every note, the agent says so once, status shows it); `sync --allow-mass-delete` while
    /// the agent runs approves it, and the agent makes every delete; the other agent applies them all. `spread`: the
    /// notes go one by one over 2 s, far longer than a delete takes to settle, as a slow `rm -r` or a file manager
    /// deletes them.
    @Test(arguments: [false, true]) func theAgentHoldsAMassDeleteWholeUntilApproved(spread: Bool) throws {
        let t = try TwoDevices("rails-agent-mass-delete\(spread ? "-spread" : "")")
        try Self.makeNotes(t, count: 30, in: "old")
        try t.write(t.a, "keep.md", "kept\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let agents = try TwoAgents(devices: t)
        defer { agents.stop() }
        if spread {
            #expect(try shell("for f in old/*; do rm \"$f\"; sleep 0.07; done; rmdir old", in: t.a) == 0)
        } else {
            try FileManager.default.removeItem(atPath: t.a + "/old")
        }
        try t.write(t.a, "keep.md", "kept, edited while the deletes are held\n")
        #expect(eventually(20) { t.read(t.b, "keep.md") == "kept, edited while the deletes are held\n" })
        #expect(eventually(10) { (try? t.run(["status", "--notes", t.a]))?.stdout.contains("30 local deletes HELD") == true })
        Thread.sleep(forTimeInterval: 1.5)
        #expect(try Self.deleteEntries(t.server) == 0, "the agent committed part of a mass delete")
        #expect(try t.notes(t.b).count == 31)
        let log = try #require(agents.agentA).stderrText
        let said = log.components(separatedBy: "sync.deletes.held").count - 1
        #expect(said >= 1 && said <= 2, "said \(said) times: once, not at every sync")
        #expect(log.contains("deletes are held"), "the agent's log does not say the deletes are held")

        // While the agent runs, `sync` is served by it (its socket): the report is the agent's sync.
        let plain = try t.run(["sync", "--notes", t.a])
        #expect(plain.status == 1 && plain.stderr.contains("30 of 31 notes are gone"), "\(plain.stdout) \(plain.stderr)")
        let approve = try t.run(["sync", "--notes", t.a, "--allow-mass-delete"])
        #expect(approve.status == 0 && approve.stdout.contains("30 upload-delete"), "\(approve.stdout) \(approve.stderr)")
        #expect(try Self.deleteEntries(t.server) == 30, "the report came before the deletes were made")
        #expect(eventually(20) { (try? t.notes(t.b).keys.sorted()) == ["keep.md"] })
    }

    /// `restore` of an earlier version while the note holds an edit not synced yet: the edit goes to the server's
    /// history first, so nothing is lost; a deleted note can be restored too.
    @Test func restoreKeepsAnUnsyncedEditAndBringsBackADeletedNote() throws {
        let t = try TwoDevices("rails-restore")
        try t.write(t.a, "n.md", "version one\n")
        try t.sync(t.a)
        try t.write(t.a, "n.md", "version two\n")
        try t.sync(t.a)
        try t.write(t.a, "n.md", "an edit not synced yet\n")
        try t.expectOK(["restore", "--notes", t.a, "n.md", "--version", "1"])
        #expect(t.read(t.a, "n.md") == "version one\n")
        let history = try t.expectOK(["history", "--notes", t.a, "n.md"])
        #expect(history.stdout.split(separator: "\n").filter { $0.hasPrefix("version") }.count == 4, "\(history.stdout)")
        try t.sync(t.b)
        #expect(t.read(t.b, "n.md") == "version one\n")
        let versions = try noteTexts(t, "n.md")
        #expect(versions.contains("an edit not synced yet\n"), "the unsynced edit is not in the history: \(versions)")

        try t.write(t.a, "gone.md", "deleted, then restored\n")
        try t.sync(t.a)
        unlink(t.a + "/gone.md")
        try t.sync(t.a)
        let gone = try t.expectOK(["history", "--notes", t.a, "gone.md"])
        let saved = try #require(gone.stdout.split(separator: "\n").first { $0.contains("saved") }?.split(separator: " ")[1])
        try t.expectOK(["restore", "--notes", t.a, "gone.md", "--version", String(saved)])
        try t.sync(t.b)
        #expect(t.read(t.b, "gone.md") == "deleted, then restored\n")
    }

    /// Every text the server's log holds for `name`.
    func noteTexts(_ t: TwoDevices, _ name: String) throws -> [String] {
        var texts: [String] = []
        let layout = ServerLayout(root: t.server)
        for (_, path) in try ServerLifeTests.entries(t.server) {
            let entry = try SealedFile.open(try Data(contentsOf: URL(fileURLWithPath: path)), kind: "entry", as: LogEntry.self)
            for change in entry.changes where change.name == name {
                if let text = change.text {
                    texts.append(try String(contentsOfFile: layout.assetPath(text.sha256), encoding: .utf8))
                }
            }
        }
        return texts
    }

    /// A notes folder inside another one, or around one, is refused by `init` (they would nest deeper at every sync).
    @Test func notesFoldersCannotNest() throws {
        let t = try TwoDevices("rails-nest")
        let inner = try t.run(["init", "--notes", t.a + "/inner", "--server", t.server])
        #expect(inner.status == 64 && inner.stderr.contains("cannot nest"), "\(inner.stderr)")
        let outer = try t.run(["init", "--notes", t.scratch.path, "--server", t.server])
        #expect(outer.status == 64 && outer.stderr.contains("cannot nest"), "\(outer.stderr)")
        #expect(FileIO.lstatInfo(t.a + "/inner/.notesync") == nil)
    }

    /// git in the notes folder leaves `.notesync/` alone; a state database emptied or replaced under notesync gives
    /// a clear error whose fix, followed, works and keeps every note.
    @Test func otherToolsStayOutAndADamagedStateIsMadeAfresh() throws {
        let t = try TwoDevices("rails-state")
        try t.write(t.a, "one.md", "one\n")
        try t.sync(t.a)
        #expect(try shell("git init -q . && git status --porcelain --untracked-files=all > ../git-status.txt", in: t.a) == 0)
        let listed = try String(contentsOfFile: t.scratch.path + "/git-status.txt", encoding: .utf8)
        #expect(!listed.contains(".notesync"), "git sees notesync's state: \(listed)")
        #expect(listed.contains("one.md"))

        let database = t.a + "/.notesync/state.sqlite"
        for suffix in ["-wal", "-shm"] { unlink(database + suffix) }
        try Data().write(to: URL(fileURLWithPath: database))
        let broken = try t.run(["sync", "--notes", t.a])
        #expect(broken.status == 1, "\(broken.stdout) \(broken.stderr)")
        #expect(!broken.stderr.contains("SQLite error"), "a raw SQLite message: \(broken.stderr)")
        let fix = try #require(broken.stderr.split(separator: "\n").first { $0.contains("fix:") })
        #expect(fix.contains("notesync init --notes \((t.a as NSString).standardizingPath) --server DIR"), "\(fix)")
        try t.expectOK(["init", "--notes", t.a, "--server", t.server, "--device-name", "alice"])
        try t.write(t.a, "two.md", "after the fresh start\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "one.md") == "one\n" && t.read(t.b, "two.md") == "after the fresh start\n")
        #expect(t.read(t.a, "one.md") == "one\n")
    }

    /// Two notes whose names differ only in Unicode form (NFC and NFD in one folder): the second is renamed to a
    /// conflict copy of its own and both texts reach the other device; the warning shows the code points.
    @Test func unicodeTwinsBothSync() throws {
        let t = try TwoDevices("rails-twins")
        try t.write(t.a, "caf\u{E9}.md", "composed\n")
        try t.write(t.a, "cafe\u{301}.md", "decomposed\n")
        let first = try t.run(["sync", "--notes", t.a])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("cafe\\u{301}.md") && first.stderr.contains("caf\\u{E9}.md"), "\(first.stderr)")
        try t.sync(t.b)
        let texts = Set(try t.notes(t.b).values.map { String(decoding: $0, as: UTF8.self) })
        #expect(texts == ["composed\n", "decomposed\n"], "\(texts)")
        let again = try t.run(["sync", "--notes", t.a])
        #expect(again.stdout.contains("nothing to do") && again.stderr.isEmpty, "\(again.stdout) \(again.stderr)")
        #expect(try t.run(["conflicts", "--notes", t.a]).stdout.contains("(conflict "))
    }

    /// A note modified in the future by this device's clock is reported (conflicts are decided by these times).
    @Test func aNoteFromTheFutureIsReported() throws {
        let t = try TwoDevices("rails-clock")
        try t.write(t.a, "future.md", "written by a clock an hour ahead\n")
        var times = [timespec(tv_sec: time(nil) + 3600, tv_nsec: 0), timespec(tv_sec: time(nil) + 3600, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, t.a + "/future.md", &times, 0) == 0)
        let result = try t.run(["sync", "--notes", t.a])
        #expect(result.status == 0)
        #expect(result.stderr.contains("future.md: modified 5") && result.stderr.contains("minutes in the future"), "\(result.stderr)")
        try t.sync(t.b)
        #expect(t.read(t.b, "future.md") == "written by a clock an hour ahead\n")
    }

    /// `init` against a server path that is not a server: a file, a folder of other files, a missing folder. Each
    /// gets its own fix (exit 64), and the one that says to add --create-server works when followed.
    @Test func initSaysWhatToDoWithAPathThatIsNotAServer() throws {
        let scratch = try Scratch("rails-init")
        let file = scratch.path + "/file"
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        let onFile = try notesync(["init", "--notes", scratch.path + "/n1", "--server", file], scratch: scratch.path)
        #expect(onFile.status == 64 && onFile.stderr.contains("is a file"), "\(onFile.stderr)")
        let full = scratch.path + "/full"
        try FileManager.default.createDirectory(atPath: full, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: full + "/other.txt"))
        let onFull = try notesync(["init", "--notes", scratch.path + "/n2", "--server", full, "--create-server"], scratch: scratch.path)
        #expect(onFull.status == 64 && onFull.stderr.contains("holds other files"), "\(onFull.stderr)")
        let missing = try notesync(["init", "--notes", scratch.path + "/n3", "--server", scratch.path + "/new"], scratch: scratch.path)
        #expect(missing.status == 64 && missing.stderr.contains("add --create-server"), "\(missing.stderr)")
        let followed = try notesync(
            ["init", "--notes", scratch.path + "/n3", "--server", scratch.path + "/new", "--create-server"],
            scratch: scratch.path)
        #expect(followed.status == 0, "\(followed.stderr)")
    }

    /// `restore` while the agent runs: served by the agent through its socket, with the same guarantee (the text
    /// it replaces is pushed to the history first), and the other device gets the restored version.
    @Test func restoreWorksWhileTheAgentRuns() throws {
        let t = try TwoDevices("rails-restore-agent")
        try t.write(t.a, "n.md", "version one\n")
        try t.sync(t.a)
        try t.write(t.a, "n.md", "version two\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let agents = try TwoAgents(devices: t)
        defer { agents.stop() }
        let restored = try t.run(["restore", "--notes", t.a, "n.md", "--version", "1"])
        #expect(restored.status == 0 && restored.stdout.contains("restored version 1 of n.md"), "\(restored.stdout) \(restored.stderr)")
        #expect(t.read(t.a, "n.md") == "version one\n")
        #expect(eventually(20) { t.read(t.b, "n.md") == "version one\n" })
        let missing = try t.run(["restore", "--notes", t.a, "n.md", "--version", "99"])
        #expect(missing.status == 64 && missing.stderr.contains("has no version 99"), "\(missing.stderr)")
    }

    /// The command line while `notesync watch` runs (settling for a minute, so it syncs nothing by itself): `diff`
    /// and `sync` are served by the agent, which waits for its watch to see every change made before the request
    /// (a cookie file), so an edit saved just before is in the answer; `status`, `history`, `conflicts` read
    /// the state as they are; `recover` is made by the agent.
    @Test func theCommandLineWorksWhileTheAgentRuns() throws {
        let t = try TwoDevices("rails-cli-agent")
        for index in 1...5 { try t.write(t.a, "n\(index).md", "note \(index)\n") }
        try t.sync(t.a)
        // Its watch made late (each event reaches it 100 ms after inotify reported it): a request is answered only
        // once the watch has caught up with it.
        let agent = try NotesyncProcess(
            ["watch", "--notes", t.a, "--settle-ms", "60000", "--delete-settle-ms", "60000"],
            scratch: t.scratch.path, environment: [WatchLag.environmentVariable: "100"])
        defer {
            agent.process.terminate()
            #expect(agent.wait().status == 0)
        }
        // status.json is written once its first (full) sync is done.
        #expect(eventually(30) { FileManager.default.fileExists(atPath: t.a + "/.notesync/status.json") }, "\(agent.stderrText)")
        let logBefore = try logChanges(t.server, "n1.md").count

        try t.write(t.a, "n1.md", "note 1\nan edit saved just before\n")
        let diff = try t.run(["diff", "--notes", t.a])
        #expect(
            diff.status == 0 && diff.stdout.contains("upload           n1.md") && diff.stdout.contains("+an edit saved just before"),
            "\(diff.stdout) \(diff.stderr)")
        #expect(try logChanges(t.server, "n1.md").count == logBefore, "a dry run writes nothing")

        let sync = try t.run(["sync", "--notes", t.a])
        #expect(sync.status == 0 && sync.stdout.contains("upload           n1.md"), "\(sync.stdout) \(sync.stderr)")
        #expect(try logChanges(t.server, "n1.md").count == logBefore + 1)
        let again = try t.run(["diff", "--notes", t.a])
        #expect(again.status == 0 && again.stdout.contains("a sync would do: nothing to do"), "\(again.stdout)")

        for command in [["status"], ["history", "n1.md"], ["conflicts"]] {
            let result = try t.run(command + ["--notes", t.a])
            #expect(result.status == 0, "\(command): \(result.stdout) \(result.stderr)")
        }
        let recover = try t.run(["recover", "--notes", t.a])
        #expect(recover.status == 0 && recover.stdout.contains("recovered:"), "\(recover.stdout) \(recover.stderr)")
        let elsewhere = try t.run(["recover", "--notes", t.a, "--server", t.scratch.path + "/other"])
        #expect(elsewhere.status == 1 && elsewhere.stderr.contains("stop the agent"), "\(elsewhere.stderr)")
        // An edit and the request at once, from this process: the answer has the edit every time.
        let folder = NotesFolder(root: t.a)
        for round in 1...5 {
            let handle = try #require(FileHandle(forWritingAtPath: t.a + "/n2.md"))
            handle.seekToEndOfFile()
            handle.write(Data("line \(round)\n".utf8))
            try handle.close()
            let answer = try #require(try AgentSocket.requestSync(folder, AgentSocket.Request(dryRun: true)))
            let planned = answer.report?.changes.contains { $0.name == "n2.md" && ($0.diff ?? "").contains("+line \(round)") } ?? false
            #expect(planned, "round \(round): \(answer.report?.changes.map(\.name) ?? []) \(answer.error ?? "")")
            if !planned { break }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: t.a)
        #expect(!names.contains { $0.hasPrefix(".notesync-tmp-") }, "no cookie is left behind: \(names)")
        #expect(agent.process.isRunning)
    }

    /// A note a sync could not write (its text missing on the server) while the agent runs: `notesync sync`, served
    /// by the agent from what its watch saw change, tries it again as a sync run alone does: it says the note is
    /// left, and once the text is back it writes it (following the fix works with the agent running).
    @Test func aSyncServedByTheAgentTriesAgainWhatWasLeft() throws {
        let t = try TwoDevices("rails-agent-retry")
        try t.write(t.a, "a.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let text = "one\ntwo, whose text goes missing\n"
        try t.write(t.a, "a.md", text)
        try t.sync(t.a)
        let asset = ServerLayout(root: t.server).assetPath(ContentDigest(of: Data(text.utf8)))
        #expect(rename(asset, t.scratch.path + "/asset") == 0)
        let agent = try NotesyncProcess(["watch", "--notes", t.b], scratch: t.scratch.path)
        defer {
            agent.process.terminate()
            #expect(agent.wait().status == 0)
        }
        #expect(eventually(30) { FileManager.default.fileExists(atPath: t.b + "/.notesync/status.json") }, "\(agent.stderrText)")
        for command in ["sync", "diff"] {
            let left = try t.run([command, "--notes", t.b])
            #expect(left.stdout.contains("not synced: 1 note(s)") && left.stderr.contains("a.md"), "\(left.stdout) \(left.stderr)")
        }
        #expect(t.read(t.b, "a.md") == "one\n")
        #expect(rename(t.scratch.path + "/asset", asset) == 0)
        let mended = try t.run(["sync", "--notes", t.b])
        #expect(mended.status == 0 && mended.stdout.contains("download") && !mended.stdout.contains("not synced"), "\(mended.stdout)")
        #expect(t.read(t.b, "a.md") == text)
        #expect(!(try t.run(["status", "--notes", t.b]).stdout.contains("waiting:")))
    }

    /// One exit code per condition, whatever the command: 1 for a folder that is not a notes folder, for a server
    /// that is not this folder's and for a damaged server marker, 64 for a bad option, 3 for a server that cannot
    /// be reached: its folder missing, or empty (the mount point of a share that is not mounted).
    @Test func theSameConditionGivesTheSameExitCodeInEveryCommand() throws {
        let t = try TwoDevices("rails-exit-codes")
        try t.write(t.a, "a.md", "one\n")
        try t.sync(t.a)
        func expectCodes(_ commands: [[String]], _ notes: String, _ code: Int32, _ condition: String) throws {
            for command in commands {
                let result = try t.run(command + ["--notes", notes])
                #expect(result.status == code, "\(condition): \(command) exited \(result.status): \(result.stderr)")
            }
        }
        let notAFolder = t.scratch.path + "/plain"
        try FileManager.default.createDirectory(atPath: notAFolder, withIntermediateDirectories: true)
        let all: [[String]] = [
            ["sync"], ["diff"], ["status"], ["conflicts"], ["history", "a.md"], ["restore", "a.md", "--version", "1"],
            ["recover"]
        ]
        try expectCodes(all, notAFolder, 1, "not a notes folder")
        try expectCodes(all.map { $0 + ["--no-such-option"] } + [["watch", "--no-such-option"]], t.a, 64, "a bad option")
        try expectCodes([["restore", "a.md", "--version", "99"]], t.a, 64, "a version that does not exist")

        let away = t.server + ".away"
        #expect(rename(t.server, away) == 0)
        try expectCodes(
            [["sync"], ["diff"], ["status"], ["history", "a.md"], ["restore", "a.md", "--version", "1"], ["recover"]],
            t.a, 3, "the server unreachable")
        let other = try t.run(["server", "init", t.server])
        #expect(other.status == 0, "\(other.stderr)")
        try expectCodes(
            [["sync"], ["diff"], ["status"], ["history", "a.md"], ["restore", "a.md", "--version", "1"]], t.a, 1,
            "another server at the path")
        try FileManager.default.removeItem(atPath: t.server)
        try FileManager.default.createDirectory(atPath: t.server, withIntermediateDirectories: false)
        try expectCodes(
            [["sync"], ["diff"], ["status"], ["history", "a.md"], ["restore", "a.md", "--version", "1"], ["recover"]],
            t.a, 3, "an empty folder at the server path")
        try FileManager.default.removeItem(atPath: t.server)
        #expect(rename(away, t.server) == 0)

        let intact = try t.damageMarker()
        try expectCodes(
            [["sync"], ["diff"], ["status"], ["history", "a.md"], ["restore", "a.md", "--version", "1"], ["recover"]],
            t.a, 1, "a damaged server marker")
        try t.restoreMarker(intact)
        try expectCodes([["sync"], ["status"]], t.a, 0, "its server back")
    }
}
