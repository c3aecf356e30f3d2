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

/// The agent's paced commits (``CommitPacer``), on clock readings given by the test.
@Suite struct CommitPacerTests {
    let start = ContinuousClock.now

    func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int(seconds * 1000)) }

    /// Runs saves of `paths` at the given times; returns when each path was committed.
    func run(_ pacer: inout CommitPacer, saves: [(Double, String)], until end: Double) -> [String: [Double]] {
        var commits: [String: [Double]] = [:]
        var queue = saves.sorted { $0.0 < $1.0 }
        var step = 0
        while Double(step) * 0.05 <= end {
            let time = Double(step) * 0.05
            var settled: [String] = []
            while let first = queue.first, first.0 <= time {
                settled.append(first.1)
                queue.removeFirst()
            }
            var ready = pacer.admit(settled, at: at(time)) { _ in true }
            for path in pacer.due(at: at(time)) where !ready.contains(path) { ready.append(path) }
            for path in ready { commits[path, default: []].append(time) }
            pacer.committed(ready, at: at(time))
            step += 1
        }
        return commits
    }

    @Test func theFirstSaveGoesAtOnceAndAutosaveIsPaced() {
        var pacer = CommitPacer(pace: .seconds(5))
        let saves = stride(from: 0.0, to: 60.0, by: 0.5).map { ($0, "a.md") }
        let commits = run(&pacer, saves: saves, until: 70)["a.md"] ?? []
        #expect(commits.first == 0, "the first save is not delayed")
        #expect(commits.count >= 12 && commits.count <= 13, "\(commits)")
        #expect((commits.last ?? 0) >= 59.5, "the last save (59.5 s) is committed: \(commits)")
        for (earlier, later) in zip(commits, commits.dropFirst()) { #expect(later - earlier >= 4.99) }
        #expect(pacer.deferred.isEmpty)
    }

    @Test func notesArePacedApartAndAQuietSpellResets() {
        var pacer = CommitPacer(pace: .seconds(5))
        let saves = [(0.0, "a.md"), (1.0, "a.md"), (1.0, "b.md"), (20.0, "a.md")]
        let commits = run(&pacer, saves: saves, until: 30)
        #expect(commits["b.md"].map { $0.map { ($0 * 100).rounded() / 100 } } == [1.0], "another note is not held by a.md's pace")
        let a = (commits["a.md"] ?? []).map { ($0 * 100).rounded() / 100 }
        #expect(a == [0, 5, 20], "\(a)")
    }

    @Test func paceZeroCommitsEverySaveAndDeletesAreNeverPaced() {
        var none = CommitPacer(pace: .zero)
        let saves = stride(from: 0.0, to: 3.0, by: 0.5).map { ($0, "a.md") }
        #expect(run(&none, saves: saves, until: 4)["a.md"]?.count == 6)
        var pacer = CommitPacer(pace: .seconds(5))
        pacer.committed(["a.md"], at: at(0))
        #expect(pacer.admit(["a.md"], at: at(1)) { _ in false } == ["a.md"], "not a save (gone): goes at once")
        #expect(pacer.admit(["a.md"], at: at(1.5)) { _ in true }.isEmpty)
        #expect(pacer.due(at: at(2), flushing: true) == ["a.md"], "a stopping agent takes every waiting save")
    }
}
