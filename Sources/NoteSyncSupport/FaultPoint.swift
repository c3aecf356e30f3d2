import Foundation
import Synchronization

/// Named points between the steps of a commit and of a local apply, where a deterministic simulation injects a
/// crash (the handler throws) or a partition, and the clock a simulation substitutes for the wall clock.
///
/// Production never installs hooks: ``hit(_:)`` is then one relaxed atomic load. Hooks are scoped to the task
/// that installs them (a task-local value), so simulations running in parallel with other tests affect only the
/// engines they drive.
public enum FaultPoint {
    /// What a simulation installs for the code it runs.
    public struct Hooks: Sendable {
        /// Called at every point with its name; throwing there is a crash between two steps.
        public var hit: @Sendable (StaticString) throws -> Void
        /// The time ``Clock/nowNanoseconds()`` returns instead of the wall clock; nil keeps the wall clock.
        public var now: (@Sendable () -> Int64)?

        public init(hit: @escaping @Sendable (StaticString) throws -> Void, now: (@Sendable () -> Int64)? = nil) {
            self.hit = hit
            self.now = now
        }
    }

    /// How many hook scopes are open in the whole process: zero in production, so nothing else is looked up.
    private static let scopes = Atomic<Int>(0)
    @TaskLocal private static var hooks: Hooks?

    /// Marks the point `name` (e.g. `"commit.claimed"`): a no-op unless a simulation installed hooks.
    @inline(__always)
    public static func hit(_ name: StaticString) throws {
        guard scopes.load(ordering: .relaxed) != 0 else { return }
        try hooks?.hit(name)
    }

    /// Whether any simulation's hooks are installed in this process (then work runs in order, on its thread).
    package static var isActive: Bool { scopes.load(ordering: .relaxed) != 0 }

    /// The simulated time, when a simulation installed a clock for the current task.
    @inline(__always)
    package static func simulatedNow() -> Int64? {
        guard scopes.load(ordering: .relaxed) != 0 else { return nil }
        return hooks?.now?()
    }

    /// Runs `body` with `hooks` installed for the current task (and the tasks it creates).
    public static func with<R>(_ hooks: Hooks, _ body: () throws -> R) rethrows -> R {
        scopes.add(1, ordering: .relaxed)
        defer { scopes.subtract(1, ordering: .relaxed) }
        return try $hooks.withValue(hooks, operation: body)
    }
}

/// Lets a test outside the process stop a real `notesync` between two exact steps, with no tracer and no timing:
/// with `NOTESYNC_TEST_STOP_AT=<point>:<n>` in its environment, the process stops itself right after its n-th
/// pass of `<point>`, and goes on when it gets SIGCONT. The signal goes to the passing thread (`raise`), which
/// stops before it returns to the caller; a signal to the process could land on another thread and let this one
/// run on for a moment.
///
/// The points: `server.published`, every successful no-replace publish to a server (the primitive probe, each
/// asset, the claim of a log slot). Without the variable, ``pass(_:)`` is one load of a lazily set constant.
public enum StopPoint {
    public static let environmentVariable = "NOTESYNC_TEST_STOP_AT"

    private static let target: (name: String, count: Int)? = {
        // `getenv`, not `ProcessInfo.environment` (a copy of the whole environment): a sync that publishes passes here.
        guard let value = getenv(environmentVariable).map({ String(cString: $0) }),
            let colon = value.lastIndex(of: ":"), let count = Int(value[value.index(after: colon)...]), count > 0
        else { return nil }
        return (String(value[..<colon]), count)
    }()

    private static let passes = Atomic<Int>(0)

    /// Marks a pass of the point `name`; stops the process at the chosen pass.
    @inline(__always)
    public static func pass(_ name: StaticString) {
        guard let target, target.name == name.description else { return }
        if passes.add(1, ordering: .sequentiallyConsistent).newValue == target.count { raise(SIGSTOP) }
    }
}

/// Lets a test make the agent's watch late: with `NOTESYNC_TEST_WATCH_LAG_MS=<ms>` in its environment, each event
/// reaches the agent that much after inotify reported it (a watch thread busy, a loaded machine). What a request
/// served from the watch must survive (``SyncAgent``'s cookie). Without the variable, nothing.
public enum WatchLag {
    public static let environmentVariable = "NOTESYNC_TEST_WATCH_LAG_MS"

    public static let duration: Duration? = getenv(environmentVariable).flatMap { Int(String(cString: $0)) }
        .map { .milliseconds($0) }
}
