/// When notesync hands the memory it freed back to the system: one policy for every layer, and the only caller of
/// ``MallocTuning/trim()``.
///
/// glibc keeps what a process frees in its arenas for the next allocation and gives pages back only when asked
/// (`malloc_trim`), which walks every arena. Asked after a phase over thousands of notes, it is cheap beside the phase
/// and keeps what the next phase allocates from being counted on top of what the last one left; asked after every
/// round of the agent's few notes, it would cost more than it frees. So memory goes back at these moments, and no
/// others:
/// - **A large phase has ended** (``phaseEnded(items:)``): a phase that allocated and freed in proportion to the
///   notes it handled (a full scan's walk, a plan, a batch of downloaded texts, a fetch of many heads, a batch of
///   pushes, an entry's staging) and handled ``largePhase`` items or more. The same count decides whether a phase
///   lets go of caches it filled (``isLarge(_:)``).
/// - **A long phase goes on** (``Pacer``): a phase over a whole large folder hands back every ``stride`` items, so
///   that what it freed early is not held to its end.
/// - **The process let go** (``letGo()``): the agent, idle after a full sync or gc, dropped its caches and records;
///   what it holds next is what it keeps, not its last peak.
package enum MemoryPolicy {
    /// From how many items (steps, pushes, notes, heads, changes) a phase is large.
    static let largePhase = 1000

    /// How many items a long phase handles between two hand-backs.
    static let stride = 12_500

    /// Whether a phase of `items` is large (see the type's documentation).
    package static func isLarge(_ items: Int) -> Bool { items >= largePhase }

    /// A phase that handled `items` has ended and freed what it built: its free pages go back if it was large.
    package static func phaseEnded(items: Int) {
        if isLarge(items) { MallocTuning.trim() }
    }

    /// The process dropped what it held for a sync: every free page goes back.
    package static func letGo() { MallocTuning.trim() }

    /// A long phase's hand-backs as it goes: told how many items it has handled, it hands back every ``stride``.
    package struct Pacer {
        private var handedBackAt = 0

        package init() {}

        /// The phase has handled `items` so far. Whether the pages went back now.
        @discardableResult
        package mutating func handled(_ items: Int) -> Bool {
            guard items - handedBackAt >= MemoryPolicy.stride else { return false }
            MallocTuning.trim()
            handedBackAt = items
            return true
        }
    }
}
