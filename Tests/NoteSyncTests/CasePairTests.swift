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

/// Records whose names are one file on a notes folder that folds case (``CasePairs``): the folder's answer is
/// injected (``SyncEngine/foldsCase``), so these run on any filesystem; the integration tests run the real ones.
@Suite struct CasePairTests {
    private static func text(_ line: String) -> Data { Data((line + "\n").utf8) }

    private static func kinds(_ report: SyncReport) -> [String] {
        report.changes.map { "\($0.kind.rawValue) \($0.name)" }.sorted()
    }

    /// Syncs `device` as a folder that folds case.
    private static func foldingSync(_ harness: SyncHarness, _ device: Int) throws -> SyncReport {
        let device = harness.devices[device]
        let engine = SyncEngine(folder: device.folder, state: device.state, config: device.config, logger: testLogger)
        engine.foldsCase = true
        return try engine.sync(SyncHarness.syncOptions)
    }

    @Test func aCasePairWaitsAndIsDeletedNowhere() throws {
        let harness = try SyncHarness(deviceCount: 2)
        try harness.write(0, "Todo.md", Self.text("upper"))
        try harness.write(0, "todo.md", Self.text("lower"))
        _ = try harness.sync(0)
        for _ in 0..<2 {
            let report = try Self.foldingSync(harness, 1)
            #expect(!report.changes.contains { $0.kind == .uploadDelete || $0.kind == .upload })
            let warned = report.warnings.filter { $0.kind == .casePair }
            #expect(warned.map(\.path) == ["todo.md"], "\(report.warnings)")
            #expect(warned.first?.message.contains("rename one of them on a device whose folder tells them apart") == true)
        }
        #expect(try harness.notes(1) == ["Todo.md": Self.text("upper")])
        #expect(
            try SyncEngine.caseWaiting(harness.devices[1].state) == [
                try RecordName(validating: "todo.md"): try RecordName(validating: "Todo.md")
            ])
        #expect(Self.kinds(try harness.sync(0)).isEmpty)
        #expect(try harness.notes(0) == ["Todo.md": Self.text("upper"), "todo.md": Self.text("lower")])
        // Renamed where case tells them apart, both arrive.
        #expect(rename(harness.path(0, "todo.md"), harness.path(0, "todo-2.md")) == 0)
        _ = try harness.sync(0)
        let after = try Self.foldingSync(harness, 1)
        #expect(after.warnings.filter { $0.kind == .casePair }.isEmpty)
        #expect(try harness.notes(1) == ["Todo.md": Self.text("upper"), "todo-2.md": Self.text("lower")])
        #expect(try SyncEngine.caseWaiting(harness.devices[1].state).isEmpty)
        #expect(try harness.serverNotes().mapValues(\.data) == ["Todo.md": Self.text("upper"), "todo-2.md": Self.text("lower")])
    }

    /// A device that synced a pair before it waited (a base for each, one file): neither is deleted or overwritten.
    @Test func theOwnerLeavingLetsTheOtherIn() throws {
        let harness = try SyncHarness(deviceCount: 2)
        try harness.write(0, "Todo.md", Self.text("upper"))
        try harness.write(0, "todo.md", Self.text("lower"))
        _ = try harness.sync(0)
        _ = try Self.foldingSync(harness, 1)
        // The owner is renamed where case tells them apart: B moves it and takes the other in, in one sync.
        #expect(rename(harness.path(0, "Todo.md"), harness.path(0, "Todo-1.md")) == 0)
        _ = try harness.sync(0)
        _ = try Self.foldingSync(harness, 1)
        #expect(try harness.notes(1) == ["Todo-1.md": Self.text("upper"), "todo.md": Self.text("lower")])
        #expect(try SyncEngine.caseWaiting(harness.devices[1].state).isEmpty)
    }

    /// `Notes/a.md` and `notes/b.md` are two folders where case is told apart and one folder here: `notes/b.md`
    /// is written into `Notes/`, and found there it is the same record, not a new note and a delete.
    @Test func aFolderSpelledOtherwiseOnDiskIsNoRename() throws {
        let harness = try SyncHarness(deviceCount: 2)
        try harness.write(0, "Notes/a.md", Self.text("a"))
        try harness.write(0, "notes/b.md", Self.text("b"))
        _ = try harness.sync(0)
        _ = try Self.foldingSync(harness, 1)
        // What a case-folding folder holds: one folder, spelled as it was made.
        #expect(rename(harness.path(1, "notes/b.md"), harness.path(1, "Notes/b.md")) == 0)
        _ = rmdir(harness.path(1, "notes"))
        let report = try Self.foldingSync(harness, 1)
        #expect(report.changes.isEmpty, "\(report.changes)")
        #expect(report.warnings.filter { $0.kind == .casePair }.isEmpty)
        #expect(Self.kinds(try harness.sync(0)).isEmpty)
        #expect(try harness.serverNotes().mapValues(\.data) == ["Notes/a.md": Self.text("a"), "notes/b.md": Self.text("b")])
        // An edit through the other spelling is the record's edit.
        try harness.write(1, "Notes/b.md", Self.text("b edited"))
        #expect(Self.kinds(try Self.foldingSync(harness, 1)) == ["upload notes/b.md"])
    }

    @Test func theOwnerIsTheNameOnDiskThenOneWithABaseThenTheLowest() throws {
        var scan = ScanResult()
        let file = LocalFile(
            name: try RecordName(validating: "a/TODO.md"), path: "a/TODO.md",
            fingerprint: StatFingerprint(size: 1, mtime: 1, ctime: 1, inode: 1), digest: ContentDigest(of: Data()),
            size: 0)
        scan.files[file.name] = file
        let head = RecordHead(tag: 1, deleted: false, text: nil, modified: 1, version: 1, device: "x")
        var heads = RecordTable<RecordHead>()
        heads[try RecordName(validating: "a/todo.md")] = head
        heads[try RecordName(validating: "a/Todo.md")] = head
        heads[try RecordName(validating: "a/straße.md")] = head
        heads[try RecordName(validating: "a/STRASSE.md")] = head
        let outcome = CasePairs.settle(&scan, bases: [:], heads: heads)
        // The file on disk spelled as no record is the lowest record's file; ß folds to ss.
        #expect(Set(outcome.waiting.keys.map(\.string)) == ["a/todo.md", "a/straße.md"])
        #expect(scan.files.keys.map(\.string) == ["a/Todo.md"])
        #expect(scan.files[try RecordName(validating: "a/Todo.md")]?.path == "a/TODO.md")
    }
}

extension CasePairTests {
    /// A conflict copy is never named so that it folds onto a note's name: on a folder that folds case they would be
    /// one file.
    @Test func aConflictCopyNameNeverFoldsOntoANote() throws {
        let harness = try SyncHarness(deviceCount: 2)
        try harness.write(0, "n.md", Self.text("base"))
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        try harness.write(0, "n.md", Self.text("A's"))
        _ = try harness.sync(0)
        try harness.write(1, "n.md", Self.text("B's"))
        let planned = try #require(try harness.sync(1, SyncHarness.dryRunOptions).conflictCopies.first)
        // The copy's name in another case, made elsewhere first.
        try harness.write(0, planned.uppercased(), Self.text("a note"))
        _ = try harness.sync(0)
        let report = try harness.sync(1)
        let copy = try #require(report.conflictCopies.first)
        let folded = CasePairs.fold(try RecordName(validating: copy))
        #expect(copy != planned && folded != planned.lowercased(), "\(copy)")
        #expect(try harness.read(1, planned.uppercased()) == Self.text("a note"))
    }
}

extension CasePairTests {
    private static func file(_ name: String, inode: UInt64) throws -> LocalFile {
        LocalFile(
            name: try RecordName(validating: name), path: name,
            fingerprint: StatFingerprint(size: 1, mtime: 1, ctime: 1, inode: inode), digest: ContentDigest(of: Data()),
            size: 0)
    }

    private static let head = RecordHead(tag: 1, deleted: false, text: nil, modified: 1, version: 1, device: "x")

    /// A partial scan finds the one file under each spelling it is given: the listing, not the lookup, says whose it
    /// is. A name just fetched (`Todo.md`) never takes the file of a note this device has a base of (`todo.md`).
    @Test func aPartialScanGivesTheFileToTheSpellingListed() throws {
        let (upper, lower) = (try RecordName(validating: "Todo.md"), try RecordName(validating: "todo.md"))
        var bases = RecordTable<BaseRecord>()
        bases[lower] = BaseRecord(tag: 1, digest: .empty, size: 0, modified: 1, fingerprint: nil)
        var heads = RecordTable<RecordHead>()
        heads[lower] = Self.head
        heads[upper] = Self.head
        for given in [[upper], [upper, lower]] {
            var scan = ScanResult()
            scan.scope = Set(given)
            for name in given { scan.files[name] = try Self.file(name.string, inode: 7) }
            let outcome = CasePairs.settle(&scan, bases: bases, heads: heads) { $0 == lower }
            #expect(outcome.waiting == [upper: lower], "\(given)")
            #expect(Array(scan.files.keys) == (given.contains(lower) ? [lower] : []), "\(given)")
            // The folder cannot be listed: the record with a base keeps it.
            var unlisted = ScanResult()
            unlisted.scope = Set(given)
            for name in given { unlisted.files[name] = try Self.file(name.string, inode: 7) }
            #expect(CasePairs.settle(&unlisted, bases: bases, heads: heads).waiting == [upper: lower], "\(given)")
        }
    }

    /// Two spellings of one group in the folder's listing are two files (exFAT keeps `ß` and `SS` apart): neither
    /// waits, and the one that is no record's is a new note, not dropped.
    @Test func twoSpellingsListedAreTwoFiles() throws {
        let (sharp, upper) = (try RecordName(validating: "straße.md"), try RecordName(validating: "STRASSE.md"))
        var heads = RecordTable<RecordHead>()
        heads[sharp] = Self.head
        var scan = ScanResult()
        scan.files[sharp] = try Self.file(sharp.string, inode: 1)
        scan.files[upper] = try Self.file(upper.string, inode: 2)
        let outcome = CasePairs.settle(&scan, bases: [:], heads: heads)
        #expect(outcome.waiting.isEmpty && outcome.warnings.isEmpty)
        #expect(Set(scan.files.keys) == [sharp, upper])
        // A partial scan that finds both listed: the same.
        var partial = ScanResult()
        partial.scope = [sharp, upper]
        partial.files[sharp] = try Self.file(sharp.string, inode: 1)
        partial.files[upper] = try Self.file(upper.string, inode: 2)
        heads[upper] = Self.head
        #expect(CasePairs.settle(&partial, bases: [:], heads: heads) { _ in true }.waiting.isEmpty)
        #expect(Set(partial.files.keys) == [sharp, upper])
    }
}

extension CasePairTests {
    /// A probe that cannot answer (here: no state folder to probe in) says so and takes the folder as folding: a
    /// case pair then waits, where taken for a folder that tells case apart it would become a delete.
    @Test func aProbeThatCannotAnswerWarnsAndTakesTheFolderAsFolding() throws {
        let harness = try SyncHarness(deviceCount: 1)
        let device = harness.devices[0]
        let engine = SyncEngine(folder: device.folder, state: device.state, config: device.config, logger: testLogger)
        let moved = device.folder.stateDirectory + "-away"
        #expect(rename(device.folder.stateDirectory, moved) == 0)
        defer { _ = rename(moved, device.folder.stateDirectory) }
        let answer = engine.notesFolderFoldsCase()
        #expect(answer.folds)
        #expect(answer.warning?.message.contains("could not tell whether this notes folder tells case apart") == true)
        #expect(answer.warning?.message.contains("fix: ") == true)
    }
}
