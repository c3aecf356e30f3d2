import Foundation
import Testing
@testable import NoteSync

/// The hash-chained log (server format 2), at the store's level: each entry names the digest of the file before it,
/// a fetch verifies every link and the log's end, a commit reads its predecessor back, and a gap is sealed void
/// so that the chain goes on through it.
@Suite struct LogChainTests {
    func save(_ store: ServerStore, _ state: inout ZoneState, _ note: String, _ text: String) throws -> LogEntry {
        let name = try RecordName(validating: note)
        let outcome = try store.commit([.save(name, base: state.tag(of: name), text: try store.putAsset(Data(text.utf8)),
                                              modified: 1)], into: &state)
        guard case .committed(let entry) = outcome else { throw NoteSyncError(.conflict, "lost the race") }
        return entry
    }

    func fileDigest(_ store: ServerStore, _ seq: Int64) throws -> ContentDigest {
        ContentDigest(of: try #require(try FileIO.read(store.layout.entryPath(seq))))
    }

    @Test func everyEntryNamesTheFileBeforeIt() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        let first = try save(store, &state, "a.md", "one")
        let second = try save(store, &state, "b.md", "two")
        #expect(first.prev == nil)
        #expect(second.prev == (try fileDigest(store, 1)))
        #expect(state.chain == (try fileDigest(store, 2)))

        var reader = ZoneState()
        try store.fetch(into: &reader)
        #expect(reader.token == 2 && reader.chain == state.chain)
    }

    @Test func aLinkThatDoesNotFollowIsRefused() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        _ = try save(store, &state, "a.md", "one")
        var reader = ZoneState()
        try store.fetch(into: &reader)
        // Another history's entry 2: names a digest that is not entry 1's.
        let forged = LogEntry(seq: 2, commit: "fork", device: "dev-b", time: 0, changes: [], prev: ContentDigest(of: Data("x".utf8)))
        try FileIO.makeDirectories(store.layout.shardDirectory(of: 2))
        try FileIO.createAndSync(store.layout.entryPath(2), try SealedFile.seal(forged, kind: "entry"))
        #expect { try store.fetch(into: &reader) } throws: { ($0 as? NoteSyncError)?.kind == .serverMismatch }
        #expect(reader.token == 1, "nothing past the break is folded in")
        // A device that never read the log takes it as it comes, up to the break.
        var fresh = ZoneState()
        #expect { try store.fetch(into: &fresh) } throws: { ($0 as? NoteSyncError)?.kind == .serverMismatch }
    }

    @Test func aServerBehindTheDeviceIsFoundByAFetchAndByACommit() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        _ = try save(store, &state, "a.md", "one")
        _ = try save(store, &state, "b.md", "two")
        unlink(store.layout.entryPath(2))
        var reader = state
        #expect { try store.fetch(into: &reader) } throws: { ($0 as? NoteSyncError)?.kind == .serverMismatch }
        #expect { _ = try save(store, &state, "c.md", "three") } throws: { ($0 as? NoteSyncError)?.kind == .serverMismatch }
        #expect(FileIO.lstatInfo(store.layout.entryPath(2)) == nil, "no slot is claimed past an end the device never read")
    }

    @Test func anEntryReplacedInPlaceIsFound() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        _ = try save(store, &state, "a.md", "one")
        let replaced = LogEntry(seq: 1, commit: "other", device: "dev-b", time: 0, changes: [])
        unlink(store.layout.entryPath(1))
        try FileIO.createAndSync(store.layout.entryPath(1), try SealedFile.seal(replaced, kind: "entry"))
        var reader = state
        reader.verifiedTail = nil
        #expect { try store.fetch(into: &reader) } throws: { ($0 as? NoteSyncError)?.kind == .serverMismatch }
    }

    @Test func aGapIsReportedThenSealedSoTheChainGoesOn() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        _ = try save(store, &state, "a.md", "one")
        _ = try save(store, &state, "b.md", "two")
        let third = try save(store, &state, "c.md", "three")
        let lost = try fileDigest(store, 2)
        unlink(store.layout.entryPath(2))
        var reader = ZoneState()
        #expect { try store.fetch(into: &reader) } throws: { ($0 as? NoteSyncError)?.kind == .logGap }
        #expect(reader.token == 1)

        let report = try ServerFsck(store: store).run(repair: true, gapGraceSeconds: 0)
        #expect(report.findings.contains { $0.kind == .missingEntry && $0.repaired != nil }, "\(report.findings)")
        guard case .entry(let void) = try store.readSlot(2) else {
            Issue.record("slot 2 is not sealed")
            return
        }
        #expect(void.void?.lost == lost && void.changes.isEmpty)
        #expect(try store.voidedSlots() == [2])
        try store.fetch(into: &reader)
        #expect(reader.token == 3 && reader.chain == third.digest)
        #expect(try ServerFsck(store: store).run(repair: false).isClean)
    }
}
