import Foundation
import Logging

/// Options of one sync.
public struct SyncOptions: Sendable {
    /// Plan and describe, write nothing anywhere (not the notes, not the server, not the local state).
    public var dryRun = false
    /// Render unified diffs of every planned change into the report.
    public var withDiffs = false
    public var colorDiffs = false
    public var allowMassDelete = false
    public var maxRounds = 8

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

    public init(deviceID: String, deviceName: String, server: String) {
        self.deviceID = deviceID
        self.deviceName = deviceName
        self.server = server
    }

    public init(state: LocalState, folder: NotesFolder) throws {
        guard let id = try state.meta("device.id"), let name = try state.meta("device.name"),
              let server = try state.meta("server.path") else {
            throw NoteSyncError(.notInitialized, path: folder.database, "holds no device or server",
                                fix: "run `notesync init --notes \(folder.root) --server DIR`")
        }
        self.init(deviceID: id, deviceName: name, server: server)
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
    let logger: Logger
    private var deviceNames: [String: String] = [:]
    /// Bases and server state as of the end of the last sync by this engine: the agent's syncs start from
    /// memory instead of reloading every record (only this process writes them: it holds the folder lock).
    private var memo: (bases: [RecordName: BaseRecord], zone: ZoneState)?
    private var store: ServerStore?
    private var lastReportedToken: Int64 = -1

    public init(folder: NotesFolder, state: LocalState, config: FolderConfig, logger: Logger) {
        self.folder = folder
        self.state = state
        self.config = config
        self.logger = logger
    }

    /// Runs one sync. With `only`, a partial sync for the agent: just those paths (relative files or folders),
    /// plus every record the server changed since the last sync.
    public func sync(_ options: SyncOptions = SyncOptions(), only paths: [String]? = nil) throws -> SyncReport {
        var report = SyncReport(dryRun: options.dryRun)
        let scanner = Scanner(root: folder.root, rules: try folder.ignoreRules())
        let remembered = memo
        memo = nil
        var bases = try remembered?.bases ?? state.bases()
        var zone = try remembered?.zone ?? state.zoneState()
        var scan = try scanner.scan(bases: bases, only: paths)
        report.warnings += scan.warnings
        report.warnings += scan.foreignConflicts.map {
            "\($0): a conflict copy made by another sync tool; it syncs as a normal note — compare and delete it"
        }
        if !options.dryRun { try recoverLeftoverTemps(&scan, scanner: scanner, bases: bases, report: &report) }
        if !options.dryRun { try recordLocalChanges(scan, bases) }

        let store: ServerStore
        do {
            store = try openStore()
        } catch let error as NoteSyncError where error.kind == .serverUnreachable || error.kind == .notAServer {
            if !options.dryRun { memo = (bases, zone) }
            return try offline(report, error, options)
        }

        // The heads the last plan saw: a partial sync also plans every record that changed since (fetched, or
        // folded in when a commit lost its slot to another device).
        var planned = zone
        for round in 1...options.maxRounds {
            report.rounds = round
            let before = zone
            let fetched: [SlotContent]
            do { fetched = try store.fetch(into: &zone) } catch let error as NoteSyncError where error.kind == .serverUnreachable {
                if !options.dryRun { memo = (bases, zone) }
                return try offline(report, error, options)
            }
            let recovered = ownUnrecordedCommits(fetched, scan: scan, bases: bases)
            for (name, base) in recovered { bases[name] = base }
            if !options.dryRun { try saveZone(zone, since: before, recovered: recovered, scan: scan) }
            if let scope = scan.scope {
                let changed = Set(zone.heads.keys.filter { planned.heads[$0] != zone.heads[$0] }).subtracting(scope)
                if !changed.isEmpty { scan.merge(try scanner.scan(bases: bases, only: changed.map(\.string))) }
            }
            planned = zone
            let plan = refineWithHistory(Self.plan(scan: scan, bases: bases, zone: zone), zone: zone, store: store)
            try checkMassDelete(plan, scan: scan, bases: bases, options: options)
            if options.dryRun {
                report.changes = try plan.map { try describe($0, scan: scan, bases: bases, zone: zone, store: store, options: options) }
                report.conflictCopies = report.changes.filter { $0.kind == .conflict }.compactMap(\.detail)
                report.warnings += zone.quarantined.map { "quarantined on the server: \($0)" }
                report.pending = plan.filter { if case .push = $0.decision { true } else { false } }.count
                report.token = zone.token
                return report
            }
            let finished: Bool
            do {
                finished = try execute(plan, scan: scan, bases: &bases, zone: &zone, store: store, report: &report)
            } catch let error as NoteSyncError where error.kind == .serverUnreachable {
                return try offline(report, error, options)
            }
            if finished { break }
            scan = try scanner.scan(bases: bases, only: scan.scope.map { $0.map(\.string) })
        }
        if paths == nil { store.removeOwnTemps() }
        report.token = zone.token
        report.warnings += zone.quarantined.map { "quarantined on the server: \($0)" }
        report.pending = try state.outbox().count
        try state.setMeta(["last.sync": String(Clock.nowNanoseconds()), "last.error": nil])
        if zone.token != lastReportedToken {
            try? store.writeDeviceInfo(DeviceInfo(id: config.deviceID, name: config.deviceName,
                                                  lastSeen: Clock.nowNanoseconds(), token: zone.token))
            lastReportedToken = zone.token
        }
        memo = (bases, zone)
        return report
    }

    /// The server, opened once and kept while it stays reachable.
    private func openStore() throws -> ServerStore {
        if let store, FileIO.lstatInfo(store.layout.marker) != nil { return store }
        let opened = try ServerStore(root: config.server, device: config.deviceID, logger: logger)
        store = opened
        return opened
    }

    // MARK: planning

    /// One record's decision, with what the reconciler saw.
    public struct Step: Sendable {
        public var name: RecordName
        public var local: LocalFile?
        public var base: BaseRecord?
        public var decision: Decision
    }

    /// Decides every record: the union of local notes, bases and server heads. Pure.
    public static func plan(scan: ScanResult, bases: [RecordName: BaseRecord], zone: ZoneState) -> [Step] {
        var names: Set<RecordName>
        if let scope = scan.scope {
            names = scope
        } else {
            names = Set(scan.files.keys)
            names.formUnion(bases.keys)
            for (name, head) in zone.heads where !head.deleted || bases[name] != nil { names.insert(name) }
        }
        var steps: [Step] = []
        for name in names.sorted() {
            let file = scan.files[name]
            let local: LocalSide
            if scan.isUnreadable(name) {
                local = .unreadable
            } else if let file {
                local = .present(digest: file.digest, size: file.size, modified: file.modified)
            } else {
                local = .absent
            }
            let decision = Reconciler.decide(local: local, base: bases[name], server: zone.heads[name])
            if decision != .nothing { steps.append(Step(name: name, local: file, base: bases[name], decision: decision)) }
        }
        return steps
    }

    private func checkMassDelete(_ plan: [Step], scan: ScanResult, bases: [RecordName: BaseRecord],
                                 options: SyncOptions) throws {
        guard !options.allowMassDelete else { return }
        let deletes = plan.filter { step in
            switch step.decision {
            case .push(nil, _): return true
            case .pull(let head): return head.deleted && step.local != nil
            default: return false
            }
        }.count
        let total = max(bases.count, scan.files.count)
        if deletes >= 3 && deletes * 2 > total {
            throw NoteSyncError(.safetyStop, path: folder.root,
                                "this sync would delete \(deletes) of \(total) notes; stopped to be safe "
                                    + "(an unmounted folder or a replaced server looks like this)",
                                fix: "check both folders with `notesync diff`; if the deletes are wanted, run `notesync sync --allow-mass-delete`")
        }
    }

    // MARK: local bookkeeping

    /// Queues every local change in the outbox (it survives crashes and offline periods) and refreshes the
    /// fingerprints of notes whose content did not change (a `touch`), so they are not hashed again.
    private func recordLocalChanges(_ scan: ScanResult, _ bases: [RecordName: BaseRecord]) throws {
        let outbox = try state.outbox()
        let now = Clock.nowNanoseconds()
        try state.update { batch in
            for (name, file) in scan.files {
                if let base = bases[name], base.digest == file.digest {
                    if base.fingerprint != file.fingerprint { try batch.setFingerprint(name, file.fingerprint) }
                    if outbox[name] != nil { try batch.dequeue(name) }
                } else if outbox[name]?.digest != file.digest || outbox[name]?.op != .save {
                    try batch.queue(OutboxItem(name: name, op: .save, digest: file.digest, size: file.size, queued: now))
                }
            }
            let candidates = scan.scope.map { Array($0.filter { bases[$0] != nil }) } ?? Array(bases.keys)
            for name in candidates where scan.files[name] == nil && !scan.isUnreadable(name) && outbox[name]?.op != .delete {
                try batch.queue(OutboxItem(name: name, op: .delete, digest: nil, size: 0, queued: now))
            }
            // A note queued and then deleted or moved away before it reached the server: nothing left to push.
            for name in outbox.keys where scan.files[name] == nil && bases[name] == nil && !scan.isUnreadable(name)
                && (scan.scope?.contains(name) ?? true) {
                try batch.dequeue(name)
            }
        }
    }

    /// Saves the fetched heads and token, and the bases of our own commits found among them (dequeued where the
    /// note is still as committed), in one transaction: once the token is past them they are never fetched again.
    private func saveZone(_ zone: ZoneState, since before: ZoneState, recovered: [RecordName: BaseRecord?],
                          scan: ScanResult) throws {
        guard zone.token != before.token else { return }
        let changed = zone.heads.filter { before.heads[$0.key] != $0.value }
        try state.update { batch in
            try batch.setZone(token: zone.token, changed: changed)
            for (name, base) in recovered {
                if let base { try batch.setBase(base) } else { try batch.removeBase(name) }
                if base?.digest == scan.files[name]?.digest && !scan.isUnreadable(name) && (scan.scope?.contains(name) ?? true) {
                    try batch.dequeue(name)
                }
            }
        }
    }

    private func offline(_ report: SyncReport, _ error: NoteSyncError, _ options: SyncOptions) throws -> SyncReport {
        var report = report
        report.offline = true
        report.offlineReason = error.description
        report.pending = try state.outbox().count
        if !options.dryRun { try state.setMeta(["last.error": error.description]) }
        logger.notice("server.unreachable", metadata: ["server.path": "\(config.server)"])
        return report
    }

    func deviceName(_ id: String, store: ServerStore) -> String {
        if id == config.deviceID { return config.deviceName }
        if let known = deviceNames[id] { return known }
        let name = store.deviceInfo(id)?.name ?? id
        deviceNames[id] = name
        return name
    }
}
