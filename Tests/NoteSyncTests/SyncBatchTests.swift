import Foundation
import Testing

@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// Each of ``SyncBatch``'s methods alone: what it does in the notes folder and what it adds to the batch.
@Suite struct SyncBatchTests {
    /// A notes folder, its server, and a batch made for `plan` over them.
    struct Setup {
        let dir: TempDirectory
        let notes: String
        let store: ServerStore
        let applier: NoteApplier

        init() throws {
            dir = try TempDirectory("sync-batch")
            notes = dir.sub("notes")
            try FileManager.default.createDirectory(atPath: notes, withIntermediateDirectories: true)
            store = try makeServer(dir)
            applier = NoteApplier(root: notes, trash: dir.sub("trash"), deviceName: "dev-a")
        }

        func batch(
            _ plan: [Step] = [], bases: RecordTable<BaseRecord> = [:], heads: RecordTable<RecordHead> = [:]
        ) -> SyncBatch {
            SyncBatch(
                plan, bases: bases, heads: heads, applier: applier, store: store, root: notes, deviceName: "dev-a",
                progress: nil)
        }

        /// Writes `text` at `path` in the notes folder and returns it as a scan finds it.
        func file(_ path: String, _ text: String) throws -> LocalFile {
            let data = Data(text.utf8)
            try writeFile(notes + "/" + path, data)
            let info = try #require(FileIO.lstatInfo(notes + "/" + path))
            return LocalFile(
                name: try name(path), path: path, fingerprint: StatFingerprint(info), digest: ContentDigest(of: data),
                size: Int64(data.count))
        }

        /// A head of `text`, its text on the server.
        func head(_ text: String, tag: Int64 = 7, modified: Int64 = 1_700_000_000_000_000_000) throws -> RecordHead {
            let ref = try store.putAsset(Data(text.utf8))
            return RecordHead(tag: tag, deleted: false, text: ref, modified: modified, version: 1, device: "dev-b")
        }

        func read(_ path: String) throws -> String? {
            try FileIO.read(notes + "/" + path).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    static func step(_ path: String, local: LocalFile? = nil, base: BaseRecord? = nil, _ action: Action) throws -> Step {
        var step = Step(name: try name(path), local: local, base: base, decision: .nothing)
        step.action = action
        return step
    }

    static func base(of file: LocalFile, tag: Int64 = 3) -> BaseRecord {
        BaseRecord(tag: tag, digest: file.digest, size: file.size, modified: file.modified, fingerprint: file.fingerprint)
    }

    @Test func countsWhatThePlanMakesAndTheRoomItNeeds() throws {
        let setup = try Setup()
        let head = try setup.head("server")
        var plan = [
            try Self.step("a.md", .save(.upload, base: 0)), try Self.step("b.md", .delete(base: 2)),
            try Self.step("c.md", .trash(head)), try Self.step("d.md", .adopt(head))
        ]
        plan += try (0..<SyncEngine.bulkDownloadThreshold).map { try Self.step("new\($0).md", .write(head, .download)) }
        let known: RecordTable<BaseRecord> = [
            try name("b.md"): BaseRecord(tag: 2, digest: head.text!.sha256, size: 6, modified: 0, fingerprint: nil)
        ]
        let batch = setup.batch(plan, bases: known, heads: [try name("a.md"): head])

        #expect(batch.counts.saves == 2)
        #expect(batch.counts.updates == 2 + SyncEngine.bulkDownloadThreshold)
        #expect(batch.counts.textWrites == SyncEngine.bulkDownloadThreshold)
        #expect(batch.counts.newDownloads == SyncEngine.bulkDownloadThreshold)
        #expect(batch.counts.newBases == plan.count - 1)
        #expect(batch.counts.newHeads == plan.count - 1)
        #expect(batch.downloadsInBulk)
        #expect(!setup.batch(Array(plan.prefix(5))).downloadsInBulk)
    }

    @Test func aCopyThePlanNamedIsNeverTakenAgain() throws {
        let setup = try Setup()
        let conflict = Conflict(
            server: try setup.head("s"), localWins: true, copy: try name("a (copy).md"), copyDevice: "dev-b",
            madeBefore: false, binary: false)
        let batch = setup.batch([try Self.step("a.md", .conflict(conflict))])
        #expect(batch.plannedCopies == [try name("a (copy).md")])
    }

    @Test func saveAddsThePushOfTheLocalNote() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("a.md", "text")
        batch.save(try Self.step("a.md", local: file, .save(.resurrect, base: 4)), .resurrect, base: 4)
        batch.save(try Self.step("gone.md", .save(.upload, base: 0)), .upload, base: 0)

        #expect(batch.pushes.count == 1)
        #expect(batch.pushes.first?.name == file.name)
        #expect(batch.pushes.first?.path == "a.md")
        #expect(batch.pushes.first?.base == 4)
        #expect(batch.pushes.first?.kind == .resurrect)
        #expect(batch.baseUpdates.isEmpty && batch.changes.isEmpty)
    }

    @Test func deleteAddsAPushWithoutAPath() throws {
        let setup = try Setup()
        var batch = setup.batch()
        batch.delete(try Self.step("a.md", .delete(base: 9)), base: 9)

        #expect(batch.pushes.count == 1)
        #expect(batch.pushes.first?.path == nil)
        #expect(batch.pushes.first?.base == 9)
        #expect(batch.pushes.first?.kind == .uploadDelete)
    }

    @Test func trashMovesTheNoteToTheTrashAndForgetsItsBase() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("a.md", "text")
        let tombstone = RecordHead(tag: 8, deleted: true, text: nil, modified: 0, version: 1, device: "dev-b")
        try batch.trash(try Self.step("a.md", local: file, base: Self.base(of: file), .trash(tombstone)))

        #expect(try setup.read("a.md") == nil)
        #expect(batch.baseUpdates.map(\.name) == [file.name])
        #expect(batch.baseUpdates.first?.base == nil)
        #expect(batch.changes.map(\.kind) == [.downloadDelete])
    }

    @Test func trashLeavesANoteEditedSinceItsBase() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("a.md", "text")
        var base = Self.base(of: file)
        base.digest = ContentDigest(of: Data("older".utf8))
        let tombstone = RecordHead(tag: 8, deleted: true, text: nil, modified: 0, version: 1, device: "dev-b")
        try batch.trash(try Self.step("a.md", local: file, base: base, .trash(tombstone)))

        #expect(try setup.read("a.md") == "text")
        #expect(batch.baseUpdates.isEmpty && batch.changes.isEmpty)
        #expect(batch.warnings.count == 1)
    }

    @Test func writeWritesTheServersTextAndTakesItsBase() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let head = try setup.head("from the server")
        try batch.write(try Self.step("a.md", .write(head, .download)), head, .download, heads: [:])

        #expect(try setup.read("a.md") == "from the server")
        #expect(batch.baseUpdates.count == 1)
        let base = try #require(batch.baseUpdates.first?.base)
        #expect(base.tag == head.tag && base.digest == head.text?.sha256 && base.modified == head.modified)
        #expect(base.fingerprint != nil)
        #expect(batch.changes.map(\.kind) == [.download])
    }

    @Test func writeKeepsANewNoteForTheBulkDownloadByNameWhenTheHeadIsTheZones() throws {
        let setup = try Setup()
        let head = try setup.head("new")
        let other = try setup.head("other", tag: 9)
        let plan = try (0..<SyncEngine.bulkDownloadThreshold).map { try Self.step("n\($0).md", .write(head, .download)) }
        var batch = setup.batch(plan)
        let heads: RecordTable<RecordHead> = [try name("n0.md"): head, try name("n1.md"): head]
        try batch.write(plan[0], head, .download, heads: heads)
        try batch.write(plan[1], other, .download, heads: heads)

        #expect(try setup.read("n0.md") == nil, "written with the others, later")
        #expect(batch.newNotes == [try name("n0.md"), try name("n1.md")])
        #expect(batch.otherHeads == [try name("n1.md"): other])
        #expect(batch.baseUpdates.isEmpty && batch.changes.isEmpty)
    }

    @Test func writeNewNotesWritesTheQueuedNotesAndTakesTheirBases() throws {
        let setup = try Setup()
        let head = try setup.head("new")
        let plan = try (0..<SyncEngine.bulkDownloadThreshold).map { try Self.step("n\($0).md", .write(head, .download)) }
        var batch = setup.batch(plan)
        var heads: RecordTable<RecordHead> = [:]
        for step in plan { heads[step.name] = head }
        for step in plan { try batch.write(step, head, .download, heads: heads) }
        try batch.writeNewNotes(heads: heads)

        for step in plan { #expect(try setup.read(step.name.string) == "new") }
        #expect(batch.newNotes.isEmpty && batch.otherHeads.isEmpty)
        #expect(Set(batch.baseUpdates.map(\.name)) == Set(plan.map(\.name)))
        #expect(batch.baseUpdates.allSatisfy { $0.base?.tag == head.tag && $0.base?.fingerprint != nil })
        #expect(batch.changes.count == plan.count && batch.changes.allSatisfy { $0.kind == .download })
    }

    @Test func adoptTakesTheHeadAsTheBaseAndItsTime() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("a.md", "same")
        let head = try setup.head("same", modified: 1_600_000_000_000_000_000)
        batch.adopt(try Self.step("a.md", local: file, .adopt(head)), head)

        let base = try #require(batch.baseUpdates.first?.base)
        #expect(batch.baseUpdates.count == 1)
        #expect(base.tag == head.tag && base.digest == file.digest)
        #expect(base.fingerprint?.mtime == head.modified, "the note takes the head's time")
        #expect(FileIO.lstatInfo(setup.notes + "/a.md").map { StatFingerprint($0).mtime } == head.modified)
    }

    @Test func adoptOfADeleteOnBothSidesForgetsTheBase() throws {
        let setup = try Setup()
        var batch = setup.batch()
        batch.adopt(try Self.step("a.md", .adopt(nil)), nil)
        #expect(batch.baseUpdates.map(\.name) == [try name("a.md")])
        #expect(batch.baseUpdates.first?.base == nil)
    }

    @Test func writeMergedWritesTheMergeAndPushesIt() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("a.md", "mine")
        let merged = Data("both".utf8)
        try batch.writeMerged(try Self.step("a.md", local: file, .writeMerged(merged, base: 5)), merged, base: 5)

        #expect(try setup.read("a.md") == "both")
        #expect(batch.pushes.map(\.kind) == [.merge])
        #expect(batch.pushes.first?.base == 5 && batch.pushes.first?.path == "a.md")
    }

    @Test func aConflictTheLocalVersionWinsKeepsTheServersAsACopy() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("a.md", "mine")
        let server = try setup.head("theirs", tag: 11)
        let copy = try name("a (conflict).md")
        let conflict = Conflict(server: server, localWins: true, copy: copy, copyDevice: "dev-b", madeBefore: false, binary: false)
        try batch.conflict(try Self.step("a.md", local: file, .conflict(conflict)), conflict) { _ in false }

        #expect(try setup.read("a.md") == "mine")
        #expect(try setup.read(copy.string) == "theirs")
        #expect(batch.pushes.map(\.name) == [copy, file.name])
        #expect(batch.pushes.map(\.kind) == [.upload, .conflict])
        #expect(batch.pushes.last?.base == server.tag)
        #expect(batch.conflicts.map(\.copy) == [copy] && batch.conflicts.first?.device == "dev-b")
        #expect(batch.changes.map(\.kind) == [.conflict])
    }

    @Test func aConflictTheServerWinsKeepsTheLocalVersionAsACopy() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("a.md", "mine")
        let server = try setup.head("theirs", tag: 11)
        let planned = try name("a (conflict).md")
        let conflict = Conflict(
            server: server, localWins: false, copy: planned, copyDevice: "dev-a", madeBefore: false, binary: false)
        try batch.conflict(try Self.step("a.md", local: file, .conflict(conflict)), conflict) { _ in false }

        let copy = try #require(batch.conflicts.first?.copy)
        #expect(try setup.read("a.md") == "theirs")
        #expect(try setup.read(copy.string) == "mine")
        #expect(batch.pushes.map(\.name) == [copy] && batch.pushes.first?.kind == .upload)
        #expect(batch.baseUpdates.map(\.name) == [file.name] && batch.baseUpdates.first?.base?.tag == server.tag)
    }

    @Test func aConflictCopyMadeBeforeIsRecordedNotPushedAgain() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("a.md", "mine")
        let copy = try name("a (conflict).md")
        let conflict = Conflict(
            server: try setup.head("theirs", tag: 11), localWins: true, copy: copy, copyDevice: "dev-b", madeBefore: true,
            binary: false)
        try batch.conflict(try Self.step("a.md", local: file, .conflict(conflict)), conflict) { _ in false }

        #expect(batch.pushes.map(\.name) == [file.name] && batch.pushes.first?.kind == .conflict)
        #expect(batch.conflicts.map(\.copy) == [copy])
        #expect(try setup.read(copy.string) == nil)
    }

    @Test func leaveOnlySaysIt() throws {
        let setup = try Setup()
        var batch = setup.batch()
        batch.leave(try Self.step("a.md", .leave(.unreadable, "cannot be read")), .unreadable, "cannot be read")
        #expect(batch.changes == [PlannedChange(kind: .unreadable, name: "a.md", detail: "cannot be read")])
        #expect(batch.pushes.isEmpty && batch.baseUpdates.isEmpty)
    }

    @Test func aMoveCommittedHereReplacesTheActionsPushWithTheMove() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("new.md", "text")
        var step = try Self.step("new.md", local: file, .save(.upload, base: 0))
        step.move = MovePlan(source: try name("old.md"), pushFrom: try name("old.md"), pushFromBase: 3, toBase: 0)
        let before = batch.marks
        batch.save(step, .upload, base: 0)
        batch.finishMove(step, try #require(step.move), since: before) { "renamed here" }

        #expect(batch.pushes.count == 1)
        let push = try #require(batch.pushes.first)
        let old = try name("old.md")
        #expect(push.kind == .move && push.name == file.name && push.moveFrom == old)
        #expect(push.moveFromBase == 3 && push.forget == old)
    }

    @Test func aMoveTheServerMadeForgetsTheOldNamesBase() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let old = try setup.file("old.md", "text")
        var step = try Self.step("new.md", local: old, .adopt(nil))
        step.move = MovePlan(source: try name("old.md"), renameFrom: try name("old.md"))
        try batch.renameForMove(&step)
        let before = batch.marks
        batch.finishMove(step, try #require(step.move), since: before) { "renamed on dev-b" }

        #expect(try setup.read("new.md") == "text" && setup.read("old.md") == nil)
        #expect(step.local?.path == "new.md")
        #expect(batch.renamedHere == ["old.md", "new.md"])
        #expect(batch.baseUpdates.map(\.name) == [try name("old.md")] && batch.baseUpdates.first?.base == nil)
        #expect(batch.changes == [PlannedChange(kind: .move, name: "new.md", detail: "renamed on dev-b", from: "old.md")])
    }

    @Test func applySaysANotesFailureAndGoesOn() throws {
        let setup = try Setup()
        var batch = setup.batch()
        let file = try setup.file("b.md", "text")
        // The note to follow a rename is not there: its step fails alone.
        var missing = try Self.step("a.md", local: try setup.file("x.md", "x"), .save(.upload, base: 0))
        missing.move = MovePlan(source: try name("gone.md"), renameFrom: try name("gone.md"))
        missing.local?.path = "gone.md"
        let plan = [missing, try Self.step("b.md", local: file, .save(.upload, base: 0))]
        try batch.apply(plan, heads: [:], isTaken: { _ in false }, moveDetail: { _, _ in "" })

        #expect(batch.warnings.count == 1)
        #expect(batch.pushes.map(\.name) == [file.name])
    }

    @Test func theReportsChangesAreTakenAndHandedBack() throws {
        let setup = try Setup()
        var batch = setup.batch()
        var report = SyncReport(dryRun: false)
        report.changes = [PlannedChange(kind: .upload, name: "earlier.md", detail: nil)]
        batch.take(&report)
        #expect(report.changes.isEmpty)
        batch.note(.download, try name("a.md"))
        batch.handBack(&report)
        #expect(report.changes.map(\.name) == ["earlier.md", "a.md"])
        #expect(batch.changes.isEmpty)
    }
}
