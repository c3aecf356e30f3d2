import CSyscalls
import Foundation

/// Two settings of glibc's malloc, made first thing in every notesync process, each unless the user's environment
/// sets its own: at most one arena per core, and a fixed threshold above which a block is mapped on its own.
///
/// - **Arenas.** A thread that finds the arenas busy gets one of its own, up to eight per core, and what a thread
///   frees stays in its arena for that arena's next allocation: the reads, hashes and writes of a large sync, spread
///   over every core, leave each arena holding what it once held. More arenas than cores never run at once. With one
///   per core, a large first sync peaks lower, no slower (docs/benchmarks.md, "Why these settings").
/// - **The mmap threshold.** When an arena has no free space for a block of 128 KiB or more, glibc maps the block
///   on its own and unmaps it when it is freed; but each time such a block is freed it raises the threshold to that
///   block's size (up to 32 MiB), so a process that once freed a large array grows its arenas for every later array
///   of that size. A sync's large arrays (the scan, the plan, the log's heads: megabytes at 100,000 notes) then land
///   between the small blocks that outlive them (names, records), and when they are freed the arena cannot hand
///   those pages back: `malloc_trim` frees only whole free pages. Fixed at 128 KiB, a large array never grows an
///   arena: it takes free space already there, or a mapping of its own whose pages go back to the system the moment
///   it is freed. What it saves an idle agent after its start's full sync and gc: docs/benchmarks.md, "Why these
///   settings". A one-shot `sync` or `diff` has a fixed threshold either way:
///   setting `M_TOP_PAD` (``OneShotProcess``) stops glibc raising it too.
public enum MallocTuning {
    /// The threshold: glibc's own starting value, kept from rising.
    static let mmapThreshold: Int32 = 128 << 10

    /// Both settings; see the type's documentation. Call it before any other thread starts: a thread keeps the arena
    /// it was given.
    public static func apply() {
        // `getenv` for the three names, not `ProcessInfo.environment`: that copies the whole environment into a
        // dictionary, a tenth of `notesync --version`.
        var environment: [String: String] = [:]
        for name in ["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"] {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        limitArenasToCores(environment: environment)
        fixMmapThreshold(environment: environment)
    }

    /// Caps the arenas at the number of cores (at least 2), unless the environment sets a limit of its own
    /// (`MALLOC_ARENA_MAX`, or `arena_max` in `GLIBC_TUNABLES`). Whether the cap was set.
    @discardableResult
    static func limitArenasToCores(environment: [String: String]) -> Bool {
        guard environment["MALLOC_ARENA_MAX"] == nil, environment["GLIBC_TUNABLES"]?.contains("arena_max") != true else {
            return false
        }
        return ns_malloc_arena_max(Int32(clamping: max(2, Parallel.cores))) == 1
    }

    /// Fixes the mmap threshold at ``mmapThreshold`` (which stops glibc raising it), unless the environment sets one
    /// of its own (`MALLOC_MMAP_THRESHOLD_`, or `mmap_threshold` in `GLIBC_TUNABLES`). Whether it was set.
    @discardableResult
    static func fixMmapThreshold(environment: [String: String]) -> Bool {
        guard environment["MALLOC_MMAP_THRESHOLD_"] == nil,
            environment["GLIBC_TUNABLES"]?.contains("mmap_threshold") != true
        else { return false }
        return ns_malloc_mmap_threshold(mmapThreshold) == 1
    }

    /// Hands the free pages of every arena back to the system (`malloc_trim(0)`). Called only by ``MemoryPolicy``,
    /// which says when.
    static func trim() {
        _ = ns_malloc_trim()
    }
}
