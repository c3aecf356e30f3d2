import CSyscalls
import Foundation
import Testing

@testable import NoteSync

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
}
