import CSyscalls
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

/// ``Parallel/map(_:serialBelow:_:)``: results in index order; a failure stops its own chunk, and the caller
/// sees which slots ran (to clean up after them).
@Suite struct ParallelTests {
    struct Failed: Error {}

    @Test func resultsComeInIndexOrder() throws {
        let results = Parallel.map(10_000) { index in .success(index * 3) }
        #expect(try results.map { try $0!.get() } == (0..<10_000).map { $0 * 3 })
    }

    /// In order on the calling thread (a small batch): nothing runs after the first failure.
    @Test func aSmallBatchStopsAtTheFirstFailure() {
        let results = Parallel.map(40) { index in index == 7 ? .failure(Failed()) : .success(index) }
        #expect(results[0..<7].allSatisfy { if case .success? = $0 { true } else { false } })
        #expect({ if case .failure? = results[7] { true } else { false } }())
        #expect(results[8...].allSatisfy { $0 == nil })
    }

    /// On every core: the failing slot's chunk stops there; every slot before it in index order ran, and every
    /// slot that did not run is after a failure of its chunk.
    @Test func aBigBatchReportsEverySlotThatRan() {
        let results = Parallel.map(1_000) { index in index == 500 ? .failure(Failed()) : .success(index) }
        #expect(results[0..<500].allSatisfy { if case .success? = $0 { true } else { false } })
        #expect({ if case .failure? = results[500] { true } else { false } }())
        #expect(results[501] == nil)
        let firstMissing = results.firstIndex { $0 == nil } ?? results.count
        #expect(firstMissing == 501)
    }

    /// Values that cannot fail fill every slot, in index order, on one thread or on every core.
    @Test(arguments: [0, 10, 10_007]) func valuesFillEverySlotInOrder(count: Int) {
        let doubled = Parallel.values(count) { $0 * 2 }
        #expect(doubled == (0..<count).map { $0 * 2 })
    }

    /// The cores counted are those the process may run on: bound to one CPU (as under `taskset -c 0`, or a cgroup's
    /// cpuset of one), it counts one; unbound, at least one and at most the CPUs of the mask. Counted for the calling
    /// thread, whose whole mask is put back after.
    @Test func theCoresAreThoseOfTheAffinityMask() throws {
        var saved = [UInt8](repeating: 0, count: 1024)
        let inMask = Int(ns_save_thread_affinity(&saved, saved.count))
        try #require(inMask >= 1, "the thread's affinity mask could not be read")
        defer { _ = ns_restore_thread_affinity(saved, saved.count) }
        let unbound = Int(ns_active_cores())
        #expect(unbound >= 1 && unbound <= inMask)
        try #require(ns_bind_thread_to_first_cpu() == 0)
        #expect(ns_active_cores() == 1)
    }

    /// The cgroup's CPU quota caps the cores (``ns_cores_capped_by_quota``, which ``ns_active_cores`` calls with the
    /// cgroup root's files): v2's `cpu.max` first, v1's quota over its period when v2's file has no two values; the
    /// quota over the period rounded up lowers the count, never raises it, and no file, "max", -1 or anything
    /// unreadable sets no cap.
    @Test func aCPUQuotaCapsTheCores() throws {
        let temp = try TempDirectory()
        func cores(_ count: Int32, v2: String?, quota: String? = nil, period: String? = nil) throws -> Int32 {
            for (name, text) in [("cpu.max", v2), ("quota", quota), ("period", period)] {
                unlink(temp.sub(name))
                if let text { try Data(text.utf8).write(to: URL(fileURLWithPath: temp.sub(name))) }
            }
            return ns_cores_capped_by_quota(count, temp.sub("cpu.max"), temp.sub("quota"), temp.sub("period"))
        }
        // cgroup v2.
        #expect(try cores(8, v2: "max 100000\n") == 8)
        #expect(try cores(8, v2: "150000 100000\n") == 2)
        #expect(try cores(8, v2: "50000 100000\n") == 1)
        #expect(try cores(8, v2: "200000 100000") == 2)
        #expect(try cores(2, v2: "400000 100000\n") == 2)
        #expect(try cores(8, v2: "1000 100000\n") == 1)
        // v2's file read, with no cap: v1's files are not looked at.
        #expect(try cores(8, v2: "max 100000\n", quota: "100000\n", period: "100000\n") == 8)
        // cgroup v1 (no v2 file, or one without two values).
        #expect(try cores(8, v2: nil, quota: "250000\n", period: "100000\n") == 3)
        #expect(try cores(8, v2: "garbage\n", quota: "100000\n", period: "100000\n") == 1)
        #expect(try cores(8, v2: nil, quota: "-1\n", period: "100000\n") == 8)
        #expect(try cores(8, v2: nil, quota: "250000\n", period: nil) == 8)
        #expect(try cores(8, v2: nil, quota: "250000\n", period: "0\n") == 8)
        // Nothing readable: no cap; never fewer than one.
        #expect(try cores(8, v2: nil) == 8)
        #expect(try cores(8, v2: "") == 8)
        #expect(try cores(0, v2: nil) == 1)
    }
}
