import Foundation
import Testing

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// Renames, row by row (docs/reconciliation.md, "Moves"): a note keeps its record across a rename, an edit made on
/// one side meets the rename made on the other, and nothing is deleted for the sake of a rename.
@Suite struct MoveTests {
    private static func text(_ lines: String...) -> Data { Data(lines.map { $0 + "\n" }.joined().utf8) }

    /// Renames a note (or a folder) as `mv` does: one rename(2), the file keeps its inode and mtime.
    private static func rename(_ harness: SyncHarness, _ device: Int, _ from: String, _ to: String) throws {
        let target = harness.path(device, to)
        try FileIO.makeDirectories(FileIO.parent(of: target))
        guard Glibc.rename(harness.path(device, from), target) == 0 else {
            throw NoteSyncError.posix("rename", path: target, errno: errno)
        }
    }

    /// Two devices with the same notes, synced.
    private static func synced(_ notes: [String: Data], devices: Int = 2) throws -> SyncHarness {
        let harness = try SyncHarness(deviceCount: devices)
        for (name, data) in notes { try harness.write(0, name, data) }
        for device in 0..<devices { _ = try harness.sync(device) }
        return harness
    }

    private static func trash(_ harness: SyncHarness, _ device: Int) -> [String] {
        (try? FileIO.listEntries(harness.devices[device].folder.root + "/.notesync/trash"))??.map(\.name) ?? []
    }

    private static func moves(_ report: SyncReport) -> [String] {
        report.changes.filter { $0.kind == .move }.map { "\($0.from ?? "?") → \($0.name)" }
    }

    /// The bases a sync records apply as in order (each name's last update stands), the removals first, so that a
    /// batch of renames reuses the rows of the old names: renames, a name removed then set, set then removed, set
    /// twice, then random sequences against applying them one by one.
    @Test func baseUpdatesApplyAsInOrderWithTheRemovalsFirst() throws {
        let digest = ContentDigest(of: Data("t".utf8))
        func base(_ tag: Int64) -> BaseRecord { BaseRecord(tag: tag, digest: digest, size: 1, modified: 1, fingerprint: nil) }
        func named(_ string: String) -> RecordName { RecordName(trusted: string)! }
        var bases = RecordTable<BaseRecord>()
        for index in 0..<6 { bases[named("n\(index).md")] = base(1) }
        var updates: [(name: RecordName, base: BaseRecord?)] = [(named("m0.md"), base(2)), (named("n0.md"), nil)]
        updates += [(named("n1.md"), nil), (named("n1.md"), base(3)), (named("n2.md"), base(4)), (named("n2.md"), nil)]
        updates += [(named("m3.md"), base(5)), (named("m3.md"), base(6))]
        var expected = bases
        for (name, value) in updates { expected[name] = value }
        SyncEngine.applyBaseUpdates(&updates, to: &bases)
        #expect(bases == expected && bases.count == 6)
        #expect(updates.count == 5 && Set(updates.map(\.name)).count == 5, "each name's last update is left")
        #expect(bases[named("n1.md")]?.tag == 3 && bases[named("n2.md")] == nil && bases[named("m3.md")]?.tag == 6)

        var random = SplitMix(seed: 20)
        for _ in 0..<200 {
            var table = RecordTable<BaseRecord>()
            for index in 0..<Int(random.next() % 8) { table[named("p\(index)")] = base(1) }
            let count = Int(random.next() % 12)
            var sequence: [(name: RecordName, base: BaseRecord?)] = (0..<count).map { _ in
                (named("p\(random.next() % 8)"), random.next() % 3 == 0 ? nil : base(Int64(random.next() % 100)))
            }
            var oneByOne = table
            for (name, value) in sequence { oneByOne[name] = value }
            let shown = sequence.map { "\($0.name)=\($0.base?.tag ?? -1)" }
            var lastOfEach: [RecordName: BaseRecord?] = [:]
            for (name, value) in sequence { lastOfEach[name] = value }
            SyncEngine.applyBaseUpdates(&sequence, to: &table)
            #expect(table == oneByOne, "\(shown)")
            #expect(sequence.count == lastOfEach.count && sequence.allSatisfy { lastOfEach[$0.name] == $0.base }, "\(shown)")
        }
    }

    @Test func aRenameReachesTheOtherDeviceAsARename() throws {
        let harness = try Self.synced(["x.md": Self.text("one", "two")])
        try Self.rename(harness, 0, "x.md", "y.md")
        let pushed = try harness.sync(0)
        #expect(Self.moves(pushed) == ["x.md → y.md"])
        let pulled = try harness.sync(1)
        #expect(Self.moves(pulled) == ["x.md → y.md"])
        #expect(try harness.notes(1) == ["y.md": Self.text("one", "two")])
        #expect(Self.trash(harness, 1).isEmpty)
        // One entry: the old name's delete and the new name's save, linked.
        let server = try harness.serverState()
        #expect(server.heads[try RecordName(validating: "x.md")]?.movedTo?.string == "y.md")
        #expect(server.heads[try RecordName(validating: "y.md")]?.movedFrom?.string == "x.md")
    }

    /// The issue's second case: A renames, B edits the old name; B syncs after A.
    @Test func anEditMadeBeforeTheRenameWasPulledEndsAtTheNewName() throws {
        let harness = try Self.synced(["x.md": Self.text("one", "two", "three")])
        try Self.rename(harness, 0, "x.md", "y.md")
        try harness.write(1, "x.md", Self.text("one", "two by bob", "three"))
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        _ = try harness.sync(0)
        for device in 0..<2 { #expect(try harness.notes(device) == ["y.md": Self.text("one", "two by bob", "three")]) }
    }

    /// The same, B first: A's rename meets B's edit already on the server, and merges it into the renamed note.
    @Test func anEditOnTheServerIsMergedIntoTheNoteRenamedHere() throws {
        let harness = try Self.synced(["x.md": Self.text("one", "two", "three")])
        try harness.write(1, "x.md", Self.text("one", "two by bob", "three"))
        _ = try harness.sync(1)
        try Self.rename(harness, 0, "x.md", "y.md")
        try harness.write(0, "y.md", Self.text("one", "two", "three", "four by alice"))
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        let both = Self.text("one", "two by bob", "three", "four by alice")
        for device in 0..<2 { #expect(try harness.notes(device) == ["y.md": both]) }
    }

    @Test func bothRenamingToTheSameNameGiveOneNote() throws {
        let harness = try Self.synced(["x.md": Self.text("one")])
        try Self.rename(harness, 0, "x.md", "y.md")
        try Self.rename(harness, 1, "x.md", "y.md")
        _ = try harness.sync(0)
        let report = try harness.sync(1)
        #expect(report.conflictCopies.isEmpty)
        for device in 0..<2 { #expect(try harness.notes(device) == ["y.md": Self.text("one")]) }
    }

    /// Both rename, to different names: one note, at the later rename's name; the other is reported.
    @Test func theLaterOfTwoRenamesKeepsTheNote() throws {
        let harness = try Self.synced(["x.md": Self.text("one")])
        try Self.rename(harness, 0, "x.md", "by-alice.md")
        _ = try harness.sync(0)
        // Bob's rename is later (a rename sets the file's ctime).
        usleep(20_000)
        try Self.rename(harness, 1, "x.md", "by-bob.md")
        let report = try harness.sync(1)
        #expect(report.warnings.contains { $0.kind == .moveConflict })
        _ = try harness.sync(0)
        for device in 0..<2 { #expect(try harness.notes(device) == ["by-bob.md": Self.text("one")]) }
        #expect(try harness.serverState().heads[try RecordName(validating: "by-bob.md")]?.movedFrom?.string == "by-alice.md")
    }

    /// ... and the earlier rename, synced last, gives way: the note is renamed to the other name here.
    @Test func anEarlierRenameSyncedLastFollowsTheLaterOne() throws {
        let harness = try Self.synced(["x.md": Self.text("one")])
        try Self.rename(harness, 0, "x.md", "by-alice.md")
        usleep(20_000)
        try Self.rename(harness, 1, "x.md", "by-bob.md")
        _ = try harness.sync(1)
        let report = try harness.sync(0)
        #expect(report.warnings.contains { $0.kind == .moveConflict })
        #expect(report.pending == 0)
        for device in 0..<2 { #expect(try harness.notes(device) == ["by-bob.md": Self.text("one")]) }
    }

    /// A folder renamed to two names on two devices ends whole at the later rename's name, in either order of
    /// syncs: its notes' own ctimes (an edit saved after the rename, a merge a sync wrote into one, a download) do
    /// not split it note by note; every edit is in the notes at that name (``RenameTimes``).
    @Test(arguments: [true, false])
    func aFolderRenamedToTwoNamesEndsWholeAtTheLaterName(earlierSyncsFirst: Bool) throws {
        var notes: [String: Data] = [:]
        for index in 0..<6 { notes["work/n\(index).md"] = Self.text("note \(index)") }
        notes["work/sub/deep.md"] = Self.text("deep")
        let harness = try Self.synced(notes)
        // Edited on each side and synced both ways: the files' ctimes differ note by note and device by device.
        try harness.write(1, "work/n2.md", Self.text("note 2", "bob's edit"))
        try harness.write(0, "work/n4.md", Self.text("note 4", "alice's edit"))
        _ = try harness.sync(1)
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        // The server's edit that alice's sync merges into her renamed note (its file written after both renames).
        try harness.write(1, "work/n1.md", Self.text("note 1", "bob again"))
        _ = try harness.sync(1)
        try Self.rename(harness, 0, "work", "by-alice")
        usleep(20_000)
        try Self.rename(harness, 1, "work", "by-bob")
        usleep(20_000)
        // Saved after both renames, in the folder renamed earlier: its file is the latest, its folder's rename is not.
        try harness.write(0, "by-alice/n3.md", Self.text("note 3", "alice after the rename"))
        let order = earlierSyncsFirst ? [0, 1, 0, 1] : [1, 0, 1, 0]
        for device in order { _ = try harness.sync(device) }
        var expected: [String: Data] = [:]
        for (name, data) in notes { expected["by-bob/" + name.dropFirst("work/".count)] = data }
        expected["by-bob/n1.md"] = Self.text("note 1", "bob again")
        expected["by-bob/n2.md"] = Self.text("note 2", "bob's edit")
        expected["by-bob/n3.md"] = Self.text("note 3", "alice after the rename")
        expected["by-bob/n4.md"] = Self.text("note 4", "alice's edit")
        for device in 0..<2 { #expect(try harness.notes(device) == expected, "device \(device)") }
        for device in 0..<2 { #expect(Self.trash(harness, device).isEmpty) }
    }

    /// Renamed on one side, deleted on the other: the rename wins, as an edit does.
    @Test func aRenameBeatsADelete() throws {
        for renamerFirst in [true, false] {
            let harness = try Self.synced(["x.md": Self.text("one")])
            try Self.rename(harness, 0, "x.md", "y.md")
            try harness.delete(1, "x.md")
            if renamerFirst {
                _ = try harness.sync(0)
                _ = try harness.sync(1)
            } else {
                _ = try harness.sync(1)
                _ = try harness.sync(0)
            }
            _ = try harness.sync(1)
            for device in 0..<2 { #expect(try harness.notes(device) == ["y.md": Self.text("one")], "renamer first: \(renamerFirst)") }
        }
    }

    /// Renamed onto a name another device created meanwhile: no move, the normal rules: both texts kept.
    @Test func aRenameOntoANameCreatedElsewhereKeepsBothTexts() throws {
        let harness = try Self.synced(["x.md": Self.text("mine")])
        try harness.write(1, "y.md", Self.text("theirs"))
        _ = try harness.sync(1)
        try Self.rename(harness, 0, "x.md", "y.md")
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        _ = try harness.sync(0)
        let notes = try harness.notes(0)
        #expect(try harness.notes(1) == notes)
        let all = notes.values.map { String(decoding: $0, as: UTF8.self) }.joined()
        #expect(all.contains("mine") && all.contains("theirs"))
    }

    @Test(arguments: [("Note.md", "note.md"), ("a/x.md", "b/c/x.md"), ("a/x.md", "top.md")])
    func renamesOfCaseAndAcrossFolders(from: String, to: String) throws {
        let harness = try Self.synced([from: Self.text("text")])
        try Self.rename(harness, 0, from, to)
        #expect(Self.moves(try harness.sync(0)) == ["\(from) → \(to)"])
        #expect(Self.moves(try harness.sync(1)) == ["\(from) → \(to)"])
        #expect(try harness.notes(1) == [to: Self.text("text")])
        #expect(Self.trash(harness, 1).isEmpty)
    }

    /// The issue's first case: a folder of most notes renamed is no mass delete, and fills no trash.
    @Test func aFolderRenamedIsNoMassDelete() throws {
        var notes: [String: Data] = ["top.md": Self.text("top")]
        for index in 0..<20 { notes["work/n\(index).md"] = Self.text("note \(index)") }
        notes["work/sub/deep.md"] = Self.text("deep")
        let harness = try Self.synced(notes)
        try Self.rename(harness, 0, "work", "job")
        var guarded = SyncHarness.syncOptions
        guarded.allowMassDelete = false
        let dry = try harness.sync(
            0,
            {
                var options = SyncHarness.dryRunOptions
                options.allowMassDelete = false
                return options
            }())
        #expect(dry.count(.move) == 21 && dry.heldDeletes == 0)
        let token = try harness.serverState().token
        let pushed = try harness.sync(0, guarded)
        #expect(pushed.heldDeletes == 0 && pushed.count(.move) == 21)
        #expect(try harness.serverState().token == token + 1, "one entry")
        let pulled = try harness.sync(1, guarded)
        #expect(pulled.count(.move) == 21 && pulled.count(.downloadDelete) == 0)
        #expect(try harness.notes(1).keys.sorted() == notes.keys.map { $0.replacingOccurrences(of: "work/", with: "job/") }.sorted())
        #expect(Self.trash(harness, 1).isEmpty)
        #expect(FileIO.lstatInfo(harness.path(1, "work")) == nil, "the emptied folder goes")
    }

    /// A rename with an edit in the same sync is still a rename (similar text).
    @Test func aRenameWithAnEditIsARename() throws {
        let lines = (0..<10).map { "line \($0)" }
        let harness = try Self.synced(["x.md": Data(lines.map { $0 + "\n" }.joined().utf8)])
        try Self.rename(harness, 0, "x.md", "y.md")
        try harness.write(0, "y.md", Data((lines + ["one more"]).map { $0 + "\n" }.joined().utf8))
        #expect(Self.moves(try harness.sync(0)) == ["x.md → y.md"])
        _ = try harness.sync(1)
        #expect(try harness.notes(1).keys.sorted() == ["y.md"])
    }

    /// Two notes of one text renamed with their folder: each goes with the note of the same path below it.
    @Test func notesOfOneTextFollowTheirPaths() throws {
        let harness = try Self.synced(["a/x/n.md": Self.text("same"), "a/y/n.md": Self.text("same"), "a/z.md": Self.text("same")])
        try Self.rename(harness, 0, "a", "b")
        let report = try harness.sync(0)
        #expect(Self.moves(report).sorted() == ["a/x/n.md → b/x/n.md", "a/y/n.md → b/y/n.md", "a/z.md → b/z.md"])
    }

    /// A dry run of a rename says it and changes nothing.
    @Test func aDryRunShowsTheRenameAndChangesNothing() throws {
        let harness = try Self.synced(["x.md": Self.text("one")])
        try Self.rename(harness, 0, "x.md", "y.md")
        let before = try harness.snapshot()
        let token = try harness.serverState().token
        let dry = try harness.sync(0, SyncHarness.dryRunOptions)
        #expect(Self.moves(dry) == ["x.md → y.md"])
        #expect(dry.changes.count == 1, "no diff for a rename alone: \(dry.changes)")
        #expect(try harness.snapshot() == before)
        #expect(try harness.serverState().token == token)
    }

    /// A note renamed over another synced note of the same text, while the server's record of that name changed: the
    /// file is not that record's version, though it has its base's text (docs/reconciliation.md, the limit the soak
    /// of 2026-11-24 found). Both texts stay. Also when the base of the name it lands on has an unknown fingerprint
    /// (saved in the instant after a sync wrote it: ``NoteApplier/publishedFingerprint(_:written:)``), whose inode
    /// is no file's.
    @Test(arguments: [false, true]) func aNoteRenamedOverANoteOfTheSameTextIsNotItsVersion(unknown: Bool) throws {
        let harness = try Self.synced(["deep.txt": Self.text("T"), "todo.txt": Self.text("T")])
        if unknown {
            try harness.devices[0].state.update { try $0.setFingerprint(try RecordName(validating: "deep.txt"), .unknown) }
        }
        try harness.write(1, "deep.txt", Self.text("B by bob"))
        _ = try harness.sync(1)
        try Self.rename(harness, 0, "todo.txt", "deep.txt")
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        _ = try harness.sync(0)
        let notes = try harness.notes(0)
        #expect(try harness.notes(1) == notes)
        #expect(notes.values.contains(Self.text("T")), "\(notes.keys)")
        #expect(notes.values.contains(Self.text("B by bob")), "\(notes.keys)")
    }

    /// `mv a.md b.md` over a synced b.md of another text replaces b, as the user meant: no conflict copy.
    @Test func aNoteRenamedOverAnotherReplacesIt() throws {
        let harness = try Self.synced(["a.md": Self.text("a"), "b.md": Self.text("b")])
        try Self.rename(harness, 0, "a.md", "b.md")
        let report = try harness.sync(0)
        #expect(report.conflictCopies.isEmpty)
        _ = try harness.sync(1)
        for device in 0..<2 { #expect(try harness.notes(device) == ["b.md": Self.text("a")]) }
    }

    /// A note renamed over another, and another renamed with a new note made at its old name, in one sync: neither is
    /// a move (a delete and an upload; two uploads), and the commit's bases keep each name's last change, so the next
    /// sync on either device has nothing to do.
    @Test func eachNameKeepsItsLastChangeOfACommit() throws {
        let harness = try Self.synced(["a.md": Self.text("a"), "b.md": Self.text("b"), "x.md": Self.text("one", "two")])
        try Self.rename(harness, 0, "a.md", "b.md")
        try Self.rename(harness, 0, "x.md", "y.md")
        try harness.write(0, "x.md", Self.text("new"))
        let pushed = try harness.sync(0)
        let pushedChanges = pushed.changes.map { "\($0.kind) \($0.name)" }.sorted()
        #expect(pushedChanges == ["upload b.md", "upload x.md", "upload y.md", "uploadDelete a.md"])
        let again = try harness.sync(0)
        #expect(again.changes.isEmpty)
        _ = try harness.sync(1)
        let expected = ["b.md": Self.text("a"), "x.md": Self.text("new"), "y.md": Self.text("one", "two")]
        for device in 0..<2 { #expect(try harness.notes(device) == expected) }
        #expect(try harness.sync(1).changes.isEmpty)
    }

    /// A chain of renames on the server (x → y → z) reaches a device that saw none of them as one rename.
    @Test func aChainOfRenamesIsFollowed() throws {
        let harness = try Self.synced(["x.md": Self.text("one")])
        try Self.rename(harness, 0, "x.md", "y.md")
        _ = try harness.sync(0)
        try Self.rename(harness, 0, "y.md", "z.md")
        _ = try harness.sync(0)
        try harness.write(1, "x.md", Self.text("one", "two by bob"))
        _ = try harness.sync(1)
        _ = try harness.sync(0)
        for device in 0..<2 { #expect(try harness.notes(device) == ["z.md": Self.text("one", "two by bob")]) }
    }
}

/// The time of a rename here (``RenameTimes``), path shape by path shape: the file's own ctime for a rename in its
/// folder or moved up, else the later ctime of the first folder new to its path and of its own folder, and never of
/// a folder both paths share.
@Suite struct RenameTimesTests {
    @Test func eachShapeOfRenameTakesTheTimeOfWhatItChanged() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        for folder in ["G", "a/G/s", "a/b"] { try FileIO.makeDirectories(root + "/" + folder) }
        usleep(20_000)
        // The folders the paths share change after the ones they moved into: their times must not count.
        // (A pause before each: the file system's clock moves in steps of a few milliseconds.)
        for file in ["a/G/s/later.md", "a/later.md", "later.md"] {
            #expect(FileManager.default.createFile(atPath: root + "/" + file, contents: nil))
            usleep(20_000)
        }
        func ctime(_ folder: String) throws -> Int64 {
            let info = try #require(FileIO.lstatInfo(folder.isEmpty ? root : root + "/" + folder))
            return Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
        }
        #expect(try ctime("a") > ctime("a/G/s") && ctime("a") > ctime("a/b") && ctime("") > ctime("G"))
        #expect(try ctime("a/G/s") > ctime("a/G"))
        let times = RenameTimes(root: root)
        func time(_ from: String, _ to: String) throws -> Int64 {
            let file = LocalFile(
                name: try name(to), path: to, fingerprint: StatFingerprint(size: 1, mtime: 1, ctime: 42, inode: 7),
                digest: ContentDigest(of: Data("x".utf8)), size: 1)
            return times.time(from: try name(from), to: try name(to), file: file)
        }
        #expect(try time("a/x.md", "a/y.md") == 42)
        #expect(try time("x.md", "y.md") == 42)
        #expect(try time("F/x.md", "G/x.md") == ctime("G"))
        // The renamed folder and the note's own: a subfolder changed since counts (moved into an existing folder).
        #expect(try time("a/F/s/x.md", "a/G/s/x.md") == ctime("a/G/s"))
        #expect(try time("F/x.md", "a/G/x.md") == max(ctime("a"), ctime("a/G")))
        #expect(try time("a/x.md", "a/b/x.md") == ctime("a/b"))
        // Moved up: only the note was renamed (the folders' ctimes move with every temp file made in them).
        #expect(try time("a/b/x.md", "a/x.md") == 42)
        #expect(try time("a/x.md", "x.md") == 42)
        #expect(try time("ab/x.md", "a/x.md") == ctime("a"))
        // A folder that cannot be read: the file's time.
        #expect(try time("F/x.md", "gone/x.md") == 42)
    }
}
