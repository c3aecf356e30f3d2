import Dispatch
import Foundation
import Logging
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport
import Synchronization

/// The agent's thread: the watch's events settle, syncs run when paths settle, the server changes, a poll or a
/// full scan is due, and commands' requests are served, with backoff while the server is away.
///
/// Each turn of ``run()`` reads as its steps: check the state database is still this folder's, sync what is due,
/// wait for the next deadline or wakeup, take what arrived.
final class AgentLoop {
    private let agent: SyncAgent
    private let door: AgentSocket.Door
    private let folder: NotesFolder
    private let options: AgentOptions
    private let logger: Logger
    private let state: LocalState
    private let engine: SyncEngine
    private let clock = ContinuousClock()
    private let notesRoot: Int
    private let serverRoot: Int?
    private let poll: Duration

    private var status: AgentStatus
    private var pending: EventSettler<ContinuousClock.Instant>
    /// Saves of a note saved again and again wait for their pace (autosave: ``CommitPacer``).
    private var pacer: CommitPacer
    private var needFull = true
    private var serverDirty = false
    private var nextPoll: ContinuousClock.Instant
    private var nextFull: ContinuousClock.Instant
    private var retryAt: ContinuousClock.Instant?
    private var backoff: Backoff
    private var stopping = false
    /// Notes a sync left as they were (a change it could not make: a text missing on the server, a name in the way,
    /// a full disk). A command's sync served from the watch's paths tries them again, as a sync run alone does; the
    /// agent's own syncs leave them to the next full one (trying them at every event would warn at every event).
    private var leftAsTheyWere: Set<String> = []
    private var cookiesSeen = Set<String>()
    private var cookies = 0

    /// Opens the state, adds the notes folder (and a local server's log folder) to the watch and starts it.
    package init(agent: SyncAgent, watcher: InotifyWatcher, door: AgentSocket.Door) throws {
        self.agent = agent
        self.door = door
        folder = agent.folder
        options = agent.options
        logger = agent.logger
        state = try LocalState(path: folder.database)
        engine = SyncEngine(folder: folder, state: state, config: agent.config, logger: logger)
        let rules = try folder.ignoreRules()
        notesRoot = try watcher.addRoot(
            folder.root,
            ignore: { path, isDirectory in
                !path.hasPrefix(ReservedNames.cookiePrefix) && rules.isIgnored(path, isDirectory: isDirectory)
            })
        var serverRoot: Int?
        if let logDirectory = ServerStore.watchableLogDirectory(root: agent.config.server) {
            serverRoot = try? watcher.addRoot(logDirectory, ignore: { _, _ in false })
        }
        self.serverRoot = serverRoot
        try watcher.start()
        poll = options.pollInterval ?? (serverRoot != nil ? AgentOptions.localSafetyPoll : AgentOptions.networkPoll)
        status = AgentStatus(
            pid: getpid(), started: Clock.nowNanoseconds(), online: false, pending: 0, token: 0,
            lastSync: nil, lastError: nil,
            serverWatch: serverRoot != nil ? .inotify : .polling(every: poll), localWatch: .inotify)
        pending = EventSettler(options)
        pacer = CommitPacer(pace: options.pace)
        nextPoll = clock.now
        nextFull = clock.now + options.fullScanInterval
        backoff = Backoff(minimum: options.minBackoff, maximum: options.maxBackoff)
        logger.info("agent.started", metadata: ["notes.root": "\(folder.root)", "server.watch": "\(status.serverWatch)"])
    }

    /// Runs until asked to stop; then finishes the sync in flight and the settled paths, and returns.
    package func run() throws {
        while true {
            // A state database replaced under the agent (a checkout, a copy over it) stops it: it is not this folder's.
            try state.requireSameFile()
            syncWhatIsDue()
            if stopping { break }
            waitForWork()
            try takeInbox()
        }
        try? status.write(to: folder)
        logger.info("agent.stopped")
    }

    // MARK: the steps of a turn

    /// The records the agent keeps, loaded again once a full sync that reached the server is done
    /// (``SyncEngine/reloadRecords()``): allocated among the sync's blocks, they would pin the holes those leave, so
    /// that the freed pages could not go back to the system.
    private func reloadRecords() {
        do { try engine.reloadRecords() } catch {
            logger.warning("agent.records.reload.failed", metadata: ["error": "\(error)"])
        }
    }

    /// A full sync when one is needed or due, else a partial sync of the settled paths when there are any, the
    /// server changed, or a poll is due; nothing while a retry waits.
    private func syncWhatIsDue() {
        let now = clock.now
        if let retryAt, now < retryAt {
            // Offline or failing: keep collecting events, sync when the backoff expires.
        } else if needFull || now >= nextFull || limitChanged() {
            needFull = false
            nextFull = now + options.fullScanInterval
            pending.removeAll()
            let waiting = pacer.takeAll()
            serverDirty = false
            nextPoll = now + poll
            let result = syncNow(nil)
            if case .success(let report) = result, !report.offline {
                try? state.setMeta([.maxFileSizeSynced: engine.maxFileSize.stored])
                pacer.committed(waiting, at: now)
                if options.gcEvery > .zero { engine.autoGC(every: Int64(options.gcEvery.seconds)) }
                reloadRecords()
            }
            // A full sync, and gc more so, allocate and free in proportion to the folder, on several threads; glibc
            // keeps what was freed in its arenas. Handed back, the agent holds its records, not its last peak
            // (docs/benchmarks.md, "Why these settings"). SQLite's page cache, full after the bases were read, goes too.
            engine.state.releaseMemory()
            engine.releaseServerCaches()
            MemoryPolicy.letGo()
        } else {
            let root = folder.root
            let settled = pending.takeSettled(at: now, flushing: stopping) { path in
                FileIO.lstatInfo(root + "/" + path).map {
                    .init(isRegularFile: ($0.st_mode & S_IFMT) == S_IFREG, size: Int64($0.st_size))
                }
            }
            // A note saved again within its pace waits (it is a save: the note is there); renames and deletes go.
            var ready = pacer.admit(settled, at: now) { path in
                FileIO.lstatInfo(root + "/" + path).map { ($0.st_mode & S_IFMT) == S_IFREG } ?? false
            }
            for path in pacer.due(at: now, flushing: stopping) where !ready.contains(path) { ready.append(path) }
            if !ready.isEmpty || serverDirty || now >= nextPoll {
                serverDirty = false
                nextPoll = now + poll
                if case .success(let report) = syncNow(ready), !report.offline { pacer.committed(ready, at: now) }
            }
        }
    }

    /// Whether `notesync config --max-file-size` changed the limit since the last full sync: the notes it now lets
    /// in or leaves out are not in a partial sync's paths (nor, on the server, among the changes since the last
    /// sync), so only a full sync takes them in.
    private func limitChanged() -> Bool {
        guard let limit = try? FileSizeLimit.stored(in: state) else { return false }
        return (try? state.meta(.maxFileSizeSynced)) != limit.stored
    }

    /// Sleeps until the next poll, full scan, retry or settling deadline, or until woken (events, a request, stop).
    private func waitForWork() {
        var deadline = min(nextPoll, nextFull)
        if let retryAt { deadline = min(deadline, retryAt) }
        if let settling = pending.nextDeadline { deadline = min(deadline, settling) }
        if let paced = pacer.nextDeadline { deadline = min(deadline, paced) }
        let timeout = max(0, (deadline - clock.now).seconds)
        _ = agent.wakeup.wait(timeout: .now() + timeout)
    }

    /// Takes the events, the commands' requests (served now) and a stop that arrived.
    private func takeInbox() throws {
        let (events, stop, requests) = agent.inbox.withLock { box -> ([WatchEvent], Bool, [(fd: Int32, request: AgentSocket.Request)]) in
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

    // MARK: syncing

    /// One sync; its report, or the error it ended with (for a command that asked for it). A sync a command
    /// asked for reports a gap in the server's log at once, as a one-shot sync does (the same exit code).
    @discardableResult
    private func syncNow(
        _ paths: [String]?, allowMassDelete: Bool = false, forgetServer: Bool = false, forCommand: Bool = false
    ) -> Result<SyncReport, any Error> {
        defer { try? status.write(to: folder) }
        var syncOptions = SyncOptions()
        syncOptions.forgetServer = forgetServer
        syncOptions.gapGrace = forCommand ? nil : Int64(options.gapGrace.seconds * 1e9)
        // Held deletes approved by `notesync sync --allow-mass-delete` (run while this agent holds the lock).
        let approval = folder.massDeleteApproval
        let approved = FileIO.lstatInfo(approval) != nil || allowMassDelete
        syncOptions.allowMassDelete = approved
        do {
            let report = try engine.sync(syncOptions, only: approved ? nil : paths)
            if approved {
                unlink(approval)
                logger.notice("sync.deletes.approved")
            }
            synced(report, full: paths == nil || approved)
            return .success(report)
        } catch {
            failed(error)
            return .failure(error)
        }
    }

    /// What a sync that ran says: held deletes, warnings and changes logged; online or offline.
    private func synced(_ report: SyncReport, full: Bool) {
        if report.heldDeletes > 0 {
            // Said once per count, not at every sync that holds them.
            if status.heldDeletes != report.heldDeletes, let warning = report.warnings.first(where: { $0.kind == .deletesHeld }) {
                logger.warning("sync.deletes.held", metadata: ["detail": "\(warning)"])
            }
            status.heldDeletes = report.heldDeletes
        } else if full {
            status.heldDeletes = nil
        }
        for warning in report.warnings where warning.kind != .deletesHeld {
            logger.warning("sync.warning", metadata: ["detail": "\(warning)"])
        }
        if !report.offline {
            // Only a note's own name (a warning's path is the name as printed, escaped where it must be).
            let left = report.warnings.lazy.filter { $0.kind == .note || $0.kind == .failed }.compactMap(\.path).filter {
                (try? RecordName(validating: $0))?.description == $0
            }
            if full { leftAsTheyWere = Set(left) } else { leftAsTheyWere.formUnion(left) }
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
    }

    /// A sync that failed: not in sync with the server, whatever stopped it (`status` says which: a gap, another
    /// server); retried with backoff, as a full sync.
    private func failed(_ error: any Error) {
        logger.error("sync.failed", metadata: ["detail": "\(error)"])
        status.online = false
        if let error = error as? NoteSyncError {
            status.lastError = error.description
            status.lastErrorKind = error.kind.rawValue
            // The changes recorded before the failure (a full server, say) are pending: say so.
            status.pending = (try? engine.state.outbox().count) ?? status.pending
        } else {
            status.lastError = "\(error)"
            status.lastErrorKind = NoteSyncError.Kind.io.rawValue
        }
        retryAt = clock.now + backoff.failed()
        needFull = true
    }

    // MARK: the watch

    /// Takes the watch's events: notes' paths wait to settle, a change in the server's log wakes a sync.
    private func take(_ events: [WatchEvent]) {
        let arrived = clock.now
        for event in events {
            switch event {
            case .changed(let root, let path), .removed(let root, let path),
                .directoryAppeared(let root, let path), .directoryRemoved(let root, let path):
                if root == serverRoot {
                    serverDirty = true
                } else if root == notesRoot {
                    if path.hasPrefix(ReservedNames.cookiePrefix) {
                        if case .changed = event { cookiesSeen.insert(path) }
                        continue
                    }
                    pending.noted(path, at: arrived, size: FileIO.lstatInfo(folder.root + "/" + path).map { Int64($0.st_size) })
                }
            case .renamed(let root, let from, let to):
                // The two names of a rename settle together, the old one without waiting as a vanished note does:
                // one sync sees the note gone and the new one, and commits a move. Noted here, with the link, as the
                // watch reports the rename before the new name's own event, which may come in a later batch.
                if root == notesRoot {
                    let size = { (path: String) in FileIO.lstatInfo(self.folder.root + "/" + path).map { Int64($0.st_size) } }
                    pending.renamed(from, to: to, at: arrived, fromSize: size(from), toSize: size(to))
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
    private func watchIsCurrent() -> Bool {
        guard status.localWatch == .inotify, !needFull, retryAt == nil else { return false }
        cookies += 1
        let name = ReservedNames.cookiePrefix + "\(getpid())-\(cookies)"
        let path = folder.root + "/" + name
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return false }
        close(fd)
        defer {
            unlink(path)
            // Requests and a stop that came while waiting are taken by the loop's next turn.
            if agent.inbox.withLock({ !$0.requests.isEmpty || $0.stop }) { agent.wakeup.signal() }
        }
        let deadline = clock.now + .seconds(2)
        while !cookiesSeen.contains(name) {
            let left = deadline - clock.now
            guard left > .zero else { return false }
            _ = agent.wakeup.wait(timeout: .now() + left.seconds)
            take(
                agent.inbox.withLock { box in
                    defer { box.events.removeAll(keepingCapacity: true) }
                    return box.events
                })
        }
        cookiesSeen.remove(name)
        return !needFull
    }

    // MARK: commands

    /// A command's request through the socket: a sync now (or a dry run, a recovery, a restore), its report sent
    /// back. With the watch current and nothing held, only the paths it saw change are scanned (the agent knows
    /// the rest is as last synced): the answer takes what changed, not what the folder holds.
    private func serve(_ request: (fd: Int32, request: AgentSocket.Request)) {
        let asked = request.request
        let outcome: Result<SyncReport, any Error>
        var keptAs: String?
        if let restore = asked.restore {
            let restored = Result {
                let name = try RecordName(validating: RecordName.nfc(restore.note))
                let result = try engine.restore(name, version: restore.version)
                logger.notice("sync.restored", metadata: ["note.path": "\(name)", "server.seq": "\(restore.version)"])
                return result
            }
            keptAs = try? restored.get().keptAs
            outcome = restored.map(\.report)
        } else if asked.recover && !asked.dryRun {
            logger.notice("sync.recover")
            outcome = syncNow(nil, forgetServer: true, forCommand: true)
            if case .success(let report) = outcome, !report.offline { pending.removeAll() }
        } else {
            outcome = serveSync(asked)
        }
        var response = AgentSocket.Response()
        response.keptAs = keptAs
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

    /// A command's sync or dry run: of the paths the watch saw change when it is current and nothing is held, else
    /// of the whole folder.
    private func serveSync(_ asked: AgentSocket.Request) -> Result<SyncReport, any Error> {
        // Only a sync or a dry run of what changed waits for the watch to catch up.
        let incremental = !asked.allowMassDelete && !asked.recover && status.heldDeletes == nil && watchIsCurrent()
        // With the notes an earlier sync left as they were: tried again (a text put back on the server since).
        let retried = incremental ? leftAsTheyWere.subtracting(pending.paths) : []
        if asked.dryRun {
            var syncOptions = SyncOptions(
                dryRun: true, withDiffs: true, colorDiffs: asked.colorDiffs, allowMassDelete: asked.allowMassDelete)
            syncOptions.forgetServer = asked.recover
            return Result { try engine.sync(syncOptions, only: incremental ? pending.paths + retried : nil) }
        }
        let paths = incremental ? pending.paths : nil
        // Those the sync leaves again come back through its report (``synced(_:full:)``).
        leftAsTheyWere.subtract(retried)
        let outcome = syncNow(paths.map { $0 + retried }, allowMassDelete: asked.allowMassDelete, forCommand: true)
        if case .success(let report) = outcome, !report.offline {
            if let paths {
                pending.remove(paths)
            } else {
                pending.removeAll()
                nextFull = clock.now + options.fullScanInterval
            }
        } else {
            leftAsTheyWere.formUnion(retried)
        }
        return outcome
    }
}
