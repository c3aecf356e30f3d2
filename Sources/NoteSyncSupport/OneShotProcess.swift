import CSyscalls

/// What a process that runs one command and exits can skip (never the agent, which runs for days).
public enum OneShotProcess {
    /// Grows the heap 32 MB at a time instead of a page at a time: loading ten thousand records otherwise costs
    /// thousands of `brk`/`mprotect` calls. Address space only: pages count as memory once they are written.
    public static func growHeapInLargeSteps() {
        _ = ns_malloc_top_pad(32 << 20)
    }

    /// Leaves `object` (and what it holds: every base and head of a sync) to the process exit, which frees it at
    /// once, instead of releasing it record by record (a cost that grows with the notes). Close the state
    /// database first (``LocalState/close()``): a process exit would leave its write-ahead log unfolded.
    public static func leaveToExit(_ object: AnyObject) {
        _ = Unmanaged.passRetained(object)
    }
}
