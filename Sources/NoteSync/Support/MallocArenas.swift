import CSyscalls
import Foundation

/// How many arenas glibc's malloc may keep. A thread that finds the arenas busy gets one of its own, up to eight per
/// core, and what a thread frees stays in its arena for that arena's next allocation: the reads, hashes and writes of
/// a large sync, spread over every core, leave each arena holding what it once held. More arenas than cores never run
/// at once. With one per core, a first sync of 100,000 notes peaked at 105 MB resident instead of 128–146 MB, no
/// slower (2 cores; README, Benchmarks).
public enum MallocArenas {
    /// Caps the arenas at the number of cores (at least 2), unless the environment sets a limit of its own
    /// (`MALLOC_ARENA_MAX`, or `arena_max` in `GLIBC_TUNABLES`). Call it first thing in the process: a thread keeps
    /// the arena it was given. Whether the cap was set.
    @discardableResult
    public static func limitToCores(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard environment["MALLOC_ARENA_MAX"] == nil, environment["GLIBC_TUNABLES"]?.contains("arena_max") != true else {
            return false
        }
        return ns_malloc_arena_max(Int32(clamping: max(2, ProcessInfo.processInfo.activeProcessorCount))) == 1
    }
}
