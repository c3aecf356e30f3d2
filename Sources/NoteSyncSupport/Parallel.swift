import CSyscalls
import Dispatch
import Foundation
import Synchronization

/// Work spread over every core, for the big batches of a first sync (hashing, writing and publishing assets).
package enum Parallel {
    /// The cores this process may use: its affinity mask (`taskset`, a cpuset), capped by a cgroup's CPU quota (v1 or
    /// v2), read once, first by ``MallocTuning`` on the main thread before any other starts. Not Foundation's
    /// `activeProcessorCount`: it sets up `ProcessInfo` and reads the cgroup's files through `URL` and `Data`, a cost
    /// in every process's start, and on Linux it reads cgroup v1's files only, never the affinity mask (under
    /// `taskset -c 0` it counts every core).
    static let cores = Int(ns_active_cores())

    /// `body(index)` for every index in `0..<count`, results in index order.
    ///
    /// Runs in order on the calling thread, stopping at the first failure (the later slots stay `nil`), when the
    /// batch is small or a simulation installed fault hooks (they are task-local: its crash points must be hit on
    /// the thread that installed them, one after another). Otherwise in chunks on every core, each chunk stopping
    /// at its first failure: the caller sees every slot that succeeded (to clean up after it) and the failures.
    package static func map<T>(
        _ count: Int, serialBelow minimum: Int = 64,
        _ body: (Int) -> Result<T, any Error>
    ) -> [Result<T, any Error>?] {
        if count < minimum || FaultPoint.isActive {
            var results = [Result<T, any Error>?](repeating: nil, count: count)
            for index in 0..<count {
                let result = body(index)
                results[index] = result
                if case .failure = result { break }
            }
            return results
        }
        let chunks = min(count, cores * 4)
        return [Result<T, any Error>?](unsafeUninitializedCapacity: count) { buffer, initialized in
            buffer.initialize(repeating: nil)
            nonisolated(unsafe) let slots = buffer
            withoutActuallyEscaping(body) { body in
                nonisolated(unsafe) let body = body
                // Each chunk writes only its own range of slots.
                DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
                    for index in chunk * count / chunks..<(chunk + 1) * count / chunks {
                        let result = body(index)
                        slots[index] = result
                        if case .failure = result { break }
                    }
                }
            }
            initialized = count
        }
    }
}

extension Parallel {
    /// `body(index)` for every index in `0..<count`, in index order, for work that cannot fail: each slot holds the
    /// value itself, not an optional `Result`, so a batch of 100,000 costs only its values (``map(_:serialBelow:_:)``'s
    /// slots are 48 bytes for a 4-byte value). In order on the calling thread below `minimum`, else in chunks on every
    /// core.
    package static func values<T>(_ count: Int, serialBelow minimum: Int = 64, _ body: (Int) -> T) -> [T] {
        if count < minimum { return (0..<count).map(body) }
        let chunks = min(count, cores * 4)
        return [T](unsafeUninitializedCapacity: count) { buffer, initialized in
            nonisolated(unsafe) let slots = buffer
            withoutActuallyEscaping(body) { body in
                nonisolated(unsafe) let body = body
                // Each chunk initializes only its own range of slots, and the chunks cover every slot.
                DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
                    for index in chunk * count / chunks..<(chunk + 1) * count / chunks {
                        (slots.baseAddress! + index).initialize(to: body(index))
                    }
                }
            }
            initialized = count
        }
    }
}

extension Parallel {
    /// `body(index)` for every index in `0..<count` on `width` threads of its own, results in index order: for work
    /// that waits (requests to an object store) rather than computes, where more in flight than cores pays. Each
    /// thread stops at its first failure; the caller sees every slot that succeeded and the failures.
    package static func threads<T>(
        _ count: Int, width: Int, _ body: (Int) -> Result<T, any Error>
    ) -> [Result<T, any Error>?] {
        let next = Atomic<Int>(0)
        let failed = Atomic<Bool>(false)
        return [Result<T, any Error>?](unsafeUninitializedCapacity: count) { buffer, initialized in
            buffer.initialize(repeating: nil)
            nonisolated(unsafe) let slots = buffer
            withoutActuallyEscaping(body) { body in
                // The threads reach `body` through a box emptied before this returns: a Thread keeps its closure a
                // moment after the work is done, and `body` must not outlive this block.
                let box = ClosureBox(body)
                let group = DispatchGroup()
                for _ in 0..<max(1, width) {
                    group.enter()
                    let thread = Thread {
                        defer { group.leave() }
                        while !failed.load(ordering: .relaxed) {
                            let index = next.add(1, ordering: .relaxed).oldValue
                            guard index < count, let body = box.body else { return }
                            let result = body(index)
                            slots[index] = result
                            if case .failure = result { failed.store(true, ordering: .relaxed) }
                        }
                    }
                    thread.stackSize = 1 << 20
                    thread.start()
                }
                group.wait()
                box.body = nil
            }
            initialized = count
        }
    }
}

/// A closure shared with threads that must drop it before its owner returns.
private final class ClosureBox<T>: @unchecked Sendable {
    var body: ((Int) -> Result<T, any Error>)?
    init(_ body: @escaping (Int) -> Result<T, any Error>) { self.body = body }
}
