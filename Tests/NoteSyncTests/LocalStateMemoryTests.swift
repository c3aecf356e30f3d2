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

/// What the local state holds in memory between syncs.
@Suite struct LocalStateMemoryTests {
    /// Reading every base fills SQLite's page cache; the agent frees it once a full sync is done
    /// (``LocalState/releaseMemory()``), and the state still reads and writes as before.
    @Test func releasingMemoryEmptiesSQLitesPageCache() throws {
        let dir = try TempDirectory()
        let state = try LocalState(path: dir.path + "/state.db")
        let digest = ContentDigest(of: Data("text".utf8))
        try state.update { batch in
            for index in 0..<5000 {
                try batch.setBase(
                    try name("a folder with a long name/note number \(index).md"),
                    BaseRecord(tag: 1, digest: digest, size: 4, modified: 1, fingerprint: nil))
            }
        }
        #expect(try state.bases().count == 5000)
        let full = state.cacheBytes()
        #expect(full > 200_000, "\(full) bytes cached after reading 5,000 bases")
        state.releaseMemory()
        #expect(state.cacheBytes() < full / 4, "\(state.cacheBytes()) of \(full) bytes left")
        #expect(try state.bases().count == 5000)
        try state.update { batch in
            try batch.setBase(try name("one more.md"), BaseRecord(tag: 2, digest: digest, size: 4, modified: 1, fingerprint: nil))
        }
        #expect(try state.bases().count == 5001)
    }

    /// SQLite keeps at most ``LocalState/pageCacheKiB`` of pages while every base is read, on a connection that
    /// writes and on a read-only one (a dry run), against 2 MB by default.
    @Test func readingEveryBaseKeepsASmallPageCache() throws {
        let dir = try TempDirectory()
        let path = dir.path + "/state.db"
        let digest = ContentDigest(of: Data("text".utf8))
        do {
            let state = try LocalState(path: path)
            try state.update { batch in
                for index in 0..<20000 {
                    try batch.setBase(
                        try name("a folder with a long name/note number \(index).md"),
                        BaseRecord(tag: 1, digest: digest, size: 4, modified: 1, fingerprint: nil))
                }
            }
            try state.close()
        }
        let limit = LocalState.pageCacheKiB * 1024 * 5 / 4  // the pages and SQLite's own header of each
        for readOnly in [false, true] {
            let state = try LocalState(path: path, readOnly: readOnly)
            #expect(try state.bases().count == 20000)
            #expect(state.cacheBytes() > limit / 4, "read-only \(readOnly): the cache is used")
            #expect(state.cacheBytes() <= limit, "read-only \(readOnly): \(state.cacheBytes()) bytes cached")
        }
    }

    /// The agent's records loaded again after a full sync (``SyncEngine/reloadRecords()``) are the ones it held, and
    /// the next sync finds nothing to do.
    @Test func recordsLoadedAgainAreTheOnesHeld() throws {
        let harness = try SyncHarness(deviceCount: 2)
        for index in 0..<20 { try harness.write(0, "folder/note \(index).md", Data("text \(index)\n".utf8)) }
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        try harness.write(1, "folder/note 3.md", Data("changed on B\n".utf8))
        try harness.delete(1, "folder/note 4.md")
        _ = try harness.sync(1)
        let device = harness.devices[0]
        let engine = try SyncEngine(folder: device.folder, state: device.state, config: device.config, logger: testLogger)
        _ = try engine.sync(SyncHarness.syncOptions)
        let held = try #require(engine.heldRecords)
        #expect(held.bases.count == 19 && held.zone.heads.count == 20)
        func storage(_ name: RecordName?) -> UnsafeRawPointer? {
            guard var string = name?.string else { return nil }
            return string.withUTF8 { UnsafeRawPointer($0.baseAddress) }
        }
        let note = try name("folder/note 12.md")
        let before = storage(held.zone.heads.storedName(note))
        try engine.reloadRecords()
        let loaded = try #require(engine.heldRecords)
        #expect(storage(loaded.zone.heads.storedName(note)) != before, "the tables are read again, not kept")
        #expect(storage(loaded.bases.storedName(note)) == storage(loaded.zone.heads.storedName(note)))
        #expect(loaded.bases == held.bases)
        #expect(loaded.zone == held.zone)
        #expect(loaded.zone.verifiedTail == held.zone.verifiedTail && loaded.zone.earlier == held.zone.earlier)
        let report = try engine.sync(SyncHarness.syncOptions)
        #expect(report.changes.isEmpty, "\(report.changes)")
        #expect(try harness.notes(0) == (try harness.notes(1)))
    }
}
