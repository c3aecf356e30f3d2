import Foundation
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

/// The plan is a list of resolved steps (``SyncEngine/Action``), worked out once: the dry run describes that list
/// and the sync does it, so what a dry run says (the merge, the winner, the conflict copy's name) is what the sync
/// does.
@Suite struct ResolvedStepTests {
    static let lines = "one\ntwo\nthree\n"

    /// Every kind of step at once on the second device: pushes, pulls, deletes both ways, a clean merge, a conflict
    /// either device wins, an edit against a delete and a delete against an edit.
    func everyKindOfStep() throws -> SyncHarness {
        let harness = try SyncHarness(deviceCount: 2)
        let notes = [
            "merge", "conflict-here", "conflict-there", "pull", "deleted-there", "deleted-here", "resurrect", "restore"
        ]
        for note in notes { try harness.write(0, note + ".md", Data(Self.lines.utf8)) }
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        // The earlier edit of the note whose server version wins.
        try harness.write(1, "conflict-there.md", Data("one\nTWO here\nthree\n".utf8))
        try harness.write(0, "merge.md", Data("one there\ntwo\nthree\n".utf8))
        try harness.write(0, "conflict-here.md", Data("one\nTWO there\nthree\n".utf8))
        try harness.write(0, "conflict-there.md", Data("one\nTWO there\nthree\n".utf8))
        try harness.write(0, "pull.md", Data("one\ntwo\nthree there\n".utf8))
        try harness.delete(0, "deleted-there.md")
        try harness.delete(0, "resurrect.md")
        try harness.write(0, "restore.md", Data("one\ntwo\nthree there\n".utf8))
        _ = try harness.sync(0)
        try harness.write(1, "merge.md", Data("one\ntwo\nthree here\n".utf8))
        try harness.write(1, "conflict-here.md", Data("one\nTWO here\nthree\n".utf8))
        try harness.delete(1, "deleted-here.md")
        try harness.write(1, "new-here.md", Data("new\n".utf8))
        try harness.write(1, "resurrect.md", Data("one\ntwo\nthree here\n".utf8))
        try harness.delete(1, "restore.md")
        return harness
    }

    @Test func theDryRunSaysWhatTheSyncDoes() throws {
        let harness = try everyKindOfStep()
        var preview = SyncHarness.syncOptions
        preview.dryRun = true
        let planned = try harness.sync(1, preview)
        let done = try harness.sync(1)

        let expected: [String: PlannedChange.Kind] = [
            "merge.md": .merge, "conflict-here.md": .conflict, "conflict-there.md": .conflict, "pull.md": .download,
            "deleted-there.md": .downloadDelete, "deleted-here.md": .uploadDelete, "new-here.md": .upload,
            "resurrect.md": .resurrect, "restore.md": .restore
        ]
        #expect(Dictionary(uniqueKeysWithValues: planned.changes.map { ($0.name, $0.kind) }) == expected, "\(planned.changes)")
        for change in planned.changes {
            #expect(
                done.changes.contains { $0.name == change.name && $0.kind == change.kind },
                "the dry run said \(change.kind) \(change.name); the sync did \(done.changes)")
        }
        // The copies the dry run named are the copies the sync made, kept and recorded.
        #expect(planned.conflictCopies.count == 2)
        #expect(Set(planned.conflictCopies) == Set(done.conflictCopies), "\(planned.conflictCopies) \(done.conflictCopies)")
        #expect(Set(try harness.devices[1].state.conflicts().map(\.copy.description)) == Set(done.conflictCopies))
        for copy in done.conflictCopies {
            #expect(try harness.read(1, copy) == Data("one\nTWO \(copy.contains("conflict-here") ? "there" : "here")\nthree\n".utf8))
        }
        #expect(try harness.read(1, "conflict-here.md") == Data("one\nTWO here\nthree\n".utf8), "the later edit keeps the name")
        #expect(try harness.read(1, "conflict-there.md") == Data("one\nTWO there\nthree\n".utf8), "the later edit keeps the name")
        #expect(try harness.read(1, "merge.md") == Data("one there\ntwo\nthree here\n".utf8))
    }

    /// The list itself: each decision resolved once into the action both consumers take.
    @Test func eachDecisionIsResolvedOnceIntoOneAction() throws {
        let harness = try everyKindOfStep()
        let device = harness.devices[1]
        let engine = SyncEngine(folder: device.folder, state: device.state, config: device.config, logger: testLogger)
        let store = try ServerStore(root: device.config.server, device: device.config.deviceID, logger: testLogger, vault: TestServer.vault)
        let bases = try device.state.bases()
        var zone = try device.state.zoneState()
        _ = try store.fetch(into: &zone)
        let scan = try FolderScanner(root: device.folder.root, rules: try device.folder.ignoreRules()).scan(bases: bases, only: nil)
        var plan = Planner.plan(scan: scan, bases: bases, zone: zone)
        var report = SyncReport(dryRun: true)
        try engine.resolve(&plan, scan: scan, bases: bases, zone: zone, store: store, report: &report)

        func action(_ name: String) -> Action? { plan.first { $0.name.string == name }?.action }
        if case .writeMerged(let text, _)? = action("merge.md") {
            #expect(text == Data("one there\ntwo\nthree here\n".utf8))
        } else {
            Issue.record("merge.md: \(String(describing: action("merge.md")))")
        }
        if case .conflict(let conflict)? = action("conflict-here.md") {
            #expect(conflict.localWins && !conflict.madeBefore && conflict.copy.string.hasPrefix("conflict-here"))
            #expect(conflict.copyDevice != device.config.deviceName, "the copy holds the other device's version")
        } else {
            Issue.record("conflict-here.md: \(String(describing: action("conflict-here.md")))")
        }
        if case .conflict(let conflict)? = action("conflict-there.md") {
            #expect(!conflict.localWins && conflict.copyDevice == device.config.deviceName)
        } else {
            Issue.record("conflict-there.md: \(String(describing: action("conflict-there.md")))")
        }
        #expect(
            plan.map(\.name.string)
                == [
                    "conflict-here.md", "conflict-there.md", "deleted-here.md", "deleted-there.md", "merge.md", "new-here.md",
                    "pull.md", "restore.md", "resurrect.md"
                ], "every record with something to do is in the list, once, in order")
        // Described from the list alone: the same names and kinds the dry run reports.
        let described = try plan.compactMap { try engine.describe($0, store: store, options: SyncOptions(dryRun: true)) }
        #expect(described.map(\.name) == plan.map(\.name.description))
        #expect(described.first { $0.name == "restore.md" }?.kind == .restore)
    }
}

/// A copy name is chosen when the plan is resolved and written later in the same sync: a file the user saves under
/// that name in between is neither overwritten nor taken for the copy. The copy takes the next free name.
@Suite struct PlannedCopyNameTests {
    @Test func aFileSavedUnderThePlannedCopyNameMeanwhileIsKept() throws {
        let harness = try SyncHarness(deviceCount: 2)
        try harness.write(0, "n.md", Data("one\n".utf8))
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        try harness.write(0, "a.md", Data("a\n".utf8))
        try harness.write(0, "n.md", Data("one, there\n".utf8))
        _ = try harness.sync(0)
        // The later edit keeps the name: the server's version becomes a copy.
        try harness.write(1, "n.md", Data("one, here\n".utf8))
        var preview = SyncHarness.syncOptions
        preview.dryRun = true
        let planned = try #require(try harness.sync(1, preview).conflictCopies.first)

        // While the sync writes a.md (before n.md), the user saves a note under the copy's planned name.
        let path = harness.path(1, planned)
        let hooks = FaultPoint.Hooks.once(at: "apply.tempWritten") {
            try Data("typed meanwhile\n".utf8).write(to: URL(fileURLWithPath: path))
        }
        let report = try FaultPoint.with(hooks) { try harness.sync(1) }
        #expect(try harness.read(1, planned) == Data("typed meanwhile\n".utf8), "the user's file is left as it is")
        let copy = try #require(report.conflictCopies.first, "\(report.changes)")
        #expect(copy != planned)
        #expect(try harness.read(1, copy) == Data("one, there\n".utf8))
        #expect(try harness.read(1, "n.md") == Data("one, here\n".utf8))
        #expect(try harness.devices[1].state.conflicts().map(\.copy.description) == [copy])
    }
}
