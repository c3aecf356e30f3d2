import Foundation
import GRDB
import Synchronization

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

// MARK: - Time and faults

/// Thrown at a fault point: the process dies there.
struct SimulatedCrash: Error, CustomStringConvertible {
    var point: String
    var description: String { "simulated crash at \(point)" }
}

/// The logical clock the users (note mtimes) and the engines (``Clock/nowNanoseconds()``) share: a run never
/// reads the wall clock, so the same schedule makes the same decisions ("the later `modified` wins") every time.
final class SimClock: Sendable {
    private let value: Mutex<Int64>

    init(start: Int64) { value = Mutex(start) }

    func advance(by step: Int64) -> Int64 {
        value.withLock { now in
            now += step
            return now
        }
    }
}

/// The faults the current sync is armed with, and a crash's aftermath: what a real crash would have left.
///
/// A simulated crash is a thrown error, and unwinding runs the `defer`s that remove temp files; a killed process
/// runs none. So at the crash the injector hard-links every temp file of the device and of the server aside,
/// and ``restoreAfterCrash()`` puts back the ones the unwinding removed: the disk is as the crash left it.
final class SimFaultInjector: Sendable {
    /// What to do during one sync, by fault point index (the n-th point passed) or by point name and occurrence.
    struct Plan: Sendable {
        var crashAt: Int?
        var crashAtPoint: (name: String, occurrence: Int)?
        var partitionAt: Int?
        /// A user's save in the middle of the sync: append `line` to the note at `path` (relative `note`).
        var edit: (at: Int, path: String, note: String, line: String)?
        /// Another device's whole sync in the middle of this one.
        var race: (at: Int, sync: SimRace)?
    }

    /// A mid-sync save that happened: the note's lines before and after.
    struct Edit: Sendable {
        var note: String
        var before: [String]?
        var after: [String]
    }

    private struct State {
        var plan = Plan()
        var hits = 0
        var pointHits: [String: Int] = [:]
        var fired: String?
        var edited: Edit?
        var raced = false
        /// Inside a raced sync of another device: its fault points are not this sync's.
        var nested = false
        var notesRoot = ""
        var stashed: [(original: String, stash: String)] = []
        var stashCount = 0
    }

    private let state = Mutex(State())
    let serverRoot: String
    let awayRoot: String
    let stashDirectory: String
    let clock: SimClock
    let clockStep: Int64

    init(serverRoot: String, awayRoot: String, stashDirectory: String, clock: SimClock, clockStep: Int64) {
        self.serverRoot = serverRoot
        self.awayRoot = awayRoot
        self.stashDirectory = stashDirectory
        self.clock = clock
        self.clockStep = clockStep
    }

    /// Arms `plan` for the next sync of the device whose notes folder is `notesRoot`.
    func arm(_ plan: Plan, notesRoot: String) {
        state.withLock { state in
            state.plan = plan
            state.hits = 0
            state.pointHits = [:]
            state.fired = nil
            state.edited = nil
            state.raced = false
            state.nested = false
            state.notesRoot = notesRoot
        }
    }

    /// Disarms; returns the point where a crash or partition fired, the number of points passed, the mid-sync
    /// save if one happened, and whether another device synced in the middle.
    func disarm() -> (fired: String?, hits: Int, edited: Edit?, raced: Bool) {
        state.withLock { state in
            defer { state.plan = Plan() }
            return (state.fired, state.hits, state.edited, state.raced)
        }
    }

    private enum Action {
        case crash, partition
        case edit(path: String, note: String, line: String)
        case race(SimRace)
    }

    /// The hook: counts the point and does what the plan says at it.
    func hit(_ name: StaticString) throws {
        let point = "\(name)"
        let (actions, notesRoot): ([Action], String) = state.withLock { state in
            guard !state.nested else { return ([], state.notesRoot) }
            let index = state.hits
            state.hits += 1
            let occurrence = state.pointHits[point, default: 0]
            state.pointHits[point] = occurrence + 1
            var actions: [Action] = []
            if let edit = state.plan.edit, edit.at == index { actions.append(.edit(path: edit.path, note: edit.note, line: edit.line)) }
            if let race = state.plan.race, race.at == index { actions.append(.race(race.sync)) }
            guard state.fired == nil else { return (actions, state.notesRoot) }
            if state.plan.crashAt == index
                || state.plan.crashAtPoint.map({ $0.name == point && $0.occurrence == occurrence }) == true
            {
                state.fired = point
                actions.append(.crash)
            } else if state.plan.partitionAt == index {
                state.fired = point
                actions.append(.partition)
            }
            return (actions, state.notesRoot)
        }
        for action in actions {
            switch action {
            case .edit(let path, let note, let line):
                let edited = userSave(path: path, note: note, line: line)
                state.withLock { $0.edited = edited }
            case .crash:
                stashTemps(notesRoot: notesRoot)
                throw SimulatedCrash(point: point)
            case .partition:
                if rename(serverRoot, awayRoot) != 0 { fatalError("cannot take the server away: \(errno)") }
            case .race(let race):
                state.withLock {
                    $0.nested = true
                    $0.raced = true
                }
                race.run()
                state.withLock { $0.nested = false }
            }
        }
    }

    /// The user appends a line to a note and saves it in place, in the middle of a sync.
    private func userSave(path: String, note: String, line: String) -> Edit {
        let before = (try? FileIO.read(path)).flatMap { $0 }.map(SyncHarness.lines)
        let after = (before ?? []) + [line]
        try? FileIO.makeDirectories(FileIO.parent(of: path))
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644)
        if fd >= 0 {
            try? FileIO.writeAll(fd: fd, SyncHarness.text(after), path: path)
            close(fd)
            try? SyncHarness.setModified(path, clock.advance(by: clockStep))
        }
        return Edit(note: note, before: before, after: after)
    }

    private func stashTemps(notesRoot: String) {
        var temps: [String] = []
        func visit(_ directory: String) {
            for entry in (try? FileIO.list(directory)) ?? [] {
                let path = directory + "/" + entry
                guard let info = FileIO.lstatInfo(path) else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    if directory != notesRoot || entry != ReservedNames.stateDirectoryName { visit(path) }
                } else if entry.hasPrefix(ReservedNames.agentTempPrefix) {
                    temps.append(path)
                }
            }
        }
        visit(notesRoot)
        // Everything in the staging folder is a temp of an apply (a version on its way in or out of a note).
        func visitStaging(_ directory: String) {
            for entry in (try? FileIO.list(directory)) ?? [] {
                let path = directory + "/" + entry
                guard let info = FileIO.lstatInfo(path) else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR { visitStaging(path) } else { temps.append(path) }
            }
        }
        visitStaging(NotesFolder(root: notesRoot).staging)
        let serverTemp = ServerLayout(root: serverRoot).tmpDirectory
        temps += ((try? FileIO.list(serverTemp)) ?? []).map { serverTemp + "/" + $0 }
        state.withLock { state in
            for temp in temps {
                state.stashCount += 1
                let stash = stashDirectory + "/\(state.stashCount)"
                if link(temp, stash) == 0 { state.stashed.append((temp, stash)) }
            }
        }
    }

    /// Puts back the temp files that existed at the crash and that the unwinding removed.
    func restoreAfterCrash() {
        let stashed = state.withLock { state in
            defer { state.stashed = [] }
            return state.stashed
        }
        for (original, stash) in stashed {
            if FileIO.lstatInfo(original) == nil {
                // The unwinding may have removed the temp's own staging folder too.
                try? FileIO.makeDirectories(FileIO.parent(of: original))
                if rename(stash, original) != 0 { fatalError("cannot restore \(original) after a simulated crash: \(errno)") }
            } else {
                unlink(stash)
            }
        }
    }
}

/// Another device's sync, run by the fault hook in the middle of one: the closure captures the runner, which is
/// not Sendable, but the hook runs on the one thread that runs the schedule (inside the engine's synchronous
/// sync), never concurrently with anything else of the runner.
final class SimRace: @unchecked Sendable {
    let run: () -> Void

    init(_ run: @escaping () -> Void) { self.run = run }
}

// MARK: - Devices

/// One device of the simulation: a notes folder with its persistent local state, and the engine of its process.
final class SimDevice {
    let index: Int
    let id: String
    let name: String
    let folder: NotesFolder
    let serverRoot: String
    let unreachableServer: String
    private(set) var state: LocalState
    private(set) var engine: SyncEngine
    /// The device's server path points to a missing folder.
    var offline = false
    /// The process just started (or restarted, or failed): its next sync scans everything, as the agent does.
    var needFull = true
    /// Paths the user touched since the device's last finished sync: a partial sync's scope.
    var dirty: Set<String> = []
    /// The agent's path (``SimSchedule/Watch``): the events inotify gave and the watch has not delivered yet (those
    /// of one user change together, oldest first, as inotify queues them), the agent's settler, and the agent's clock.
    var undelivered: [[WatchEvent]] = []
    /// How many of the first ``undelivered`` changes were already late at the last partial sync: the watch
    /// delivers them at the next one, never later.
    var carriedLate = 0
    var settler = EventSettler<FakeInstant>(AgentOptions())
    var watchNow = FakeInstant.zero

    /// What inotify says of a user's change, as the agent's watch reads it (WatchEvent.swift): a path changed or
    /// gone, or a rename with both names.
    enum WatchEvent {
        case noted(String)
        case renamed(String, to: String)
    }

    /// `notesRoot`: the notes folder, where it is not `root/<name>` (a case-folding folder, in its mount).
    init(index: Int, root: String, serverRoot: String, notesRoot: String? = nil) throws {
        self.index = index
        id = SimDevice.ids[index]
        name = SimDevice.names[index]
        folder = NotesFolder(root: notesRoot ?? root + "/" + name)
        self.serverRoot = serverRoot
        unreachableServer = root + "/unreachable-" + name
        try FileIO.makeDirectories(folder.root)
        try FileIO.makeDirectory(folder.stateDirectory)
        try Self.emptyState.get().write(to: URL(fileURLWithPath: folder.database))
        state = try LocalState(path: folder.database)
        engine = SyncEngine(
            folder: folder, state: state, config: try Self.config(id: id, name: name, server: serverRoot, state: state),
            logger: testLogger)
        let store = try ServerStore(root: serverRoot, device: id, logger: testLogger, vault: TestServer.vault)
        try store.writeDeviceInfo(DeviceInfo(id: id, name: name, lastSeen: 0, token: 0))
    }

    /// A new, migrated local state database, copied for every device instead of running the migrations each time
    /// (a soak makes hundreds of thousands). LocalState opens it as it opens any state file.
    static let emptyState: Result<Data, any Error> = Result {
        let directory = try SimScratch(in: SimRunner.baseDirectory)
        let path = directory.sub("template.sqlite")
        try LocalState(path: path).checkpoint()
        return try FileIO.read(path) ?? Data()
    }

    static let ids = SyncHarness.deviceIDs
    static let names = SyncHarness.deviceNames

    /// A new process: the local state reopened from its file, a new engine (its server path as connectivity says).
    func restart() throws {
        state = try LocalState(path: folder.database)
        let server = offline ? unreachableServer : serverRoot
        engine = SyncEngine(
            folder: folder, state: state, config: try Self.config(id: id, name: name, server: server, state: state),
            logger: testLogger)
        needFull = true
        // A new process watches anew: what the old one had not synced, its first (full) sync scans.
        undelivered = []
        carriedLate = 0
        settler.removeAll()
    }

    /// The configuration a process reads from the local state (the server id it is bound to included).
    private static func config(id: String, name: String, server: String, state: LocalState) throws -> FolderConfig {
        FolderConfig(deviceID: id, deviceName: name, server: server, serverID: try state.meta(.serverID))
    }
}

// MARK: - Findings and figures

/// What a simulation run found wrong, by invariant (research/reliability.md §1.10). Every entry names the step.
struct SimFindings: CustomStringConvertible, Sendable {
    var harness: [String] = []
    var lostWrites: [String] = []
    var unrequestedDeletes: [String] = []
    var convergence: [String] = []
    var termination: [String] = []
    var idempotence: [String] = []
    var selfEcho: [String] = []
    var confinement: [String] = []
    var offline: [String] = []
    var dryRun: [String] = []
    /// A device a server fault affects that synced (or ran a dry run) without reporting it, or reported another
    /// condition than the one it finds: the rule *no device silently stops syncing* (SimServerOracle.swift).
    var silentStops: [String] = []
    /// A text the server's heads or the versions its retention keeps reference, missing from the server (gc).
    var missingTexts: [String] = []

    var all: [(String, [String])] {
        [
            ("harness", harness), ("lost writes", lostWrites), ("unrequested deletes", unrequestedDeletes),
            ("convergence", convergence), ("termination", termination), ("idempotence", idempotence),
            ("self-echo", selfEcho), ("confinement", confinement), ("offline", offline), ("dry run", dryRun),
            ("silent stops", silentStops), ("missing texts", missingTexts)
        ]
    }

    var isEmpty: Bool { all.allSatisfy { $0.1.isEmpty } }
    var count: Int { all.reduce(0) { $0 + $1.1.count } }

    var description: String {
        all.filter { !$0.1.isEmpty }.map { label, found in
            "\(label):\n  "
                + (found.prefix(8) + (found.count > 8 ? ["… and \(found.count - 8) more"] : []))
                .joined(separator: "\n  ")
        }.joined(separator: "\n")
    }
}

/// Counts over one or many runs, for scripts/soak.
struct SimFigures: Sendable {
    var schedules = 0
    var steps = 0
    /// User operations: edits, deletes, moves, folder deletes, touches.
    var operations = 0
    var syncs = 0
    var crashes = 0
    /// Offline periods: a device cut off, the server gone for everyone, the server lost in the middle of a sync.
    var partitions = 0
    var midSyncPartitions = 0
    /// Users' saves in the middle of a sync (between its scan and its apply, or between the steps of an apply).
    var midSyncEdits = 0
    /// Syncs of another device run in the middle of one (two devices committing at once).
    var races = 0
    var healingRounds = 0
    /// Server faults (backups restored, servers replaced, entries lost or delivered late) and the recoveries that
    /// followed them (`recover`, `fsck --repair`).
    var serverFaults = 0
    var recoveries = 0
    /// Syncs and dry runs of devices a server fault affected, each of which reported the fault as it must.
    var faultReports = 0
    /// Users' mass deletes, the syncs that held them (whole), and restores of an earlier version.
    var massDeletes = 0
    var heldSyncs = 0
    var restores = 0
    /// gc runs (format 3), those killed at one of their fault points, and the files their sweeps removed.
    var gcRuns = 0
    var gcKills = 0
    var gcRemoved = 0
    /// The agent's path: partial syncs scoped by the settler, events the watch delivered late, renames it saw as a
    /// delete and a create.
    var watchSyncs = 0
    var lateEvents = 0
    var splitRenames = 0
    /// Users' `chmod 600` of a note, and versions a sync wrote over such a note (which stayed 0600).
    var privateNotes = 0
    var privateRewrites = 0
    /// Schedules that drew each filesystem personality other than plain for at least one notes folder (a
    /// case-folding one only where it was mounted).
    var filesystems: [String: Int] = [:]
    /// Schedules that drew a case-folding folder where none could be mounted (run plain); users' actions on a
    /// name spelled in another case than the pool's; names that waited on a case-folding device at the end (a
    /// case pair on the server, one file there).
    var caseFoldingUnmounted = 0
    var caseVariants = 0
    var casePairWaits = 0
    /// Schedules with at least one invariant violated, and the violations found.
    var failedSchedules = 0
    var violations = 0
    var crashPoints: [String: Int] = [:]
    /// Time spent in each phase of the runs (setup, steps, healing, checks).
    var phases: [String: Duration] = [:]

    mutating func add(_ other: SimFigures) {
        schedules += other.schedules
        steps += other.steps
        operations += other.operations
        syncs += other.syncs
        crashes += other.crashes
        partitions += other.partitions
        midSyncPartitions += other.midSyncPartitions
        midSyncEdits += other.midSyncEdits
        races += other.races
        healingRounds += other.healingRounds
        serverFaults += other.serverFaults
        recoveries += other.recoveries
        faultReports += other.faultReports
        massDeletes += other.massDeletes
        heldSyncs += other.heldSyncs
        restores += other.restores
        gcRuns += other.gcRuns
        gcKills += other.gcKills
        gcRemoved += other.gcRemoved
        watchSyncs += other.watchSyncs
        lateEvents += other.lateEvents
        splitRenames += other.splitRenames
        failedSchedules += other.failedSchedules
        violations += other.violations
        privateNotes += other.privateNotes
        privateRewrites += other.privateRewrites
        filesystems.merge(other.filesystems, uniquingKeysWith: +)
        caseFoldingUnmounted += other.caseFoldingUnmounted
        caseVariants += other.caseVariants
        casePairWaits += other.casePairWaits
        crashPoints.merge(other.crashPoints, uniquingKeysWith: +)
        phases.merge(other.phases, uniquingKeysWith: +)
    }
}

extension LocalState {
    /// Folds the write-ahead log into the database file, so that the file alone holds everything.
    func checkpoint() throws {
        try queue.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
    }
}
