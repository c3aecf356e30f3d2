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

/// Seeds the soak found on the extended simulation (the agent's path, filesystem personalities), shrunk, kept as
/// deterministic tests once fixed. Each runs the schedule with every invariant checked.
extension SimRegressionTests {
    /// Carol saves `a/b.md`, then renames its folder `a` to `a2`; her agent's next sync comes while the folder's
    /// rename is still settling. The settler gave `a/b.md` alone, missing, and the sync pushed its delete before
    /// the move was seen: a delete nobody made, and the other devices lost carol's text until her next sync
    /// uploaded `a2/b.md` as a new note (soak seed 3204859652964217760, shrunk). A path gone with its folder now
    /// waits for the folder's rename and goes with it (``EventSettler``).
    @Test func aNoteWhoseFolderIsRenamedWhileItSettlesIsMovedNotDeleted() {
        Self.expectClean(
            SimSchedule(
                deviceCount: 5, clockStep: 1_000_000,
                steps: [
                    .init(4, .edit(.pool(1), .changeLine(2), .inPlace)),
                    .init(4, .edit(.existing(5), .append, .inPlace)),
                    .init(2, .edit(.existing(1), .changeLine(0), .inPlace)),
                    .init(4, .sync(nil, full: false)),
                    .init(1, .sync(.race(at: 11, device: 1), full: false)),
                    .init(4, .sync(nil, full: false)),
                    .init(2, .moveFolder(.pool(1), to: 0)),
                    .init(2, .sync(nil, full: false))
                ], watch: .init(seed: 4_782_011_780_227_879_349)))
    }
}

extension SimRegressionTests {
    /// Dave's sync is killed after its commit landed (a conflict copy and his edit), before recording it; bob deletes
    /// both; gc with every band off compacts the log. Dave's commit was kept neither as a head nor at his token, so
    /// his next sync did not know it as his: the notes looked made on his device, and his push brought back what bob
    /// had deleted (soak seed 3204859652964221605, shrunk). gc keeps the versions a device made after its token
    /// (`ServerStore.kept`), so the device finds its commit in the snapshot and takes bob's deletes.
    @Test func aCommitNeverRecordedSurvivesGcSoItsDeletesAreTaken() {
        Self.expectClean(
            SimSchedule(
                deviceCount: 4, clockStep: 1_000_000,
                steps: [
                    .init(0, .sync(.userEdit(at: 3, .pool(4)), full: false)),
                    .init(3, .sync(.crash(at: 3), full: false)),
                    .init(3, .edit(.pool(4), .append, .inPlace)),
                    .init(0, .sync(nil, full: false)),
                    .init(1, .sync(.userEdit(at: 0, .existing(1)), full: false)),
                    .init(3, .sync(.crash(at: 14), full: false)),
                    .init(1, .sync(nil, full: false)),
                    .init(1, .deleteMost),
                    .init(1, .sync(nil, full: false)),
                    .init(0, .gc(policy: 0, crashAt: nil))
                ]))
    }
}

extension SimRegressionTests {
    /// Carol makes note.md private and syncs; alice deletes it; carol restores an earlier version. The restore's
    /// first sync took alice's delete (the note went to the trash), and the version came back as a new file, 0644:
    /// her private note readable by every user of the machine (soak seed 3204859652964227662, shrunk). The version
    /// brought back keeps the mode the note had before the restore.
    @Test func aPrivateNoteDeletedElsewhereIsRestoredPrivate() {
        Self.expectClean(
            SimSchedule(
                deviceCount: 3, clockStep: 1_000_000,
                steps: [
                    .init(2, .edit(.pool(0), .changeLine(4), .inPlace)),
                    .init(2, .makePrivate(.pool(0))),
                    .init(2, .sync(nil, full: false)),
                    .init(0, .approveDeletes),
                    .init(0, .delete(.pool(0))),
                    .init(0, .sync(nil, full: false)),
                    .init(2, .restore(.existing(5), back: 2))
                ]))
    }

    /// Carol renames the folder `a` to `a2`, then moves `a2/x/y/deep.txt` to `todo.txt` before her agent's next
    /// sync: the folder's rename settled first, and its partial sync saw the note gone from `a/` and not at `a2/`,
    /// and pushed its delete; `todo.txt` came later as a new note (soak seed 3204859652964227462, shrunk). A rename
    /// out of a folder taken goes with it (``EventSettler``).
    @Test func aNoteMovedOutOfAFolderJustRenamedIsMovedNotDeleted() {
        Self.expectClean(
            SimSchedule(
                deviceCount: 4, clockStep: 1_000_000_000,
                steps: [
                    .init(2, .edit(.pool(3), .append, .inPlace)),
                    .init(3, .edit(.pool(0), .changeLine(0), .inPlace)),
                    .init(3, .sync(nil, full: false)),
                    .init(2, .sync(nil, full: false)),
                    .init(3, .edit(.pool(2), .rewrite(lines: 6), .inPlace)),
                    .init(2, .moveFolder(.pool(1), to: 5)),
                    .init(2, .move(.existing(6), to: 5)),
                    .init(3, .sync(nil, full: false)),
                    .init(2, .sync(nil, full: false))
                ], watch: .init(seed: 14_101_441_250_104_242_283)))
        // The same seed shrunk on the fixed settler: the two renames' events in other batches.
        Self.expectClean(
            SimSchedule(
                deviceCount: 3, clockStep: 1_000_000_000,
                steps: [
                    .init(2, .sync(nil, full: false)),
                    .init(2, .edit(.pool(3), .append, .inPlace)),
                    .init(2, .sync(nil, full: false)),
                    .init(0, .sync(nil, full: false)),
                    .init(0, .sync(nil, full: false)),
                    .init(2, .sync(nil, full: true)),
                    .init(2, .moveFolder(.pool(1), to: 5)),
                    .init(2, .move(.existing(6), to: 5)),
                    .init(2, .sync(nil, full: false))
                ], watch: .init(seed: 14_101_441_250_104_242_283)))
    }
}

extension SimRegressionTests {
    /// Carol pushes her rewrite of a/x/README as entry 2; a replicating tool holds that entry back, alice takes slot
    /// 2 with her own commit and bob commits entry 3 over it; gc compacts the log up to 3, and the held entry is
    /// delivered into the freed slot 2. Carol, recovering, walked back from bob's head through its base, read slot 2
    /// and took her own lost rewrite (its text and mtime) for a version the record had: her note looked unchanged,
    /// bob's version was pulled over it, and her rewrite was gone (soak seed 4142363115645708106, shrunk). An entry
    /// at or below a snapshot is walked only if the snapshot keeps its link (``ServerStore/logEntry(_:)``).
    @Test func anEntryDeliveredIntoACompactedSlotIsNoVersionOfTheRecord() {
        Self.expectClean(
            SimSchedule(
                deviceCount: 3, clockStep: 1_000_000,
                steps: [
                    .init(2, .edit(.pool(2), .append, .inPlace)),
                    .init(0, .edit(.pool(2), .changeLine(1), .inPlace)),
                    .init(1, .edit(.pool(2), .changeLine(3), .inPlace)),
                    .init(2, .sync(nil, full: false)),
                    .init(2, .edit(.existing(2), .rewriteShared(0), .inPlace)),
                    .init(2, .sync(nil, full: false)),
                    .init(0, .serverFault(.holdEntry)),
                    .init(0, .sync(nil, full: false)),
                    .init(1, .sync(nil, full: false)),
                    .init(0, .sync(.gc(at: 12), full: false))
                ]))
    }
}

extension SimRegressionTests {
    /// Alice makes a/x/README private; her sync pulls carol's rename of it to a/x/y/deep.txt (the note keeps its file
    /// and 0600 there), and at that moment she saves a/x/README: the save finds no file and makes one, 0644. The
    /// harness still followed the private note at the old name and wanted the new file 0600 (soak seed
    /// 630374797232645536 with `NOTESYNC_SIM_CASE=0`, shrunk). A mid-sync save that makes a file ends the following.
    @Test func aSaveMadeWhereAPrivateNoteWasRenamedAwayIsANewFile() {
        Self.expectClean(
            SimSchedule(
                deviceCount: 3, clockStep: 1_000_000,
                steps: [
                    .init(2, .edit(.pool(2), .changeLine(3), .inPlace)),
                    .init(2, .sync(nil, full: false)),
                    .init(2, .move(.existing(6), to: 3)),
                    .init(0, .approveDeletes),
                    .init(1, .edit(.pool(1), .rewriteShared(1), .inPlace)),
                    .init(1, .approveDeletes),
                    .init(2, .approveDeletes),
                    .init(0, .makePrivate(.existing(6))),
                    .init(0, .sync(.userEdit(at: 11, .existing(7)), full: false))
                ]))
    }
}
