import Foundation
import PropertyBased
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

// MARK: - Devices and a server, in-process

/// Two or three devices, each with its own notes folder and local state, syncing with one server, all in one
/// temporary directory and driven in-process through ``SyncEngine`` as `notesync init` and `notesync sync` do.
///
/// Note mtimes come from a logical clock: every write or touch by the harness gives the note a strictly
/// increasing mtime (`clockStep` apart), so "the later `modified` wins" is deterministic and two writes never
/// share a stat fingerprint however coarse the filesystem's timestamps are. With a step of a second conflict
/// copies made of different versions get different names; with a millisecond they often share one.
final class SyncHarness {
    struct Device {
        let id: String
        let name: String
        let folder: NotesFolder
        let state: LocalState
        let config: FolderConfig
    }

    /// Up to five devices (the simulation of SimRunner.swift runs 3–5; this harness 1–3).
    static let deviceIDs = ["dev-a", "dev-b", "dev-c", "dev-d", "dev-e"]
    static let deviceNames = ["alice", "bob", "carol", "dave", "erin"]
    /// Logical time starts in 2033: later than the wall-clock mtime the engine gives a merged note, so a user's
    /// edit is always later than the engine's own writes, as it is in life.
    static let epoch: Int64 = 2_000_000_000 * 1_000_000_000
    /// Without the clock checks: notes written in 2033 are in the future of the wall clock, by design.
    static let syncOptions: SyncOptions = {
        var options = SyncOptions(allowMassDelete: true)
        options.checksClock = false
        return options
    }()
    static let dryRunOptions: SyncOptions = {
        var options = SyncOptions(dryRun: true, withDiffs: true, allowMassDelete: true)
        options.checksClock = false
        return options
    }()

    let directory: TempDirectory
    let serverRoot: String
    let devices: [Device]
    private(set) var now = SyncHarness.epoch
    let clockStep: Int64
    /// A reader of the server for the checks, which folds in only the entries it has not read yet.
    private let checker: ServerStore
    private var checkerState = ZoneState()
    private var texts: [AssetRef: Data] = [:]

    /// `persistentState` keeps each device's local state in `.notesync/state.sqlite` (as the CLI does) rather
    /// than in memory: slower (SQLite fsyncs), needed where the database file itself is compared.
    init(deviceCount: Int, persistentState: Bool = false, clockStep: Int64 = 1_000_000_000) throws {
        precondition((1...3).contains(deviceCount))
        self.clockStep = clockStep
        directory = try TempDirectory("notesync-props")
        serverRoot = try TestServer.root(directory)
        let marker = try TestServer.create(serverRoot)
        var devices: [Device] = []
        for index in 0..<deviceCount {
            let folder = NotesFolder(root: directory.sub(Self.deviceNames[index]))
            try FileIO.makeDirectories(folder.root)
            try FileIO.makeDirectory(folder.stateDirectory)
            let state = persistentState ? try LocalState(path: folder.database) : try LocalState()
            let config = FolderConfig(
                deviceID: Self.deviceIDs[index], deviceName: Self.deviceNames[index], server: serverRoot,
                vault: TestServer.vault, vaultServerID: marker.id)
            let store = try ServerStore(root: serverRoot, device: config.deviceID, logger: testLogger, vault: TestServer.vault)
            try store.writeDeviceInfo(DeviceInfo(id: config.deviceID, name: config.deviceName, lastSeen: 0, token: 0))
            devices.append(Device(id: config.deviceID, name: config.deviceName, folder: folder, state: state, config: config))
        }
        self.devices = devices
        checker = try ServerStore(root: serverRoot, device: "checker", logger: testLogger, vault: TestServer.vault)
    }

    /// The next logical time, in nanoseconds.
    func tick() -> Int64 {
        now += clockStep
        return now
    }

    // MARK: the user's side

    func path(_ device: Int, _ note: String) -> String { devices[device].folder.root + "/" + note }

    func read(_ device: Int, _ note: String) throws -> Data? { try FileIO.read(path(device, note)) }

    /// Saves a note in place (truncate and write, as many editors do), then gives it the next logical mtime.
    func write(_ device: Int, _ note: String, _ data: Data) throws {
        let path = path(device, note)
        try FileIO.makeDirectories(FileIO.parent(of: path))
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw NoteSyncError.posix("open", path: path, errno: errno) }
        defer { close(fd) }
        try FileIO.writeAll(fd: fd, data, path: path)
        try Self.setModified(path, tick())
    }

    /// Changes only the note's mtime.
    func touch(_ device: Int, _ note: String) throws {
        try Self.setModified(path(device, note), tick())
    }

    func delete(_ device: Int, _ note: String) throws {
        let path = path(device, note)
        guard unlink(path) == 0 else { throw NoteSyncError.posix("unlink", path: path, errno: errno) }
    }

    static func setModified(_ path: String, _ nanoseconds: Int64) throws {
        let time = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var times = [time, time]
        guard utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw NoteSyncError.posix("utimensat", path: path, errno: errno)
        }
    }

    // MARK: syncing

    func sync(_ device: Int, _ options: SyncOptions = SyncHarness.syncOptions) throws -> SyncReport {
        let device = devices[device]
        return try SyncEngine(folder: device.folder, state: device.state, config: device.config, logger: testLogger)
            .sync(options)
    }

    /// Syncs the devices round-robin until a whole round commits nothing and reports no change. Returns the
    /// number of rounds, or nil when `maxRounds` were not enough (the devices never settled).
    func heal(maxRounds: Int = 10, afterEach: (Int, SyncReport) throws -> Void) throws -> Int? {
        for round in 1...maxRounds {
            let token = try serverState().token
            var quiet = true
            for device in devices.indices {
                let report = try sync(device)
                try afterEach(device, report)
                if !report.changes.isEmpty { quiet = false }
            }
            let after = try serverState().token
            if quiet && after == token { return round }
        }
        return nil
    }

    // MARK: looking

    /// Every regular file of a device's notes folder outside `.notesync/`, by relative path (litter included).
    func notes(_ device: Int) throws -> [String: Data] {
        var notes: [String: Data] = [:]
        for (relative, _) in try Self.walk(devices[device].folder.root, skipTopLevel: ReservedNames.stateDirectoryName)
        where !relative.hasSuffix("/") {
            notes[relative] = try FileIO.read(devices[device].folder.root + "/" + relative)
        }
        return notes
    }

    /// The mtime of every note of a device, in nanoseconds.
    func modifiedTimes(_ device: Int) throws -> [String: Int64] {
        var times: [String: Int64] = [:]
        for (relative, info) in try Self.walk(devices[device].folder.root, skipTopLevel: ReservedNames.stateDirectoryName)
        where !relative.hasSuffix("/") {
            times[relative] = StatFingerprint(info).mtime
        }
        return times
    }

    /// The server's heads as of its last entry.
    func serverState() throws -> ZoneState {
        try checker.fetch(into: &checkerState)
        return checkerState
    }

    /// The server's live heads with their texts. `fresh` folds the whole log again with
    /// ``ServerStore/bootstrap()`` and reads every text from the server, as a new device would.
    func serverNotes(fresh: Bool = false) throws -> [String: (data: Data, modified: Int64)] {
        let heads = fresh ? try checker.bootstrap().heads : try serverState().heads
        var notes: [String: (data: Data, modified: Int64)] = [:]
        for (name, head) in heads where !head.deleted {
            guard let text = head.text else { continue }
            if fresh || texts[text] == nil { texts[text] = try checker.readAsset(text) }
            notes[name.string] = (texts[text] ?? Data(), head.modified)
        }
        return notes
    }

    /// One file or folder in a ``snapshot()``.
    enum Entry: Equatable, CustomStringConvertible {
        case directory(mtime: Int64)
        case file(Data, mtime: Int64)
        case other(mode: UInt32)
        /// An object of a server in a bucket: its size, time and ETag (``StorageInfo/fingerprint``).
        case object(StorageInfo)

        var description: String {
            switch self {
            case .directory(let mtime): "folder, mtime \(mtime)"
            case .file(let data, let mtime): "file of \(data.count) bytes, sha256 \(ContentDigest(of: data).hex.prefix(12)), mtime \(mtime)"
            case .other(let mode): "special file, mode \(String(mode, radix: 8))"
            case .object(let info): "object of \(info.size) bytes, mtime \(info.mtime), etag hash \(info.fingerprint.inode)"
            }
        }
    }

    /// Everything under the test directory (every notes folder with its local state database, and the server):
    /// each folder with its mtime, each file with its bytes and mtime; a server in a bucket as its objects, under
    /// `s3:`.
    ///
    /// SQLite's `-shm` file is left out: it is the shared-memory lock table of a WAL database, holds nothing
    /// durable, and a reader must register in it while a writer (here the harness's own open state, in real
    /// life a running agent) has the database open. With no writer, dry runs open the state immutable and the
    /// CLI test checks that not even `-shm`/`-wal` appear.
    func snapshot() throws -> [String: Entry] {
        var entries: [String: Entry] = [:]
        for (relative, info) in try Self.walk(directory.path, skipTopLevel: nil) where !relative.hasSuffix(".sqlite-shm") {
            let mtime = StatFingerprint(info).mtime
            switch info.st_mode & S_IFMT {
            case S_IFDIR: entries[relative] = .directory(mtime: mtime)
            case S_IFREG: entries[relative] = .file(try FileIO.read(directory.path + "/" + relative) ?? Data(), mtime: mtime)
            default: entries[relative] = .other(mode: UInt32(info.st_mode))
            }
        }
        if ServerAddress.isObjectStore(serverRoot) {
            for (path, info) in try ServerFiles(root: serverRoot).listing() { entries["s3:" + path] = .object(info) }
        }
        return entries
    }

    /// Every entry under `root` by relative path (folders end in `/` and come with their own stat), the root's
    /// top-level `skipTopLevel` left out.
    static func walk(_ root: String, skipTopLevel: String?) throws -> [(String, stat)] {
        var found: [(String, stat)] = []
        func visit(_ relative: String) throws {
            let directory = relative.isEmpty ? root : root + "/" + relative
            for entry in try FileIO.list(directory) ?? [] {
                if relative.isEmpty && entry == skipTopLevel { continue }
                let path = relative.isEmpty ? entry : relative + "/" + entry
                guard let info = FileIO.lstatInfo(root + "/" + path) else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    found.append((path + "/", info))
                    try visit(path)
                } else {
                    found.append((path, info))
                }
            }
        }
        try visit("")
        return found
    }

    // MARK: note texts

    /// A note's text as lines; the harness only ever writes lines that end in a newline.
    static func lines(_ data: Data) -> [String] {
        var lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .map(String.init)
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    static func text(_ lines: [String]) -> Data { Data(lines.map { $0 + "\n" }.joined().utf8) }
}

// MARK: - Random histories

/// A random history: what the users of two or three devices do, one step at a time.
struct SyncHistory: Sendable, CustomTestStringConvertible {
    /// The notes the users touch: a small pool, so that devices collide, with nested folders.
    static let pool = ["note.md", "a/b.md", "a/x/README"]

    enum Edit: Sendable, Hashable {
        /// Replace the whole text by `lines` new lines (also how a missing note is created).
        case rewrite(lines: Int)
        /// Replace the whole text by one of two well-known texts, which other devices may write too (so both
        /// sides of a sync can make the same change).
        case rewriteShared(Int)
        /// Add one new line at the end.
        case append
        /// Replace one line (index taken modulo the line count) by a new line.
        case changeLine(Int)
    }

    enum Action: Sendable, Hashable {
        case edit(Edit)
        case delete
        /// Changes only the mtime.
        case touch
        case sync
        /// A dry run, checked for purity, then the real sync, checked against it.
        case dryRunThenSync
    }

    struct Step: Sendable, Hashable, CustomStringConvertible {
        var device: Int
        var note: String
        var action: Action

        var description: String {
            let who = SyncHarness.deviceNames[device]
            switch action {
            case .edit(.rewrite(let lines)): return "\(who) rewrites \(note) (\(lines) lines)"
            case .edit(.rewriteShared(let variant)): return "\(who) rewrites \(note) as well-known text \(variant)"
            case .edit(.append): return "\(who) appends to \(note)"
            case .edit(.changeLine(let index)): return "\(who) changes line \(index) of \(note)"
            case .delete: return "\(who) deletes \(note) (or the next note it has)"
            case .touch: return "\(who) touches \(note)"
            case .sync: return "\(who) syncs"
            case .dryRunThenSync: return "\(who) dry-runs, then syncs"
            }
        }
    }

    var deviceCount: Int
    /// The logical clock's step, in nanoseconds: a second, or a millisecond (many edits within one second).
    var clockStep: Int64 = 1_000_000_000
    var steps: [Step]

    var testDescription: String {
        "\(deviceCount) devices, clock step \(clockStep) ns: " + steps.map(\.description).joined(separator: "; ")
    }

    /// Histories of 2–3 devices and `length` steps. Integers shrink towards 0, which maps to a sync by alice of
    /// the first note: a shrunk history keeps only the steps that matter.
    static func generator(length: ClosedRange<Int> = 5...30, dryRuns: Bool = false)
        -> Generator<SyncHistory, some Sequence & SendableMetatype>
    {
        let step = zip(Gen.int(in: 0...2), Gen.int(in: 0...(pool.count - 1)), Gen.int(in: 0...99), Gen.int(in: 0...5))
            .map { device, note, roll, parameter in
                Step(device: device, note: pool[note], action: action(roll: roll, parameter: parameter, dryRuns: dryRuns))
            }
        return zip(Gen.int(in: 2...3), Gen.bool, step.array(of: length)).map { deviceCount, fineClock, steps in
            SyncHistory(
                deviceCount: deviceCount, clockStep: fineClock ? 1_000_000 : 1_000_000_000,
                steps: steps.map { step in
                    var step = step
                    step.device %= deviceCount
                    return step
                })
        }
    }

    /// A note synced everywhere; then one device edits it while another deletes it, neither having seen the
    /// other's change, and they sync in either order. The edit must win (docs/reconciliation.md).
    static let editAgainstDelete = zip(
        Gen.int(in: 0...(pool.count - 1)), Gen.int(in: 2...3), Gen.int(in: 0...2), Gen.int(in: 0...5), Gen.bool, Gen.bool
    ).map { note, deviceCount, kind, parameter, bobEdits, editorSyncsFirst in
        let note = pool[note]
        let (editor, deleter) = bobEdits ? (1, 0) : (0, 1)
        let edit: Edit = [.changeLine(parameter), .append, .rewrite(lines: 1 + parameter)][kind]
        var steps = [Step(device: 0, note: note, action: .edit(.rewrite(lines: 4)))]
        steps += (0..<deviceCount).map { Step(device: $0, note: note, action: .sync) }
        steps += [Step(device: editor, note: note, action: .edit(edit)), Step(device: deleter, note: note, action: .delete)]
        steps += (editorSyncsFirst ? [editor, deleter] : [deleter, editor]).map { Step(device: $0, note: note, action: .sync) }
        return SyncHistory(deviceCount: deviceCount, steps: steps)
    }

    private static func action(roll: Int, parameter: Int, dryRuns: Bool) -> Action {
        switch roll {
        case ..<32: return .sync
        case ..<40: return dryRuns ? .dryRunThenSync : .sync
        case ..<57: return .edit(.changeLine(parameter))
        case ..<67: return .edit(.append)
        case ..<71: return .edit(.rewrite(lines: 1 + parameter))
        case ..<74: return .edit(.rewriteShared(parameter % 2))
        case ..<96: return .delete
        default: return .touch
        }
    }
}

// MARK: - What the users did, and what may therefore be gone

/// The users' writes and deletes, with who had heard of what, to judge what the engine may drop.
///
/// Knowledge travels only through syncs: a sync hands the server everything the device has heard of and the
/// device everything the server has. Every line a user writes is new and unique in the history, so a line can
/// legitimately disappear only if some user removed it from a note they had in front of them (by editing or
/// deleting that note); any other line must survive somewhere, in the note or in a conflict copy.
struct SyncHistoryModel {
    struct Event: CustomStringConvertible {
        var id: Int
        var device: Int
        var note: String
        /// The text the user saved; nil for a delete.
        var lines: [String]?
        /// The events the device had heard of when the user acted (not this one).
        var knows: Set<Int>
        /// The events it may have heard of: more than `knows` after a sync that did not finish (a crash, the
        /// server lost midway), which may have delivered any part of what it was syncing.
        var mayKnow: Set<Int>

        var description: String {
            "event \(id) (\(SyncHarness.deviceNames[device]) " + (lines == nil ? "deletes \(note))" : "writes \(note): \(lines!))")
        }
    }

    private(set) var events: [Event] = []
    private var knowledge: [Set<Int>]
    private var mayKnow: [Set<Int>]
    private var serverMayKnow: Set<Int> = []
    private(set) var serverKnowledge: Set<Int> = []
    /// The events that wrote each line (several only for the well-known texts).
    private var origins: [String: [Int]] = [:]
    /// Lines some user removed from a note in front of them: these may go.
    private var removed: Set<String> = []

    init(deviceCount: Int) {
        knowledge = Array(repeating: [], count: deviceCount)
        mayKnow = knowledge
    }

    /// The id the next event gets; new lines carry it, which keeps them unique.
    var nextID: Int { events.count }

    /// A user's save. Saving the very text the note had is no edit (the engine compares contents, as it should:
    /// it is a touch), so it is no event either.
    mutating func wrote(device: Int, note: String, before: [String], after: [String]) {
        guard before != after else { return }
        let id = record(device: device, note: note, lines: after)
        let kept = Set(after)
        removed.formUnion(before.filter { !kept.contains($0) })
        for line in after where origins[line]?.contains(id) != true { origins[line, default: []].append(id) }
    }

    mutating func deleted(device: Int, note: String, before: [String]) {
        record(device: device, note: note, lines: nil)
        removed.formUnion(before)
    }

    /// A sync that finished: the server and the device now know the same.
    mutating func synced(_ device: Int) {
        serverKnowledge.formUnion(knowledge[device])
        knowledge[device] = serverKnowledge
        serverMayKnow.formUnion(mayKnow[device])
        mayKnow[device] = serverMayKnow
    }

    /// A sync that did not finish: it may have pushed or pulled any part of what it was syncing, or nothing.
    mutating func partlySynced(_ device: Int) {
        serverMayKnow.formUnion(mayKnow[device])
        mayKnow[device].formUnion(serverMayKnow)
    }

    @discardableResult
    private mutating func record(device: Int, note: String, lines: [String]?) -> Int {
        let id = events.count
        events.append(Event(id: id, device: device, note: note, lines: lines, knows: knowledge[device], mayKnow: mayKnow[device]))
        knowledge[device].insert(id)
        mayKnow[device].insert(id)
        return id
    }

    /// Lines written by events in `known` and never removed by a user, with the first such event: each must be
    /// in some note.
    func linesThatMustSurvive(known: Set<Int>) -> [String: Int] {
        origins.filter { !removed.contains($0.key) }.compactMapValues { $0.first(where: known.contains) }
    }

    /// Notes whose end is decided by the history alone, with their expected text (nil: the note is gone).
    ///
    /// Among the events on a note, the latest ones (no other event on it heard of them) decide: if they are all
    /// deletes, the note must be gone. If exactly one is a write, and that write had heard of every other write
    /// of the note, the other latest events are deletes it never heard of (edit beats delete): the note must
    /// have exactly that text. Anything else (concurrent writes) merges or makes conflict copies and is left
    /// to ``linesThatMustSurvive(known:)``. So is a note whose order of events is uncertain (an event on it
    /// may have heard of another one on it through a sync that did not finish), or that was given a text it had
    /// before.
    func decidedOutcomes() -> [String: [String]?] {
        var outcomes: [String: [String]?] = [:]
        for note in Set(events.map(\.note)) {
            let onNote = events.filter { $0.note == note }
            let ids = Set(onNote.map(\.id))
            guard onNote.allSatisfy({ $0.knows.intersection(ids) == $0.mayKnow.intersection(ids) }) else { continue }
            // A text saved again after the note had it (deleted and written anew, or changed back) is no change
            // for an engine that compares contents with the base; whether it beats a delete is not for the model.
            let texts = onNote.compactMap(\.lines)
            guard Set(texts).count == texts.count else { continue }
            let latest = onNote.filter { event in !onNote.contains { $0.knows.contains(event.id) } }
            let latestWrites = latest.filter { $0.lines != nil }
            if latestWrites.isEmpty {
                outcomes[note] = .some(nil)
            } else if latestWrites.count == 1, let write = latestWrites.first,
                onNote.allSatisfy({ $0.lines == nil || $0.id == write.id || write.knows.contains($0.id) })
            {
                outcomes[note] = .some(write.lines)
            }
        }
        return outcomes
    }

    func event(_ id: Int) -> Event { events[id] }
}

// MARK: - Running a history

/// What a history run found wrong, by property. Every entry names the step and the device.
struct SyncFindings: CustomStringConvertible {
    /// The harness could not run the history: a sync threw, stayed offline or pending, warned, never settled.
    var harness: [String] = []
    var lostWrites: [String] = []
    var convergence: [String] = []
    var idempotence: [String] = []
    var dryRun: [String] = []

    var description: String {
        [
            ("harness", harness), ("lost writes", lostWrites), ("convergence", convergence), ("idempotence", idempotence),
            ("dry run", dryRun)
        ].filter { !$0.1.isEmpty }.map { label, found in
            "\(label):\n  "
                + (found.prefix(8) + (found.count > 8 ? ["… and \(found.count - 8) more"] : []))
                .joined(separator: "\n  ")
        }.joined(separator: "\n")
    }
}

/// The checks a run performs besides running the history and healing (checking costs time).
struct SyncChecks: OptionSet, Sendable {
    let rawValue: Int
    /// After every sync, the server holds every line it has heard of that no user removed; after healing,
    /// every note decided by the history (``SyncHistoryModel/decidedOutcomes()``) is as decided.
    static let lostWrites = SyncChecks(rawValue: 1)
    /// After every sync, the device's notes are the server's heads; after healing, all devices and the server
    /// hold the same notes, byte for byte, with the records' mtimes (unless the history touched a note).
    static let convergence = SyncChecks(rawValue: 2)
    /// After healing, another round (and a round after touching every note) plans and commits nothing.
    static let idempotence = SyncChecks(rawValue: 4)
    /// Dry runs change no byte anywhere, and plan what the sync that follows does.
    static let dryRun = SyncChecks(rawValue: 8)
}

struct SyncHistoryRunner {
    let history: SyncHistory
    let checks: SyncChecks
    let harness: SyncHarness
    var model: SyncHistoryModel
    var findings = SyncFindings()
    /// Where we are, for the findings.
    private var at = "setup"
    /// Whether an edit wrote the very bytes the note already held: like a touch, it changes only the mtime, which
    /// is not uploaded (docs/reconciliation.md: a touch uploads nothing).
    private var rewroteSameText = false
    /// The texts each device's notes held when an edit began there, by device and note.
    private var textsHeld: [Int: [String: Set<[String]>]] = [:]

    static func run(_ history: SyncHistory, checks: SyncChecks) -> SyncFindings {
        do {
            var runner = try SyncHistoryRunner(history: history, checks: checks)
            runner.runAll()
            return runner.findings
        } catch {
            return SyncFindings(harness: ["setup failed: \(error)"])
        }
    }

    init(history: SyncHistory, checks: SyncChecks) throws {
        self.history = history
        self.checks = checks
        harness = try SyncHarness(
            deviceCount: history.deviceCount, persistentState: checks.contains(.dryRun),
            clockStep: history.clockStep)
        model = SyncHistoryModel(deviceCount: history.deviceCount)
    }

    mutating func runAll() {
        do {
            for (index, step) in history.steps.enumerated() {
                at = "step \(index + 1) (\(step))"
                try perform(step)
            }
            at = "healing"
            let rounds = try harness.heal { device, report in try afterSync(device, report) }
            guard rounds != nil else {
                findings.harness.append("the devices did not settle within 10 rounds of syncs")
                return
            }
            at = "after healing"
            if checks.contains(.convergence) { try checkConverged() }
            if checks.contains(.lostWrites) { try checkNothingLostAtTheEnd() }
            if checks.contains(.idempotence) { try checkIdempotent() }
        } catch {
            findings.harness.append("\(at): \(error)")
        }
    }

    private mutating func perform(_ step: SyncHistory.Step) throws {
        let (device, note) = (step.device, step.note)
        switch step.action {
        case .edit(let edit):
            let before = try harness.read(device, note).map(SyncHarness.lines)
            let id = model.nextID
            func fresh(_ count: Int) -> [String] { (0..<count).map { "\(note) e\(id) l\($0)" } }
            var after: [String]
            switch (edit, before) {
            case (.rewrite(let count), _):
                after = fresh(count)
            case (.rewriteShared(let variant), _):
                after = (0..<4).map { "\(note) well-known \(variant) l\($0)" }
            case (_, nil):
                after = fresh(4)
            case (.append, let lines?):
                after = lines + fresh(1)
            case (.changeLine(let index), let lines?):
                after = lines
                if lines.isEmpty { after = fresh(1) } else { after[index % lines.count] = fresh(1)[0] }
            }
            // The same bytes as the note held before, or as it held at any earlier edit on this device (changed and
            // changed back before a sync: the text its base has, so the sync sees a touch).
            if before == after || textsHeld[device, default: [:]][note, default: []].contains(after) { rewroteSameText = true }
            if let before { textsHeld[device, default: [:]][note, default: []].insert(before) }
            try harness.write(device, note, SyncHarness.text(after))
            model.wrote(device: device, note: note, before: before ?? [], after: after)
        case .delete:
            // The chosen note, or else the next one in the pool that the device has: deletes that do something.
            let start = SyncHistory.pool.firstIndex(of: note) ?? 0
            for offset in SyncHistory.pool.indices {
                let candidate = SyncHistory.pool[(start + offset) % SyncHistory.pool.count]
                guard let before = try harness.read(device, candidate) else { continue }
                try harness.delete(device, candidate)
                model.deleted(device: device, note: candidate, before: SyncHarness.lines(before))
                return
            }
        case .touch:
            if try harness.read(device, note) != nil { try harness.touch(device, note) }
        case .sync:
            try afterSync(device, try harness.sync(device))
        case .dryRunThenSync:
            guard checks.contains(.dryRun) else {
                try afterSync(device, try harness.sync(device))
                return
            }
            let before = try harness.snapshot()
            let dry = try harness.sync(device, SyncHarness.dryRunOptions)
            let after = try harness.snapshot()
            for path in Set(before.keys).union(after.keys).sorted() where before[path] != after[path] {
                findings.dryRun.append(
                    "\(at): the dry run changed \(path): "
                        + "\(before[path]?.description ?? "absent") → \(after[path]?.description ?? "absent")")
            }
            let real = try harness.sync(device)
            findings.dryRun += Self.comparePlans(dry: dry, real: real).map { "\(at): \($0)" }
            try afterSync(device, real)
        }
    }

    /// Checks a finished real sync and records what the device and the server now know.
    private mutating func afterSync(_ device: Int, _ report: SyncReport) throws {
        let who = SyncHarness.deviceNames[device]
        if report.offline { findings.harness.append("\(at): \(who)'s sync was offline: \(report.offlineReason ?? "")") }
        if report.pending != 0 { findings.harness.append("\(at): \(who)'s sync left \(report.pending) change(s) pending") }
        if !report.warnings.isEmpty { findings.harness.append("\(at): \(who)'s sync warned: \(report.warnings)") }
        model.synced(device)
        guard checks.contains(.convergence) || checks.contains(.lostWrites) else { return }
        let server = try harness.serverNotes()
        if checks.contains(.convergence) && findings.convergence.isEmpty {
            let local = try harness.notes(device)
            for path in Set(local.keys).union(server.keys).sorted() where local[path] != server[path]?.data {
                findings.convergence.append(
                    "\(at): after \(who)'s sync, \(path) is "
                        + "\(Self.show(local[path])) there and \(Self.show(server[path]?.data)) on the server")
            }
        }
        if checks.contains(.lostWrites) && findings.lostWrites.isEmpty {
            let held = Set(server.values.flatMap { SyncHarness.lines($0.data) })
            for (line, origin) in model.linesThatMustSurvive(known: model.serverKnowledge).sorted(by: { $0.key < $1.key })
            where !held.contains(line) {
                findings.lostWrites.append("\(at): after \(who)'s sync the server lost \"\(line)\" of \(model.event(origin))")
            }
        }
    }

    private mutating func checkConverged() throws {
        let server = try harness.serverNotes(fresh: true)
        // A touch changes a note's mtime and nothing else: it is not uploaded, so the mtime stays local. So does
        // saving the same text again.
        let touched = history.steps.contains { $0.action == .touch } || rewroteSameText
        for device in harness.devices.indices {
            let who = SyncHarness.deviceNames[device]
            let local = try harness.notes(device)
            let times = try harness.modifiedTimes(device)
            for path in Set(local.keys).union(server.keys).sorted() {
                if local[path] != server[path]?.data {
                    findings.convergence.append(
                        "\(at): \(path) is \(Self.show(local[path])) on \(who) "
                            + "and \(Self.show(server[path]?.data)) on the server")
                } else if !touched, let head = server[path], times[path] != head.modified {
                    findings.convergence.append(
                        "\(at): \(path) has mtime \(times[path] ?? 0) on \(who), "
                            + "the record says \(head.modified)")
                }
            }
        }
    }

    private mutating func checkNothingLostAtTheEnd() throws {
        for device in harness.devices.indices {
            let who = SyncHarness.deviceNames[device]
            let local = try harness.notes(device)
            let held = Set(local.values.flatMap(SyncHarness.lines))
            for (line, origin) in model.linesThatMustSurvive(known: Set(model.events.map(\.id))).sorted(by: { $0.key < $1.key })
            where !held.contains(line) {
                findings.lostWrites.append("\(at): \(who) lost \"\(line)\" of \(model.event(origin))")
            }
            for (note, expected) in model.decidedOutcomes().sorted(by: { $0.key < $1.key }) {
                let actual = local[note].map(SyncHarness.lines)
                if actual != expected {
                    findings.lostWrites.append(
                        "\(at): \(note) on \(who) is \(actual.map { "\($0)" } ?? "absent"), "
                            + "the history decides \(expected.map { "\($0)" } ?? "absent")")
                }
            }
        }
    }

    private mutating func checkIdempotent() throws {
        func quietRound(_ label: String) throws {
            for device in harness.devices.indices {
                let who = SyncHarness.deviceNames[device]
                let token = try harness.serverState().token
                let notes = try harness.notes(device)
                let report = try harness.sync(device)
                if !report.changes.isEmpty {
                    findings.idempotence.append(
                        "\(at): \(label): \(who)'s sync did "
                            + report.changes.map { "\($0.kind.rawValue) \($0.name)" }.joined(separator: ", "))
                }
                if try harness.serverState().token != token {
                    findings.idempotence.append("\(at): \(label): \(who)'s sync committed to the server")
                }
                if try harness.notes(device) != notes {
                    findings.idempotence.append("\(at): \(label): \(who)'s sync changed its notes")
                }
            }
        }
        try quietRound("a sync after convergence")
        for device in harness.devices.indices {
            let planned = try harness.sync(device, SyncHarness.dryRunOptions).changes
            if !planned.isEmpty {
                findings.idempotence.append(
                    "\(at): a dry run on \(SyncHarness.deviceNames[device]) after convergence plans "
                        + planned.map { "\($0.kind.rawValue) \($0.name)" }.joined(separator: ", "))
            }
        }
        for device in harness.devices.indices {
            for note in try harness.notes(device).keys.sorted() { try harness.touch(device, note) }
        }
        try quietRound("a sync after touching every note")
    }

    /// What a dry run promised against what the sync then did, as multisets of (kind, note).
    ///
    /// Adopts are left out: a dry run lists them, a sync does them silently. A conflict is one entry in the
    /// dry run, which names the copy in its detail; the sync reports the conflict (the copy as its detail) and
    /// also the upload of the copy: that upload is taken as part of its conflict, and the copy's name must be
    /// the one the dry run announced.
    static func comparePlans(dry: SyncReport, real: SyncReport) -> [String] {
        var problems: [String] = []
        let copies = Set(real.changes.filter { $0.kind == .conflict }.compactMap(\.detail))
        let done = real.changes.filter { $0.kind != .adopt && !($0.kind == .upload && copies.contains($0.name)) }
        let planned = dry.changes.filter { $0.kind != .adopt }
        func key(_ change: PlannedChange) -> String { "\(change.kind.rawValue) \(change.name)" }
        let plannedKeys = planned.map(key).sorted()
        let doneKeys = done.map(key).sorted()
        if plannedKeys != doneKeys {
            problems.append("the dry run planned \(plannedKeys) but the sync did \(doneKeys)")
        }
        for conflict in real.changes where conflict.kind == .conflict {
            guard let copy = conflict.detail else { continue }
            let announced = dry.changes.first { $0.kind == .conflict && $0.name == conflict.name }?.detail ?? ""
            if !announced.contains(copy) {
                problems.append("the sync kept \(conflict.name) as the conflict copy \(copy), the dry run said: \(announced)")
            }
        }
        return problems
    }

    static func show(_ data: Data?) -> String {
        guard let data else { return "absent" }
        return "\(SyncHarness.lines(data))"
    }
}
