import Foundation
import Testing

@testable import NoteSync

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
}
