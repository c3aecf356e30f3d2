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

/// Histories that the property tests of SyncPropertyTests.swift shrank to, kept as deterministic tests once
/// the engine was fixed. Each replays the history with the harness of SyncHarness.swift and checks every property.
@Suite struct SyncRegressionTests {
    private static func step(_ device: Int, _ note: String, _ action: SyncHistory.Action) -> SyncHistory.Step {
        SyncHistory.Step(device: device, note: note, action: action)
    }

    /// A conflict copy named like one that already exists (same note, same losing device, same second).
    ///
    /// Alice's first sync keeps bob's version as `a/b (conflict bob …).md`; then bob's and alice's next edits
    /// conflict again, bob's loses again within the same second, and the engine picked the same copy name: it
    /// wrote the new copy over the existing one (moving that one aside, unsynced), saved it as a new record
    /// (base 0) although the record existed, lost the race, and in its next round pushed that name twice in one
    /// commit. The sync threw "appears twice in one commit", and so did every sync after it. A copy name must be
    /// free in the notes folder and on the server.
    @Test func aConflictCopyNameThatIsTakenIsNotReused() {
        let note = "a/b.md"
        let history = SyncHistory(
            deviceCount: 2, clockStep: 1_000_000,
            steps: [
                Self.step(1, note, .edit(.changeLine(0))), Self.step(1, note, .sync),
                Self.step(0, note, .edit(.changeLine(0))), Self.step(0, note, .sync),
                Self.step(1, note, .edit(.changeLine(0))), Self.step(0, note, .edit(.changeLine(0))),
                Self.step(1, note, .sync)
            ])
        let findings = SyncHistoryRunner.run(history, checks: [.lostWrites, .convergence, .idempotence])
        #expect(findings.harness.isEmpty, "\(findings)")
        #expect(findings.lostWrites.isEmpty, "\(findings)")
        #expect(findings.convergence.isEmpty, "\(findings)")
        #expect(findings.idempotence.isEmpty, "\(findings)")
    }

    /// The same with three devices and a dry run: the copy name the dry run announces is the free one the
    /// sync then uses.
    @Test func aDryRunAnnouncesTheFreeConflictCopyName() {
        let note = "note.md"
        let history = SyncHistory(
            deviceCount: 3, clockStep: 1_000_000,
            steps: [
                Self.step(0, note, .edit(.changeLine(0))), Self.step(0, note, .sync),
                Self.step(2, note, .edit(.changeLine(0))), Self.step(2, note, .sync),
                Self.step(0, note, .edit(.changeLine(0))), Self.step(1, note, .edit(.changeLine(0))),
                Self.step(0, note, .dryRunThenSync), Self.step(1, note, .dryRunThenSync)
            ])
        let findings = SyncHistoryRunner.run(history, checks: [.lostWrites, .convergence, .dryRun])
        #expect(findings.harness.isEmpty, "\(findings)")
        #expect(findings.lostWrites.isEmpty, "\(findings)")
        #expect(findings.convergence.isEmpty, "\(findings)")
        #expect(findings.dryRun.isEmpty, "\(findings)")
    }

    /// Both devices save the same text at different times; alice syncs first. Bob's sync adopts alice's record
    /// (same bytes, nothing to move) but kept its own later mtime, so the folders differed in mtime for ever.
    /// Adopting a record now gives the file the record's `modified`.
    @Test func theSameTextSavedTwiceEndsWithTheRecordsMtimeEverywhere() {
        let note = "note.md"
        let history = SyncHistory(
            deviceCount: 2, clockStep: 1_000_000_000,
            steps: [
                Self.step(0, note, .edit(.rewriteShared(0))), Self.step(1, note, .edit(.rewriteShared(0))),
                Self.step(0, note, .sync), Self.step(0, note, .sync), Self.step(0, note, .sync)
            ])
        let findings = SyncHistoryRunner.run(history, checks: [.lostWrites, .convergence, .idempotence])
        #expect(findings.harness.isEmpty, "\(findings)")
        #expect(findings.lostWrites.isEmpty, "\(findings)")
        #expect(findings.convergence.isEmpty, "\(findings)")
        #expect(findings.idempotence.isEmpty, "\(findings)")
    }
    /// Alice saves a shared text and syncs; bob pulls it, changes a line, then saves the shared text again before he
    /// syncs: his note holds his base's bytes with a later mtime, a touch, which uploads nothing; the checker must
    /// not take that mtime for a divergence. Found by `devicesConvergeOnTheServerHeads` on an encrypted server.
    @Test func aNoteChangedAndChangedBackIsATouch() {
        let note = "a/b.md"
        let history = SyncHistory(
            deviceCount: 2, clockStep: 1_000_000_000,
            steps: [
                Self.step(0, note, .edit(.rewriteShared(1))), Self.step(0, note, .sync), Self.step(1, note, .sync),
                Self.step(1, note, .edit(.changeLine(0))), Self.step(1, note, .edit(.rewriteShared(1)))
            ])
        let findings = SyncHistoryRunner.run(history, checks: [.lostWrites, .convergence, .idempotence])
        #expect(findings.harness.isEmpty, "\(findings)")
        #expect(findings.lostWrites.isEmpty, "\(findings)")
        #expect(findings.convergence.isEmpty, "\(findings)")
        #expect(findings.idempotence.isEmpty, "\(findings)")
    }

    /// Alice saves a note, syncs, saves the same text again a second later, and syncs twice. The second save
    /// changes no byte, only the mtime: like a touch, it uploads nothing (docs/reconciliation.md), and the checker must not
    /// take the note's local mtime for a divergence. Found by `devicesConvergeOnTheServerHeads`.
    @Test func theSameTextSavedAgainUploadsNothing() {
        let note = "note.md"
        let history = SyncHistory(
            deviceCount: 2, clockStep: 1_000_000_000,
            steps: [
                Self.step(0, note, .edit(.rewriteShared(1))), Self.step(0, note, .sync),
                Self.step(0, note, .edit(.rewriteShared(1))), Self.step(0, note, .sync), Self.step(0, note, .sync)
            ])
        let findings = SyncHistoryRunner.run(history, checks: [.lostWrites, .convergence, .idempotence])
        #expect(findings.harness.isEmpty, "\(findings)")
        #expect(findings.lostWrites.isEmpty, "\(findings)")
        #expect(findings.convergence.isEmpty, "\(findings)")
        #expect(findings.idempotence.isEmpty, "\(findings)")
    }

    /// Alice deletes a note; bob's sync moves his copy to `.notesync/trash/`, and bob moves it back (same text,
    /// same mtime). The history recovery meant for a sync killed before recording a pull took the note for that
    /// version of the record, under the delete, and deleted it again. It now applies only to heads the sync
    /// fetched: this tombstone was known, and the note is one bob made again.
    @Test func aNoteRestoredFromTheTrashIsUploadedNotDeletedAgain() throws {
        let harness = try SyncHarness(deviceCount: 2)
        let text = SyncHarness.text(["keep me", "please"])
        try harness.write(0, "a/n.md", text)
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        try harness.delete(0, "a/n.md")
        _ = try harness.sync(0)
        let pulled = try harness.sync(1)
        #expect(pulled.changes.map(\.kind) == [.downloadDelete])
        #expect(try harness.read(1, "a/n.md") == nil)

        let trash = harness.devices[1].folder.trash
        let trashed = try #require(FileManager.default.subpathsOfDirectory(atPath: trash).first { $0.hasSuffix("a/n.md") })
        try FileIO.makeDirectories(harness.path(1, "a"))
        #expect(rename(trash + "/" + trashed, harness.path(1, "a/n.md")) == 0)
        let restored = try harness.sync(1)
        #expect(restored.changes.map(\.kind) == [.upload], "\(restored.changes)")
        #expect(try harness.read(1, "a/n.md") == text)
        _ = try harness.sync(0)
        #expect(try harness.read(0, "a/n.md") == text)
    }
}
