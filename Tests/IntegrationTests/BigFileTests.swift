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

/// `max-file-size`: a note over the limit is left out with a warning that names it and the fix, listed by `status`,
/// never deleted anywhere, and every other note syncs; big notes are kept as conflict copies rather than merged.
@Suite struct BigFileTests {
    /// `count` bytes of text lines (a merge reads it as text).
    static func text(_ count: Int, _ tag: String) -> String {
        let line = "\(tag) " + String(repeating: "x", count: 70) + "\n"
        return String(repeating: line, count: count / line.utf8.count + 1)
    }

    @Test func aNoteOverTheLimitHereIsLeftOutAndTheOthersSync() throws {
        let devices = try TwoDevices("bigfile-up")
        try devices.expectOK(["config", "--notes", devices.a, "--max-file-size", "1M"])
        try devices.write(devices.a, "small.md", "small\n")
        try devices.write(devices.a, "big.md", Self.text(2 << 20, "big"))
        let synced = try devices.sync(devices.a)
        #expect(synced.stderr.contains("big.md: 2.0 MiB, over max-file-size (1 MiB): not uploaded"), "\(synced.stderr)")
        let fix = "fix: `notesync config --notes \(NotesFolder(root: devices.a).root) --max-file-size 3M`"
        #expect(synced.stderr.contains(fix), "\(synced.stderr)")
        let status = try devices.expectOK(["status", "--notes", devices.a])
        #expect(status.stdout.contains("too big:   1 note(s) over max-file-size (1 MiB)"), "\(status.stdout)")
        #expect(status.stdout.contains("           big.md"), "\(status.stdout)")
        try devices.sync(devices.b)
        #expect(devices.read(devices.b, "small.md") == "small\n")
        #expect(devices.read(devices.b, "big.md") == nil)
        // Still there, and synced once the limit allows it; `status` lists it no more.
        #expect(devices.read(devices.a, "big.md") != nil)
        // The printed fix, followed as printed, from a folder outside the notes.
        let config = try devices.run(["config", "--notes", devices.a, "--max-file-size", "3M"], directory: devices.scratch.path)
        #expect(config.status == 0 && config.stdout.contains("max-file-size: 3 MiB"), "\(config.stdout)\(config.stderr)")
        let again = try devices.sync(devices.a)
        #expect(again.stdout.contains("upload           big.md"), "\(again.stdout)")
        #expect(!(try devices.expectOK(["status", "--notes", devices.a])).stdout.contains("too big:"))
        try devices.sync(devices.b)
        #expect(devices.read(devices.b, "big.md") == devices.read(devices.a, "big.md"))
    }

    @Test func aNoteOverTheLimitOnTheServerIsNotDownloadedAndTheOthersArrive() throws {
        let devices = try TwoDevices("bigfile-down")
        try devices.expectOK(["config", "--notes", devices.a, "--max-file-size", "0"])
        try devices.expectOK(["config", "--notes", devices.b, "--max-file-size", "1M"])
        for index in 0..<5 { try devices.write(devices.a, "n\(index).md", "note \(index)\n") }
        try devices.write(devices.a, "big.md", Self.text(2 << 20, "big"))
        try devices.sync(devices.a)
        let pulled = try devices.sync(devices.b)
        #expect(pulled.stderr.contains("big.md: 2.0 MiB, over max-file-size (1 MiB): not downloaded"), "\(pulled.stderr)")
        for index in 0..<5 { #expect(devices.read(devices.b, "n\(index).md") == "note \(index)\n") }
        #expect(devices.read(devices.b, "big.md") == nil)
        let status = try devices.expectOK(["status", "--notes", devices.b])
        #expect(status.stdout.contains("too big:   1 note(s)") && status.stdout.contains("           big.md"), "\(status.stdout)")
        // Nothing of it is deleted on the server: A's next sync changes nothing.
        let next = try devices.sync(devices.a)
        #expect(!next.stdout.contains("big.md"), "\(next.stdout)")
        #expect(devices.read(devices.a, "big.md") != nil)
    }

    /// Synced notes that the limit now leaves out (an upgrader's, or a limit lowered), on both devices: big.md,
    /// deep.md and proj/big.md, beside proj/small.md and small notes.
    static func bigNotesSyncedThenLimited(_ label: String) throws -> TwoDevices {
        let devices = try TwoDevices(label)
        try devices.write(devices.a, "big.md", text(2 << 20, "big"))
        try devices.write(devices.a, "deep.md", text(2 << 20, "deep"))
        try devices.write(devices.a, "proj/big.md", text(2 << 20, "proj"))
        try devices.write(devices.a, "proj/small.md", "small\n")
        // Enough other notes that three deletes are not held as a mass delete.
        for index in 0..<20 { try devices.write(devices.a, "n\(index).md", "note \(index)\n") }
        try devices.sync(devices.a)
        try devices.sync(devices.b)
        for folder in [devices.a, devices.b] { try devices.expectOK(["config", "--notes", folder, "--max-file-size", "1M"]) }
        return devices
    }

    /// The renames of ``bigNotesSyncedThenLimited(_:)``'s notes: one renamed, one moved into a folder, and their
    /// folder renamed.
    static func renameBigNotes(_ devices: TwoDevices) throws {
        let a = devices.a
        #expect(rename(a + "/big.md", a + "/large.md") == 0)
        try FileManager.default.createDirectory(atPath: a + "/docs", withIntermediateDirectories: true)
        #expect(rename(a + "/deep.md", a + "/docs/deep.md") == 0)
        #expect(rename(a + "/proj", a + "/archive") == 0)
    }

    /// A note over the limit renamed is left out whole, its old name too: never a delete on the other device. Once
    /// the limit allows it, the rename arrives as a rename.
    @Test func aNoteOverTheLimitRenamedIsNeverADelete() throws {
        let devices = try Self.bigNotesSyncedThenLimited("bigfile-rename")
        let before = try devices.notes(devices.b)
        try Self.renameBigNotes(devices)
        let synced = try devices.sync(devices.a)
        #expect(!synced.stdout.contains("delete"), "\(synced.stdout)")
        #expect(synced.stderr.contains("large.md: 2.0 MiB, over max-file-size"), "\(synced.stderr)")
        #expect(synced.stderr.contains("docs/deep.md: 2.0 MiB") && synced.stderr.contains("archive/big.md: 2.0 MiB"), "\(synced.stderr)")
        try devices.sync(devices.b)
        // The small note of the renamed folder is a rename on its own; the big ones wait where they were.
        var expected = before
        expected["archive/small.md"] = expected.removeValue(forKey: "proj/small.md")
        #expect(try devices.notes(devices.b).keys.sorted() == expected.keys.sorted())
        #expect(FileIO.lstatInfo(devices.b + "/.notesync/trash") == nil, "nothing went to B's trash")
        for folder in [devices.a, devices.b] { try devices.expectOK(["config", "--notes", folder, "--max-file-size", "3M"]) }
        let moved = try devices.sync(devices.a)
        #expect(!moved.stdout.contains("delete") && !moved.stdout.contains("upload"), "\(moved.stdout)")
        try devices.sync(devices.b)
        #expect(try devices.notes(devices.b) == (try devices.notes(devices.a)))
        #expect(FileIO.lstatInfo(devices.b + "/.notesync/trash") == nil, "nothing went to B's trash")
    }

    @Test func aSizeThatIsNotOneIsRefusedWithTheFix() throws {
        let devices = try TwoDevices("bigfile-usage")
        let refused = try devices.run(["config", "--notes", devices.a, "--max-file-size", "lots"])
        #expect(refused.status == 64, "\(refused.stderr)")
        #expect(refused.stderr.contains("lots: is not a file size") && refused.stderr.contains("fix:"), "\(refused.stderr)")
        let shown = try devices.expectOK(["config", "--notes", devices.a])
        #expect(shown.stdout.contains("max-file-size: \(FileSizeLimit.default) (the default)"), "\(shown.stdout)")
    }

    /// Both devices edit a note over the merge limit: no line merge (it would hold thirteen times the texts), both
    /// versions kept, one as a conflict copy.
    @Test func bigNotesEditedOnBothSidesAreKeptAsAConflictCopy() throws {
        let devices = try TwoDevices("bigfile-merge")
        let base = Self.text(5 << 20, "base")
        try devices.write(devices.a, "big.md", base)
        try devices.sync(devices.a)
        try devices.sync(devices.b)
        try devices.write(devices.a, "big.md", "alice's line\n" + base)
        try devices.sync(devices.a)
        try devices.write(devices.b, "big.md", base + "bob's line\n")
        let merged = try devices.sync(devices.b)
        #expect(merged.stdout.contains("conflict"), "\(merged.stdout.prefix(2000))")
        let notes = try devices.notes(devices.b)
        // Digests, not texts: a failure prints what it compares.
        let texts = Set(notes.values.map { ContentDigest(of: $0) })
        #expect(notes.count == 2, "\(notes.keys.sorted())")
        #expect(texts == [ContentDigest(of: Data(("alice's line\n" + base).utf8)), ContentDigest(of: Data((base + "bob's line\n").utf8))])
    }
}

/// `max-file-size` under running agents: their partial syncs leave a big note out as a one-shot sync does, and
/// take it in once the limit is raised, without a restart.
@Suite(.serialized) struct BigFileAgentTests {
    @Test func agentsLeaveABigNoteOutAndTakeItInWhenTheLimitIsRaised() throws {
        let devices = try TwoDevices("bigfile-agents")
        for folder in [devices.a, devices.b] { try devices.expectOK(["config", "--notes", folder, "--max-file-size", "1M"]) }
        let agents = try TwoAgents(devices: devices)
        defer { agents.stop() }
        try devices.write(devices.a, "big.md", BigFileTests.text(2 << 20, "big"))
        try devices.write(devices.a, "small.md", "small\n")
        #expect(eventually(30) { devices.read(devices.b, "small.md") == "small\n" }, "\(agents.logs())")
        let listed = eventually(30) {
            (try? devices.run(["status", "--notes", devices.a]))?.stdout.contains("           big.md") == true
        }
        #expect(listed, "\(agents.logs())")
        #expect(devices.read(devices.b, "big.md") == nil)
        // The printed fix alone, the note untouched: the agents' next syncs take it in.
        for folder in [devices.a, devices.b] { try devices.expectOK(["config", "--notes", folder, "--max-file-size", "3M"]) }
        let arrived = eventually(30) { devices.read(devices.b, "big.md") == devices.read(devices.a, "big.md") }
        #expect(arrived, "\(agents.logs())")
        let cleared = eventually(30) {
            (try? devices.run(["status", "--notes", devices.a]))?.stdout.contains("too big:") == false
        }
        #expect(cleared, "\(agents.logs())")
    }

    /// A note too big for B only, on the server: B's agent downloads it once B's limit is raised, nothing else
    /// changed anywhere.
    @Test func anAgentDownloadsANoteOnceItsLimitIsRaised() throws {
        let devices = try TwoDevices("bigfile-agents-down")
        try devices.expectOK(["config", "--notes", devices.b, "--max-file-size", "1M"])
        let agents = try TwoAgents(devices: devices)
        defer { agents.stop() }
        try devices.write(devices.a, "big.md", BigFileTests.text(2 << 20, "big"))
        try devices.write(devices.a, "small.md", "small\n")
        #expect(eventually(30) { devices.read(devices.b, "small.md") == "small\n" }, "\(agents.logs())")
        let listed = eventually(30) {
            (try? devices.run(["status", "--notes", devices.b]))?.stdout.contains("           big.md") == true
        }
        #expect(listed, "\(agents.logs())")
        #expect(devices.read(devices.b, "big.md") == nil)
        try devices.expectOK(["config", "--notes", devices.b, "--max-file-size", "3M"])
        let arrived = eventually(30) { devices.read(devices.b, "big.md") == devices.read(devices.a, "big.md") }
        #expect(arrived, "\(agents.logs())")
    }
}
