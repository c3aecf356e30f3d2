import Dispatch
import Foundation
import Logging
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
    let folder: NotesFolder
    let config: FolderConfig
    let options: AgentOptions
    let logger: Logger
    private let inbox = Mutex<Inbox>(Inbox())
    private let wakeup = DispatchSemaphore(value: 0)

    /// Events waiting for the agent thread.
    struct Inbox {
        var events: [WatchEvent] = []
        var stop = false
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
            let acceptor = Thread { [self] in
                while true {
                    let connection = accept(listener, nil, nil)
                    if connection < 0 {
                        if errno == EINTR || errno == ECONNABORTED { continue }
                        return
                    }
                    door.accepted(connection)
                    guard let request = AgentSocket.readRequest(connection) else {
                        door.drop(connection)
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
                unlink(AgentSocket.path(folder))
                shutdown(listener, Int32(SHUT_RDWR))
                close(listener)
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
        let state = try LocalState(path: folder.database)
        let engine = SyncEngine(folder: folder, state: state, config: config, logger: logger)
        let clock = ContinuousClock()
        let rules = try folder.ignoreRules()

        let notesRoot = try watcher.addRoot(
            folder.root,
            ignore: { path, isDirectory in
                !path.hasPrefix(AgentSocket.cookiePrefix) && rules.isIgnored(path, isDirectory: isDirectory)
            })
        var serverRoot: Int?
        let logDirectory = ServerLayout(root: config.server).logDirectory
        var serverIsLocal = false
        if let kind = try? FilesystemKind(path: logDirectory), !kind.isNetwork {
            serverIsLocal = true
            serverRoot = try? watcher.addRoot(logDirectory, ignore: { _, _ in false })
        }
        try watcher.start()
        let poll = options.pollInterval ?? (serverIsLocal && serverRoot != nil ? AgentOptions.localSafetyPoll : AgentOptions.networkPoll)
        var status = AgentStatus(
            pid: getpid(), started: Clock.nowNanoseconds(), online: false, pending: 0, token: 0,
            lastSync: nil, lastError: nil,
            serverWatch: serverRoot != nil ? .inotify : .polling(every: poll), localWatch: .inotify)
        logger.info("agent.started", metadata: ["notes.root": "\(folder.root)", "server.watch": "\(status.serverWatch)"])

        var pending = EventSettler<ContinuousClock.Instant>(options)
        var needFull = true
        var serverDirty = false
        var nextPoll = clock.now
        var nextFull = clock.now + options.fullScanInterval
        var retryAt: ContinuousClock.Instant?
        var backoff = Backoff(minimum: options.minBackoff, maximum: options.maxBackoff)
        var stopping = false

        /// One sync; its report, or the error it ended with (for a command that asked for it). A sync a command
        /// asked for reports a gap in the server's log at once, as a one-shot sync does (the same exit code).
        @discardableResult
        func syncNow(
            _ paths: [String]?, allowMassDelete: Bool = false, forgetServer: Bool = false, forCommand: Bool = false
        ) -> Result<SyncReport, any Error> {
            var outcome: Result<SyncReport, any Error> = .failure(NoteSyncError(.io, "the sync did not run"))
            defer { try? status.write(to: folder) }
            do {
                var syncOptions = SyncOptions()
                syncOptions.forgetServer = forgetServer
                syncOptions.gapGrace = forCommand ? nil : Int64(options.gapGrace.seconds * 1e9)
                // Held deletes approved by `notesync sync --allow-mass-delete` (run while this agent holds the lock).
                let approval = SyncEngine.massDeleteApproval(folder)
                let approved = FileIO.lstatInfo(approval) != nil || allowMassDelete
                syncOptions.allowMassDelete = approved
                let report = try engine.sync(syncOptions, only: approved ? nil : paths)
                outcome = .success(report)
                if approved {
                    unlink(approval)
                    logger.notice("sync.deletes.approved")
                }
                if report.heldDeletes > 0 {
                    // Said once per count, not at every sync that holds them.
                    if status.heldDeletes != report.heldDeletes, let warning = report.warnings.first(where: { $0.kind == .deletesHeld }) {
                        logger.warning("sync.deletes.held", metadata: ["detail": "\(warning)"])
                    }
                    status.heldDeletes = report.heldDeletes
                } else if paths == nil || approved {
                    status.heldDeletes = nil
                }
                for warning in report.warnings where warning.kind != .deletesHeld {
                    logger.warning("sync.warning", metadata: ["detail": "\(warning)"])
                }
                for change in report.changes where change.kind != .adopt {
                    logger.info("sync.change", metadata: ["note.path": "\(change.name)", "sync.kind": "\(change.kind.rawValue)"])
                }
                status.pending = report.pending
                status.token = report.token
                status.lastErrorKind = nil
                if report.offline {
                    if status.online || status.lastError != report.offlineReason {
                        logger.warning("server.unreachable", metadata: ["detail": "\(report.offlineReason ?? "")"])
                    }
                    status.online = false
                    status.lastError = report.offlineReason
                    retryAt = clock.now + backoff.failed()
                    needFull = true
                } else {
                    if !status.online { logger.notice("server.online", metadata: ["server.seq": "\(report.token)"]) }
                    status.online = true
                    status.lastSync = Clock.nowNanoseconds()
                    status.lastError = nil
                    retryAt = nil
                    backoff.succeeded()
                }
            } catch let error as NoteSyncError {
                outcome = .failure(error)
                logger.error("sync.failed", metadata: ["detail": "\(error)"])
                // Not in sync with the server, whatever stopped it (`status` says which: a gap, another server).
                status.online = false
                status.lastError = error.description
                status.lastErrorKind = error.kind.rawValue
                // The changes recorded before the failure (a full server, say) are pending: say so.
                status.pending = (try? engine.state.outbox().count) ?? status.pending
                retryAt = clock.now + backoff.failed()
                needFull = true
            } catch {
                outcome = .failure(error)
                logger.error("sync.failed", metadata: ["detail": "\(error)"])
                status.online = false
                status.lastError = "\(error)"
                status.lastErrorKind = NoteSyncError.Kind.io.rawValue
                retryAt = clock.now + backoff.failed()
                needFull = true
            }
            return outcome
        }

        var cookiesSeen = Set<String>()
        var cookies = 0

        /// Takes the watch's events: notes' paths wait to settle, a change in the server's log wakes a sync.
        func take(_ events: [WatchEvent]) {
            let arrived = clock.now
            for event in events {
                switch event {
                case .changed(let root, let path), .removed(let root, let path),
                    .directoryAppeared(let root, let path), .directoryRemoved(let root, let path):
                    if root == serverRoot {
                        serverDirty = true
                    } else if root == notesRoot {
                        if path.hasPrefix(AgentSocket.cookiePrefix) {
                            if case .changed = event { cookiesSeen.insert(path) }
                            continue
                        }
                        pending.noted(path, at: arrived, size: FileIO.lstatInfo(folder.root + "/" + path).map { Int64($0.st_size) })
                    }
                case .overflow:
                    logger.warning("watch.overflow")
                    needFull = true
                case .watchLimitReached(let message):
                    logger.error("watch.limit", metadata: ["detail": "\(message)"])
                    status.localWatch = .periodicScans(reason: "inotify watch limit reached")
                    nextFull = min(nextFull, arrived + .seconds(30))
                    needFull = true
                case .failed(let message):
                    logger.error("watch.failed", metadata: ["detail": "\(message)"])
                    status.localWatch = .periodicScans(reason: "inotify failed")
                    needFull = true
                }
            }
            if status.localWatch != .inotify { nextFull = min(nextFull, arrived + .seconds(30)) }
        }

        /// Whether the watch has seen every change made before now: a cookie file written in the notes folder comes
        /// back through the same inotify queue after every earlier event (watchman's way). False when the watch
        /// cannot be trusted for it (not running on inotify, overflowed, a sync failing) or the cookie does not come
        /// back within two seconds: then a full scan answers.
        func watchIsCurrent() -> Bool {
            guard status.localWatch == .inotify, !needFull, retryAt == nil else { return false }
            cookies += 1
            let name = AgentSocket.cookiePrefix + "\(getpid())-\(cookies)"
            let path = folder.root + "/" + name
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { return false }
            close(fd)
            defer {
                unlink(path)
                // Requests and a stop that came while waiting are taken by the loop's next turn.
                if inbox.withLock({ !$0.requests.isEmpty || $0.stop }) { wakeup.signal() }
            }
            let deadline = clock.now + .seconds(2)
            while !cookiesSeen.contains(name) {
                let left = deadline - clock.now
                guard left > .zero else { return false }
                _ = wakeup.wait(timeout: .now() + left.seconds)
                take(
                    inbox.withLock { box in
                        defer { box.events.removeAll(keepingCapacity: true) }
                        return box.events
                    })
            }
            cookiesSeen.remove(name)
            return !needFull
        }

        /// A command's request through the socket: a sync now (or a dry run, a recovery, a restore), its report sent
        /// back. With the watch current and nothing held, only the paths it saw change are scanned (the agent knows
        /// the rest is as last synced): at 100,000 notes an unchanged folder answers in milliseconds.
        func serve(_ request: (fd: Int32, request: AgentSocket.Request)) {
            var response = AgentSocket.Response()
            func answer(_ outcome: Result<SyncReport, any Error>) {
                switch outcome {
                case .success(let report):
                    response.report = report
                case .failure(let error as NoteSyncError):
                    response.errorKind = error.kind.rawValue
                    response.error = error.description
                case .failure(let error):
                    response.error = "\(error)"
                }
                door.answer(request.fd, response)
            }
            let asked = request.request
            if let restore = asked.restore {
                let restored = Result {
                    let name = try RecordName(validating: RecordName.nfc(restore.note))
                    let result = try engine.restore(name, version: restore.version)
                    logger.notice("sync.restored", metadata: ["note.path": "\(name)", "server.seq": "\(restore.version)"])
                    return result
                }
                response.keptAs = try? restored.get().keptAs
                answer(restored.map(\.report))
                return
            }
            if asked.recover && !asked.dryRun {
                logger.notice("sync.recover")
                let outcome = syncNow(nil, forgetServer: true, forCommand: true)
                if case .success(let report) = outcome, !report.offline { pending.removeAll() }
                answer(outcome)
                return
            }
            // Only a sync or a dry run of what changed waits for the watch to catch up.
            let incremental = !asked.allowMassDelete && !asked.recover && status.heldDeletes == nil && watchIsCurrent()
            if asked.dryRun {
                var syncOptions = SyncOptions(
                    dryRun: true, withDiffs: true, colorDiffs: asked.colorDiffs,
                    allowMassDelete: asked.allowMassDelete)
                syncOptions.forgetServer = asked.recover
                answer(Result { try engine.sync(syncOptions, only: incremental ? pending.paths : nil) })
                return
            }
            let paths = incremental ? pending.paths : nil
            let outcome = syncNow(paths, allowMassDelete: asked.allowMassDelete, forCommand: true)
            if case .success(let report) = outcome, !report.offline {
                if let paths {
                    pending.remove(paths)
                } else {
                    pending.removeAll()
                    nextFull = clock.now + options.fullScanInterval
                }
            }
            answer(outcome)
        }

        while true {
            // A state database replaced under the agent (a checkout, a copy over it) stops it: it is not this folder's.
            try state.requireSameFile()
            let now = clock.now
            if let retryAt, now < retryAt {
                // Offline or failing: keep collecting events, sync when the backoff expires.
            } else if needFull || now >= nextFull {
                needFull = false
                nextFull = now + options.fullScanInterval
                pending.removeAll()
                serverDirty = false
                nextPoll = now + poll
                syncNow(nil)
            } else {
                let ready = pending.takeSettled(at: now, flushing: stopping) { path in
                    FileIO.lstatInfo(folder.root + "/" + path).map {
                        .init(isRegularFile: ($0.st_mode & S_IFMT) == S_IFREG, size: Int64($0.st_size))
                    }
                }
                if !ready.isEmpty || serverDirty || now >= nextPoll {
                    serverDirty = false
                    nextPoll = now + poll
                    syncNow(ready)
                }
            }
            if stopping { break }

            var deadline = min(nextPoll, nextFull)
            if let retryAt { deadline = min(deadline, retryAt) }
            if let settling = pending.nextDeadline { deadline = min(deadline, settling) }
            let timeout = max(0, (deadline - clock.now).seconds)
            _ = wakeup.wait(timeout: .now() + timeout)

            let (events, stop, requests) = inbox.withLock { box -> ([WatchEvent], Bool, [(fd: Int32, request: AgentSocket.Request)]) in
                defer {
                    box.events.removeAll(keepingCapacity: true)
                    box.requests.removeAll()
                }
                return (box.events, box.stop, box.requests)
            }
            take(events)
            if !requests.isEmpty { try state.requireSameFile() }
            for request in requests { serve(request) }
            if stop {
                stopping = true
                retryAt = nil
            }
        }
        try? status.write(to: folder)
        logger.info("agent.stopped")
    }
}
