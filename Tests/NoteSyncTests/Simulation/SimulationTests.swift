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

/// The deterministic simulation (SimRunner.swift) in the regular suite: a fixed set of seeds, a few hundred
/// generated schedules (fixed seeds too) that shrink on failure, and a replay of any seed a soak reported.
///
/// A failure prints the schedule as Swift: paste it into SimRegressionTests.swift once the engine is fixed.
/// `NOTESYNC_SIM_SEED=N` replays soak seed N (``replaysTheSeedInTheEnvironment()``); scripts/soak runs many.
@Suite(.simulationFolder) struct SimulationTests {
    static func expectClean(
        _ findings: SimFindings, _ schedule: SimSchedule, seed: UInt64? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(findings.isEmpty, "\(seed.map { "seed \($0): " } ?? "")\(findings)\n\(schedule.code)", sourceLocation: sourceLocation)
    }

    /// The same 64 seeds every run, in 4 parallel batches (both cores).
    @Test(arguments: 0..<4)
    func fixedSeedsKeepEveryInvariant(_ batch: Int) async {
        for seed in stride(from: UInt64(batch) + 1, through: 64, by: 4) {
            let schedule = SimSchedule.forSeed(seed)
            let (findings, _) = await SimRunner.runOffThePool(schedule)
            Self.expectClean(findings, schedule, seed: seed)
        }
    }

    /// Schedules from the property generator (every kind of step, fault and filesystem it draws), on seeds fixed in
    /// this file so that a run on CI is the run here; a failing one shrinks to the steps that matter and prints as
    /// Swift. New seeds are the soak's (scripts/soak): a random schedule that fails in the regular suite would turn
    /// CI red for a defect no change brought (`NOTESYNC_PROPERTY_SCALE` multiplies the count).
    @Test(arguments: 0..<2)
    func generatedSchedulesKeepEveryInvariant(_ batch: Int) async {
        for index in 0..<SyncPropertyTests.count(100) {
            let seed = UInt64(batch) << 32 | UInt64(index)
            let schedule = SimSchedule.generated(seed: seed)
            let (findings, _) = await SimRunner.runOffThePool(schedule)
            guard !findings.isEmpty else { continue }
            let (shrunk, shrunkFindings) = SimRunner.shrink(schedule, findings: findings)
            Issue.record("generated schedule \(seed), shrunk: \(shrunkFindings)\n\(shrunk.code)")
        }
    }

    /// Replays the soak seed in `NOTESYNC_SIM_SEED` (what scripts/soak prints for a failure).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["NOTESYNC_SIM_SEED"] != nil))
    func replaysTheSeedInTheEnvironment() throws {
        let seed = try #require(UInt64(ProcessInfo.processInfo.environment["NOTESYNC_SIM_SEED"] ?? ""))
        let schedule = SimSchedule.forSeed(seed)
        let (findings, figures) = SimRunner.run(schedule)
        print("seed \(seed): \(figures.steps) steps, \(figures.crashes) crashes, \(figures.partitions) partitions")
        guard !findings.isEmpty, ProcessInfo.processInfo.environment["NOTESYNC_SIM_SHRINK"] != nil else {
            Self.expectClean(findings, schedule, seed: seed)
            return
        }
        let (shrunk, shrunkFindings) = SimRunner.shrink(schedule, findings: findings)
        Self.expectClean(shrunkFindings, shrunk, seed: seed)
    }

    /// The schedule the same seed gives is the same, and so is what it does: a failing seed replays exactly.
    @Test func aSeedReplaysExactly() async {
        for seed: UInt64 in [3, 17, 40] {
            #expect(SimSchedule.forSeed(seed) == SimSchedule.forSeed(seed))
            let first = await SimRunner.runOffThePool(SimSchedule.forSeed(seed)).figures
            let second = await SimRunner.runOffThePool(SimSchedule.forSeed(seed)).figures
            #expect(
                first.crashPoints == second.crashPoints && first.syncs == second.syncs
                    && first.healingRounds == second.healingRounds, "seed \(seed) ran differently twice")
        }
    }
}
