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

/// Crash atomicity, exhaustively: for a few syncs that do every kind of work (pull new notes, replace and trash
/// notes, merge, keep conflict copies both ways, upload, commit), the process is killed at each fault point in
/// turn (FaultPoint.swift), restarted from what it persisted, and, in a second run, killed again at the same
/// point of its first sync after the restart. Every run heals and must keep every invariant (SimRunner.swift).
@Suite(.simulationFolder) struct SimCrashPointTests {
    struct Scenario: Sendable, CustomTestStringConvertible {
        var name: String
        var before: [SimSchedule.Step]
        /// The device whose sync crashes.
        var device: Int
        /// Points its sync must pass, so that the test cannot pass by crashing nowhere interesting.
        var points: Set<String>
        var testDescription: String { name }
    }

    private static func at(_ device: Int, _ action: SimSchedule.Action) -> SimSchedule.Step { .init(device, action) }
    private static let sync = SimSchedule.Action.sync(nil, full: true)
    private static let state: Set<String> = ["state.beforeUpdate", "state.afterUpdate"]
    private static let upload: Set<String> = ["assets.tempWritten", "assets.published", "commit.entryWritten", "commit.claimed"]

    static let scenarios: [Scenario] = [
        Scenario(
            name: "bob pulls three new notes, nested",
            before: [
                at(0, .edit(.pool(0), .rewrite(lines: 3), .inPlace)), at(0, .edit(.pool(1), .append, .inPlace)),
                at(0, .edit(.pool(3), .append, .inPlace)), at(0, sync)
            ], device: 1, points: state.union(["apply.begin", "apply.tempWritten", "apply.renamedIn"])),
        Scenario(
            name: "bob pulls an edit, a delete and a move",
            before: [
                at(0, .edit(.pool(0), .rewrite(lines: 3), .inPlace)), at(0, .edit(.pool(1), .append, .inPlace)),
                at(0, .edit(.pool(5), .append, .inPlace)), at(0, sync), at(1, sync),
                at(0, .edit(.pool(0), .changeLine(1), .vim)), at(0, .delete(.pool(1))), at(0, .move(.pool(5), to: 4)), at(0, sync)
            ], device: 1, points: state.union(["apply.exchanged", "apply.checked", "delete.trashed", "apply.followedRename"])),
        Scenario(
            name: "bob merges, wins a conflict, uploads a new note",
            before: [
                at(0, .edit(.pool(0), .rewrite(lines: 5), .inPlace)), at(0, .edit(.pool(1), .rewrite(lines: 3), .inPlace)),
                at(0, sync), at(1, sync),
                at(0, .edit(.pool(0), .changeLine(0), .inPlace)), at(0, .edit(.pool(1), .changeLine(0), .inPlace)), at(0, sync),
                at(1, .edit(.pool(0), .changeLine(4), .emacs)), at(1, .edit(.pool(1), .changeLine(0), .renameOver)),
                at(1, .edit(.pool(5), .append, .inPlace))
            ], device: 1, points: state.union(upload).union(["apply.exchanged", "apply.renamedIn"])),
        Scenario(
            name: "alice loses a conflict, her version kept as a copy",
            before: [
                at(0, .edit(.pool(2), .rewrite(lines: 3), .inPlace)), at(0, sync), at(1, sync),
                at(0, .edit(.pool(2), .changeLine(1), .inPlace)), at(1, .edit(.pool(2), .changeLine(1), .inPlace)), at(1, sync)
            ], device: 0, points: state.union(upload).union(["apply.renamedIn"])),
        Scenario(
            name: "carol comes back online with queued edits and deletes",
            before: [
                at(0, .edit(.pool(0), .rewrite(lines: 3), .inPlace)), at(0, .edit(.pool(4), .append, .inPlace)), at(0, sync),
                at(2, sync), at(2, .goOffline),
                at(2, .edit(.pool(0), .append, .vim)), at(2, .delete(.pool(4))), at(2, .edit(.pool(3), .append, .inPlace)),
                at(2, sync), at(0, .edit(.pool(0), .changeLine(0), .inPlace)), at(0, sync), at(2, .comeOnline)
            ], device: 2, points: state.union(upload).union(["apply.exchanged"]))
    ]

    @Test(arguments: scenarios)
    func aCrashAtEveryPointOfASyncLosesNothing(_ scenario: Scenario) async {
        var passed: Set<String> = []
        for index in 0..<200 {
            for twice in [false, true] {
                var steps = scenario.before + [.init(scenario.device, .sync(.crash(at: index), full: true))]
                if twice { steps.append(.init(scenario.device, .sync(.crash(at: index), full: true))) }
                let schedule = SimSchedule(deviceCount: 3, clockStep: 1_000_000_000, steps: steps)
                let (findings, figures) = await SimRunner.runOffThePool(schedule)
                #expect(findings.isEmpty, "crash at point \(index)\(twice ? ", twice" : ""): \(findings)\n\(schedule.code)")
                if figures.crashes == 0 {
                    if ProcessInfo.processInfo.environment["NOTESYNC_SIM_TRACE"] != nil {
                        print("\(scenario.name): \(index) fault points, crashed at \(passed.sorted())")
                    }
                    #expect(passed.isSuperset(of: scenario.points), "crashed only at \(passed.sorted())")
                    return
                }
                passed.formUnion(figures.crashPoints.keys)
            }
        }
        Issue.record("the sync passed 200 fault points: the scenario never ends")
    }
}
