import Dispatch
import Foundation
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

/// The long run of the simulation, for scripts/soak: schedules of consecutive seeds on every core until a count or
/// a time is reached, with figures printed as it goes. Off unless `NOTESYNC_SOAK_SCHEDULES` or
/// `NOTESYNC_SOAK_SECONDS` is set. `NOTESYNC_SOAK_FIRST_SEED` (default 1), `NOTESYNC_SOAK_JOBS` (default: cores).
///
/// A failing seed is printed (replay it with `NOTESYNC_SIM_SEED=N`), and the first few are shrunk and printed as
/// Swift for a regression test.
@Suite(.simulationFolder) struct SimulationSoak {
    static let environment = ProcessInfo.processInfo.environment
    static let enabled = environment["NOTESYNC_SOAK_SCHEDULES"] != nil || environment["NOTESYNC_SOAK_SECONDS"] != nil

    /// Writes a line at once: stdout is a pipe to scripts/soak, where a buffered `print` shows minutes late.
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    struct Failure: Sendable {
        var seed: UInt64
        var summary: String
    }

    @Test(.enabled(if: enabled))
    func soak() {
        let limit = Int(Self.environment["NOTESYNC_SOAK_SCHEDULES"] ?? "") ?? .max
        let seconds = Double(Self.environment["NOTESYNC_SOAK_SECONDS"] ?? "") ?? .infinity
        let first = UInt64(Self.environment["NOTESYNC_SOAK_FIRST_SEED"] ?? "") ?? 1
        let jobs = max(1, Int(Self.environment["NOTESYNC_SOAK_JOBS"] ?? "") ?? ProcessInfo.processInfo.activeProcessorCount)
        let start = Date()
        let deadline = start.addingTimeInterval(seconds)
        let next = Atomic<Int>(0)
        let totals = Mutex(SimFigures())
        let failures = Mutex<[Failure]>([])
        let lastReport = Mutex(start)

        @Sendable func line(_ figures: SimFigures, _ elapsed: Double) -> String {
            "soak: schedules=\(figures.schedules) steps=\(figures.steps) operations=\(figures.operations) "
                + "syncs=\(figures.syncs) crashes=\(figures.crashes) partitions=\(figures.partitions) "
                + "mid-sync-partitions=\(figures.midSyncPartitions) mid-sync-edits=\(figures.midSyncEdits) races=\(figures.races) "
                + "healing-rounds=\(figures.healingRounds) server-faults=\(figures.serverFaults) recoveries=\(figures.recoveries) "
                + "fault-reports=\(figures.faultReports) "
                + "mass-deletes=\(figures.massDeletes) held-syncs=\(figures.heldSyncs) restores=\(figures.restores) "
                + "gc-runs=\(figures.gcRuns) gc-kills=\(figures.gcKills) gc-removed=\(figures.gcRemoved) "
                + "watch-syncs=\(figures.watchSyncs) late-events=\(figures.lateEvents) split-renames=\(figures.splitRenames) "
                + "fuse-folders=\(figures.filesystems["fuse", default: 0]) exfat-folders=\(figures.filesystems["exfat", default: 0]) "
                + "modeless-folders=\(figures.filesystems["modeless", default: 0]) "
                + "case-folding-folders=\(figures.filesystems["caseFolding", default: 0]) "
                + "case-folding-unmounted=\(figures.caseFoldingUnmounted) case-variants=\(figures.caseVariants) "
                + "case-pair-waits=\(figures.casePairWaits) private-notes=\(figures.privateNotes) "
                + "private-rewrites=\(figures.privateRewrites) "
                + "violations=\(figures.violations) failed-schedules=\(figures.failedSchedules) "
                + "seconds=\(Int(elapsed)) rate=\(String(format: "%.1f", Double(figures.schedules) / max(elapsed, 0.001)))/s"
        }

        DispatchQueue.concurrentPerform(iterations: jobs) { _ in
            while Date() < deadline {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < limit else { return }
                let seed = first + UInt64(index)
                let (findings, figures) = SimRunner.run(SimSchedule.forSeed(seed))
                if !findings.isEmpty {
                    let summary = findings.all.filter { !$0.1.isEmpty }.map { "\($0.0): \($0.1.first ?? "")" }.joined(separator: "; ")
                    failures.withLock { $0.append(Failure(seed: seed, summary: summary)) }
                    Self.say("soak: seed \(seed) FAILED: \(summary)")
                }
                let total = totals.withLock { total in
                    total.add(figures)
                    return total
                }
                let now = Date()
                let due = lastReport.withLock { last in
                    guard now.timeIntervalSince(last) >= 30 else { return false }
                    last = now
                    return true
                }
                if due {
                    Self.say(line(total, now.timeIntervalSince(start)))
                }
            }
        }

        let total = totals.withLock { $0 }
        let elapsed = Date().timeIntervalSince(start)
        print(line(total, elapsed))
        print(
            "soak: crash points: "
                + total.crashPoints.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                .joined(separator: " "))
        print(
            "soak: time by phase: "
                + total.phases.sorted { $0.key < $1.key }
                .map {
                    "\($0.key)=\(String(format: "%.1f", Double($0.value.components.seconds) + Double($0.value.components.attoseconds) / 1e18)) s"
                }
                .joined(separator: " "))
        let failed = failures.withLock { $0 }.sorted { $0.seed < $1.seed }
        for failure in failed.prefix(3) {
            let schedule = SimSchedule.forSeed(failure.seed)
            let (findings, _) = SimRunner.run(schedule)
            let (shrunk, shrunkFindings) = SimRunner.shrink(schedule, findings: findings, budget: 1500)
            print("soak: seed \(failure.seed) (replay: NOTESYNC_SIM_SEED=\(failure.seed)) shrinks to:\n\(shrunkFindings)\n\(shrunk.code)")
        }
        #expect(failed.isEmpty, "failing seeds: \(failed.map(\.seed))")
    }
}
