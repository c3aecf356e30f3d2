import Foundation
import Synchronization
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

/// The batching of commits (BatchPipeline): batches in order, the next one prepared while one is processed, writes
/// one at a time and in order, everything finished before it returns or throws.
@Suite struct BatchPipelineTests {
    struct Failure: Error {}

    @Test(arguments: [false, true])
    func batchesAreProcessedInOrderAndWritesRunInOrder(overlapped: Bool) throws {
        let prepared = Mutex<[Range<Int>]>([])
        let written = Mutex<[Int]>([])
        var processed: [Range<Int>] = []
        var lasts: [Bool] = []
        let finished = try BatchPipeline.run(
            total: 10, batchSize: 3, overlapped: overlapped,
            prepare: { range in
                prepared.withLock { $0.append(range) }
                return range.count
            },
            process: { count, range, isLast, writer in
                #expect(count == range.count)
                processed.append(range)
                lasts.append(isLast)
                let index = range.lowerBound
                try writer.submit(inBackground: !isLast) {
                    usleep(useconds_t(2_000 * (3 - index / 3 % 3)))  // earlier writes take longer: order must still hold
                    written.withLock { $0.append(index) }
                }
                return true
            })
        #expect(finished)
        #expect(processed == [0..<3, 3..<6, 6..<9, 9..<10])
        #expect(lasts == [false, false, false, true])
        #expect(prepared.withLock { $0 } == processed, "each batch prepared once, in order")
        #expect(written.withLock { $0 } == [0, 3, 6, 9], "every write done, in order, before run returned")
    }

    @Test func aBatchThatStopsEndsTheRunAfterItsWrites() throws {
        let written = Mutex<[Int]>([])
        var processed = 0
        let startOf: @Sendable (Range<Int>) -> Int = { $0.lowerBound }
        let finished = try BatchPipeline.run(total: 9, batchSize: 3, overlapped: true, prepare: startOf) {
            start, _, _, writer in
            processed += 1
            try writer.submit(inBackground: true) {
                usleep(5_000)
                written.withLock { $0.append(start) }
            }
            return start < 3
        }
        #expect(!finished && processed == 2)
        #expect(written.withLock { $0 } == [0, 3], "the writes submitted were finished")
    }

    @Test func aFailedWriteOrPreparationIsThrownInOrder() {
        #expect(throws: Failure.self) {
            let startOf: @Sendable (Range<Int>) -> Int = { $0.lowerBound }
            _ = try BatchPipeline.run(total: 6, batchSize: 2, overlapped: true, prepare: startOf) { start, _, _, writer in
                try writer.submit(inBackground: true) { if start == 0 { throw Failure() } }
                return true
            }
        }
        var processed: [Int] = []
        #expect(throws: Failure.self) {
            let failing: @Sendable (Range<Int>) throws -> Int = { range in
                if range.lowerBound == 4 { throw Failure() }
                return range.lowerBound
            }
            _ = try BatchPipeline.run(total: 6, batchSize: 2, overlapped: true, prepare: failing) { start, _, _, _ in
                processed.append(start)
                return true
            }
        }
        #expect(processed == [0, 2], "the batches before the failed one were processed")
    }
}
