import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport
import Synchronization

/// Options of one sync.
public struct SyncOptions: Sendable {
    /// Plan and describe, write nothing anywhere (not the notes, not the server, not the local state).
    public var dryRun = false
    /// Render unified diffs of every planned change into the report.
    public var withDiffs = false
    public var colorDiffs = false
    public var allowMassDelete = false
    public var maxRounds = 8
    /// How long a gap in the server's log (an entry missing while later ones are there) is waited for before it is
    /// reported as an error: replicating tools deliver files out of order. `nil` reports it at once (one-shot
    /// commands); meanwhile the sync pushes nothing and pulls nothing past the gap, as if offline.
    public var gapGrace: Int64?
    /// Forget what this device knew of the server (token, heads, bases) and sync as if for the first time with
    /// the notes it holds, bound to the server now at the path: `notesync recover`.
    public var forgetServer = false
    /// Report notes modified in the future and a clock far from the server's (off in harnesses whose logical time
    /// is not the wall clock's).
    public var checksClock = true
    /// Counters the sync bumps as it goes (scanned, downloaded, uploaded, committed), for a progress line; nil
    /// costs nothing.
    public var progress: SyncProgress?

    public init(dryRun: Bool = false, withDiffs: Bool = false, colorDiffs: Bool = false, allowMassDelete: Bool = false) {
        self.dryRun = dryRun
        self.withDiffs = withDiffs
        self.colorDiffs = colorDiffs
        self.allowMassDelete = allowMassDelete
    }
}

/// The identity and configuration of a notes folder, from its local state.
public struct FolderConfig: Sendable, Hashable {
    public var deviceID: String
    public var deviceName: String
    public var server: String
    /// The id of the server this notes folder syncs with (its marker's id), bound at `init`; `nil` for a folder
    /// made by a build before binding: the first sync that reaches a server binds it.
    public var serverID: String?
    /// The S3-compatible service of an `s3://` server (nil: `NOTESYNC_S3_ENDPOINT`, else AWS S3).
    public var serverEndpoint: String?
    /// The key of an encrypted server (``VaultKeyFile``) and the id of the server it is for; nil for a plain one.
    public var vaultKey: Data?
    public var vaultServerID: String?

    public init(
        deviceID: String, deviceName: String, server: String, serverID: String? = nil, serverEndpoint: String? = nil,
        vault: Vault? = nil, vaultServerID: String? = nil
    ) {
        self.deviceID = deviceID
        self.deviceName = deviceName
        self.server = server
        self.serverID = serverID
        self.serverEndpoint = serverEndpoint
        self.vaultKey = vault?.keyBytes
        self.vaultServerID = vaultServerID
    }

    /// The kept key, if any.
    public var vault: Vault? { vaultKey.flatMap { try? Vault(keyBytes: $0) } }

    public init(state: LocalState, folder: NotesFolder) throws {
        guard let id = try state.meta(.deviceID), let name = try state.meta(.deviceName),
            let server = try state.meta(.serverPath)
        else {
            throw NoteSyncError(
                .notInitialized, path: folder.database, "holds no device or server",
                fix: "run `notesync init --notes \(folder.root) --server DIR --device-name NAME` again (NAME: the name "
                    + "this device had): it moves this state aside and starts afresh as a new device, keeping every note")
        }
        let kept = try VaultKeyFile.read(folder.vaultKeyFile)
        self.init(
            deviceID: id, deviceName: name, server: server, serverID: try state.meta(.serverID),
            serverEndpoint: try state.meta(.serverEndpoint), vault: kept?.vault, vaultServerID: kept?.serverID)
    }
}

/// One-shot sync of a notes folder with its server: scan, fetch, reconcile, apply, push, until nothing is left.
///
/// Every step is persisted before the next relies on it, so a crash at any point is finished by the next sync:
/// the heads and token as soon as they are fetched, a note's base only once the note and server agree.
public final class SyncEngine {
    public let folder: NotesFolder
    public let state: LocalState
    public let config: FolderConfig
    package let logger: Logger
    private var deviceNames: [String: String] = [:]
    /// Bases and server state as of the end of the last sync by this engine: the agent's syncs start from
    /// memory instead of reloading every record (only this process writes them: it holds the folder lock).
    private var memo: (bases: RecordTable<BaseRecord>, zone: ZoneState)?
    private var store: ServerStore?
    /// The marker file as it was when ``store`` was opened: another file there (a share mounted again, a server
    /// put in its place) is opened and its id checked again.
    private var markerSeen: StatFingerprint?
    /// The server id this engine checks every server against (``FolderConfig/serverID``, or bound by this engine).
    private var boundServerID: String?
    /// When a sync first found a gap at a slot (``SyncOptions/gapGrace``).
    private var gapSeen: (path: String, since: Int64)?
    /// The token and time this engine last found or put in its status file on the server (``reportDevice(_:token:)``).
    private var lastReported: (token: Int64, at: Int64)?
    /// When a sync of this engine last checked the server's marker and the end of its log (every sync but an idle
    /// poll of an object store does); ``endCheckInterval`` after it, an idle poll checks them again.
    private var lastEndCheck: ContinuousClock.Instant?
    /// This sync is an agent's idle poll of an object store that reads the next slot only (``cheapPoll(_:)``).
    private var pollsCheaply = false
    /// How long an agent's idle polls of an object store read only the next slot before one checks the marker and
    /// the end of the log again: a server replaced or restored from a backup is noticed within this time.
    static let endCheckInterval: Duration = .seconds(60)
    /// For a process that exits after one sync: what a sync held is left to the exit (``OneShotProcess``)
    /// instead of being released record by record (a cost that grows with the notes). Never for the agent.
    public var leavesMemoryToExit = false
    /// The running sync's ``SyncOptions/progress``.
    package var progress: SyncProgress?
    /// The running sync's limit on a note's size (``MetaKey/maxFileSize``).
    package var maxFileSize = FileSizeLimit.default
    /// Whether the notes folder folds case (``CasePairs``); nil: asked of the folder at each sync
    /// (``notesFolderFoldsCase()``). Set by tests that run a case-folding folder's logic on any filesystem.
    public var foldsCase: Bool?

    public init(folder: NotesFolder, state: LocalState, config: FolderConfig, logger: Logger) {
        self.folder = folder
        self.state = state
        self.config = config
        self.logger = logger
        self.boundServerID = config.serverID
    }

    /// Runs one sync. With `only`, a partial sync for the agent: just those paths (relative files or folders),
    /// plus every record the server changed since the last sync.
    ///
    /// The phases, in order: load and scan; open the server; settle what a killed process left and queue the local
    /// changes; then rounds of fetch, plan, resolve and execute until a commit lands without a race; then finish.
    /// A server that cannot be reached, at any phase, ends the sync in one place (``ServerAway``): the local
    /// changes stay queued.
    public func sync(_ options: SyncOptions = SyncOptions(), only paths: [String]? = nil) throws -> SyncReport {
        var round = SyncRound(
            report: SyncReport(dryRun: options.dryRun), phases: PhaseTimer(measuresMemory: logger.logLevel <= .debug))
        defer { logger.debug("sync.phases", metadata: round.phases.metadata) }
        progress = options.progress
        progress?.enter(.scanning)
        var scanner = FolderScanner(root: folder.root, rules: try folder.ignoreRules())
        scanner.progress = options.progress
        // Read at every sync: `notesync config` changes it under a running agent.
        maxFileSize = try FileSizeLimit.stored(in: state)
        scanner.maxFileSize = maxFileSize
        // Taken out of the memo so that each is uniquely referenced: changing them copies nothing.
        (round.bases, round.zone, round.scan) = try loadAndScan(scanner, options: options, only: paths, phases: &round.phases)
        // Before anything is queued: a record that waits for another's file is no delete and no edit. Said once the
        // heads are fetched (``rounds``), which may end the wait.
        let (foldsCase, probeWarning) = notesFolderFoldsCase()
        if let probeWarning { round.report.warnings.append(probeWarning) }
        if foldsCase {
            var unsaid = SyncReport(dryRun: options.dryRun)
            try settleCasePairs(
                &round.scan, scanner: &scanner, bases: round.bases, heads: round.zone.heads, keep: false, report: &unsaid)
        }
        round.report.hashed = round.scan.hashed
        round.report.warnings += scanWarnings(round.scan, options: options)
        // The server is opened first: a temp file an interrupted apply left is settled against what the server
        // holds, and only while it can be read. Offline, temps wait (they are ignored names, nothing is lost) and
        // the sync changes no note.
        pollsCheaply = !options.forgetServer && cheapPoll(paths)
        let opened = Result { try openStore(anyServer: options.forgetServer, idlePoll: pollsCheaply) }
        do {
            if options.forgetServer { try forgetServer(try opened.get(), options: options) }
            if !options.dryRun {
                if let lacking = try probeFolderGuarantees() { round.report.warnings.append(lacking) }
                try settleLocal(
                    &round.scan, scanner: scanner, bases: &round.bases, zone: round.zone, opened: opened,
                    full: paths == nil, forgetting: options.forgetServer, report: &round.report)
            } else if case .success = opened, !options.forgetServer {
                try adoptPendingWrites(&round.scan, bases: &round.bases, dryRun: true)
            }
            round.phases.lap("outbox")
            let store = try reachable(opened, bases: round.bases, zone: round.zone, options: options)
            try rounds(&round, store: store, scanner: scanner, options: options, only: paths, foldsCase: foldsCase)
            if !options.dryRun {
                try finish(
                    store: store, bases: round.bases, zone: &round.zone, full: paths == nil, options: options,
                    report: &round.report)
            }
            round.phases.lap("finish")
            return round.report
        } catch let away as ServerAway {
            if let kept = away.memo { memo = kept }
            // A dry run queued nothing: it lists what a sync would queue from this scan. A sync counts what it
            // queued (the agent retries offline: no list of a long outbox each time; `status` lists it).
            let queued = options.dryRun ? try outboxAfter(round.scan, round.bases, scanner: scanner) : nil
            return try offline(round.report, away.error, options, queued: queued)
        }
    }

    /// What a sync carries through its phases and rounds, in place of five values handed `inout` to each part: the
    /// records it syncs from, its scan, what it says and what it measures. Each is held once, uniquely referenced:
    /// changing one copies nothing (a first sync's tables and scan are one record a note).
    struct SyncRound {
        var bases: RecordTable<BaseRecord> = [:]
        var zone = ZoneState()
        var scan = ScanResult()
        var report: SyncReport
        var phases: PhaseTimer
    }

    /// The server could not be reached (or holds a gap still waited for): the sync ends as offline, and the agent's
    /// next sync starts from `memo` when it is set.
    struct ServerAway: Error {
        package var error: NoteSyncError
        var memo: (bases: RecordTable<BaseRecord>, zone: ZoneState)?
    }

    /// Forgets what the open server's store read to find texts (the packs' indexes, 48 bytes a packed text): an idle
    /// agent holds none; the next text not found loose reads them again.
    public func releaseServerCaches() { store?.releasePackIndexes() }

    /// Loads the records a long-lived process keeps between syncs (the bases and the heads) again from the state
    /// database, once a full sync is done and has freed what it used. They were allocated among that sync's own
    /// blocks, and the holes those leave outlast it (an agent at 100,000 notes: 16,000–22,000 holes, 15–20 MB that
    /// `malloc_trim` cannot hand back); loaded anew into the emptied heap, they lie together. Only the two tables are
    /// replaced, and only when every head is saved and the database's token is memory's: the rest of the zone (its
    /// chain, damaged and quarantined entries, what is left to plan) is kept. The tables read are what an agent
    /// started again would read. A failure to read them leaves no records held: the next sync reads the database.
    public func reloadRecords() throws {
        guard var kept = memo, kept.zone.unsaved.isEmpty,
            let saved = try state.meta(.token).flatMap({ Int64($0) }), saved == kept.zone.token
        else { return }
        memo = nil
        kept.bases = [:]
        kept.zone.heads = [:]
        MemoryPolicy.letGo()
        let loaded = try state.zoneState()
        guard loaded.token == kept.zone.token else { return }
        kept.zone.heads = loaded.heads
        kept.bases = try state.bases(sharingNamesWith: kept.zone.heads)
        memo = kept
    }

    /// The records the next sync in this process starts from without reading the database.
    var heldRecords: (bases: RecordTable<BaseRecord>, zone: ZoneState)? { memo }

    /// The bases and server state to sync from (the memo, else the state database, on another thread while the
    /// folder is walked), and the scan of the notes folder against them.
    private func loadAndScan(
        _ scanner: FolderScanner, options: SyncOptions, only paths: [String]?, phases: inout PhaseTimer
    ) throws -> (RecordTable<BaseRecord>, ZoneState, ScanResult) {
        if options.forgetServer {
            // As a first sync with the notes this device holds: nothing is known of the server.
            memo = nil
            let scan = try scanner.scan(bases: [:], only: nil)
            phases.lap("scan")
            return ([:], ZoneState(), scan)
        }
        if let kept = memo {
            // A dry run changes nothing, so the memo stays as it is (its copies are made only if it fetches).
            if !options.dryRun { memo = nil }
            let scan = try scanner.scan(bases: kept.bases, only: paths, namesUnder: namesUnder)
            phases.lap("scan")
            return (kept.bases, kept.zone, scan)
        }
        guard paths == nil else {
            let zone = try state.zoneState()
            let bases = try state.bases(sharingNamesWith: zone.heads)
            phases.lap("load")
            let scan = try scanner.scan(bases: bases, only: paths, namesUnder: namesUnder)
            phases.lap("scan")
            return (bases, zone, scan)
        }
        // A first sync in this process: the folder is walked while the bases and heads load on another thread.
        let loaded = Self.loadInBackground(state)
        let walked = Result { try scanner.walkAll() }
        phases.lap("walk")
        let (bases, zone) = try loaded.wait()
        phases.lap("load")
        // Taken out of the result, not copied: the scan frees the walk's arrays as it goes.
        let found: FolderScanner.Walked
        switch consume walked {
        case .success(let value): found = value
        case .failure(let error): throw error
        }
        let scan = try scanner.complete(consume found, bases: bases)
        phases.lap("scan")
        return (bases, zone, scan)
    }

    /// What the scan found to say: notes from the future, names skipped, other tools' conflict copies.
    private func scanWarnings(_ scan: ScanResult, options: SyncOptions) -> [SyncWarning] {
        var warnings = options.checksClock ? futureTimes(scan).map { SyncWarning(.clock, $0) } : []
        warnings += scan.warnings
        warnings += scan.foreignConflicts.map {
            SyncWarning(
                .foreignConflictCopy, path: $0.description,
                "\($0): a conflict copy made by another sync tool; it syncs as a normal note — compare and delete it")
        }
        return warnings
    }

    /// `notesync recover`: the server at the path becomes this folder's server, and what was known of the old one
    /// is forgotten (never queued for later: recovery needs the server).
    private func forgetServer(_ store: ServerStore, options: SyncOptions) throws {
        guard !options.dryRun else { return }
        try state.update { try $0.forgetServer(bindingTo: store.marker.id) }
        boundServerID = store.marker.id
        logger.notice("server.recover", metadata: ["server.id": "\(store.marker.id)"])
    }

    /// Finishes what a killed process left in the notes folder (while the server can be read), keeps both Unicode
    /// twins, and queues every local change in the outbox.
    private func settleLocal(
        _ scan: inout ScanResult, scanner: FolderScanner, bases: inout RecordTable<BaseRecord>, zone: ZoneState,
        opened: Result<ServerStore, any Error>, full: Bool, forgetting: Bool, report: inout SyncReport
    ) throws {
        if case .success(let store) = opened {
            if full { try recoverUncheckedDeletes(&scan, scanner: scanner, bases: bases) }
            try recoverLeftoverTemps(&scan, scanner: scanner, bases: bases, zone: zone, store: store, report: &report)
            // After the temps: a save a killed write displaced is kept by then, judged against the old base.
            if !forgetting { try adoptPendingWrites(&scan, bases: &bases, dryRun: false) }
        }
        if !scan.unicodeTwins.isEmpty { try keepUnicodeTwins(&scan, scanner: scanner, bases: bases, report: &report) }
        try recordLocalChanges(scan, bases, scanner: scanner)
    }

    /// The opened server, or the sync ends: offline (unreachable, nothing there), or stopped (not this folder's).
    private func reachable(
        _ opened: Result<ServerStore, any Error>, bases: RecordTable<BaseRecord>, zone: ZoneState, options: SyncOptions
    ) throws -> ServerStore {
        do {
            return try opened.get()
        } catch let error as NoteSyncError where error.kind == .serverUnreachable || error.kind == .notAServer {
            throw ServerAway(error: error, memo: options.dryRun ? nil : (bases, zone))
        } catch let error as NoteSyncError where error.kind == .serverMismatch {
            throw try stopped(error, options)
        }
    }

    /// The rounds of a sync: fetch, plan, resolve, then describe (a dry run, which ends here) or execute, until a
    /// commit lands without losing its slot, at most ``SyncOptions/maxRounds``.
    private func rounds(
        _ round: inout SyncRound, store: ServerStore, scanner: FolderScanner, options: SyncOptions,
        only paths: [String]?, foldsCase: Bool = false
    ) throws {
        var scanner = scanner
        // The notes this sync made (conflict copies) and pushed as new, when the scan is partial.
        var made = Set<RecordName>()
        // The token the last finished sync planned up to: heads after it were fetched by this sync or by one that
        // did not finish (killed, or the server gone before it applied anything).
        let plannedBefore = options.forgetServer ? 0 : Int64(try state.meta(.plannedToken) ?? "") ?? 0
        let recovering = try options.forgetServer || state.meta(.recovering) != nil
        let lostCommits = try lostEntries(store, zone: &round.zone, bases: round.bases, options: options, full: paths == nil)
        for number in 1...options.maxRounds {
            round.report.rounds = number
            try fetchRound(&round, number, store: store, scanner: scanner, options: options, only: paths, recovering: recovering)
            if !options.dryRun && number == 1 && !lostCommits.isEmpty {
                let requeued = try requeueLostCommits(
                    lostCommits, zone: round.zone, bases: &round.bases, scan: &round.scan, store: store)
                if !requeued.isEmpty {
                    round.scan.merge(try scanner.scan(bases: round.bases, only: requeued.map(\.string), namesUnder: namesUnder))
                }
            }
            round.phases.lap("fetch")
            try scanUnplanned(&round, scanner: &scanner, foldsCase: foldsCase, keep: !options.dryRun)
            let plan = try planRound(&round, store: store, scanner: scanner, options: options, plannedBefore: plannedBefore)
            if options.dryRun {
                try describe(plan, zone: round.zone, store: store, options: options, report: &round.report)
                return
            }
            let scope = round.scan.scope
            let finished: Bool
            do {
                let taken = round.scan
                round.scan = ScanResult()
                finished = try execute(
                    consume plan, scan: consume taken, bases: &round.bases, zone: &round.zone, store: store, made: &made,
                    report: &round.report)
            } catch let error as NoteSyncError where error.kind == .serverUnreachable {
                throw ServerAway(error: error, memo: nil)
            }
            round.phases.lap("execute")
            if finished {
                // A note that waited for its group's file (``CasePairs``) is planned once the owner left: no event
                // or poll names it, and the next sync might be far off.
                let released =
                    foldsCase ? try releasedCasePairs(bases: round.bases, heads: round.zone.heads, waiting: scanner.waiting) : []
                guard !released.isEmpty, number < options.maxRounds else { return }
                round.scan = try scanner.scan(bases: round.bases, only: released.map(\.string), namesUnder: namesUnder)
                continue
            }
            // The next round's partial scan includes the notes this one made (conflict copies): their push was lost
            // with the race, and no later event names them (the agent ignores its own writes).
            round.scan = try scanner.scan(
                bases: round.bases, only: scope.map { $0.union(made).map(\.string) }, namesUnder: namesUnder)
        }
    }

    /// A round's fetch: the entries the server has since the token are folded into the heads, this device's own
    /// commits a killed sync did not record become bases, and the heads are saved.
    private func fetchRound(
        _ round: inout SyncRound, _ number: Int, store: ServerStore, scanner: FolderScanner, options: SyncOptions,
        only paths: [String]?, recovering: Bool
    ) throws {
        let tokenBefore = round.zone.token
        let check = endCheck(only: paths, round: number)
        let fetched = try fetch(store, zone: &round.zone, bases: round.bases, check: check, options: options)
        if check != .nextSlot { lastEndCheck = .now }
        var recovered: [RecordName: BaseRecord?] = [:]
        if let jumpedFrom = round.zone.jumpedFrom {
            round.report.warnings += try checkJump(&round.zone, bases: round.bases, store: store, options: options)
            recovered = ownUnrecordedCommits(
                jumpedFrom: jumpedFrom, zone: round.zone, scan: round.scan, bases: round.bases, store: store)
        }
        // The entries read go once looked at (a rename of 50,000 notes: 100,000 changes, 13 MB and their names),
        // before the heads are stored and the round plans.
        recovered.merge(ownUnrecordedCommits(consume fetched, scan: round.scan, bases: round.bases)) { _, fetched in fetched }
        // A recovery reads the log from its start: a note deleted here gets no base from this device's own
        // commit, so its delete (one the server lost) is not pushed again and the note comes back from the server;
        // nothing is deleted for a recovery. (A first sync killed after its commit keeps them: a delete made since
        // is pushed.)
        if recovering && tokenBefore == 0 {
            recovered = recovered.filter {
                round.scan.files[$0.key] != nil || round.scan.isUnreadable($0.key) || scanner.isIgnored($0.key)
            }
        }
        if !options.dryRun { adoptCommittedTimes(&recovered, scan: round.scan) }
        for (name, base) in recovered {
            round.scan.rebase(name, from: round.bases[name], to: base)
            // A full scan hashes only notes whose fingerprint left their base's, and the planner looks only at
            // those: a note still as its old base (the user saved that text again after the killed commit) now
            // differs from its new base, and is a change to push.
            if let file = round.scan.files[name], file.digest != base?.digest { round.scan.changed.append(name) }
            round.bases[name] = base
        }
        // Many heads changed since they were last saved (a fetch of many changes, mostly): what was read (the
        // entries, their changes, the heads' storage they outgrew) was freed where the plan's small blocks do not
        // all fit, and the free pages go back before the round plans.
        MemoryPolicy.phaseEnded(items: round.zone.unsaved.count)
        if !options.dryRun && (round.zone.token != tokenBefore || !round.zone.unsaved.isEmpty) {
            try saveZone(&round.zone, recovered: recovered, scan: round.scan)
        }
    }

    /// Scans what a round plans beyond its scan. A partial sync also plans every record that changed since the
    /// last plan (fetched, or folded in when a commit lost its slot to another device): ``ZoneState/unplanned``. A
    /// case-folding folder settles its case pairs against the heads fetched: a pulled name may be one file with a
    /// note here.
    private func scanUnplanned(_ round: inout SyncRound, scanner: inout FolderScanner, foldsCase: Bool, keep: Bool) throws {
        if let scope = round.scan.scope {
            let changed = round.zone.unplanned.subtracting(scope)
            if !changed.isEmpty {
                round.scan.merge(try scanner.scan(bases: round.bases, only: changed.map(\.string), namesUnder: namesUnder))
            }
        }
        round.zone.unplanned = []
        guard foldsCase else { return }
        let released = try settleCasePairs(
            &round.scan, scanner: &scanner, bases: round.bases, heads: round.zone.heads, keep: keep, report: &round.report)
        if let scope = round.scan.scope, case let unscanned = released.filter({ !scope.contains($0) }), !unscanned.isEmpty {
            round.scan.merge(try scanner.scan(bases: round.bases, only: unscanned.map(\.string), namesUnder: namesUnder))
            try settleCasePairs(
                &round.scan, scanner: &scanner, bases: round.bases, heads: round.zone.heads, keep: keep,
                report: &round.report)
        }
    }

    /// A round's plan, resolved (``resolve(_:scan:bases:zone:store:report:)``).
    private func planRound(
        _ round: inout SyncRound, store: ServerStore, scanner: FolderScanner, options: SyncOptions, plannedBefore: Int64
    ) throws -> [Step] {
        var plan = Planner.plan(
            scan: round.scan, bases: round.bases, zone: round.zone, deviceID: config.deviceID, similarity: similarity(store),
            isIgnored: scanner.isIgnored, waiting: scanner.waiting, renameTime: RenameTimes(root: folder.root).time
        ) { name, local, head, base in
            historyBase(name, local: local, head: head, base: base, knownBefore: plannedBefore, store: store)
        }
        holdMassDelete(&plan, scan: round.scan, scanner: scanner, bases: round.bases, options: options, report: &round.report)
        do {
            try resolve(&plan, scan: round.scan, bases: round.bases, zone: round.zone, store: store, report: &round.report)
        } catch let error as NoteSyncError where error.kind == .serverUnreachable {
            throw ServerAway(error: error, memo: nil)
        }
        round.phases.lap("plan")
        return plan
    }

    /// How much of the log's end a fetch checks: all of it in a full sync's first round; nothing in a cheap idle
    /// poll (``cheapPoll(_:)``); else the slot after the next.
    private func endCheck(only paths: [String]?, round: Int) -> ServerStore.EndCheck {
        if paths == nil && round == 1 { return .full }
        return pollsCheaply ? .nextSlot : .quick
    }

    /// Whether this sync is an agent's idle poll (nothing changed here) of an object store whose marker and log end
    /// were checked less than ``endCheckInterval`` ago: it costs one request, the next slot. Every request to a
    /// bucket is billed and takes a round trip, where a share's `lstat` is nearly free. A push, a full sync, and the
    /// first idle poll after the interval check the marker, the tip and a gap; an entry fetched meanwhile is still
    /// checked against the chain this device read (an entry of another server breaks it).
    private func cheapPoll(_ paths: [String]?) -> Bool {
        guard paths?.isEmpty == true, let store, store.storage.billsRequests, let lastEndCheck else { return false }
        return ContinuousClock.now - lastEndCheck < Self.endCheckInterval
    }

    /// Entries this device read that were lost from the server since (fsck sealed their slots): the heads folded
    /// from them are read again from the log (the zone starts afresh), then what they changed is queued again.
    private func lostEntries(
        _ store: ServerStore, zone: inout ZoneState, bases: RecordTable<BaseRecord>, options: SyncOptions, full: Bool
    ) throws -> LostEntries {
        guard !options.dryRun && full else { return LostEntries() }
        let lost = try lostEntriesRead(store, zone: zone, bases: bases)
        guard !lost.isEmpty else { return lost }
        // Read again from the start only if the log is still the one this device read past the lost slots: its
        // last entry unchanged pins every entry before it down to the void (each names the one before it).
        var tip = zone
        do { try store.checkTip(&tip) } catch let error as NoteSyncError where error.kind == .serverMismatch {
            throw try stopped(error, options)
        }
        zone = ZoneState()
        try state.update { try $0.forgetZone() }
        return lost
    }

    /// Fetches the entries after the token, checking the log (``ServerStore/fetch(into:limit:check:)``). A gap is
    /// waited for (a replicating tool may still deliver the entry) through ``SyncOptions/gapGrace``, as if offline:
    /// nothing is pushed past it, and nothing pulled; then it stops the sync, as another log does.
    private func fetch(
        _ store: ServerStore, zone: inout ZoneState, bases: RecordTable<BaseRecord>, check: ServerStore.EndCheck,
        options: SyncOptions
    ) throws -> [SlotContent] {
        do {
            let fetched = try store.fetch(into: &zone, check: check)
            gapSeen = nil
            if boundServerID == nil && !options.dryRun {
                // A folder made before binding (0.1.0) is bound only now: the fetch checked the log's end against
                // the token it knew, so a server behind it (or another one at the path) is never bound.
                try state.setMeta([.serverID: store.marker.id])
                boundServerID = store.marker.id
            }
            return fetched
        } catch let error as NoteSyncError where error.kind == .serverUnreachable {
            throw ServerAway(error: error, memo: options.dryRun ? nil : (bases, zone))
        } catch let error as NoteSyncError where error.kind == .logGap {
            let now = Clock.nowNanoseconds()
            if gapSeen?.path != error.path { gapSeen = (error.path ?? "", now) }
            if let grace = options.gapGrace, let since = gapSeen?.since, now - since < grace {
                throw ServerAway(error: error, memo: options.dryRun ? nil : (bases, zone))
            }
            throw try stopped(error, options)
        } catch let error as NoteSyncError where error.kind == .serverMismatch {
            throw try stopped(error, options)
        }
    }

    /// After a jump to a snapshot (gc compacted the log past this device's token): a base whose tag the snapshot's
    /// head has must have its text (else the snapshot is of another history: stopped, as for another log), and a
    /// base whose name the snapshot forgot is pushed again (the reconciler does that) and reported, never deleted.
    private func checkJump(
        _ zone: inout ZoneState, bases: RecordTable<BaseRecord>, store: ServerStore, options: SyncOptions
    ) throws -> [SyncWarning] {
        zone.jumpedFrom = nil
        var warnings: [SyncWarning] = []
        for (name, base) in bases.sorted(by: { $0.key < $1.key }) where base.tag > 0 && base.tag <= zone.token {
            guard let head = zone.heads[name] else {
                warnings.append(
                    SyncWarning(
                        .deleteForgotten, path: name.string,
                        "the server no longer remembers this note (deleted while this device was away longer than "
                            + "its retention keeps deletes); it is kept here and pushed again\n"
                            + "  fix: delete it again if it should go"))
                continue
            }
            if head.tag == base.tag && (head.deleted || head.text?.sha256 != base.digest) {
                throw try stopped(
                    store.chainBroken(at: zone.token, "snapshot \(zone.token) holds another version of \(name) at \(base.tag)"),
                    options)
            }
        }
        return warnings
    }

    /// A dry run's report: each resolved step described; a note whose server text cannot be read is reported and
    /// left out, as in a real sync.
    private func describe(
        _ plan: [Step], zone: ZoneState, store: ServerStore, options: SyncOptions, report: inout SyncReport
    ) throws {
        for step in plan {
            do {
                report.changes += try describeAll(step, store: store, options: options)
            } catch let error as NoteSyncError where error.kind == .serverUnreachable {
                throw ServerAway(error: error, memo: nil)
            } catch let error as NoteSyncError {
                report.warnings.append(SyncWarning.note(step.name, error))
            }
        }
        report.conflictCopies = plan.compactMap { step in
            if case .conflict(let conflict) = step.action { conflict.copy.description } else { nil }
        }
        report.warnings += zone.problems.map { SyncWarning(.server, $0) }
        report.pending = plan.filter(\.isPush).count
        report.token = zone.token
    }

    /// After the rounds: this device's temps on the server go, the clock is compared with the server's, and what
    /// `status` and the next sync read is recorded (the token planned, held deletes, the device's status file).
    private func finish(
        store: ServerStore, bases: RecordTable<BaseRecord>, zone: inout ZoneState, full: Bool, options: SyncOptions,
        report: inout SyncReport
    ) throws {
        if full { store.removeOwnTemps() }
        if options.checksClock, let skew = clockSkewWarning(store) { report.warnings.append(SyncWarning(.clock, skew)) }
        report.token = zone.token
        report.warnings += zone.problems.map { SyncWarning(.server, $0) }
        // Reported once, when read (as a one-shot sync does): the agent's next syncs start from this zone.
        zone.quarantined.removeAll()
        zone.damaged.removeAll()
        report.pending = try state.outboxCount()
        // `last.sync` is an earlier build's: cleared once (the time is `.notesync/last-sync`'s now).
        var meta: [MetaKey: String?] = [
            .lastSync: nil, .lastError: nil, .plannedToken: String(zone.token), .chainFile: zone.verifiedTail?.stored,
            .recovering: nil
        ]
        // What `status` says of held deletes: set by any sync that holds them, cleared by a full sync that does not.
        if full || report.heldDeletes > 0 {
            meta[.heldDeletes] = report.heldDeletes > 0 ? String(report.heldDeletes) : nil
        }
        // What `status` lists as left out for its size: a full sync's findings, or those added since by partial ones.
        let tooBig = report.warnings.filter { $0.kind == .tooBig }.compactMap(\.path)
        let stored = full ? nil : try state.meta(.tooBig)
        if full || !tooBig.isEmpty || stored != nil {
            var listed = (stored ?? "").split(separator: "\n").map(String.init)
            // A note this sync moved is no longer left out (the limit was raised, the note shrank).
            if !listed.isEmpty && !report.changes.isEmpty {
                let moved = Set(report.changes.map(\.name))
                listed.removeAll { moved.contains($0) }
            }
            for line in tooBig where !listed.contains(line) { listed.append(line) }
            meta[.tooBig] = listed.isEmpty ? nil : listed.joined(separator: "\n")
        }
        // Values that did not change are not written (`Batch.setMeta`), and the time is a file's.
        try state.setMeta(meta)
        state.recordSyncFinished()
        reportDevice(store, token: zone.token)
        memo = (bases, zone)
    }

    /// How old the `lastSeen` of a status file may grow before a sync that changed nothing writes it again.
    static let deviceRefresh: Int64 = 3600 * 1_000_000_000

    /// Keeps this device's status file (`devices/<id>.json`: its name and token, which gc keeps history for) true.
    /// A sync that changed nothing writes nothing to the server: the file is read, and written again only when its
    /// token or name differ, or it was written more than ``deviceRefresh`` ago (`lastSeen`, shown by `server usage`),
    /// or it is missing or unreadable. A write to a share costs a file, two flushes and a rename (and a replicating
    /// tool's upload); to a bucket, a billed PUT. An engine reads the file once; after that it knows what it wrote.
    private func reportDevice(_ store: ServerStore, token: Int64) {
        let now = Clock.nowNanoseconds()
        if let lastReported {
            // Only this device writes its file: what this engine wrote last is what it holds.
            if lastReported.token == token && (0..<Self.deviceRefresh).contains(now - lastReported.at) { return }
        } else if let known = store.deviceInfo(config.deviceID), known.token == token, known.name == config.deviceName,
            (0..<Self.deviceRefresh).contains(now - known.lastSeen)
        {
            lastReported = (token, known.lastSeen)
            return
        }
        guard (try? store.writeDeviceInfo(DeviceInfo(id: config.deviceID, name: config.deviceName, lastSeen: now, token: token))) != nil
        else { return }
        lastReported = (token, now)
    }

    /// The bases' names under a folder prefix for a partial scan, from the state database's index: the bases in memory
    /// are those stored (each change is written before the memo keeps it; a dry run's in-memory additions are notes
    /// that exist, which the scan finds by walking). Nil when the database cannot answer: the scan goes over the bases.
    package var namesUnder: (String) -> [RecordName]? { { [state] prefix in try? state.baseNames(under: prefix) } }

    /// The bases and the zone state, loaded from the state database on a thread of their own.
    private static func loadInBackground(_ state: LocalState) -> Pending<(RecordTable<BaseRecord>, ZoneState)> {
        Pending.inBackground(named: "notesync-load") {
            let zone = try state.zoneState()
            return (try state.bases(sharingNamesWith: zone.heads), zone)
        }
    }

    /// The server, opened once and kept while it stays reachable.
    /// Opens the server and checks it is this folder's server (its id). A folder not bound yet (made by an earlier
    /// build) is bound by ``sync(_:only:)`` once a fetch has checked the log against what the folder knew.
    func openStore(anyServer: Bool = false, idlePoll: Bool = false) throws -> ServerStore {
        // A cheap idle poll of an object store (``cheapPoll(_:)``) does not look at the marker.
        if let store, idlePoll, !anyServer { return store }
        // The marker as the open server's storage sees it: another file there (a share mounted again, a server put in
        // its place) is opened and checked again.
        let marker = store?.storage.info(ServerLayout(root: config.server).marker)?.fingerprint
        if let store, marker != nil, marker == markerSeen, !anyServer { return store }
        let opened = try ServerStore(
            root: config.server, endpoint: config.serverEndpoint, device: config.deviceID, logger: logger, vault: config.vault)
        // Another server at the path is said first: a key for it would not make it this folder's server.
        if anyServer {
            // `notesync recover`: the server there becomes this folder's server.
        } else if let bound = boundServerID {
            try opened.requireID(bound)
        }
        try Self.requireKey(opened, folder: folder, config: config)
        store = opened
        markerSeen = opened.storage.info(opened.layout.marker)?.fingerprint
        return opened
    }

    /// The server of `folder` opened for a command that only reads it (`status`, `history`, the conflict copies a
    /// sync's report names): the server `config` names, checked to be the one the folder is bound to and, when it is
    /// encrypted, that the folder has its key, as ``openStore(anyServer:idlePoll:)`` checks it for a sync.
    public static func openServer(folder: NotesFolder, config: FolderConfig, logger: Logger) throws -> ServerStore {
        let store = try ServerStore(
            root: config.server, endpoint: config.serverEndpoint, device: config.deviceID, logger: logger, vault: config.vault)
        // Another server at the path is said first: a key for it would not make it this folder's server.
        if let bound = config.serverID { try store.requireID(bound) }
        try requireKey(store, folder: folder, config: config)
        return store
    }

    /// An encrypted server opened for `folder` needs the key the folder keeps (`.notesync/vault-key`, for that
    /// server): without it nothing of the server can be read, and every command that reads it says so, with the fix.
    static func requireKey(_ opened: ServerStore, folder: NotesFolder, config: FolderConfig) throws {
        guard opened.marker.isEncrypted && (opened.vault == nil || config.vaultServerID != opened.marker.id) else { return }
        throw NoteSyncError(
            .key, path: opened.layout.marker,
            "is the marker of an encrypted server, and this notes folder has no key for it",
            fix: "run `notesync init --notes \(folder.root) --server \(config.server)` with the server's passphrase "
                + "(--passphrase-file FILE, NOTESYNC_PASSPHRASE, or typed at the prompt): it keeps the key and every note")
    }

    /// How far ahead of this device's clock a time may be before it is reported (a note's mtime, the server's).
    static let skewTolerance: Int64 = 5 * 60 * 1_000_000_000

    /// Notes changed since their base whose mtime is more than five minutes ahead of this device's clock: the
    /// record's `modified` decides which edit keeps the name in a conflict, so a wrong clock (here or where the
    /// note was written) is said. The decision stays deterministic: the same times give the same winner everywhere.
    func futureTimes(_ scan: ScanResult) -> [String] {
        // A simulation's clock is its own: the files' times are not comparable with it.
        guard FaultPoint.simulatedNow() == nil else { return [] }
        let now = Clock.nowNanoseconds()
        return scan.changed.compactMap { name in
            guard let file = scan.files[name], file.modified - now > Self.skewTolerance else { return nil }
            return "\(name): modified \((file.modified - now) / 60_000_000_000) minutes in the future by this device's clock; "
                + "a conflict on it is decided by this time\n  fix: check the clock of this device (and of the device that wrote it), "
                + "then `touch` the note"
        }
    }

    /// This device's clock against the server's: the time the server's filesystem gave the entry just published.
    func clockSkewWarning(_ store: ServerStore) -> String? {
        guard let skew = store.takeClockSkew(), abs(skew) > Self.skewTolerance else { return nil }
        return "this device's clock is \(abs(skew) / 60_000_000_000) minutes \(skew > 0 ? "ahead of" : "behind") the server's "
            + "(the time of the entry just written): conflicts are decided by the notes' times\n"
            + "  fix: set the clock right (timedatectl set-ntp true)"
    }

    /// Records a condition that stops syncing (for `status` and the agent's log) and returns it to throw.
    private func stopped(_ error: NoteSyncError, _ options: SyncOptions) throws -> NoteSyncError {
        if !options.dryRun { try state.setMeta([.lastError: error.description]) }
        logger.debug("server.problem", metadata: ["detail": "\(error)"])
        return error
    }

    // MARK: the mass-delete guard

    /// The mass-delete guard, one rule for every path (one-shot sync and agent): when local deletes would remove
    /// more than half of the notes (at least 3) — what an unmounted or emptied notes folder looks like — every local
    /// delete is held back, whole: none is committed, each stays queued, and the rest of the sync goes on. They go
    /// through with `allowMassDelete` (`notesync sync --allow-mass-delete`; a dry run with it previews them).
    ///
    /// A partial (agent) sync sees only the paths that settled, not the whole of an `rm -r` in progress: when it
    /// holds a local delete, it counts every synced note that is gone (an `lstat` per base). Deletes pulled from the
    /// server were decided by another device and are applied whole (to the trash), never guarded here.
    private func holdMassDelete(
        _ plan: inout [Step], scan: ScanResult, scanner: FolderScanner, bases: RecordTable<BaseRecord>,
        options: SyncOptions, report: inout SyncReport
    ) {
        func isLocalDelete(_ step: Step) -> Bool { if case .push(nil, _) = step.decision { true } else { false } }
        let deletes = plan.filter(isLocalDelete).count
        guard deletes > 0 else { return }
        // A renamed note is not deleted: a folder renamed is no mass delete.
        let moved = Set(plan.lazy.compactMap(\.move?.source))
        let gone =
            scan.scope == nil
            ? deletes
            : bases.keys.filter {
                !moved.contains($0) && !scanner.isIgnored($0) && FileIO.lstatInfo(folder.root + "/" + $0.string) == nil
            }.count
        let total = max(bases.count, scan.files.count)
        // Held whole until approved: once held, the deletes stay held while three or more notes are still gone, also
        // when fewer than half are now (a note brought back by another device's edit, some put back by hand).
        let stillHeld = gone >= 3 && (try? state.meta(.heldDeletes)) != nil
        guard gone >= 3 && gone * 2 > total || stillHeld, !options.allowMassDelete else { return }
        plan.removeAll(where: isLocalDelete)
        report.heldDeletes = gone
        report.warnings.append(SyncWarning(.deletesHeld, Self.massDeleteWarning(gone, of: total, root: folder.root)))
    }

    /// What the guard says, and how to go on.
    public static func massDeleteWarning(_ deletes: Int, of total: Int, root: String) -> String {
        "\(deletes) of \(total) notes are gone from \(root): these deletes are held, none is synced "
            + "(an unmounted or emptied folder looks like this); every other change syncs\n"
            + "  fix: if the notes should be there, put them back (they sync as before); if the deletes are wanted, "
            + "preview them with `notesync diff --allow-mass-delete`, then run `notesync sync --allow-mass-delete`"
    }

    /// How alike a gone note's text (its base, read from the server) and a new note's are, for a rename with an
    /// edit (``MoveMatcher``); nil when either cannot be read or is over 1 MiB.
    private func similarity(_ store: ServerStore) -> (BaseRecord, LocalFile) -> Double? {
        let root = folder.root
        return { base, file in
            guard base.size <= 1 << 20, file.size <= 1 << 20,
                let old = try? store.readAsset(AssetRef(sha256: base.digest, size: base.size)),
                let new = try? FileIO.read(root + "/" + file.path)
            else { return nil }
            return MoveMatcher.similarity(old, new)
        }
    }

    // MARK: local bookkeeping

    /// Queues every local change in the outbox (it survives crashes and offline periods) and refreshes the
    /// fingerprints of notes whose content did not change (a `touch`), so they are not hashed again. A note the
    /// ignore rules take out of the sync is no change: its file is passed over, not deleted, and what was queued for
    /// it goes.
    private func recordLocalChanges(_ scan: ScanResult, _ bases: RecordTable<BaseRecord>, scanner: FolderScanner) throws {
        let outbox = try state.outbox()
        try state.update { batch in
            try Self.localChanges(scan, bases, outbox: outbox, scanner: scanner) { edit in
                switch edit {
                case .queue(let item): try batch.queue(item)
                case .dequeue(let name): try batch.dequeue(name)
                case .fingerprint(let name, let fingerprint): try batch.setFingerprint(name, fingerprint)
                }
            }
        }
    }

    /// What ``recordLocalChanges(_:_:scanner:)`` would leave in the outbox, written nowhere: what an offline dry run
    /// reports as the changes a sync would queue.
    private func outboxAfter(_ scan: ScanResult, _ bases: RecordTable<BaseRecord>, scanner: FolderScanner) throws
        -> [RecordName: OutboxItem]
    {
        var outbox = try state.outbox()
        try Self.localChanges(scan, bases, outbox: outbox, scanner: scanner) { edit in
            switch edit {
            case .queue(let item): outbox[item.name] = item
            case .dequeue(let name): outbox[name] = nil
            case .fingerprint: break
            }
        }
        return outbox
    }

    /// One change of the outbox or a base's fingerprint that a scan calls for.
    private enum LocalChangeEdit {
        case queue(OutboxItem)
        case dequeue(RecordName)
        case fingerprint(RecordName, StatFingerprint)
    }

    /// The changes of the outbox (and fingerprints) `scan` calls for, given to `apply` in order.
    private static func localChanges(
        _ scan: ScanResult, _ bases: RecordTable<BaseRecord>, outbox: [RecordName: OutboxItem], scanner: FolderScanner,
        apply: (LocalChangeEdit) throws -> Void
    ) throws {
        let now = Clock.nowNanoseconds()
        // A full scan names the files it hashed: the others have their base's fingerprint and digest.
        let examined = scan.scope == nil ? scan.changed + outbox.keys.filter { scan.files[$0] != nil } : Array(scan.files.keys)
        for name in Set(examined) {
            guard let file = scan.files[name] else { continue }
            if let base = bases[name], base.digest == file.digest {
                if !base.matches(file.fingerprint) { try apply(.fingerprint(name, file.fingerprint)) }
                if outbox[name] != nil { try apply(.dequeue(name)) }
            } else if outbox[name]?.digest != file.digest || outbox[name]?.op != .save {
                try apply(.queue(OutboxItem(name: name, op: .save, digest: file.digest, size: file.size, queued: now)))
            }
        }
        let candidates: [RecordName]
        if let scope = scan.scope {
            candidates = scope.filter { bases[$0] != nil }
        } else {
            candidates = scan.baseMatches < bases.count ? Array(bases.keys) : []
        }
        for name in candidates
        where scan.files[name] == nil && !scan.isUnreadable(name) && outbox[name]?.op != .delete
            && !scanner.isIgnored(name)
        {
            try apply(.queue(OutboxItem(name: name, op: .delete, digest: nil, size: 0, queued: now)))
        }
        for name in outbox.keys where scan.files[name] == nil && scanner.isIgnored(name) { try apply(.dequeue(name)) }
        // A note queued and then deleted or moved away before it reached the server: nothing left to push.
        for name in outbox.keys
        where scan.files[name] == nil && bases[name] == nil && !scan.isUnreadable(name)
            && (scan.scope?.contains(name) ?? true)
        {
            try apply(.dequeue(name))
        }
    }

    /// Saves the token with every head changed since the last save, and the bases of our own commits found
    /// among them (dequeued where the note is still as committed), in one transaction: once the token is past
    /// them they are never fetched again.
    /// Stores the fetched heads and token, and the bases recovered from own unrecorded commits.
    private func saveZone(_ zone: inout ZoneState, recovered: [RecordName: BaseRecord?], scan: ScanResult) throws {
        // The heads straight from the zone: a first sync's are every head, too many to copy into a dictionary first.
        let names = zone.unsaved
        let saved = zone
        try state.update { batch in
            try batch.setZone(token: saved.token, chain: saved.chain, earlier: saved.earlier, names: names) {
                saved.heads[$0]
            }
            for (name, base) in recovered {
                if let base { try batch.setBase(name, base) } else { try batch.removeBase(name) }
                if base?.digest == scan.files[name]?.digest && !scan.isUnreadable(name) && (scan.scope?.contains(name) ?? true) {
                    try batch.dequeue(name)
                }
            }
        }
        zone.markSaved()
    }

    private func offline(
        _ report: SyncReport, _ error: NoteSyncError, _ options: SyncOptions, queued: [RecordName: OutboxItem]?
    ) throws -> SyncReport {
        var report = report
        report.offline = true
        report.offlineReason = error.description
        if let queued {
            report.pending = queued.count
            report.queued = queued.values.sorted { $0.name < $1.name }.map { "\($0.op.rawValue) \($0.name)" }
        } else {
            report.pending = try state.outboxCount()
        }
        if !options.dryRun { try state.setMeta([.lastError: error.description]) }
        logger.notice("server.unreachable", metadata: ["server.path": "\(config.server)"])
        return report
    }

    package func deviceName(_ id: String, store: ServerStore) -> String {
        if id == config.deviceID { return config.deviceName }
        if let known = deviceNames[id] { return known }
        let name = store.deviceName(id)
        deviceNames[id] = name
        return name
    }
}
