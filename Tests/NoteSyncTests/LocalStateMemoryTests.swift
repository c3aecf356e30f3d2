import Foundation
import Testing

@testable import NoteSync

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
}
