import CInotifyTools
import Dispatch
import Foundation
import Logging
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport
import Synchronization

/// Watches directory trees with inotify and reports changes as ``WatchEvent``s on ``events``.
///
/// libinotifytools 3.22 is process-global, non-reentrant C state with known traps (docs/agent.md, "The inotify
/// watcher"), so
/// every call into it happens on one dedicated `Thread` (``InotifyWatcher/Loop``), and only copied Sendable
/// values leave that thread. It reads with `inotifytools_next_event(1)`: a one-second timeout is the only
/// safe way to wait (0 blocks forever, `next_events(_, n > 1)` busy-spins), and it is also how quickly the
/// thread notices ``stop()`` and new roots.
///
/// The watcher keeps its own wd → (root, path) map: libinotifytools' own bookkeeping goes stale after
/// directory renames, never forgets watches the kernel dropped, and `inotifytools_watch_file` does not return
/// the wd (and `inotifytools_wd_from_filename` answers with a dead wd once a directory name is reused). So
/// watches are added and removed with `inotify_add_watch`/`inotify_rm_watch` on the descriptor the library
/// opened; the library only initialises, reads and cleans up. New directories are watched and *then* scanned,
/// because files written before the watch existed raise no event.
///
/// A directory renamed within a root keeps its watches (the map is rewritten for the whole subtree) and is
/// reported as `directoryRemoved(old)`, `renamed(old, new)`, `directoryAppeared(new)`, its entries not one by one.
/// Whether an `IN_MOVED_FROM` of a directory was a move out of the tree is decided by the next event (the kernel
/// queues the matching `IN_MOVED_TO` right after it) or a one-second quiet; a move out drops the subtree's watches.
/// Entries whose names are not valid UTF-8 are skipped, as the scanner skips them (it warns on its next pass).
///
/// One watcher at a time per process: libinotifytools has a single inotify instance, so ``start()`` throws
/// while another watcher runs. A stopped watcher cannot be restarted; make a new one.
public final class InotifyWatcher: Sendable {
    /// What happened in the watched roots, in kernel order. Finishes after ``stop()`` or ``WatchEvent/failed(_:)``.
    ///
    /// Buffered up to ``bufferLimit`` events; past that, events are dropped and an ``WatchEvent/overflow``
    /// follows as soon as there is room, as if the kernel queue had overflowed.
    public let events: AsyncStream<WatchEvent>
    package let continuation: AsyncStream<WatchEvent>.Continuation
    package let logger: Logger
    /// Pretends the watch limit is this many watches (tests; nil in production).
    let watchLimitForTesting: Int?
    /// Stops the thread right after it has handled this many events, mid-batch (tests; nil in production).
    let stopAfterEventsForTesting: Int?
    /// The hand-off between callers and the watcher thread; everything else lives on that thread.
    package let control = Mutex(Control())

    /// Whether a watcher owns libinotifytools in this process: taken by ``start()``, released by the
    /// watcher thread after `inotifytools_cleanup()`.
    static let processSlot = Mutex(false)

    /// How many events ``events`` holds before it drops events and owes an overflow.
    public static let bufferLimit = 1 << 16

    public convenience init(logger: Logger) {
        self.init(logger: logger, watchLimitForTesting: nil)
    }

    package init(logger: Logger, watchLimitForTesting: Int?, stopAfterEventsForTesting: Int? = nil) {
        self.logger = logger
        self.watchLimitForTesting = watchLimitForTesting
        self.stopAfterEventsForTesting = stopAfterEventsForTesting
        (events, continuation) = AsyncStream.makeStream(
            of: WatchEvent.self,
            bufferingPolicy: .bufferingOldest(Self.bufferLimit))
        // A consumer that stops listening stops the watcher.
        continuation.onTermination = { [weak self] _ in
            self?.control.withLock { $0.stopRequested = true }
        }
    }

    /// Starts watching `path` (and, if `recursive`, every directory under it) and returns the root id that
    /// tags its events.
    ///
    /// Before ``start()`` this only checks that `path` is a directory and queues it: ``start()`` returns once
    /// it is watched. While the watcher runs, this blocks until the watcher thread has added the watches
    /// (up to about a second: the thread picks requests up between reads). Either way, scan the root after the
    /// watches exist, not before, or a change in between goes unnoticed. Roots must not overlap: the kernel
    /// keeps one watch per directory, so a directory in two roots would report to only one of them.
    ///
    /// - Parameters:
    ///   - ignore: called on the watcher thread with a `/`-separated path relative to `path` whose parent
    ///     directories are not ignored, e.g. `IgnoreRules.isIgnored(_:isDirectory:)`. Ignored directories are
    ///     not watched; ignored entries raise no events.
    /// - Throws: `NoteSyncError` when `path` is not a directory, cannot be watched, or the watcher has stopped.
    ///   Reaching the watch limit is not an error: it is reported as ``WatchEvent/watchLimitReached(_:)``.
    @discardableResult
    public func addRoot(
        _ path: String, recursive: Bool = true,
        ignore: @escaping @Sendable (_ relativePath: String, _ isDirectory: Bool) -> Bool = { _, _ in false }
    )
        throws -> Int
    {
        let absolute = Self.normalized(path)
        guard let info = FileIO.lstatInfo(absolute) else {
            throw NoteSyncError(
                .io, path: absolute, "cannot be watched: it does not exist",
                fix: "create the directory or correct the path", errno: errno)
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw NoteSyncError(
                .io, path: absolute, "cannot be watched: it is not a directory (symbolic links are not followed)",
                fix: "give the path of the directory itself")
        }
        enum Next {
            case queued(Int)
            case wait(Int, Reply)
            case stopped
        }
        let next = control.withLock { state -> Next in
            guard state.phase != .stopped else { return .stopped }
            let id = state.nextRootID
            state.nextRootID += 1
            let reply = state.phase == .running ? Reply() : nil
            state.requests.append(RootRequest(id: id, path: absolute, recursive: recursive, ignore: ignore, reply: reply))
            return reply.map { .wait(id, $0) } ?? .queued(id)
        }
        switch next {
        case .queued(let id):
            return id
        case .wait(let id, let reply):
            try reply.wait()
            return id
        case .stopped:
            throw NoteSyncError(
                .usage, path: absolute, "cannot be watched: the watcher has stopped",
                fix: "create a new InotifyWatcher")
        }
    }

    /// Starts the watcher thread and returns once the roots added so far are watched.
    ///
    /// - Throws: `NoteSyncError` when another watcher runs in this process, this one was started before,
    ///   `inotify_init` fails (e.g. `fs.inotify.max_user_instances` reached), or a root cannot be watched.
    public func start() throws {
        let claimed = Self.processSlot.withLock { taken -> Bool in
            if taken { return false }
            taken = true
            return true
        }
        guard claimed else {
            throw NoteSyncError(
                .usage, "another inotify watcher is already running in this process",
                fix: "libinotifytools has one inotify instance per process: stop the other watcher first")
        }
        let fresh = control.withLock { state -> Bool in
            guard state.phase == .idle else { return false }
            state.phase = .running
            return true
        }
        guard fresh else {
            Self.processSlot.withLock { $0 = false }
            throw NoteSyncError(.usage, "this inotify watcher was already started", fix: "create a new InotifyWatcher")
        }
        let started = Reply()
        let thread = Thread { [self] in
            Loop(watcher: self).run(started: started)
        }
        thread.name = "notesync-inotify"
        thread.start()
        try started.wait()
    }

    /// Asks the watcher to stop. Returns at once; the thread notices within about a second, releases the
    /// inotify instance and finishes ``events``.
    public func stop() {
        let neverStarted = control.withLock { state -> Bool in
            state.stopRequested = true
            guard state.phase == .idle else { return false }
            state.phase = .stopped
            state.requests.removeAll()
            return true
        }
        if neverStarted { continuation.finish() }
    }

    /// Test hook: parks the watcher thread between reads, so the kernel queue fills up; returns once parked.
    package func pause() {
        control.withLock { $0.pauseRequested = true }
        while !control.withLock({ $0.paused || $0.phase != .running }) { usleep(2_000) }
    }

    /// Test hook: lets a paused watcher thread read again.
    func resume() {
        control.withLock { $0.pauseRequested = false }
    }

    /// Test hook: the inotify descriptor libinotifytools opened, while the watcher runs.
    var descriptorForTesting: Int32? { control.withLock { $0.descriptor } }

    package static func normalized(_ path: String) -> String {
        var absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        while absolute.count > 1 && absolute.hasSuffix("/") { absolute.removeLast() }
        return absolute
    }
}

extension InotifyWatcher {
    /// State shared between callers and the watcher thread, always under ``InotifyWatcher/control``.
    package struct Control {
        package enum Phase { case idle, running, stopped }
        package var phase = Phase.idle
        var nextRootID = 0
        var requests: [RootRequest] = []
        var stopRequested = false
        var pauseRequested = false
        var paused = false
        package var descriptor: Int32?
    }

    struct RootRequest: Sendable {
        package let id: Int
        package let path: String
        let recursive: Bool
        package let ignore: @Sendable (String, Bool) -> Bool
        /// Nil for roots queued before ``InotifyWatcher/start()``, whose errors go to `start()`.
        let reply: Reply?
    }

    /// A one-shot answer from the watcher thread to a caller blocked in `start()` or `addRoot`.
    final class Reply: Sendable {
        private let done = DispatchSemaphore(value: 0)
        private let outcome = Mutex<NoteSyncError?>(nil)

        package func finish(_ error: NoteSyncError?) {
            outcome.withLock { $0 = error }
            done.signal()
        }

        package func wait() throws {
            done.wait()
            if let error = outcome.withLock({ $0 }) { throw error }
        }
    }
}
