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

/// The server or the notes folder failing under a sync: full, read-only, gone in the middle of a commit.
/// Nothing is lost, the message names the file and the fix, the exit code is the documented one, and the next sync
/// (or the running agent, by itself) finishes the work once the fault is gone.
@Suite(.enabled(if: TestMount.available, "needs root and mount(8): tmpfs and bind mounts"))
struct FaultTests {
    /// A server on a 1 MiB tmpfs left with `pages` free pages of 4 KiB. The sync needs 50 for its assets (39 small
    /// notes and one of ten pages), then one for the primitive probe (freed at once), then two for its entry: so it
    /// stops with ENOSPC at an asset (0, 10, 49), at the probe (50), at the entry once every asset is published
    /// (51), or only at the device status file, which is not needed (52). It leaves no temp file and loses nothing;
    /// with room, the next sync pushes it all, each note exactly once.
    @Test(arguments: [0, 10, 49, 50, 51, 52])
    func aFullServerLosesNothingAndTheNextSyncPushesEverything(pages: Int) throws {
        let t = try TwoDevices("full-server-\(pages)")
        let mount = try TestMount.tmpfs(replacing: t.server, size: "1m")
        defer {
            mount.unmount()
            withExtendedLifetime(t) {}
        }
        for index in 0..<3 { try t.write(t.a, "n\(index).md", "note \(index)\n") }
        try t.sync(t.a)
        try t.sync(t.b)

        try t.write(t.a, "n0.md", "note 0, edited when the server was full\n")
        for index in 10...48 { try t.write(t.a, "new-\(index).md", "new note \(index)\n") }
        try t.write(t.a, "zz-big.md", String(repeating: "a longer note that takes ten pages\n", count: 1150))
        let expected = try t.notes(t.a)
        let filler = try fillFilesystem(t.server, leaving: pages * 4096)
        let full = try t.run(["sync", "--notes", t.a])
        expectNoTerminalControls(full)
        if full.status != 0 {
            #expect(full.status == 1, "\(full.stdout) \(full.stderr)")
            expectNoSpaceStop(full)
            let status = try t.run(["status", "--notes", t.a])
            #expect(!status.stdout.contains("pending:   0"), "the changes stay queued: \(status.stdout)")
        }
        #expect(try t.notes(t.a) == expected, "nothing lost locally")
        #expect(try FileIO.list(t.server + "/zones/notes/tmp") == [], "no temp file left behind")

        unlink(filler)
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(try t.notes(t.b) == expected)
        for name in ["n0.md", "new-10.md", "new-48.md", "zz-big.md"] {
            #expect(try logChanges(t.server, name).count == (name == "n0.md" ? 2 : 1), "\(name) committed exactly once")
        }
        #expect(try t.run(["server", "fsck", t.server]).status == 0)
    }

    /// The top folder of 5,000 notes renamed is one entry of about 3 MB, written to its temp a piece at a time
    /// (never held whole): a server that fills while it is written stops the sync with the message and the fix,
    /// leaves no temp and loses nothing; with room, the next sync commits the rename as one entry and B follows it.
    @Test func aServerThatFillsUnderALargeEntryLosesNothing() throws {
        let t = try TwoDevices("full-server-entry")
        let mount = try TestMount.tmpfs(replacing: t.server, size: "16m")
        defer {
            mount.unmount()
            withExtendedLifetime(t) {}
        }
        let folder = "a folder whose name is long enough to count"
        for index in 0..<5_000 { try t.write(t.a, "\(folder)/note number \(index).md", "note \(index)\n") }
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(rename(t.a + "/" + folder, t.a + "/renamed " + folder) == 0)
        let expected = try t.notes(t.a)
        let filler = try fillFilesystem(t.server, leaving: 64 * 4096)
        let full = try t.run(["sync", "--notes", t.a])
        expectNoTerminalControls(full)
        #expect(full.status == 1, "\(full.stdout) \(full.stderr)")
        expectNoSpaceStop(full)
        #expect(try t.notes(t.a) == expected, "nothing lost locally")
        #expect(try FileIO.list(t.server + "/zones/notes/tmp") == [], "no temp file left behind")

        unlink(filler)
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(try t.notes(t.b) == expected)
        let moved = try logChanges(t.server, "renamed \(folder)/note number 4999.md")
        #expect(moved.count == 1 && moved.first?.movedFrom == "\(folder)/note number 4999.md")
        let layout = ServerLayout(root: t.server)
        var last: Int64 = 1
        while FileIO.lstatInfo(layout.entryPath(last + 1)) != nil { last += 1 }
        let size = try #require(FileIO.lstatInfo(layout.entryPath(last))).st_size
        #expect(size > 1 << 20, "the rename's entry (\(last), \(size) bytes) is large enough to be written in pieces")
        #expect(try t.run(["server", "fsck", t.server]).status == 0)
    }

    /// The notes folder's filesystem full (`pages` free; the local state lives there too): downloads and the local
    /// state fail with a message that says so and the fix, no half-written note is left, the device's own change
    /// is kept; with room, everything converges.
    @Test(arguments: [0, 2, 8, 16, 32, 64])
    func aFullNotesFolderLosesNothing(pages: Int) throws {
        let t = try TwoDevices("full-notes-\(pages)")
        for index in 0..<5 { try t.write(t.a, "n\(index).md", "note \(index)\n") }
        try t.write(t.a, "big.md", String(repeating: "a note too big for what is left of B's disk\n", count: 4000))
        try t.sync(t.a)
        try t.write(t.b, "mine.md", "B's own note, written before the disk filled\n")
        let mount = try TestMount.tmpfs(replacing: t.b, size: "1m")
        defer {
            mount.unmount()
            withExtendedLifetime(t) {}
        }
        // The filler sits in the state folder: on the same filesystem, and never a note.
        let filler = try fillFilesystem(t.b + "/.notesync", leaving: pages * 4096)

        let full = try t.run(["sync", "--notes", t.b])
        expectNoTerminalControls(full)
        #expect(full.status == 0 || full.status == 1, "\(full.stderr)")
        if full.status == 1 {
            // Stopped by the local state's write ("notesync: ..."), or finished with a note it could not write (a
            // warning; exit 1 as for any change not made): which comes first depends on the pages left.
            #expect(
                (full.stderr.hasPrefix("notesync: ")
                    || full.stderr.hasPrefix("warning: ") && full.stderr.contains("(No space left on device)"))
                    && full.stderr.contains("fix: free space"),
                "a clear message, never a raw database error: \(full.stderr)")
            for raw in ["SQLite", "SQLITE_", "database or disk is full"] {
                #expect(!full.stderr.contains(raw), "never a raw database error: \(full.stderr)")
            }
        }
        for warning in full.stderr.components(separatedBy: "warning: ").dropFirst() {
            #expect(warning.contains("fix:"), "\(warning)")
        }
        let notesA = try t.notes(t.a)
        for (name, data) in try t.notes(t.b) where name != "mine.md" {
            #expect(data == notesA[name], "\(name) is whole or absent, never half-written")
        }
        #expect(t.read(t.b, "mine.md") == "B's own note, written before the disk filled\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.b).allSatisfy { !$0.hasPrefix(".notesync-tmp-") })

        unlink(filler)
        try t.sync(t.b)
        try t.sync(t.a)
        #expect(try t.notes(t.a) == t.notes(t.b))
        #expect(t.read(t.a, "mine.md") == "B's own note, written before the disk filled\n")
        #expect(try t.notes(t.b).count == 7)
    }

    /// A folder of notes mounted read-only (a bind mount inside the notes folder): the notes that cannot be written
    /// there are a local problem (exit 1, the path, "Read-only file system"), never an offline server (exit 3);
    /// every other note syncs, and once the folder is writable again the next sync writes them.
    @Test func aReadOnlyNotesFolderIsALocalProblemNotAnOfflineServer() throws {
        let t = try TwoDevices("read-only-notes")
        try t.write(t.a, "sub/one.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let readOnly = try TestMount(bind: t.b + "/sub", at: t.b + "/sub", readOnly: true)
        defer {
            readOnly.unmount()
            withExtendedLifetime(t) {}
        }
        try t.write(t.a, "sub/one.md", "one, edited\n")
        try t.write(t.a, "top.md", "top\n")
        try t.sync(t.a)

        let stuck = try t.run(["sync", "--notes", t.b])
        #expect(stuck.status == 1 && !stuck.stdout.contains("server unreachable"), "\(stuck.status) \(stuck.stdout) \(stuck.stderr)")
        #expect((stuck.stdout + stuck.stderr).contains("Read-only file system"), "\(stuck.stdout) \(stuck.stderr)")
        #expect(t.read(t.b, "sub/one.md") == "one\n")
        readOnly.unmount()
        try t.sync(t.b)
        #expect(t.read(t.b, "sub/one.md") == "one, edited\n" && t.read(t.b, "top.md") == "top\n")
    }

    /// A folder of notes that is a writable bind mount inside the notes folder: renames cannot cross into it from
    /// `.notesync/staging`, so applies there put their temp beside the note, and the notes sync as anywhere else.
    @Test func notesInABindMountedFolderSync() throws {
        let t = try TwoDevices("bind-notes")
        try t.write(t.a, "sub/one.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let elsewhere = t.scratch.path + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: t.b + "/sub/one.md", toPath: elsewhere + "/one.md")
        let bound = try TestMount(bind: elsewhere, at: t.b + "/sub")
        defer {
            bound.unmount()
            withExtendedLifetime(t) {}
        }
        try t.write(t.a, "sub/one.md", "one, edited\n")
        try t.write(t.a, "sub/new.md", "new\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "sub/one.md") == "one, edited\n" && t.read(t.b, "sub/new.md") == "new\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).allSatisfy { !$0.hasPrefix(".notesync-tmp-") })
    }

    /// A server mounted read-only: the sync reads what it can, queues its own changes, says why with exit code 3,
    /// writes nothing; read-write again, the next sync pushes them.
    @Test func aReadOnlyServerQueuesChangesAndTheNextSyncPushesThem() throws {
        let t = try TwoDevices("read-only")
        try t.write(t.a, "a.md", "a1\n")
        try t.sync(t.a)
        try t.write(t.b, "b.md", "b1\n")
        try t.sync(t.b)
        let readOnly = try TestMount(bind: t.server, at: t.server, readOnly: true)
        defer {
            readOnly.unmount()
            withExtendedLifetime(t) {}
        }
        let server = try treeState(t.server)

        try t.write(t.a, "a.md", "a2, while the server was read-only\n")
        try t.write(t.a, "new.md", "new while read-only\n")
        let offline = try t.run(["sync", "--notes", t.a])
        #expect(offline.status == 3, "\(offline.stdout) \(offline.stderr)")
        #expect(
            offline.stdout.contains("Read-only file system") && offline.stdout.contains("fix: the filesystem is mounted read-only")
                && offline.stdout.contains("2 local change(s) queued"), "\(offline.stdout)")
        #expect(t.read(t.a, "b.md") == "b1\n", "what can be read is still pulled")
        #expect(try treeState(t.server) == server, "nothing is written")
        let status = try t.run(["status", "--notes", t.a])
        #expect(status.stdout.contains("pending:   2") && status.stdout.contains("Read-only file system"), "\(status.stdout)")

        readOnly.unmount()
        let back = try t.sync(t.a)
        #expect(back.stdout.contains("upload           a.md") && back.stdout.contains("upload           new.md"), "\(back.stdout)")
        try t.sync(t.b)
        #expect(t.read(t.b, "a.md") == "a2, while the server was read-only\n" && t.read(t.b, "new.md") == "new while read-only\n")
    }

    enum Vanishing: String, CaseIterable, CustomStringConvertible, Sendable {
        /// The server folder is renamed away (a share remounted elsewhere, a replicated folder moved).
        case renamedAway
        /// The share is unmounted: an empty mount point stays, without the marker.
        case unmounted
        var description: String { rawValue }
    }

    /// The server disappears between two steps of a commit: after the probe, after the first or the last asset,
    /// after the claim of the log slot (the commit landed but the device cannot confirm it). The sync exits 3 with
    /// the changes queued; when the server is back, the next sync finishes, each note committed exactly once.
    @Test(arguments: Vanishing.allCases, 1...5)
    func theServerVanishingMidCommitLosesNothing(_ how: Vanishing, afterPublish step: Int) throws {
        let t = try TwoDevices("vanish-\(how)-\(step)")
        let disk = t.scratch.path + "/server-disk"
        var share: TestMount?
        if how == .unmounted {
            #expect(rename(t.server, disk) == 0 && mkdir(t.server, 0o755) == 0)
            share = try TestMount(bind: disk, at: t.server)
        }
        defer {
            share?.unmount()
            withExtendedLifetime(t) {}
        }
        try t.write(t.a, "keep.md", "synced before\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let names = ["one.md", "two.md", "three.md"]
        for name in names { try t.write(t.a, name, "\(name) written just before the server vanished\n") }
        let expected = try t.notes(t.a)

        // Publishes of this sync: 1 the primitive probe, 2-4 the three assets, 5 the claim of the slot.
        let traced = try StoppingNotesync(["sync", "--notes", t.a], scratch: t.scratch.path, stopAfter: step)
        guard traced.stopped() else {
            Issue.record("the sync did not reach step \(step): \(traced.wait())")
            return
        }
        switch how {
        case .renamedAway: #expect(rename(t.server, t.server + ".away") == 0)
        case .unmounted: share?.unmount()
        }
        traced.resume()
        let away = traced.wait()
        #expect(away.status == 3, "\(away.stdout) \(away.stderr)")
        #expect(away.stdout.contains("server unreachable") && away.stdout.contains("3 local change(s) queued"), "\(away.stdout)")
        expectNoTerminalControls(away)
        let status = try t.run(["status", "--notes", t.a])
        #expect(status.status == 3 && status.stdout.contains("UNREACHABLE") && status.stdout.contains("pending:   3"), "\(status.stdout)")
        #expect(try t.notes(t.a) == expected)

        switch how {
        case .renamedAway: #expect(rename(t.server + ".away", t.server) == 0)
        case .unmounted: share = try TestMount(bind: disk, at: t.server)
        }
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(try t.notes(t.b) == expected)
        #expect(try t.run(["status", "--notes", t.a]).stdout.contains("pending:   0"))
        for name in names { #expect(try logChanges(t.server, name).count == 1, "\(name) committed exactly once") }
        let fsck = try t.run(["server", "fsck", t.server])
        let unexpected = fsck.stdout.split(separator: "\n").filter { $0.contains(": ") && !$0.hasPrefix("temp file:") }
        #expect(unexpected.isEmpty, "only temp files of the interrupted writer may remain: \(unexpected)")
    }

    enum AgentFault: String, CaseIterable, CustomStringConvertible, Sendable {
        case serverFull, serverReadOnly
        var description: String { rawValue }
    }

    /// `notesync watch` through a full or read-only server: edits are queued, `status` says why, and when the
    /// fault goes the agent pushes everything by itself.
    @Test(arguments: AgentFault.allCases)
    func theAgentResumesByItselfWhenTheFaultGoes(_ fault: AgentFault) throws {
        let t = try TwoDevices("agent-\(fault)")
        let tmpfs = fault == .serverFull ? try TestMount.tmpfs(replacing: t.server, size: "1m") : nil
        var readOnly: TestMount?
        defer {
            readOnly?.unmount()
            tmpfs?.unmount()
            withExtendedLifetime(t) {}
        }
        let agents = try TwoAgents(devices: t)
        defer { agents.stop() }
        try t.write(t.a, "before.md", "before the fault\n")
        #expect(eventually { t.read(t.b, "before.md") == "before the fault\n" })

        var filler: String?
        switch fault {
        case .serverFull: filler = try fillFilesystem(t.server)
        case .serverReadOnly: readOnly = try TestMount(bind: t.server, at: t.server, readOnly: true)
        }
        try t.write(t.a, "before.md", "edited during the fault\n")
        for index in 0..<5 { try t.write(t.a, "during-\(index).md", "written during the fault \(index)\n") }
        let reason = fault == .serverFull ? "No space left on device" : "Read-only file system"
        #expect(
            eventually(30) {
                guard let data = try? Data(contentsOf: URL(fileURLWithPath: t.a + "/.notesync/status.json")),
                    let status = try? JSONDecoder().decode(AgentStatus.self, from: data)
                else { return false }
                return status.pending >= 6 && status.lastError?.contains(reason) == true
            }, "the agent reports the fault with the edits pending")
        let status = try t.run(["status", "--notes", t.a])
        #expect(status.stdout.contains(reason) && status.stdout.contains("fix:"), "\(status.stdout)")
        expectNoTerminalControls(status)
        #expect(t.read(t.b, "during-0.md") == nil && t.read(t.b, "before.md") == "before the fault\n")

        if let filler { unlink(filler) }
        readOnly?.unmount()
        let expected = try t.notes(t.a)
        #expect(expected.count == 6)
        #expect(eventually(60) { (try? t.notes(t.b)) == expected }, "the agent did not resume by itself")
    }
}

/// A sync stopped by a full filesystem: one error line that says so and gives the fix (free space, sync again).
private func expectNoSpaceStop(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(
        result.stderr.hasPrefix("notesync: ") && result.stderr.contains("No space left on device")
            && result.stderr.contains("fix: free space"), "\(result.stderr)", sourceLocation: sourceLocation)
}
