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

struct SyncProgressLineTests {
    @Test func theLineNamesThePhaseCountsBytesAndRate() {
        typealias S = SyncProgress.Snapshot
        #expect(SyncProgress.line(S(phase: .scanning, done: 0, total: 0, bytes: 0, seconds: 0.5)) == "scanning the notes folder…")
        #expect(
            SyncProgress.line(S(phase: .scanning, done: 1234, total: 100_000, bytes: 2_500_000, seconds: 2))
                == "scanning: 1,234/100,000 notes, 2.5 MB, 1.2 MB/s")
        #expect(
            SyncProgress.line(S(phase: .uploading, done: 4000, total: 10000, bytes: 8_000_000, committed: 2000, seconds: 4))
                == "uploading: 4,000/10,000 notes, 8.0 MB, 2.0 MB/s, 2,000 committed")
        #expect(
            SyncProgress.line(S(phase: .uploading, done: 10000, total: 10000, bytes: 1_000_000, committed: 8000, seconds: 0.1))
                == "committing: 8,000/10,000 notes, 1.0 MB")
        #expect(SyncProgress.line(S(phase: .downloading, done: 7, total: 9, bytes: 0, seconds: 3)) == "downloading: 7/9 notes")
    }

    @Test func theCountersAreBumpedAndResetByPhase() {
        let progress = SyncProgress()
        progress.enter(.uploading, total: 10)
        progress.add(4, bytes: 100)
        progress.addCommitted(2)
        var snapshot = progress.snapshot
        #expect((snapshot.phase, snapshot.done, snapshot.total, snapshot.bytes, snapshot.committed) == (.uploading, 4, 10, 100, 2))
        progress.enter(.downloading)
        progress.expect(3)
        snapshot = progress.snapshot
        #expect((snapshot.phase, snapshot.done, snapshot.total, snapshot.bytes, snapshot.committed) == (.downloading, 0, 3, 0, 0))
    }
}
