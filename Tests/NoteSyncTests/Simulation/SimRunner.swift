import Foundation
import PropertyBased
import Synchronization
import Testing

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

extension Trait where Self == ConditionTrait {
    /// The simulation's server is a folder of its own whatever ``TestServer`` says: its faults act on the folder.
    static var simulationFolder: Self {
        .folderOnly("the simulation's faults act on its server folder: renamed away, files lost, held, restored")
    }
}

/// Runs one ``SimSchedule`` on real folders: 3–5 devices with persistent local state and one server directory,
/// all in-process through ``SyncEngine`` as the agent drives it, then heals (server back, every device online,
/// full syncs round-robin until a round changes nothing) and checks every invariant.
///
/// Faults come from ``FaultPoint``: the engine runs with hooks that count the named points of the commit and of
/// the local apply and fire the sync's fault at its index: a crash (the device restarts from what it persisted,
/// temp files left as a crash leaves them) or a partition (the server folder goes away for everyone).
///
/// The judge is the history model of SyncHarness.swift (``SyncHistoryModel``): knowledge travels only through
/// syncs that finished, so what it decides is what the engine must do whatever crashed in between.
final class SimRunner {
    let schedule: SimSchedule
    let world: SimScratch
    let serverRoot: String
    let awayRoot: String
    let stashDirectory: String
    let clock = SimClock(start: SyncHarness.epoch)
    let injector: SimFaultInjector
    var devices: [SimDevice] = []
    var model: SyncHistoryModel
    var findings = SimFindings()
    var figures = SimFigures()
    let rules: IgnoreRules
    private let checker: ServerStore
    private var checkerState = ZoneState()
    private var texts: [AssetRef: Data] = [:]
    private var serverDown = false
    /// A server fault happened and was not recovered yet: devices may find the server behind them, replaced, or with
    /// a gap in its log, and must say so (their syncs throw) until healing runs the documented recovery.
    private var serverHistoryBroken = false
    /// Entries taken out of the log by ``SimSchedule/ServerFault/holdEntry``, to be delivered later: (slot, held file).
    private var heldEntries: [(seq: Int64, file: String)] = []
    private var backupRoot: String { world.sub("server-backup") }
    private var heldRoot: String { world.sub("server-held") }
    /// Names that were ever a note somewhere, and names some user deleted (or moved away, or removed with a
    /// folder): a name in the first set and not in the second must exist at the end.
    private var everSeen: Set<String> = []
    private var userDeleted: Set<String> = []
    private var touched: Set<String> = []
    /// Names that were a note on the server at some finished sync, and names a user made that a folding device's
    /// finished sync took as the file of a server record of another case (``foldedAway(_:server:)``).
    private var everOnServer: Set<String> = []
    private var foldedNames: Set<String> = []
    /// Per device, the notes a sync that did not finish (killed, or the server gone midway) wrote or made there, until
    /// the device's next finished sync: a pull renamed into place or a conflict copy, not yet recorded.
    private var unconfirmed: [Set<String>] = []
    /// Notes a user touched, edited, deleted or moved while they were unconfirmed. The next sync cannot tell such a
    /// note from one it never wrote, and takes the safe side: it writes a deleted one again (a pull, a conflict copy
    /// of a server version), and uploads a touched one as a new note. No text is lost, but the end of these notes
    /// is not decided by the history; their lines are still checked.
    private var undecided: Set<String> = []
    private var textsSaved: [String: Set<[String]>] = [:]
    /// Every rename a user made: the model's event for it (the old name's delete) and the names. An edit of the old
    /// name that the rename never heard of (nor it of the rename) must reach the note wherever its record is at the
    /// end (``checkEditsFollowRenames``).
    private var userMoves: [(event: Int, source: String, destination: String)] = []
    /// Names a user moved a note to: the note may leave such a name again when another device's later rename of it
    /// wins; its lines are still checked.
    private var movedTo: Set<String> = []
    private var at = "setup"
    /// Per device, the notes its user made private (`chmod 600`) on a folder that keeps modes (``checkPrivateNotes``).
    /// With the inode each had when last checked: a new one is a version written over it.
    private var privateNotes: [[String: UInt64]] = []
    /// The draws of the agent's path (``SimSchedule/Watch``), nil without it.
    private var watchDraws: Xoshiro?
    /// `NOTESYNC_SIM_TRACE=1` prints every step and what each sync did.
    private static let tracing = ProcessInfo.processInfo.environment["NOTESYNC_SIM_TRACE"] != nil

    private func trace(_ line: @autoclosure () -> String) {
        if Self.tracing { print("[sim] " + line()) }
    }

    /// The folder simulations run in: `NOTESYNC_SIM_DIR`, else /dev/shm (tmpfs: no disk flushes, faster), else
    /// the system temp folder.
    static let baseDirectory: String = {
        if let configured = ProcessInfo.processInfo.environment["NOTESYNC_SIM_DIR"], !configured.isEmpty { return configured }
        if access("/dev/shm", W_OK) == 0 { return "/dev/shm" }
        return NSTemporaryDirectory()
    }()

    /// ``run(_:)`` on a thread of its own, for tests. A simulation is minutes of blocking work: run on the
    /// cooperative pool (one thread per core, two on CI) it holds every thread, and the async tests running beside
    /// it (the watcher's, the agent's) starve until their timeouts expire.
    static func runOffThePool(_ schedule: SimSchedule) async -> (findings: SimFindings, figures: SimFigures) {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: run(schedule)) }
            thread.stackSize = 8 << 20
            thread.name = "notesync-simulation"
            thread.start()
        }
    }

    /// Runs `schedule` and returns what it found, with the run's figures.
    static func run(_ schedule: SimSchedule) -> (findings: SimFindings, figures: SimFigures) {
        do {
            let start = ContinuousClock.now
            var runner: SimRunner? = try SimRunner(schedule)
            runner?.figures.phases["setup", default: .zero] += ContinuousClock.now - start
            runner?.runAll()
            let findings = runner?.findings ?? SimFindings()
            var figures = runner?.figures ?? SimFigures()
            let end = ContinuousClock.now
            runner = nil
            figures.phases["teardown", default: .zero] += ContinuousClock.now - end
            figures.schedules = 1
            figures.violations = findings.count
            figures.failedSchedules = findings.isEmpty ? 0 : 1
            return (findings, figures)
        } catch {
            var findings = SimFindings()
            findings.harness.append("setup failed: \(error)")
            return (findings, SimFigures(schedules: 1, failedSchedules: 1, violations: 1))
        }
    }

    init(_ schedule: SimSchedule) throws {
        self.schedule = schedule
        world = try SimScratch(in: Self.baseDirectory)
        serverRoot = world.sub("server")
        awayRoot = world.sub("server-away")
        stashDirectory = world.sub("stash")
        try FileIO.makeDirectory(stashDirectory)
        try TestServer.create(serverRoot)
        injector = SimFaultInjector(
            serverRoot: serverRoot, awayRoot: awayRoot, stashDirectory: stashDirectory, clock: clock,
            clockStep: schedule.clockStep)
        model = SyncHistoryModel(deviceCount: schedule.deviceCount)
        rules = try IgnoreRules(userRules: nil)
        checker = try ServerStore(root: serverRoot, device: "checker", logger: testLogger, vault: TestServer.vault)
        unconfirmed = Array(repeating: [], count: schedule.deviceCount)
        privateNotes = Array(repeating: [:], count: schedule.deviceCount)
        if let watch = schedule.watch {
            watchDraws = Xoshiro(seed: (watch.seed, watch.seed ^ 0x9E37_79B9_7F4A_7C15, ~watch.seed, watch.seed &* 31 | 1))
        }
        if (0..<schedule.deviceCount).contains(where: { filesystem(of: $0) == .caseFolding }) {
            foldingMount = SimCaseFolding.acquire()
        }
        for index in 0..<schedule.deviceCount {
            // Before the device's folders are made: they get what its filesystem gives them.
            let filesystem = filesystem(of: index)
            if filesystem == .caseFolding, let mount = foldingMount {
                // Really case-folding, and really without rename flags: nothing to simulate.
                let root = mount + "/" + (world.path as NSString).lastPathComponent + "-" + SimDevice.names[index]
                foldingRoots.append(root)
                devices.append(try SimDevice(index: index, root: world.path, serverRoot: serverRoot, notesRoot: root))
                continue
            }
            SimulatedFolders.set(
                .init(lacking: filesystem.lacking, fixedMode: filesystem.fixedMode), forFolder: world.path + "/" + SimDevice.names[index])
            devices.append(try SimDevice(index: index, root: world.path, serverRoot: serverRoot))
        }
        for filesystem in Set((0..<schedule.deviceCount).map(filesystem(of:))) where filesystem != .plain {
            figures.filesystems["\(filesystem)", default: 0] += 1
        }
        if schedule.filesystems?.contains(.caseFolding) == true && SimCaseFolding.root == nil { figures.caseFoldingUnmounted = 1 }
    }

    deinit {
        for index in 0..<schedule.deviceCount { SimulatedFolders.set(nil, forFolder: world.path + "/" + SimDevice.names[index]) }
        for root in foldingRoots { try? FileManager.default.removeItem(atPath: root) }
        if let foldingMount { SimCaseFolding.release(foldingMount) }
    }

    // MARK: - Filesystem personalities

    /// The personality of device `index`'s notes folder (``SimSchedule/Filesystem``): the rename flags and links
    /// ``FolderRename`` finds refused there come from ``SimulatedFolders``, on whatever thread the engine works.
    func filesystem(of index: Int) -> SimSchedule.Filesystem {
        let drawn = schedule.filesystems.flatMap { index < $0.count ? $0[index] : nil } ?? .plain
        // Where no case-folding folder can be mounted, such a device runs plain.
        return drawn == .caseFolding && SimCaseFolding.root == nil ? .plain : drawn
    }

    /// The ``SimCaseFolding`` mount this run's folding devices keep their notes folders in, and those folders,
    /// removed when the run ends.
    private var foldingMount: String?
    private var foldingRoots: [String] = []

    private func folds(_ device: SimDevice) -> Bool { filesystem(of: device.index) == .caseFolding }

    /// The case-pair warnings of a finished sync that name no record waiting after it (``SyncEngine/caseWaiting(_:)``):
    /// a pair the same sync settled (a pulled rename of one of it) is not said.
    private func staleCasePairWarnings(_ device: SimDevice, _ warnings: [SyncWarning]) -> [SyncWarning] {
        let said = warnings.filter { $0.kind == .casePair }
        guard !said.isEmpty else { return [] }
        let waiting = Set(((try? SyncEngine.caseWaiting(device.state)) ?? [:]).keys.map(\.description))
        return said.filter { !waiting.contains($0.path ?? "") }
    }

    /// `warnings` less the one a notes folder without rename flags and links gives (``FolderGuarantees``): said
    /// there, and only there.
    private func folderWarningsTaken(_ device: SimDevice, _ warnings: [SyncWarning]) -> [SyncWarning] {
        guard filesystem(of: device.index).lacking.contains(.links) else { return warnings }
        return warnings.filter { !($0.kind == .folder && $0.message.contains("no rename-without-replace")) }
    }

    /// What `notesync status` says each notes folder lacks is what its filesystem lacks (after healing, every
    /// device has probed its folder).
    private func checkFolderLacks() throws {
        for device in devices {
            let lacking = filesystem(of: device.index).lacking
            let expected =
                (lacking.contains(.exchange) ? ["rename-exchange"] : []) + (lacking.contains(.noReplace) ? ["rename-without-replace"] : [])
                + (lacking.contains(.links) ? ["hard links"] : [])
            let said = try SyncEngine.folderLacks(device.state)?.missing
            if said != expected {
                findings.harness.append("\(at): \(device.name)'s status says its folder lacks \(said ?? ["?"]), not \(expected)")
            }
        }
    }

    /// Every note a user made private on a folder that keeps modes is still 0600 while it is at that name: a pulled
    /// version, a merge or a restore written over it keeps its mode. A note gone from the name is no longer followed
    /// (what a sync writes there later is a new file).
    private func checkPrivateNotes(_ device: SimDevice) {
        for (note, known) in privateNotes[device.index].sorted(by: { $0.key < $1.key }) {
            // On a case-folding folder the name finds the file of a record it folds to (the note renamed to another
            // case elsewhere): that is the note gone from the name.
            let moved = folds(device) && (try? recordName(device, note)) != note
            guard !moved, let info = FileIO.lstatInfo(device.folder.root + "/" + note), (info.st_mode & S_IFMT) == S_IFREG else {
                privateNotes[device.index][note] = nil
                continue
            }
            if info.st_mode & 0o777 != 0o600 {
                findings.harness.append(
                    "\(at): \(device.name)'s private note \(note) is mode \(String(info.st_mode & 0o777, radix: 8)), not 600")
                privateNotes[device.index][note] = nil
            } else if UInt64(info.st_ino) != known {
                figures.privateRewrites += 1
                privateNotes[device.index][note] = UInt64(info.st_ino)
            }
        }
    }

    private func inode(_ path: String) -> UInt64 { FileIO.lstatInfo(path).map { UInt64($0.st_ino) } ?? 0 }

    /// What a filesystem without modes shows of a device's folder after a step: every file and folder the fixed mode,
    /// whoever made it (the engine's state database and lock too, made with modes of their own) and whatever chmod
    /// was asked. Only what differs is changed.
    private func settleModes(_ device: SimDevice) {
        guard let fixed = filesystem(of: device.index).fixedMode else { return }
        func visit(_ path: String) {
            guard let info = FileIO.lstatInfo(path) else { return }
            let kind = info.st_mode & S_IFMT
            guard kind == S_IFREG || kind == S_IFDIR else { return }
            if info.st_mode & 0o7777 != fixed { chmod(path, fixed) }
            guard kind == S_IFDIR, let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
            for name in names { visit(path + "/" + name) }
        }
        visit(device.folder.root)
    }

    func runAll() {
        let injector = injector
        let clock = clock
        let hooks = FaultPoint.Hooks(hit: { try injector.hit($0) }, now: { clock.advance(by: 1_000) })
        FaultPoint.with(hooks) {
            do {
                var mark = ContinuousClock.now
                func phase(_ name: String) {
                    let now = ContinuousClock.now
                    figures.phases[name, default: .zero] += now - mark
                    mark = now
                }
                for (index, step) in schedule.steps.enumerated() {
                    at = "step \(index + 1) (\(SimDevice.names[step.device]) \(step.action.code))"
                    figures.steps += 1
                    trace(at)
                    try perform(step)
                    for device in devices {
                        settleModes(device)
                        checkPrivateNotes(device)
                    }
                    if Self.tracing { try traceNotes(devices[step.device]) }
                }
                phase("steps")
                at = "healing"
                guard try heal() else { return }
                phase("healing")
                at = "after healing"
                try checkFinalState()
                try checkFolderLacks()
                try checkServerTexts()
                phase("final checks")
                try checkIdempotent()
                phase("idempotence")
                try checkConfinement()
                phase("confinement")
            } catch {
                findings.harness.append("\(at): \(error)")
            }
        }
    }

    // MARK: - Steps

    private func perform(_ step: SimSchedule.Step) throws {
        let device = devices[step.device]
        switch step.action {
        case .edit(let target, let edit, let style):
            figures.operations += 1
            let typed = try typedName(target, device)
            try userEdit(device, folds(device) ? recordName(device, typed) : typed, edit, style, typed: typed)
        case .delete(let target):
            figures.operations += 1
            let note = try resolve(target, device)
            guard let before = try read(device, note) else { return }
            noteActedOn(device, note)
            try check(unlink(device.folder.root + "/" + note) == 0, "unlink \(note)")
            model.deleted(device: device.index, note: note, before: SyncHarness.lines(before))
            userDeleted.insert(note)
            changed(device, [note])
        case .move(let target, let destinationIndex):
            figures.operations += 1
            try moveNote(device, try resolve(target, device), to: SimSchedule.pool[destinationIndex % SimSchedule.pool.count])
        case .respell(let target, let variant):
            let source = try resolve(target, device)
            let variants = SimSchedule.caseVariants(of: source)
            guard !variants.isEmpty else { return }
            figures.operations += 1
            figures.caseVariants += 1
            try moveNote(device, source, to: variants[variant % variants.count])
        case .moveFolder(let target, let destinationIndex):
            figures.operations += 1
            let note = try resolve(target, device)
            let components = note.split(separator: "/")
            let top = String(components[0])
            guard components.count > 1, FileIO.lstatInfo(device.folder.root + "/" + top) != nil else { return }
            // The pool's other top folder, or the folder's name with a digit: never over a folder that exists.
            let other = SimSchedule.pool[destinationIndex % SimSchedule.pool.count].split(separator: "/").first.map(String.init)
            let candidates = [other, top + "2", top + "3"].compactMap { $0 }.filter { $0 != top && !$0.contains(".") }
            guard let newTop = candidates.first(where: { FileIO.lstatInfo(device.folder.root + "/" + $0) == nil }) else { return }
            // On a case-folding folder the folder may be spelled otherwise, and hold records of other spellings.
            let spelledTop = folds(device) ? SimCaseFolding.spelling(of: top, in: device.folder.root) : top
            let moved = try recordNotes(device).filter { $0.value.spelling.hasPrefix(spelledTop + "/") }
            for name in moved.keys { noteActedOn(device, name) }
            try check(rename(device.folder.root + "/" + top, device.folder.root + "/" + newTop) == 0, "mv \(top)")
            for (name, file) in moved.sorted(by: { $0.key < $1.key }) {
                userMoved(device, name, to: newTop + file.spelling.dropFirst(spelledTop.count), text: file.data, replaced: nil)
            }
            renamedOnDisk(device, top, to: newTop)
        case .deleteFolder(let target):
            figures.operations += 1
            let note = try resolve(target, device)
            let components = note.split(separator: "/")
            guard components.count > 1 else { return }
            let top = String(components[0])
            let spelledTop = folds(device) ? SimCaseFolding.spelling(of: top, in: device.folder.root) : top
            for (name, file) in try recordNotes(device) where file.spelling.hasPrefix(spelledTop + "/") {
                noteActedOn(device, name)
                model.deleted(device: device.index, note: name, before: SyncHarness.lines(file.data))
                userDeleted.insert(name)
            }
            if FileIO.lstatInfo(device.folder.root + "/" + top) != nil {
                try FileManager.default.removeItem(atPath: device.folder.root + "/" + top)
            }
            changed(device, [top])
        case .touch(let target):
            figures.operations += 1
            let note = try resolve(target, device)
            guard try read(device, note) != nil else { return }
            noteActedOn(device, note)
            try SyncHarness.setModified(device.folder.root + "/" + note, clock.advance(by: schedule.clockStep))
            touched.insert(note)
            changed(device, [note])
        case .makePrivate(let target):
            let note = try resolve(target, device)
            let path = device.folder.root + "/" + note
            guard FileIO.lstatInfo(path) != nil else { return }
            figures.operations += 1
            figures.privateNotes += 1
            // Accepted and ignored where the filesystem has no modes (``settleModes`` puts the fixed mode back).
            try check(chmod(path, 0o600) == 0, "chmod 600 \(note)")
            if filesystem(of: device.index).fixedMode == nil { privateNotes[device.index][note] = inode(path) }
        case .sync(let fault, let full):
            try sync(device, fault: fault, full: full)
        case .dryRun:
            try dryRun(device)
        case .goOffline:
            guard !device.offline else { return }
            device.offline = true
            figures.partitions += 1
            try device.restart()
        case .comeOnline:
            guard device.offline else { return }
            device.offline = false
            try device.restart()
        case .serverDown:
            guard !serverDown else { return }
            try check(rename(serverRoot, awayRoot) == 0, "take the server away")
            serverDown = true
            figures.partitions += 1
        case .serverUp:
            try serverBack()
        case .restart:
            try device.restart()
        case .serverFault(let fault):
            guard !serverDown else { return }
            try serverFault(fault)
        case .deleteMost:
            let all = try recordNotes(device).sorted { $0.value.spelling < $1.value.spelling }
            guard all.count > 1 else { return }
            figures.operations += 1
            figures.massDeletes += 1
            for (name, file) in all.dropFirst() {
                noteActedOn(device, name)
                try check(unlink(device.folder.root + "/" + file.spelling) == 0, "unlink \(file.spelling)")
                model.deleted(device: device.index, note: name, before: SyncHarness.lines(file.data))
                userDeleted.insert(name)
                changed(device, [name])
            }
        case .approveDeletes:
            try sync(device, fault: nil, full: true, approve: true)
        case .restore(let target, let back):
            try restore(device, try resolve(target, device), back: back)
        case .gc(let policy, let crashAt):
            guard !serverDown else { return }
            runGC(policy: policy, crashAt: crashAt)
            try checkServerTexts()
        }
    }

    /// `notesync server gc --grace 0` (docs/retention.md), its policy every band off (0) or the default (1), killed at
    /// its `crashAt`-th fault point if given. A log gc cannot read whole (a gap, another history) makes it refuse.
    private func runGC(policy: Int, crashAt: Int?) {
        guard let store = try? ServerStore(root: serverRoot, device: "gc", logger: testLogger, vault: TestServer.vault), store.hasRetention
        else { return }
        let chosen = policy == 1 ? RetentionPolicy.default : RetentionPolicy(all: 0, hourly: 0, daily: 0, weekly: 0)
        let clock = clock
        let passed = Mutex(0)
        let hooks = FaultPoint.Hooks(
            hit: { name in
                let index = passed.withLock { count in
                    defer { count += 1 }
                    return count
                }
                if index == crashAt { throw SimulatedCrash(point: "\(name)") }
            }, now: { clock.advance(by: 1_000) })
        figures.gcRuns += 1
        do {
            let report = try FaultPoint.with(hooks) {
                try store.collectGarbage(grace: 0, dryRun: false, policy: chosen, now: clock.advance(by: 1_000))
            }
            figures.gcRemoved += report.assetsRemoved + report.entriesRemoved + report.snapshotsRemoved
            trace(
                "  gc: end \(report.end), snapshot \(report.snapshot.map(String.init) ?? "none"), removed \(report.assetsRemoved) texts, \(report.entriesRemoved) entries, \(report.tombstonesDropped) tombstones forgotten; devices at \(store.deviceTokenList().sorted { $0.id < $1.id }.map { "\($0.id) \($0.token)" }.joined(separator: ", "))"
            )
        } catch let crash as SimulatedCrash {
            figures.gcKills += 1
            trace("  gc killed at \(crash.point)")
        } catch {
            trace("  gc refused: \(error)")
        }
    }

    /// Every text the server's heads and the versions its newest snapshot keeps reference is on the server (unless the
    /// server's history is broken by a fault, which the recovery checks judge).
    private func checkServerTexts() throws {
        guard !serverDown, !serverHistoryBroken else { return }
        let store = try ServerStore(root: serverRoot, device: "checker", logger: testLogger, vault: TestServer.vault)
        var state = ZoneState()
        guard (try? store.fetch(into: &state)) != nil else { return }
        for (name, head) in state.heads.sorted(by: { $0.key < $1.key }) {
            guard let text = head.text, !store.hasAsset(text.sha256) else { continue }
            findings.missingTexts.append("\(at): the text of \(name) (entry \(head.tag)) is missing from the server")
        }
        if let newest = try store.snapshotSequences().first, let snapshot = try? store.readSnapshot(newest) {
            for version in snapshot.history ?? [] {
                guard let text = version.text, !store.hasAsset(text.sha256) else { continue }
                findings.missingTexts.append(
                    "\(at): the text of \(version.name) version \(version.seq), kept by snapshot \(newest), is missing")
            }
        }
    }

    /// The versions of `note` in the server's log (slots of its saves), oldest first.
    private func savedVersions(_ note: String) throws -> [(seq: Int64, text: AssetRef)] {
        var versions: [(seq: Int64, text: AssetRef)] = []
        for (seq, path) in try logEntries().sorted(by: { $0.key < $1.key }) {
            guard let data = try FileIO.read(path), let entry = try? SealedFile.open(data, kind: "entry", as: LogEntry.self) else {
                continue
            }
            for change in entry.changes where change.name == note && change.op == .save {
                if let text = change.text { versions.append((seq, text)) }
            }
        }
        return versions
    }

    /// `notesync restore NOTE --version V`: the version comes back (and syncs), and the text it replaced is still
    /// in the server's history or kept as a conflict copy.
    private func restore(_ device: SimDevice, _ note: String, back: Int) throws {
        guard !device.offline, !serverDown, !serverHistoryBroken else { return }
        let versions = try savedVersions(note)
        guard !versions.isEmpty else { return }
        let version = versions[versions.count - 1 - back % versions.count]
        // The restore's first step is a full sync (it pushes the text it will replace): run as one, checked as one,
        // so that what the restore itself changes is judged against the state after it.
        try sync(device, fault: nil, full: true)
        // A private note that sync moved or deleted is followed no more: what the restore writes at its old name is a
        // new file, with the user's default mode.
        checkPrivateNotes(device)
        guard !device.offline, !serverDown, !serverHistoryBroken else { return }
        let before = try read(device, note)
        if Self.tracing, let name = try? RecordName(validating: note) {
            let base = try device.state.bases()[name]
            trace(
                "  before the restore: base \(base.map { "\($0.tag) \($0.digest.hex.prefix(8)) \($0.modified)" } ?? "none"), file "
                    + "\(before.map { ContentDigest(of: $0).hex.prefix(8) } ?? "none") "
                    + "\(FileIO.lstatInfo(device.folder.root + "/" + note).map { StatFingerprint($0).mtime } ?? 0)")
        }
        noteActedOn(device, note)
        figures.operations += 1
        figures.syncs += 1
        let result: SyncEngine.RestoreResult
        do {
            result = try device.engine.restore(try RecordName(validating: note), version: version.seq, options: Self.guardedOptions)
        } catch {
            device.needFull = true
            model.partlySynced(device.index)
            if !reportsBrokenServer(error) { findings.harness.append("\(at): \(device.name)'s restore threw: \(error)") }
            return
        }
        figures.restores += 1
        if Self.tracing, let name = try? RecordName(validating: note) {
            let base = try device.state.bases()[name]
            trace(
                "  after the restore: base \(base.map { "\($0.tag) \($0.digest.hex.prefix(8)) \($0.modified)" } ?? "none"), file "
                    + "\(FileIO.lstatInfo(device.folder.root + "/" + note).map { StatFingerprint($0).mtime } ?? 0)")
        }
        /// A text as it reads from the server (stored compressed or not: format 3).
        func serverText(_ ref: AssetRef) throws -> Data? {
            try FileIO.read(ServerLayout(root: serverRoot).assetPath(ref.sha256)).flatMap {
                AssetCodec.decode($0, digest: ref.sha256, size: ref.size)
            }
        }
        let restored = try serverText(version.text) ?? Data()
        trace(
            "  \(device.name) restored \(note) to version \(version.seq)\(result.keptAs.map { ", kept \($0)" } ?? ""): "
                + result.report.changes.map { "\($0.kind.rawValue) \($0.name)" }.joined(separator: ", "))
        if let before, findings.lostWrites.isEmpty {
            // Every line of it is in a version the server's history holds (pushed as it was, or merged first with
            // what another device saved), or in the copy the restore kept.
            var held = Set(try result.keptAs.flatMap { try read(device, $0) }.map(SyncHarness.lines) ?? [])
            for path in try logEntries().values {
                guard let data = try FileIO.read(path), let entry = try? SealedFile.open(data, kind: "entry", as: LogEntry.self) else {
                    continue
                }
                for change in entry.changes {
                    guard let text = change.text, let asset = try serverText(text) else {
                        continue
                    }
                    held.formUnion(SyncHarness.lines(asset))
                }
            }
            if !SyncHarness.lines(before).allSatisfy(held.contains) {
                findings.lostWrites.append(
                    "\(at): \(device.name)'s restore of \(note) replaced a text that is neither in the "
                        + "server's history nor kept: \(SyncHistoryRunner.show(before))")
            }
        }
        // The user's write of the restored text (nothing, where the note already held it: no version is made).
        model.wrote(device: device.index, note: note, before: before.map(SyncHarness.lines) ?? [], after: SyncHarness.lines(restored))
        everSeen.insert(note)
        changed(device, [note])
        if let copy = result.keptAs { everSeen.insert(copy) }
        try afterSync(device, result.report)
    }

    // MARK: - Server faults

    private func logEntries() throws -> [Int64: String] {
        let layout = ServerLayout(root: serverRoot)
        var found: [Int64: String] = [:]
        for shard in try FileIO.list(layout.logDirectory) ?? [] {
            for name in try FileIO.list(layout.logDirectory + "/" + shard) ?? [] {
                if let seq = ServerLayout.sequence(ofFileName: name) { found[seq] = layout.logDirectory + "/" + shard + "/" + name }
            }
        }
        return found
    }

    private func serverFault(_ fault: SimSchedule.ServerFault) throws {
        switch fault {
        case .backup:
            try? FileManager.default.removeItem(atPath: backupRoot)
            try FileManager.default.copyItem(atPath: serverRoot, toPath: backupRoot)
            return
        case .restoreBackup:
            guard FileIO.lstatInfo(backupRoot) != nil else { return }
            try FileManager.default.removeItem(atPath: serverRoot)
            try FileManager.default.copyItem(atPath: backupRoot, toPath: serverRoot)
        case .replaceWithEmpty:
            try FileManager.default.removeItem(atPath: serverRoot)
            try TestServer.create(serverRoot)
        case .loseEntry(let fromEnd):
            let entries = try logEntries().sorted { $0.key > $1.key }
            guard !entries.isEmpty else { return }
            try check(unlink(entries[fromEnd % entries.count].value) == 0, "lose an entry")
        case .holdEntry:
            guard let (seq, path) = try logEntries().max(by: { $0.key < $1.key }) else { return }
            try FileIO.makeDirectories(heldRoot)
            let held = heldRoot + "/\(seq)-\(heldEntries.count)"
            // A replicating tool delivers the texts the entry names with it: they are kept with the held entry
            // (a server restored meanwhile may have lost them).
            if case .entry(let entry) = try checker.readSlot(seq) {
                let layout = ServerLayout(root: serverRoot)
                for change in entry.changes {
                    guard let text = change.text, FileIO.lstatInfo(held + "-asset-" + text.sha256.hex) == nil else { continue }
                    try? FileManager.default.copyItem(atPath: layout.assetPath(text.sha256), toPath: held + "-asset-" + text.sha256.hex)
                }
            }
            try check(rename(path, held) == 0, "hold an entry back")
            heldEntries.append((seq, held))
        case .deliverHeld:
            guard !heldEntries.isEmpty else { return }
            try deliverHeld()
        }
        figures.serverFaults += 1
        serverHistoryBroken = true
        trace("  the server's history changed: \(fault.code)")
    }

    /// Delivers the held entries: into their slot if it is free, else beside it as a conflicted copy (what
    /// Syncthing makes when two devices wrote the same file).
    private func deliverHeld() throws {
        let layout = ServerLayout(root: serverRoot)
        for name in (try FileIO.list(heldRoot)) ?? [] {
            guard let range = name.range(of: "-asset-"), let digest = ContentDigest(hex: String(name[range.upperBound...])) else {
                continue
            }
            if FileIO.lstatInfo(layout.assetPath(digest)) == nil {
                try FileIO.makeDirectories(layout.assetShard(digest))
                try check(rename(heldRoot + "/" + name, layout.assetPath(digest)) == 0, "deliver a text")
            } else {
                unlink(heldRoot + "/" + name)
            }
        }
        for (seq, held) in heldEntries {
            let path = layout.entryPath(seq)
            try FileIO.makeDirectories(layout.shardDirectory(of: seq))
            if FileIO.lstatInfo(path) != nil {
                try check(rename(held, path + ".sync-conflict-20261123-120000-SIMDEV1") == 0, "deliver a conflicted copy")
            } else {
                try check(rename(held, path) == 0, "deliver an entry")
            }
        }
        heldEntries = []
    }

    /// What `device` must report if it syncs now (the rule *no device silently stops syncing*,
    /// ``SimServerOracle``): nil while no server fault is in effect, while the device cannot reach the server (it
    /// reports itself offline, checked by the offline invariant), or when the fault does not concern it.
    /// `quickEnd`: a partial sync. `forgetting`: `notesync recover`, which reads the log from its start and accepts
    /// any server id.
    private func expectedReport(_ device: SimDevice, quickEnd: Bool, forgetting: Bool = false) throws -> SimServerOracle.Expected? {
        guard serverHistoryBroken, !device.offline, !serverDown else { return nil }
        if forgetting {
            return try SimServerOracle.expected(serverRoot: serverRoot, boundID: nil, token: 0, chain: nil, quickEnd: false)
        }
        return try SimServerOracle.expected(serverRoot: serverRoot, device: device, quickEnd: quickEnd)
    }

    /// Judges a sync (or dry run, or recover) of a device the server fault concerns (`expected`): it must fail with
    /// the kind of error that names what it finds (docs/server-format.md: `serverMismatch`, `logGap`, exit 1,
    /// `SYNC STOPPED`; a one-shot sync reports a gap at once). A sync that finishes, or that calls itself offline
    /// while the server is there, stopped silently. `lenient`: either kind will do, where the device may meet
    /// another condition first (a device synced in the middle, or a void makes it read the log again from its
    /// start). A sync a crash ended, or whose server went away midway (`partitioned`, reported as offline), could not
    /// tell; any other error is the harness invariant's.
    private func judgeReport(
        _ device: SimDevice, _ expected: SimServerOracle.Expected?, _ outcome: Result<SyncReport, any Error>, what: String,
        lenient: Bool, partitioned: Bool = false
    ) throws {
        guard let expected else { return }
        switch outcome {
        case .success(let report):
            if report.offline && partitioned { return }
            let did =
                report.offline
                ? "reported itself offline (\(report.offlineReason ?? "no reason"))"
                : "finished (\(report.changes.isEmpty ? "nothing to do" : "\(report.changes.count) change(s)"))"
            findings.silentStops.append("\(at): \(device.name)'s \(what) \(did) while \(expected); it must stop with \(expected.named)")
        case .failure(let error as NoteSyncError) where error.kind == .serverMismatch || error.kind == .logGap:
            let voids = try SimServerOracle.hasVoids(serverRoot: serverRoot)
            if expected.kinds.contains(error.kind) || lenient || voids {
                figures.faultReports += 1
            } else {
                findings.silentStops.append(
                    "\(at): \(device.name)'s \(what) stopped with \(error.kind.rawValue) while \(expected); it must stop with "
                        + "\(expected.named): \(error.message)")
            }
        case .failure:
            return
        }
    }

    /// Whether `error` is a device reporting a broken server history, as it must while one is not recovered.
    private func reportsBrokenServer(_ error: any Error) -> Bool {
        guard serverHistoryBroken, let error = error as? NoteSyncError else { return false }
        return error.kind == .serverMismatch || error.kind == .logGap
    }

    /// The documented recovery, run by the user at healing: entries held back are delivered; a device that finds
    /// a gap has it sealed (`notesync server fsck --repair`), a device that finds the server behind it or replaced
    /// runs `notesync recover`; then fsck moves a replicating tool's conflicted copies aside. Every device must
    /// sync cleanly afterwards.
    private func recoverServer() throws {
        try deliverHeld()
        if Self.tracing {
            for device in devices {
                let zone = try device.state.zoneState()
                trace("  before recovery: \(device.name) token \(zone.token) chain \(zone.chain?.hex.prefix(8) ?? "nil")")
            }
            for (seq, path) in try logEntries().sorted(by: { $0.key < $1.key }) {
                let data = try FileIO.read(path) ?? Data()
                let entry = try? SealedFile.open(data, kind: "entry", as: LogEntry.self)
                trace(
                    "  log \(seq): \(ContentDigest(of: data).hex.prefix(8)) prev \(entry?.prev?.hex.prefix(8) ?? "nil") by \(entry?.device ?? "?") \(entry?.void != nil ? "void" : "")"
                )
            }
        }
        func repairServer() throws {
            let store = try ServerStore(root: serverRoot, device: "fsck", logger: testLogger, vault: TestServer.vault)
            _ = try ServerFsck(store: store).run(repair: true, gapGraceSeconds: 0)
        }
        for pass in 1...8 {
            var clean = true
            for device in devices {
                at = "recovery pass \(pass), \(device.name)"
                var recovering = false
                // What the user does with what the device says: a gap is sealed (`server fsck --repair`), a server
                // behind it or with another log is recovered (`notesync recover`), and the device syncs again.
                for _ in 1...4 {
                    figures.syncs += 1
                    var options = SyncHarness.syncOptions
                    options.forgetServer = recovering
                    // Before its recovery too, a device the fault concerns says so: a device stopped silently at a gap
                    // would otherwise go on only because the last fsck seals every gap.
                    let expected = try expectedReport(device, quickEnd: false, forgetting: recovering)
                    let outcome = Result { try device.engine.sync(options, only: nil) }
                    // A private note deleted by this sync is followed no more: what a later sync writes there is new.
                    checkPrivateNotes(device)
                    try judgeReport(device, expected, outcome, what: recovering ? "recover" : "sync", lenient: false)
                    do {
                        let report = try outcome.get()
                        trace(
                            "  \(at): "
                                + report.changes.map { "\($0.kind.rawValue) \($0.name)\($0.detail.map { " (\($0))" } ?? "")" }.joined(
                                    separator: ", "))
                        break
                    } catch let error as NoteSyncError where error.kind == .logGap {
                        clean = false
                        figures.recoveries += 1
                        trace("  \(at): gap, sealed: \(error)")
                        try repairServer()
                    } catch let error as NoteSyncError where error.kind == .serverMismatch {
                        clean = false
                        figures.recoveries += 1
                        trace("  \(at): \(error.message); fsck --repair, then recover")
                        // A log that breaks its own chain (an entry of another history delivered late) is cut by fsck.
                        try repairServer()
                        recovering = true
                    }
                }
                model.partlySynced(device.index)
                device.needFull = true
            }
            // The user's last step: `server fsck --repair`. When it repairs something (a log whose chain breaks
            // where every device had read past it: its tail goes to quarantine/), the devices that read the tail
            // now stop, and are recovered as above: another pass.
            if clean {
                let store = try ServerStore(root: serverRoot, device: "fsck", logger: testLogger, vault: TestServer.vault)
                let fsck = try ServerFsck(store: store).run(repair: true, gapGraceSeconds: 0)
                let repaired = fsck.findings.filter { $0.repaired != nil && $0.kind == .brokenChain }
                if repaired.isEmpty { break }
                trace("  \(at): fsck --repair: \(repaired.map(\.description))")
            }
        }
        let store = try ServerStore(root: serverRoot, device: "fsck", logger: testLogger, vault: TestServer.vault)
        _ = try ServerFsck(store: store).run(repair: true, gapGraceSeconds: 0)
        serverHistoryBroken = false
        // The model's history no longer decides which notes exist (a recovery brings back notes whose delete the
        // server lost); every line a user wrote and did not remove must still survive.
        undecided.formUnion(everSeen)
        undecided.formUnion(model.events.map(\.note))
        checkerState = ZoneState()
        texts = [:]
        // A name only the lost history had is no record now: a folding device's recovery takes a file of that name as
        // the file of a server record of another case (``foldedAway(_:server:)``), as it does a name that never
        // reached the server. Its text is still checked with every other line.
        everOnServer = Set(try serverNotes(fresh: true).keys)
    }

    private func serverBack() throws {
        guard serverDown else { return }
        try check(rename(awayRoot, serverRoot) == 0, "bring the server back")
        serverDown = false
    }

    /// `mv` of the note `source` to the name the user types, `typed`, creating folders as needed. On a case-folding
    /// folder a name that finds another file replaces that file under its spelling (the model records its record), and
    /// one that finds the note itself changes the case of its name (or of nothing, for a folder's other spelling):
    /// no change to the note.
    private func moveNote(_ device: SimDevice, _ source: String, to typed: String) throws {
        let root = device.folder.root
        let destination = folds(device) ? try recordName(device, typed) : typed
        let sameFile = folds(device) && SimCaseFolding.fold(destination) == SimCaseFolding.fold(source)
        guard source != destination || sameFile, let moved = try read(device, source) else { return }
        let replaced = sameFile ? nil : try read(device, destination)
        // A text moved over the same text changes only the note's mtime, which is not a change to sync.
        // So does a text moved to a name whose record holds it (a note moved away and its copy moved back).
        if !sameFile, replaced == moved || (try? serverNotes())?[destination]?.data == moved { touched.insert(destination) }
        let known = sameFile ? try device.state.bases().keys.contains { $0.string == source } : false
        try FileIO.makeDirectories(parent(root + "/" + typed))
        try check(rename(root + "/" + source, root + "/" + typed) == 0, "mv \(source) \(typed)")
        if sameFile {
            // The file's name changed case (or nothing did). A record of this device's: the engine takes the file
            // under its name, as ``CasePairs`` documents (a file spelled as no record is that record's), so the note
            // is where it was. A note not synced yet is the file's new spelling.
            device.dirty.formUnion([source, typed])
            let spelled = SimCaseFolding.spelling(of: typed, in: root)
            if known || spelled == source {
                if watchDraws != nil { device.undelivered.append([.renamed(source, to: typed)]) }
                return
            }
            noteActedOn(device, source)
            userMoved(device, source, to: spelled, text: moved, replaced: nil)
            renamedOnDisk(device, source, to: spelled)
            return
        }
        noteActedOn(device, source)
        userMoved(device, source, to: destination, text: moved, replaced: replaced)
        renamedOnDisk(device, source, to: destination)
    }

    /// A user's rename of `source` to `destination` (the note's text `text`; `replaced`, what the destination held).
    /// The text moves: its lines are not removed; what the move replaced is. Where both names end is not decided by
    /// the history alone (an edit elsewhere follows the rename, the later of two renames keeps the note): their
    /// lines are checked, and the edits made concurrently with the rename must reach the note's final name.
    private func userMoved(_ device: SimDevice, _ source: String, to destination: String, text: Data, replaced: Data?) {
        // `mv` keeps the note's inode, and so its mode.
        let wasPrivate = privateNotes[device.index].removeValue(forKey: source)
        privateNotes[device.index][destination] = wasPrivate
        let event = model.nextID
        model.deleted(device: device.index, note: source, before: [])
        model.wrote(
            device: device.index, note: destination, before: replaced.map(SyncHarness.lines) ?? [],
            after: SyncHarness.lines(text))
        userDeleted.insert(source)
        everSeen.insert(destination)
        undecided.formUnion([source, destination])
        movedTo.insert(destination)
        if replaced == nil { userMoves.append((event, source, destination)) }
    }

    private func noteActedOn(_ device: SimDevice, _ note: String) {
        if unconfirmed[device.index].contains(note) { undecided.insert(note) }
    }

    /// The note a target names on `device`: on a case-folding folder, the record of the file the user's spelling
    /// finds there (``recordName(_:_:)``), which is what the user's action really changes.
    private func resolve(_ target: SimSchedule.Target, _ device: SimDevice) throws -> String {
        let typed = try typedName(target, device)
        return folds(device) ? try recordName(device, typed) : typed
    }

    /// The name the user types for a target (on a case-folding folder, perhaps another spelling of the file).
    private func typedName(_ target: SimSchedule.Target, _ device: SimDevice) throws -> String {
        switch target {
        case .pool(let index):
            return SimSchedule.pool[index % SimSchedule.pool.count]
        case .spelled(let index, let variant):
            figures.caseVariants += 1
            let name = SimSchedule.pool[index % SimSchedule.pool.count]
            let variants = SimSchedule.caseVariants(of: name)
            return variants.isEmpty ? name : variants[variant % variants.count]
        case .existing(let index):
            let names = try notes(device).keys.sorted()
            return names.isEmpty ? SimSchedule.pool[index % SimSchedule.pool.count] : names[index % names.count]
        }
    }

    /// The record that the file `typed` finds on a case-folding device is (or would be, made now): the folder's
    /// spelling of it (``SimCaseFolding/spelling(of:in:)``), unless the device has a record of that file under
    /// another spelling (a folder made in another case by another record, a save that made the file anew under
    /// the user's spelling): the engine takes the file under the record's name, as ``CasePairs`` says.
    private func recordName(_ device: SimDevice, _ typed: String) throws -> String {
        let spelled = SimCaseFolding.spelling(of: typed, in: device.folder.root)
        let bases = try device.state.bases().keys.map(\.string)
        if bases.contains(spelled) { return spelled }
        let key = SimCaseFolding.fold(spelled)
        if let base = bases.filter({ SimCaseFolding.fold($0) == key }).min(by: { UTF8Bytes.precedes($0, $1) }) { return base }
        // Else a record the device has fetched and not pulled yet (the engine's owner then: the lowest record).
        let heads = try device.state.zoneState().heads.filter { !$0.value.deleted }.map(\.key.string)
        if heads.contains(spelled) { return spelled }
        return heads.filter { SimCaseFolding.fold($0) == key }.min { UTF8Bytes.precedes($0, $1) } ?? spelled
    }

    /// A device's notes by record (``recordName(_:_:)`` of each file's spelling on a case-folding folder), with the
    /// spelling each file has there.
    private func recordNotes(_ device: SimDevice) throws -> [String: (spelling: String, data: Data)] {
        var result: [String: (spelling: String, data: Data)] = [:]
        for (spelling, data) in try notes(device) {
            result[folds(device) ? try recordName(device, spelling) : spelling] = (spelling, data)
        }
        return result
    }

    /// `typed`: the name the user's editor opens, where it is another spelling of the note (a case-folding folder).
    private func userEdit(
        _ device: SimDevice, _ note: String, _ edit: SimSchedule.Edit, _ style: SimSchedule.SaveStyle, typed: String? = nil
    ) throws {
        var note = note
        let old = try read(device, note)
        let before = old.map(SyncHarness.lines)
        noteActedOn(device, note)
        let id = model.nextID
        func fresh(_ count: Int) -> [String] { (0..<count).map { "\(note) e\(id) l\($0)" } }
        var after: [String]
        switch (edit, before) {
        case (.rewrite(let count), _): after = fresh(count)
        case (.rewriteShared(let variant), _): after = (0..<4).map { "\(note) well-known \(variant) l\($0)" }
        case (_, nil): after = fresh(4)
        case (.append, let lines?): after = lines + fresh(1)
        case (.changeLine(let index), let lines?):
            after = lines
            if lines.isEmpty { after = fresh(1) } else { after[index % lines.count] = fresh(1)[0] }
        }
        try save(device, note, SyncHarness.text(after), style: before == nil ? .inPlace : style, typed: typed)
        // An editor that makes the file anew on a case-folding folder gives it the user's spelling: a note this
        // device has no record of is that file's name now (a record keeps its name, ``recordName(_:_:)``).
        if folds(device), let typed, let old, case let spelled = SimCaseFolding.spelling(of: typed, in: device.folder.root),
            spelled != note, try recordName(device, spelled) == spelled
        {
            userMoved(device, note, to: spelled, text: old, replaced: nil)
            renamedOnDisk(device, note, to: spelled)
            note = spelled
        }
        // A text the note had before: perhaps its base again, which is a touch (the mtime stays local).
        if !textsSaved[note, default: []].insert(after).inserted { touched.insert(note) }
        model.wrote(device: device.index, note: note, before: before ?? [], after: after)
        everSeen.insert(note)
        changed(device, [note])
    }

    /// Saves a note the way `style`'s editor does, then gives it the next logical mtime.
    private func save(_ device: SimDevice, _ note: String, _ data: Data, style: SimSchedule.SaveStyle, typed: String? = nil) throws {
        let path = device.folder.root + "/" + (typed ?? note)
        let directory = parent(path)
        try FileIO.makeDirectories(directory)
        let backup = path + "~"
        switch style {
        case .inPlace:
            try writeFile(path, data, flags: O_CREAT | O_TRUNC)
        case .vim:
            try writeFile(directory + "/4913", Data(), flags: O_CREAT | O_EXCL)
            unlink(directory + "/4913")
            try check(rename(path, backup) == 0, "vim: rename to backup")
            try writeFile(path, data, flags: O_CREAT | O_EXCL)
            unlink(backup)
        case .emacs:
            try check(rename(path, backup) == 0, "emacs: rename to backup")
            try writeFile(path, data, flags: O_CREAT | O_EXCL)
        case .renameOver:
            let temp = directory + "/.goutputstream-SIM\(model.nextID)"
            try writeFile(temp, data, flags: O_CREAT | O_EXCL)
            try check(rename(temp, path) == 0, "rename over")
        }
        // Editors that write a new file give it the note's mode.
        if privateNotes[device.index][note] != nil {
            try check(chmod(path, 0o600) == 0, "chmod 600 \(note)")
            privateNotes[device.index][note] = inode(path)
        }
        try SyncHarness.setModified(path, clock.advance(by: schedule.clockStep))
    }

    private func writeFile(_ path: String, _ data: Data, flags: Int32) throws {
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | flags, 0o644)
        guard fd >= 0 else { throw NoteSyncError.posix("open", path: path, errno: errno) }
        defer { close(fd) }
        if let fixed = SimulatedFolders.personality(at: path)?.fixedMode { fchmod(fd, fixed) }
        try FileIO.writeAll(fd: fd, data, path: path)
    }

    // MARK: - Syncing

    /// What a user's sync runs with: the mass-delete guard on, unless they approve (`--allow-mass-delete`).
    static let guardedOptions: SyncOptions = {
        var options = SyncHarness.syncOptions
        options.allowMassDelete = false
        return options
    }()

    private func sync(_ device: SimDevice, fault: SimSchedule.Fault?, full: Bool, approve: Bool = false) throws {
        figures.syncs += 1
        let expectOffline = device.offline || serverDown
        let notesBefore = expectOffline || fault != nil ? try localNotes(device) : [:]
        var scope = device.needFull || full ? nil : device.dirty.sorted()
        if scope != nil, watchDraws != nil { scope = watchScope(device) }
        let expected = try expectedReport(device, quickEnd: scope != nil)
        injector.arm(try plan(fault, device), notesRoot: device.folder.root)
        let outcome: Result<SyncReport, any Error>
        let options = approve ? SyncHarness.syncOptions : Self.guardedOptions
        do { outcome = .success(try device.engine.sync(options, only: scope)) } catch { outcome = .failure(error) }
        var (fired, hits, edited, raced) = injector.disarm()
        let who = device.name
        if let note = edited?.note, folds(device) {
            // On a case-folding folder the save went into whichever file its name found then (one the sync pulled).
            edited?.note = try recordName(device, note)
        }
        if let edited {
            // The save happened during the sync: the sync may have delivered part of what it synced before it.
            model.partlySynced(device.index)
            model.wrote(device: device.index, note: edited.note, before: edited.before ?? [], after: edited.after)
            everSeen.insert(edited.note)
            changed(device, [edited.note])
            // A save that found no file at the name (the sync had just moved or deleted the note) made a new file,
            // with the user's mode: the private note is no longer at that name.
            if edited.before == nil { privateNotes[device.index][edited.note] = nil }
            figures.operations += 1
            figures.midSyncEdits += 1
        }
        switch outcome {
        case .success(let report):
            trace(
                "  \(who) synced\(scope.map { " \($0)" } ?? " (full)"): \(report.offline ? "offline " : "")"
                    + report.changes.map { "\($0.kind.rawValue) \($0.name)\($0.detail.map { " (\($0))" } ?? "")" }.joined(separator: ", ")
                    + " [\(hits) fault points\(fired.map { ", fault at \($0)" } ?? "")]")
        case .failure(let error):
            trace("  \(who)'s sync ended: \(error) [\(hits) fault points]")
        }
        // A device that synced in the middle may have changed the server, but never so that the fault concerns this
        // device no more: it may find another condition first.
        try judgeReport(device, expected, outcome, what: "sync", lenient: raced, partitioned: fired != nil)

        let finished: Bool
        switch outcome {
        case .success: finished = fired == nil && edited == nil && !raced
        case .failure: finished = false
        }
        if !finished && fault != nil {
            let after = try localNotes(device)
            for name in Set(after.keys).union(notesBefore.keys) where after[name] != notesBefore[name] && name != edited?.note {
                unconfirmed[device.index].insert(name)
            }
        }

        if case .failure(let error) = outcome, let crash = error as? SimulatedCrash {
            figures.crashes += 1
            figures.crashPoints[crash.point, default: 0] += 1
            model.partlySynced(device.index)
            injector.restoreAfterCrash()
            try device.restart()
            return
        }
        let partitioned = fired != nil
        if partitioned {
            figures.partitions += 1
            figures.midSyncPartitions += 1
            serverDown = true
        }
        let report: SyncReport
        switch outcome {
        case .success(let value):
            report = value
        case .failure(let error):
            device.needFull = true
            model.partlySynced(device.index)
            if !expectOffline && !partitioned && !reportsBrokenServer(error) {
                findings.harness.append("\(at): \(who)'s sync threw: \(error)")
            }
            return
        }
        if expectOffline {
            try checkOffline(device, report, notesBefore: notesBefore, userEdited: edited?.note, scope: scope)
            device.needFull = true
            return
        }
        if partitioned {
            // It did part of the sync before the server went away, perhaps all of it.
            model.partlySynced(device.index)
            device.needFull = true
            return
        }
        if folds(device) && !serverHistoryBroken && !report.offline {
            // The sync took each file made here beside a server record of another case as that record's
            // (``foldedAway(_:server:)``), whether or not it is judged now: a save during it, or a race, leaves it
            // unjudged, and a later delete of the file by its user must not read as a delete of the name made here.
            let server = try serverNotes()
            for name in everSeen where foldedAway(name, server: server) { foldedNames.insert(name) }
        }
        if edited != nil || raced {
            // A save the sync may or may not have seen, or another device's commits after its last fetch: it may
            // not have all the server has. Nothing to check until the next sync.
            model.partlySynced(device.index)
            if report.offline { findings.harness.append("\(at): \(who)'s sync was offline: \(report.offlineReason ?? "")") }
            return
        }
        if scope != nil && watchDraws != nil && (!device.undelivered.isEmpty || !device.settler.isEmpty) {
            // The agent's partial sync of what had settled: changes still on their way (late, not quiet yet) are
            // the next one's. What it did is judged with them.
            model.partlySynced(device.index)
            if report.heldDeletes > 0 { device.needFull = true }
            if report.offline { findings.harness.append("\(at): \(who)'s sync was offline: \(report.offlineReason ?? "")") }
            return
        }
        try afterSync(device, report)
    }

    // MARK: - The agent's path

    /// A user changed `paths` on `device`: the next partial sync's scope, and (the agent's path) the events inotify
    /// gives for them.
    private func changed(_ device: SimDevice, _ paths: [String]) {
        device.dirty.formUnion(paths)
        if watchDraws != nil { device.undelivered.append(paths.map { .noted($0) }) }
    }

    /// A user renamed `source` to `destination` (a note or a folder). The watch sees one rename, or, one time in
    /// three, its halves apart (a delete and a create: a move into the folder from outside the watch, a queue
    /// overflow, a cookie the watch did not pair).
    private func renamedOnDisk(_ device: SimDevice, _ source: String, to destination: String) {
        device.dirty.formUnion([source, destination])
        guard watchDraws != nil else { return }
        if Int.random(in: 0..<3, using: &watchDraws!) == 0 {
            figures.splitRenames += 1
            device.undelivered.append([.noted(source), .noted(destination)])
        } else {
            device.undelivered.append([.renamed(source, to: destination)])
        }
    }

    /// The scope of the agent's partial sync now: the watch delivers the device's events as the real watcher reads
    /// inotify's queue, in order: the newest changes may still be on their way (each, from the newest back, one time
    /// in four), never an older change behind a newer one delivered; a change late at one sync arrives at the next,
    /// and none is still late once the agent has waited the deletes' wait (the watcher reads its queue within
    /// milliseconds, so a vanished note's rename is seen before its delete may go). A delivery is at times out of
    /// order within the batch; events of one path coalesce in the settler; the two halves of a rename arrive
    /// together. The agent's time passes (within the quiet period, past it, past the deletes' wait), and the
    /// settler gives what has settled. An empty scope is the agent's poll of the server.
    private func watchScope(_ device: SimDevice) -> [String] {
        let root = device.folder.root
        func probe(_ path: String) -> EventSettler<FakeInstant>.Probe? {
            FileIO.lstatInfo(root + "/" + path).map { .init(isRegularFile: ($0.st_mode & S_IFMT) == S_IFREG, size: Int64($0.st_size)) }
        }
        func deliver(_ events: [SimDevice.WatchEvent]) {
            for event in events {
                switch event {
                case .noted(let path): device.settler.noted(path, at: device.watchNow, size: probe(path)?.size)
                case .renamed(let source, let destination):
                    device.settler.renamed(
                        source, to: destination, at: device.watchNow, fromSize: probe(source)?.size, toSize: probe(destination)?.size)
                }
            }
        }
        var cut = device.undelivered.count
        while cut > device.carriedLate && Int.random(in: 0..<4, using: &watchDraws!) == 0 { cut -= 1 }
        var delivered = Array(device.undelivered[..<cut].joined())
        let late = Array(device.undelivered[cut...])
        if delivered.count > 1 && Int.random(in: 0..<3, using: &watchDraws!) == 0 { delivered.shuffle(using: &watchDraws!) }
        deliver(delivered)
        let waits: [Duration] = [.milliseconds(5), .milliseconds(100), .seconds(1), .seconds(10)]
        let wait = waits[Int.random(in: 0..<waits.count, using: &watchDraws!)]
        device.watchNow = device.watchNow.advanced(by: wait)
        if wait >= AgentOptions().deleteSettle {
            deliver(late.flatMap { $0 })
            device.undelivered = []
        } else {
            device.undelivered = late
        }
        device.carriedLate = device.undelivered.count
        figures.watchSyncs += 1
        figures.lateEvents += device.undelivered.count
        let scope = device.settler.takeSettled(at: device.watchNow, probe: probe)
        trace("  \(device.name)'s watch: scope \(scope), late \(device.undelivered.count), settling \(device.settler.paths.sorted())")
        return scope
    }

    /// Another device's whole sync, run in the middle of one (``SimSchedule/Fault/race(at:device:)``): checked as
    /// any sync.
    private func racingSync(_ device: SimDevice) {
        figures.syncs += 1
        figures.races += 1
        let expectOffline = device.offline || serverDown
        let expected: SimServerOracle.Expected?
        do { expected = try expectedReport(device, quickEnd: false) } catch {
            findings.harness.append("\(at): the server could not be read before \(device.name)'s sync in the middle: \(error)")
            return
        }
        let outcome = Result { try device.engine.sync(Self.guardedOptions, only: nil) }
        do { try judgeReport(device, expected, outcome, what: "sync in the middle of another", lenient: false) } catch {
            findings.harness.append("\(at): \(error)")
        }
        do {
            let report = try outcome.get()
            trace(
                "  \(device.name) synced in the middle: "
                    + report.changes.map { "\($0.kind.rawValue) \($0.name)" }
                    .joined(separator: ", "))
            if expectOffline {
                device.needFull = true
            } else {
                try afterSync(device, report)
            }
        } catch {
            device.needFull = true
            model.partlySynced(device.index)
            if !expectOffline && !reportsBrokenServer(error) {
                findings.harness.append("\(at): \(device.name)'s sync in the middle of another threw: \(error)")
            }
        }
    }

    /// What the injector does during a sync with `fault`.
    private func plan(_ fault: SimSchedule.Fault?, _ device: SimDevice) throws -> SimFaultInjector.Plan {
        var plan = SimFaultInjector.Plan()
        func edit(_ at: Int, _ target: SimSchedule.Target) throws {
            let note = try resolve(target, device)
            plan.edit = (at, device.folder.root + "/" + note, note, "\(note) e\(model.nextID) mid-sync")
        }
        switch fault {
        case nil: break
        case .crash(let at): plan.crashAt = at
        case .crashAtPoint(let point, let occurrence):
            plan.crashAtPoint = (SimSchedule.faultPoints[point % SimSchedule.faultPoints.count], occurrence)
        case .partition(let at):
            // The server can go away mid-sync only while it is there.
            if !serverDown { plan.partitionAt = at }
        case .userEdit(let at, let target):
            try edit(at, target)
        case .userEditThenCrash(let at, let target, let crashAt):
            try edit(at, target)
            plan.crashAt = crashAt
        case .gc(let at):
            plan.race = (at, SimRace { [unowned self] in self.runGC(policy: 0, crashAt: nil) })
        case .race(let at, let index):
            var other = devices[index % devices.count]
            if other === device { other = devices[(index + 1) % devices.count] }
            // The interrupted sync may already have pushed part of what it syncs: the racing device may pull it.
            let interrupted = device.index
            plan.race = (
                at,
                SimRace { [unowned self] in
                    self.model.partlySynced(interrupted)
                    self.racingSync(other)
                }
            )
        }
        return plan
    }

    /// Checks a finished online sync, and records what the device and the server now know.
    private func afterSync(_ device: SimDevice, _ report: SyncReport) throws {
        let who = device.name
        if report.heldDeletes > 0 {
            // A mass delete is held whole: none of its deletes is committed, everything else syncs.
            figures.heldSyncs += 1
            let committed = report.changes.filter { $0.kind == .uploadDelete }.map(\.name)
            if !committed.isEmpty {
                findings.harness.append("\(at): \(who)'s sync held \(report.heldDeletes) deletes but committed \(committed)")
            }
            let others = folderWarningsTaken(device, report.warnings).filter {
                $0.kind != .deletesHeld && $0.kind != .moveConflict && !($0.kind == .casePair && folds(device))
            }
            if !others.isEmpty { findings.harness.append("\(at): \(who)'s sync warned: \(others)") }
            let stale = staleCasePairWarnings(device, report.warnings)
            if !stale.isEmpty { findings.harness.append("\(at): \(who)'s sync said pairs that do not wait: \(stale)") }
            model.partlySynced(device.index)
            device.needFull = true
            return
        }
        if report.offline { findings.harness.append("\(at): \(who)'s sync was offline: \(report.offlineReason ?? "")") }
        if report.pending != 0 {
            let queued = (try? device.state.outbox())?.map { "\($0.value.op) \($0.key)" }.sorted() ?? []
            findings.harness.append("\(at): \(who)'s sync left \(report.pending) change(s) pending: \(queued)")
        }
        // Two devices renaming one note to different names is said, not a fault; so is a case pair waiting on a
        // case-folding folder (``userView(_:server:)`` checks that it is one).
        let warnings = folderWarningsTaken(device, report.warnings).filter {
            $0.kind != .moveConflict && !($0.kind == .casePair && folds(device))
        }
        if !warnings.isEmpty { findings.harness.append("\(at): \(who)'s sync warned: \(warnings)") }
        let stale = staleCasePairWarnings(device, report.warnings)
        if !stale.isEmpty { findings.harness.append("\(at): \(who)'s sync said pairs that do not wait: \(stale)") }
        guard !report.offline else {
            device.needFull = true
            return
        }
        if serverHistoryBroken {
            // A device the fault does not concern (yet) syncs; what the server holds is judged after the recovery.
            model.partlySynced(device.index)
            device.needFull = true
            return
        }
        model.synced(device.index)
        unconfirmed[device.index] = []
        device.dirty = []
        device.needFull = false

        let server = try serverNotes()
        everSeen.formUnion(server.keys)
        everOnServer.formUnion(server.keys)
        if folds(device) {
            for name in everSeen where foldedAway(name, server: server) { foldedNames.insert(name) }
        }
        if findings.convergence.isEmpty {
            let (local, waiting) = try userView(device, server: server)
            for path in Set(local.keys).union(server.keys).sorted() where local[path] != server[path]?.data && !waiting.contains(path) {
                findings.convergence.append(
                    "\(at): after \(who)'s sync, \(path) is \(SyncHistoryRunner.show(local[path])) "
                        + "there and \(SyncHistoryRunner.show(server[path]?.data)) on the server")
            }
        }
        if findings.lostWrites.isEmpty {
            let held = Set(server.values.flatMap { SyncHarness.lines($0.data) })
            for (line, origin) in model.linesThatMustSurvive(known: model.serverKnowledge).sorted(by: { $0.key < $1.key })
            where !held.contains(line) {
                findings.lostWrites.append("\(at): after \(who)'s sync the server lost \"\(line)\" of \(model.event(origin))")
            }
        }
        // No self-echo: what a device pulls was written by another device.
        let pulled = report.changes.filter { $0.kind == .download || $0.kind == .restore }
        if !pulled.isEmpty {
            let bases = try device.state.bases()
            for change in pulled {
                guard let name = try? RecordName(validating: change.name), let base = bases[name],
                    case .entry(let entry) = try checker.readSlot(base.tag)
                else { continue }
                if entry.device == device.id {
                    findings.selfEcho.append("\(at): \(who) downloaded its own change of \(change.name) (entry \(base.tag)) back")
                }
            }
        }
    }

    /// An offline sync changes no note, reports itself offline, and leaves every local change queued in the outbox.
    /// `userEdited`: a note the user saved during the sync, which the sync may or may not have seen. `scope`: a
    /// partial sync's, outside which it queues nothing (the agent's changes still on their way).
    private func checkOffline(
        _ device: SimDevice, _ report: SyncReport, notesBefore: [String: Data],
        userEdited: String?, scope: [String]?
    ) throws {
        func inScope(_ name: String) -> Bool {
            scope.map { $0.contains { name == $0 || name.hasPrefix($0 + "/") } } ?? true
        }
        let who = device.name
        if !report.offline {
            findings.offline.append("\(at): \(who)'s sync without a server did not report itself offline")
        }
        var local = try localNotes(device)
        var before = notesBefore
        if let userEdited {
            local[userEdited] = nil
            before[userEdited] = nil
        }
        if local != before {
            findings.offline.append("\(at): \(who)'s sync without a server changed its notes")
        }
        let bases = try device.state.bases()
        let outbox = try device.state.outbox()
        for (name, data) in local {
            let digest = ContentDigest(of: data)
            guard inScope(name), let record = try? RecordName(validating: name), bases[record]?.digest != digest else { continue }
            if outbox[record]?.digest != digest || outbox[record]?.op != .save {
                findings.offline.append("\(at): \(who)'s change of \(name) is not queued in the outbox while offline")
            }
        }
        for name in bases.keys
        where local[name.string] == nil && name.string != userEdited && outbox[name]?.op != .delete && inScope(name.string) {
            findings.offline.append("\(at): \(who)'s delete of \(name) is not queued in the outbox while offline")
        }
        if userEdited == nil && report.pending != outbox.count {
            findings.offline.append("\(at): \(who)'s report says \(report.pending) pending, the outbox holds \(outbox.count)")
        }
    }

    private func dryRun(_ device: SimDevice) throws {
        let before = try snapshot()
        let options = SyncHarness.dryRunOptions
        let expected = try expectedReport(device, quickEnd: false)
        let outcome = Result { try device.engine.sync(options, only: nil) }
        try judgeReport(device, expected, outcome, what: "dry run", lenient: false)
        if case .failure(let error) = outcome, !(error is NoteSyncError) { throw error }
        if case .failure(let error as NoteSyncError) = outcome {
            if !device.offline && !serverDown && !reportsBrokenServer(error) {
                findings.harness.append("\(at): \(device.name)'s dry run threw: \(error)")
            }
        }
        let after = try snapshot()
        for path in Set(before.keys).union(after.keys).sorted() where before[path] != after[path] {
            findings.dryRun.append(
                "\(at): the dry run changed \(path): "
                    + "\(before[path]?.description ?? "absent") → \(after[path]?.description ?? "absent")")
        }
    }

    // MARK: - Healing and the checks at the end

    /// Brings the server back and every device online, then syncs round-robin until a whole round changes
    /// nothing (termination). Returns false when they never settled. That last round is also the first check of
    /// idempotence: no sync in it may have changed a note either.
    private func heal() throws -> Bool {
        try serverBack()
        if serverHistoryBroken || !heldEntries.isEmpty {
            for device in devices where device.offline {
                device.offline = false
                try device.restart()
            }
            try recoverServer()
        }
        for device in devices where device.offline {
            device.offline = false
            try device.restart()
        }
        for round in 1...12 {
            let token = try serverState().token
            var quiet = true
            var changedNotes: [String] = []
            for device in devices {
                at = "healing round \(round), \(device.name)"
                figures.syncs += 1
                let notesBefore = try notes(device)
                let report = try device.engine.sync(SyncHarness.syncOptions, only: nil)
                if try notes(device) != notesBefore { changedNotes.append(device.name) }
                checkPrivateNotes(device)
                trace(
                    "  \(at): "
                        + report.changes.map { "\($0.kind.rawValue) \($0.name)\($0.detail.map { " (\($0))" } ?? "")" }
                        .joined(separator: ", "))
                try afterSync(device, report)
                if !report.changes.isEmpty { quiet = false }
            }
            figures.healingRounds += 1
            let after = try serverState().token
            if quiet && after == token {
                for who in changedNotes {
                    findings.idempotence.append("\(at): a sync after convergence, which reported no change, changed \(who)'s notes")
                }
                return true
            }
        }
        findings.termination.append("the devices did not settle within 12 rounds of syncs")
        return false
    }

    private func checkFinalState() throws {
        let server = try serverNotes(fresh: true)
        let foldUndecided = foldUndecidedNotes(server: server)
        for device in devices {
            let who = device.name
            let (local, waiting) = try userView(device, server: server)
            figures.casePairWaits += waiting.count
            let times = try modifiedTimes(device)
            // Convergence: every folder is the server's heads, byte for byte, with the records' mtimes (on a
            // case-folding folder, less the records that wait there for their twin).
            for path in Set(local.keys).union(server.keys).sorted() where !waiting.contains(path) {
                if local[path] != server[path]?.data {
                    findings.convergence.append(
                        "\(at): \(path) is \(SyncHistoryRunner.show(local[path])) on \(who) "
                            + "and \(SyncHistoryRunner.show(server[path]?.data)) on the server")
                } else if !touched.contains(path), let head = server[path], times[path] != head.modified {
                    findings.convergence.append("\(at): \(path) has mtime \(times[path] ?? 0) on \(who), the record says \(head.modified)")
                }
            }
            // The three trees agree: every base is the server head, nothing is queued.
            let bases = try device.state.bases()
            let heads = try serverState().heads
            for (name, head) in heads where !head.deleted && !waiting.contains(name.string) {
                guard let base = bases[name] else {
                    findings.convergence.append("\(at): \(who) has no base for \(name)")
                    continue
                }
                if base.tag != head.tag || base.digest != head.text?.sha256 {
                    findings.convergence.append("\(at): \(who)'s base of \(name) is tag \(base.tag), the head is tag \(head.tag)")
                }
            }
            for name in bases.keys where heads[name].map({ $0.deleted }) ?? true {
                findings.convergence.append("\(at): \(who) keeps a base for \(name), which the server does not have")
            }
            let outbox = try device.state.outbox()
            if !outbox.isEmpty { findings.convergence.append("\(at): \(who)'s outbox still holds \(outbox.keys.sorted())") }

            // No lost write: every line some user wrote and no user removed is in some note; decided notes are as decided.
            // A record waiting on a case-folding folder keeps its text on the server, and on every other folder.
            let held = Set((local.values.map { $0 } + waiting.compactMap { server[$0]?.data }).flatMap(SyncHarness.lines))
            for (line, origin) in model.linesThatMustSurvive(known: Set(model.events.map(\.id))).sorted(by: { $0.key < $1.key })
            where !held.contains(line) {
                findings.lostWrites.append("\(at): \(who) lost \"\(line)\" of \(model.event(origin))")
            }
            for (note, expected) in model.decidedOutcomes().sorted(by: { $0.key < $1.key })
            where !undecided.contains(note) && !foldUndecided.contains(note) {
                let actual = (waiting.contains(note) ? server[note]?.data : local[note]).map(SyncHarness.lines)
                if actual != expected {
                    findings.lostWrites.append(
                        "\(at): \(note) on \(who) is \(actual.map { "\($0)" } ?? "absent"), "
                            + "the history decides \(expected.map { "\($0)" } ?? "absent")")
                }
            }
            // A record waiting here is where it is on the server.
            let waited = waiting.compactMap { name in server[name].map { (name, $0.data) } }
            checkEditsFollowRenames(local: local.merging(waited) { $1 }, who: who)
            // No unrequested delete: a name that was ever a note and that no user deleted is still a note (a name a
            // note was renamed to may lose it to another device's later rename of the same note).
            for name in everSeen.subtracting(userDeleted).subtracting(movedTo).sorted()
            where local[name] == nil && !waiting.contains(name) && !foldedNames.contains(name) && !foldedAway(name, server: server) {
                findings.unrequestedDeletes.append("\(at): \(name) is gone from \(who), but no user deleted it")
            }
        }
        for name in server.keys.sorted() where isIgnoredPath(name) {
            findings.confinement.append("\(at): editor litter \(name) reached the server")
        }
    }

    /// Edits follow renames: an edit of a note that a user renamed, made without knowing of the rename (before it
    /// reached that device) and not known to the rename either, ends in the note wherever the server's heads say its
    /// record is now (following its moves: ``ZoneState/destination(of:)``), or in a conflict copy, or at a name a
    /// user moved a note to since; never left behind at the old name. Only lines no user removed since, and only
    /// where the model is sure of who knew what (no sync that did not finish in between).
    private func checkEditsFollowRenames(local: [String: Data], who: String) {
        guard !userMoves.isEmpty, let heads = try? serverState().heads else { return }
        let mustSurvive = model.linesThatMustSurvive(known: Set(model.events.map(\.id)))
        let elsewhere = Set(
            local.filter { ConflictCopyName.isNotesyncConflictCopy($0.key) || movedTo.contains($0.key) }.values.flatMap(
                SyncHarness.lines))
        for move in userMoves {
            let renamed = model.event(move.event)
            guard let source = RecordName(trusted: move.source), let head = heads[source] else { continue }
            // Deleted at the end (by a user, or never moved): nothing to follow.
            guard let final = head.deleted ? ZoneState(heads: heads).destination(of: source) : source else { continue }
            let accepted = elsewhere.union(local[final.string].map(SyncHarness.lines) ?? [])
            // On a case-folding folder the file a user wrote under the old name may be a twin's (a record whose name
            // folds to it, ``CasePairs``): the edit is that record's, and its text is kept there.
            let key = SimCaseFolding.fold(move.source)
            let twins = Set(
                local.filter { $0.key != move.source && SimCaseFolding.fold($0.key) == key }.values.flatMap(SyncHarness.lines))
            for edit in model.events where edit.note == move.source && edit.lines != nil && edit.id != move.event {
                guard !edit.mayKnow.contains(move.event), !renamed.mayKnow.contains(edit.id) else { continue }
                let folding = filesystem(of: edit.device) == .caseFolding
                for line in edit.lines ?? []
                where mustSurvive[line] != nil && !accepted.contains(line) && !(folding && twins.contains(line)) {
                    findings.lostWrites.append(
                        "\(at): \(who): \"\(line)\" of \(edit), made to \(move.source) while "
                            + "\(SyncHarness.deviceNames[renamed.device]) renamed it to \(move.destination), is not in "
                            + "\(final), where the note is now")
                }
            }
        }
    }

    /// Idempotence: once converged (the last round of healing changed nothing), a dry run plans nothing, and a
    /// sync after every note was touched (mtime changed, bytes not) does and commits nothing.
    private func checkIdempotent() throws {
        func quietRound(_ label: String) throws {
            for device in devices {
                let token = try serverState().token
                let notes = try notes(device)
                let report = try device.engine.sync(SyncHarness.syncOptions, only: nil)
                figures.syncs += 1
                if !report.changes.isEmpty {
                    findings.idempotence.append(
                        "\(at): \(label): \(device.name)'s sync did "
                            + report.changes.map { "\($0.kind.rawValue) \($0.name)" }.joined(separator: ", "))
                }
                if try serverState().token != token {
                    findings.idempotence.append("\(at): \(label): \(device.name)'s sync committed to the server")
                }
                if try self.notes(device) != notes {
                    findings.idempotence.append("\(at): \(label): \(device.name)'s sync changed its notes")
                }
            }
        }
        for device in devices {
            let planned = try device.engine.sync(SyncHarness.dryRunOptions, only: nil).changes
            if !planned.isEmpty {
                findings.idempotence.append(
                    "\(at): a dry run on \(device.name) after convergence plans "
                        + planned.map { "\($0.kind.rawValue) \($0.name)" }.joined(separator: ", "))
            }
        }
        for device in devices {
            for note in try notes(device).keys.sorted() {
                try SyncHarness.setModified(device.folder.root + "/" + note, clock.advance(by: schedule.clockStep))
            }
        }
        try quietRound("a sync after touching every note")
    }

    /// Confinement: nothing was written outside the notes folders and the server, and no temp file outlives the
    /// syncs that followed it (the local trash is documented and stays).
    private func checkConfinement() throws {
        let expected = Set(devices.map(\.name) + ["server", "stash", "server-backup", "server-held"])
        for entry in try FileIO.list(world.path) ?? [] where !expected.contains(entry) {
            findings.confinement.append("\(at): something wrote \(entry) next to the notes folders and the server")
        }
        if let stash = try FileIO.list(stashDirectory), !stash.isEmpty {
            findings.harness.append("\(at): the crash stash still holds \(stash.count) file(s)")
        }
        let stateFiles: Set<String> = [
            "state.sqlite", "state.sqlite-wal", "state.sqlite-shm", "last-sync", "trash", "staging"
        ]
        for device in devices {
            for (relative, info) in try SyncHarness.walk(device.folder.root, skipTopLevel: nil) {
                let components = relative.split(separator: "/")
                let name = String(components.last ?? "")
                let staged =
                    components.count > 2 && components[0] == Substring(ReservedNames.stateDirectoryName)
                    && components[1] == "staging"
                if name.hasPrefix(ReservedNames.agentTempPrefix) || staged {
                    findings.confinement.append("\(at): \(device.name) has a leftover temp file \(relative)")
                } else if components.first == Substring(ReservedNames.stateDirectoryName), components.count == 2,
                    !stateFiles.contains(name)
                {
                    findings.confinement.append("\(at): \(device.name) has an unexpected \(relative)")
                }
                _ = info
            }
        }
        let report = try ServerFsck(store: checker).run(repair: false)
        for finding in report.findings {
            findings.confinement.append("\(at): server fsck: \(finding)")
        }
    }

    // MARK: - Looking

    private func read(_ device: SimDevice, _ note: String) throws -> Data? {
        try FileIO.read(device.folder.root + "/" + note)
    }

    /// A device's notes: every file the engine syncs (ignored litter and `.notesync/` left out), by relative path.
    /// The notes of `device` and their texts' lines, for the trace.
    private func traceNotes(_ device: SimDevice) throws {
        for (name, data) in try notes(device).sorted(by: { $0.key < $1.key }) {
            trace(
                "    \(device.name) has \(name): \(SyncHarness.lines(data).joined(separator: " | ")) @\(FileIO.lstatInfo(device.folder.root + "/" + name).map { StatFingerprint($0).mtime % 100_000_000_000 } ?? 0)"
            )
        }
    }

    func notes(_ device: SimDevice) throws -> [String: Data] {
        var notes: [String: Data] = [:]
        for relative in try noteFiles(device.folder.root) {
            notes[relative] = try FileIO.read(device.folder.root + "/" + relative)
        }
        return notes
    }

    /// The notes' mtimes, by record (``recordNotes(_:)``).
    private func modifiedTimes(_ device: SimDevice) throws -> [String: Int64] {
        var times: [String: Int64] = [:]
        for (name, file) in try recordNotes(device) {
            times[name] = FileIO.lstatInfo(device.folder.root + "/" + file.spelling).map { StatFingerprint($0).mtime }
        }
        return times
    }

    /// A device's notes by record: on a case-folding folder, each file under the record it is (``recordNotes(_:)``).
    private func localNotes(_ device: SimDevice) throws -> [String: Data] {
        try recordNotes(device).mapValues(\.data)
    }

    /// What the user of `device` has, by record, and the records that wait there: on a case-folding folder, a
    /// record of the server with no file of its own while a twin (a name that folds to it) has the file, holding
    /// the twin's text as the server has it. That is what ``CasePairs`` documents (one file, the other name waits);
    /// a file holding another record's text, or a record with no twin on the folder, is a divergence.
    private func userView(
        _ device: SimDevice, server: [String: (data: Data, modified: Int64)]
    ) throws -> (local: [String: Data], waiting: Set<String>) {
        let local = try localNotes(device)
        guard folds(device) else { return (local, []) }
        var owners: [String: String] = [:]
        for (name, data) in local where server[name]?.data == data { owners[SimCaseFolding.fold(name)] = name }
        let waiting = Set(server.keys.filter { local[$0] == nil && owners[SimCaseFolding.fold($0)] != nil })
        return (local, waiting)
    }

    /// With a case-folding device in the schedule, notes whose name folds to another name some device had: which
    /// of them a user's action on the folding device changed depends on what that folder held then, so their ends
    /// are not decided by the history (their lines are still checked, and so are deletes of names on the server).
    private func foldUndecidedNotes(server: [String: (data: Data, modified: Int64)]) -> Set<String> {
        guard devices.contains(where: folds) else { return [] }
        var groups: [String: Set<String>] = [:]
        for name in everSeen.union(everOnServer).union(server.keys) { groups[SimCaseFolding.fold(name), default: []].insert(name) }
        return Set(groups.values.filter { $0.count > 1 }.flatMap { $0 })
    }

    /// A name a user made on a case-folding folder that never reached the server, while the server has a name that
    /// folds to it: the user's file was that record's file there (``CasePairs``), so the name is no note of its
    /// own. (Its text is checked with every other line.)
    private func foldedAway(_ name: String, server: [String: (data: Data, modified: Int64)]) -> Bool {
        guard devices.contains(where: folds), !everOnServer.contains(name) else { return false }
        let key = SimCaseFolding.fold(name)
        return server.keys.contains { $0 != name && SimCaseFolding.fold($0) == key }
    }

    private func noteFiles(_ root: String) throws -> [String] {
        var found: [String] = []
        func visit(_ relative: String) throws {
            let directory = relative.isEmpty ? root : root + "/" + relative
            for entry in try FileIO.list(directory) ?? [] {
                let path = relative.isEmpty ? entry : relative + "/" + entry
                guard let info = FileIO.lstatInfo(root + "/" + path) else { continue }
                let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
                if rules.isIgnored(path, isDirectory: isDirectory) { continue }
                if isDirectory { try visit(path) } else { found.append(path) }
            }
        }
        try visit("")
        return found
    }

    private func isIgnoredPath(_ name: String) -> Bool {
        let components = name.split(separator: "/").map(String.init)
        for index in components.indices {
            let path = components[...index].joined(separator: "/")
            if rules.isIgnored(path, isDirectory: index < components.count - 1) { return true }
        }
        return false
    }

    private func serverState() throws -> ZoneState {
        try checker.fetch(into: &checkerState)
        return checkerState
    }

    private func serverNotes(fresh: Bool = false) throws -> [String: (data: Data, modified: Int64)] {
        let heads = fresh ? try checker.bootstrap().heads : try serverState().heads
        var notes: [String: (data: Data, modified: Int64)] = [:]
        for (name, head) in heads where !head.deleted {
            guard let text = head.text else { continue }
            if fresh || texts[text] == nil { texts[text] = try checker.readAsset(text) }
            notes[name.string] = (texts[text] ?? Data(), head.modified)
        }
        return notes
    }

    /// Everything under the simulation folder, for dry-run purity (SQLite's `-shm` lock table left out, as in
    /// ``SyncHarness/snapshot()``).
    private func snapshot() throws -> [String: SyncHarness.Entry] {
        var entries: [String: SyncHarness.Entry] = [:]
        for root in [world.path] + foldingRoots {
            for (relative, info) in try SyncHarness.walk(root, skipTopLevel: nil) where !relative.hasSuffix(".sqlite-shm") {
                let mtime = StatFingerprint(info).mtime
                let key = root + "/" + relative
                switch info.st_mode & S_IFMT {
                case S_IFDIR: entries[key] = .directory(mtime: mtime)
                case S_IFREG: entries[key] = .file(try FileIO.read(root + "/" + relative) ?? Data(), mtime: mtime)
                default: entries[key] = .other(mode: UInt32(info.st_mode))
                }
            }
        }
        return entries
    }

    private func parent(_ path: String) -> String { FileIO.parent(of: path) }

    private func check(_ condition: Bool, _ what: String) throws {
        if !condition { throw NoteSyncError(.io, path: at, "the simulation could not \(what)", errno: errno) }
    }
}

/// The folder of one simulation run, removed when the run ends (without the chmod pass of ``TempDirectory``:
/// a soak makes thousands of these).
final class SimScratch {
    let path: String

    init(in base: String) throws {
        var template = Array((base + "/notesync-sim-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw NoteSyncError(.io, path: base, "mkdtemp failed", errno: errno)
        }
        path = String(cString: made)
    }

    func sub(_ name: String) -> String { path + "/" + name }

    deinit {
        if ProcessInfo.processInfo.environment["NOTESYNC_SIM_KEEP"] == nil { try? FileManager.default.removeItem(atPath: path) }
    }
}

extension SimRunner {
    /// Shrinks a failing schedule greedily with ``SimSchedule/shrinks()``: the first smaller candidate that still
    /// fails the same way (a violation of one of the invariants the original violated) replaces it, until none
    /// does or `budget` runs are spent. The soak's counterpart of propertyCheck's shrinking.
    static func shrink(_ schedule: SimSchedule, findings: SimFindings, budget: Int = 3000) -> (SimSchedule, SimFindings) {
        let violated = Set(findings.all.filter { !$0.1.isEmpty }.map(\.0))
        func sameFailure(_ found: SimFindings) -> Bool {
            found.all.contains { violated.contains($0.0) && !$0.1.isEmpty }
        }
        var current = (schedule, findings)
        var runs = 0
        var improved = true
        while improved && runs < budget {
            improved = false
            for candidate in current.0.shrinks() {
                runs += 1
                let found = run(candidate).findings
                if sameFailure(found) {
                    current = (candidate, found)
                    improved = true
                    break
                }
                if runs >= budget { break }
            }
        }
        return current
    }
}
