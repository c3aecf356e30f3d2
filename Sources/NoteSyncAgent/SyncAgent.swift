import Dispatch
import Foundation
import Logging
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport
import ServiceLifecycle
import Synchronization

/// The watch agent: keeps a notes folder and its server in sync by itself.
///
/// inotify reports local changes (settled: acted on once a path is quiet, deletes only once a note stays
/// missing) and, when the server is on a local filesystem, other devices' commits; otherwise the server is
/// polled. Each batch of settled paths is one partial sync through the same engine as `notesync sync`, so the
/// agent's own writes are recognised by their fingerprint and never echoed back. While the server is
/// unreachable changes stay queued and the agent retries with backoff, then finishes with a full sync.
public final class SyncAgent: Service, Sendable {
    package let folder: NotesFolder
    package let config: FolderConfig
    package let options: AgentOptions
    package let logger: Logger
    package let inbox = Mutex<Inbox>(Inbox())
    let wakeup = DispatchSemaphore(value: 0)

    /// Events waiting for the agent thread.
    package struct Inbox {
        var events: [WatchEvent] = []
        package var stop = false
        /// Commands waiting for a sync (``AgentSocket``): the connection and what it asked.
        var requests: [(fd: Int32, request: AgentSocket.Request)] = []
    }

    public init(folder: NotesFolder, config: FolderConfig, options: AgentOptions = AgentOptions(), logger: Logger) {
        self.folder = folder
        self.config = config
        self.options = options
        self.logger = logger
    }

    public func run() async throws {
        let lock = try FolderLock(folder)
        defer { withExtendedLifetime(lock) {} }
        let watcher = InotifyWatcher(logger: logger)
        let forwarder = Task { [self] in
            for await event in watcher.events {
                if let lag = WatchLag.duration { try? await Task.sleep(for: lag) }
                inbox.withLock { $0.events.append(event) }
                wakeup.signal()
            }
        }
        defer { forwarder.cancel() }
        // The command line's door: `notesync sync` asks this agent to sync instead of waiting for the lock.
        let listener = AgentSocket.listen(folder)
        let door = AgentSocket.Door()
        if let listener {
            // The socket thread owns the listener and closes it as it ends: the agent's stop only shuts it down
            // (which wakes an `accept`), so the thread never accepts on a number another file may have taken.
            let acceptor = Thread { [self] in
                defer { close(listener) }
                while true {
                    let connection = accept(listener, nil, nil)
                    if connection < 0 {
                        if errno == EINTR || errno == ECONNABORTED { continue }
                        return
                    }
                    guard door.accepted(connection) else { return }
                    let request = AgentSocket.readRequest(connection)
                    let open = door.received(connection)
                    guard open, let request else {
                        door.drop(connection)
                        guard open else { return }
                        continue
                    }
                    inbox.withLock { $0.requests.append((connection, request)) }
                    wakeup.signal()
                }
            }
            acceptor.name = "notesync-agent-socket"
            acceptor.start()
        }
        defer {
            if let listener {
                unlink(folder.agentSocket)
                shutdown(listener, Int32(SHUT_RDWR))
            }
            door.closeAll()
        }
        try await withGracefulShutdownHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let thread = Thread { [self] in
                    do {
                        try self.loop(watcher: watcher, door: door)
                        continuation.resume()
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
                thread.name = "notesync-agent"
                thread.start()
            }
        } onGracefulShutdown: { [self] in
            requestStop()
        }
        watcher.stop()
    }

    /// Asks the agent to finish the sync in flight, push what is pending, and return.
    public func requestStop() {
        inbox.withLock { $0.stop = true }
        wakeup.signal()
    }

    // MARK: the agent thread

    private func loop(watcher: InotifyWatcher, door: AgentSocket.Door) throws {
        try AgentLoop(agent: self, watcher: watcher, door: door).run()
    }
}
