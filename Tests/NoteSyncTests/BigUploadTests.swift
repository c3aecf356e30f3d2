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

/// A first sync of more notes than one commit batch (2,000): several entries, each batch's local state written
/// on another thread while the next batch uploads. The property tests use few notes, so this path is checked here.
@Suite struct BigUploadTests {
    /// Three batches; two against a bucket, where each note is a request or three over HTTP.
    static let count = TestServer.isFolder ? 4_500 : 2_100
    static let batches = (count + SyncEngine.commitBatchSize - 1) / SyncEngine.commitBatchSize

    /// Every note is committed once, the local state holds a base with the entry's tag and the fingerprint for
    /// each (the next sync hashes nothing), the outbox is empty, and the other device gets every note exactly.
    @Test func aFirstSyncOfManyNotesCommitsEveryBatchAndRecordsEveryBase() throws {
        let harness = try SyncHarness(deviceCount: 2, persistentState: true)
        var written: [String: Data] = [:]
        for index in 0..<Self.count {
            let note = ["", "a/", "a/b/", "c/", "d/"][index % 5] + "note \(index).md"
            let data = Data("note \(index)\n".utf8 + Data(repeating: UInt8(ascii: "x"), count: index % 700) + Data("\n".utf8))
            try harness.write(0, note, data)
            written[note] = data
        }
        let report = try harness.sync(0)
        #expect(report.changes.filter { $0.kind == .upload }.count == Self.count)
        #expect(report.warnings.isEmpty, "\(report.warnings)")
        #expect(report.pending == 0)

        let state = harness.devices[0].state
        #expect(try state.outboxCount() == 0)
        let bases = try state.bases()
        #expect(bases.count == Self.count)
        let zone = try state.zoneState()
        #expect(zone.token == Int64(Self.batches), "one entry for each batch")
        #expect(zone.heads.count == Self.count)
        for (name, base) in bases {
            #expect(zone.heads[name]?.tag == base.tag && base.fingerprint != nil, "\(name)")
            #expect(zone.heads[name]?.text?.sha256 == base.digest, "\(name)")
        }
        #expect(Set(bases.values.map(\.tag)) == Set(1...Int64(Self.batches)))

        // Every staged text was published: no temp is left on the server.
        #expect(try ServerFiles(root: harness.serverRoot).names(in: ServerLayout(root: harness.serverRoot).tmpDirectory).isEmpty)

        let again = try harness.sync(0)
        #expect(again.changes.isEmpty && again.hashed == 0, "\(again.changes.count) changes, \(again.hashed) hashed")
        _ = try harness.sync(1)
        #expect(try harness.notes(1) == written)
        #expect(try harness.notes(0) == written)
    }

    /// A rename's moves are read and staged 500 at a time (``SyncEngine/partSize(_:)``), and each part's texts are
    /// looked for in the packs however few of them are distinct (notes sharing a text): a folder of notes another
    /// device uploaded (their texts packed) is renamed with no text stored again.
    @Test func aRenameOfPackedNotesSharingTextsStoresNoTextAgain() throws {
        let harness = try SyncHarness(deviceCount: 2, persistentState: true)
        for index in 0..<1_200 {
            // Every tenth note has the text of the one before it: a part of 500 moves holds 450 distinct texts.
            try harness.write(0, "work/note \(index).md", Data("note \(index % 10 == 9 ? index - 1 : index)\n".utf8))
        }
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        let files = try ServerFiles(root: harness.serverRoot)
        let layout = ServerLayout(root: harness.serverRoot)
        func stored() throws -> Int {
            let packs = try files.storage.list(layout.packsDirectory)?.count ?? 0
            let shards = try files.storage.list(layout.assetsDirectory) ?? []
            return try shards.reduce(packs) { $0 + (try files.storage.list(layout.assetsDirectory + "/" + $1)?.count ?? 0) }
        }
        let before = try stored()
        #expect(before > 0)
        guard Glibc.rename(harness.path(1, "work"), harness.path(1, "job")) == 0 else {
            throw NoteSyncError.posix("rename", path: harness.path(1, "job"), errno: errno)
        }
        let pushed = try harness.sync(1)
        #expect(pushed.count(.move) == 1_200 && pushed.warnings.isEmpty, "\(pushed.warnings)")
        #expect(try stored() == before, "moved notes' texts stored again")
        _ = try harness.sync(0)
        #expect(try harness.notes(0) == (try harness.notes(1)))
    }

    /// A folder of more notes than one commit batch renamed, some notes edited in the same sync: every move goes in
    /// one entry, though its notes are read and their texts staged a batch at a time (so that a rename of half of a
    /// large folder does not hold every moved text at once), and each moved note keeps its own text, the edited ones
    /// their new one: the texts of the parts line up with the moves.
    @Test func aFolderOfManyNotesRenamedIsOneEntryWithEveryText() throws {
        let harness = try SyncHarness(deviceCount: 2, persistentState: true)
        var written: [String: Data] = [:]
        for index in 0..<Self.count {
            let note = "work/" + ["", "a/", "b/"][index % 3] + "note \(index).md"
            let data = Data((0..<12).map { "note \(index) line \($0)\n" }.joined().utf8)
            try harness.write(0, note, data)
            written[note] = data
        }
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        guard Glibc.rename(harness.path(0, "work"), harness.path(0, "job")) == 0 else {
            throw NoteSyncError.posix("rename", path: harness.path(0, "job"), errno: errno)
        }
        var expected: [String: Data] = [:]
        for (note, data) in written {
            let moved = "job/" + note.dropFirst("work/".count)
            expected[moved] = data
        }
        // One note in 97 edited as well, spread over the parts: a rename with an edit, its new text uploaded.
        for (offset, note) in expected.keys.sorted().enumerated() where offset % 97 == 5 {
            let edited = expected[note]! + Data("an edit after the rename\n".utf8)
            try harness.write(0, note, edited)
            expected[note] = edited
        }
        let token = try harness.serverState().token
        let pushed = try harness.sync(0)
        #expect(pushed.count(.move) == Self.count && pushed.warnings.isEmpty, "\(pushed.warnings)")
        #expect(try harness.serverState().token == token + 1, "one entry")
        #expect(try ServerFiles(root: harness.serverRoot).names(in: ServerLayout(root: harness.serverRoot).tmpDirectory).isEmpty)
        let pulled = try harness.sync(1)
        #expect(pulled.count(.move) == Self.count)
        #expect(try harness.notes(1) == expected)
        #expect(try harness.notes(0) == expected)
        for (name, head) in try harness.serverState().heads where !head.deleted {
            #expect(head.text?.sha256 == ContentDigest(of: expected[name.string] ?? Data()), "\(name)")
        }
    }
}
