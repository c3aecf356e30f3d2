import Foundation
import Testing
@testable import NoteSync

/// Schedules the simulation (SimRunner.swift) failed on, shrunk, kept as deterministic tests once the engine was
/// fixed. Each runs the schedule with every invariant checked.
@Suite struct SimRegressionTests {
    static func expectClean(_ schedule: SimSchedule, sourceLocation: SourceLocation = #_sourceLocation) {
        let (findings, _) = SimRunner.run(schedule)
        #expect(findings.isEmpty, "\(findings)", sourceLocation: sourceLocation)
    }

    /// A partial sync (the agent's) of a one-letter path: the folder `a` after `rm -r a`. The scanner took the
    /// path's parent with `NSString.deletingLastPathComponent`, which traps in Foundation (Swift 6.3.1) on a
    /// relative path of one character: the agent died on `rm -r a`, or on saving a note named `x`.
    @Test func aPartialSyncOfAOneLetterFolderDoesNotTrap() {
        Self.expectClean(SimSchedule(deviceCount: 3, clockStep: 1_000_000_000, steps: [
            .init(0, .edit(.pool(1), .append, .inPlace)),
            .init(0, .sync(nil, full: true)),
            .init(0, .deleteFolder(.pool(1))),
            .init(0, .sync(nil, full: false)),
        ]))
    }

    /// A note created offline (queued in the outbox), then moved before the server came back: the outbox kept
    /// the old name for ever, so every sync reported a change pending (and `status` never showed all synced).
    /// A queued note that is gone and was never synced is dequeued: there is nothing to push.
    @Test func aNoteQueuedOfflineThenMovedAwayIsNotPendingForEver() {
        Self.expectClean(SimSchedule(deviceCount: 3, clockStep: 1_000_000_000, steps: [
            .init(2, .serverDown),
            .init(0, .edit(.pool(1), .rewrite(lines: 6), .inPlace)),
            .init(0, .sync(nil, full: false)),
            .init(0, .move(.pool(1), to: 4)),
        ]))
    }

    /// The same at the scanner: partial scans of one-letter names, present and gone.
    @Test func aPartialScanOfOneLetterNamesDoesNotTrap() throws {
        let directory = try TempDirectory()
        try FileIO.makeDirectories(directory.sub("a/b"))
        try writeFile(directory.sub("x"), Data("x\n".utf8))
        try writeFile(directory.sub("a/b/c"), Data("c\n".utf8))
        let scan = try Scanner(root: directory.path, rules: IgnoreRules(userRules: nil)).scan(bases: [:], only: ["x", "a", "y", "a/b"])
        #expect(Set(scan.files.keys.map(\.string)) == ["x", "a/b/c"])
    }
}
