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

/// A note bigger than the server takes in one file (S3: 5 GiB in one `PutObject`; ``ServerStorage/largestFile``)
/// never keeps the others from syncing: it is left queued with a warning naming it and the fix, and the rest is
/// committed. Bound small here for the test's task (``BigText/largestStored``).
@Suite struct ServerFileLimitTests {
    @Test func aNoteTheServerCannotTakeIsLeftOutAndTheOthersSync() throws {
        try BigText.$threshold.withValue(64 << 10) {
            try BigText.$largestStored.withValue(1 << 20) {
                let harness = try SyncHarness(deviceCount: 2)
                let big = Data((0..<60_000).map { "line \($0) of a note too big for this server\n" }.joined().utf8)
                try harness.write(0, "big.md", big)
                try harness.write(0, "small.md", Data("small\n".utf8))
                try harness.write(0, "medium.md", Data(repeating: UInt8(ascii: "m"), count: 200 << 10))
                let report = try harness.sync(0)
                let warning = try #require(report.warnings.first { $0.message.contains("big.md") }, "\(report.warnings)")
                #expect(warning.message.contains("bigger than the server takes in one file"), "\(warning.message)")
                #expect(warning.message.contains(".notesyncignore"), "the fix is named: \(warning.message)")
                #expect(report.pending == 1, "big.md stays queued: \(report.pending)")
                let server = try harness.serverNotes()
                #expect(server["small.md"] != nil && server["medium.md"] != nil && server["big.md"] == nil)
                _ = try harness.sync(1)
                #expect(try harness.read(1, "small.md") == Data("small\n".utf8))
                #expect(try harness.read(1, "big.md") == nil)
                // Following the fix: the note ignored, the sync is clean and nothing waits.
                try harness.write(0, ".notesyncignore", Data("big.md\n".utf8))
                let after = try harness.sync(0)
                #expect(after.pending == 0 && !after.warnings.contains { $0.message.contains("bigger than") }, "\(after.warnings)")
            }
        }
    }
}
