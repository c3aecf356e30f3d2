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

/// Many notes new on a device (a first sync) are written in bulk: temps, one flush, no-replace renames, one flush
/// (``NoteApplier/writeNew(_:)``). The property tests use few notes, so the bulk path is checked here.
@Suite struct BulkDownloadTests {
    static let count = 60

    static func notes() -> [(String, Data)] {
        (0..<count).map { index in
            let folder = ["", "a/", "a/b/", "c/"][index % 4]
            return ("\(folder)note \(index).md", Data("note \(index)\nline two\n".utf8))
        }
    }

    /// Every note arrives byte for byte with its record's mtime, nothing is left behind, and the next sync on
    /// either device does nothing.
    @Test func aFirstSyncWritesEveryNoteExactly() throws {
        let harness = try SyncHarness(deviceCount: 2)
        for (note, data) in Self.notes() { try harness.write(0, note, data) }
        _ = try harness.sync(0)

        let report = try harness.sync(1)
        #expect(report.changes.filter { $0.kind == .download }.count == Self.count)
        #expect(report.warnings.isEmpty, "\(report.warnings)")
        #expect(try harness.notes(1) == harness.notes(0))
        #expect(try harness.modifiedTimes(1) == harness.modifiedTimes(0))
        let server = try harness.serverNotes()
        for (note, time) in try harness.modifiedTimes(1) { #expect(server[note]?.modified == time, "\(note)") }
        let litter = try SyncHarness.walk(harness.devices[1].folder.root, skipTopLevel: ReservedNames.stateDirectoryName)
            .map(\.0).filter { $0.contains(ReservedNames.agentTempPrefix) }
        #expect(litter.isEmpty, "temp files left: \(litter)")

        for device in [0, 1] {
            let again = try harness.sync(device)
            #expect(again.changes.isEmpty, "\(again.changes)")
            #expect(again.hashed == 0, "a fingerprint was not recorded: \(again.hashed) notes hashed again")
        }
    }

    /// Notes the device already has (same or different text) are not written in bulk: the same text is adopted,
    /// a different one merged; the rest still arrive in bulk.
    @Test func notesThatExistLocallyAreMergedNotReplaced() throws {
        let harness = try SyncHarness(deviceCount: 2)
        let notes = Self.notes()
        for (note, data) in notes { try harness.write(0, note, data) }
        _ = try harness.sync(0)
        try harness.write(1, notes[0].0, notes[0].1)
        try harness.write(1, notes[1].0, Data("bob's own first line\n".utf8))

        let report = try harness.sync(1)
        #expect(report.changes.filter { $0.kind == .download }.count == Self.count - 2)
        let bob = try harness.notes(1)
        #expect(bob[notes[0].0] == notes[0].1)
        // Two texts with no common ancestor: a conflict, both kept.
        #expect(bob.values.contains(Data("bob's own first line\n".utf8)))
        #expect(bob.values.contains(notes[1].1))
        _ = try harness.heal { _, _ in }
        #expect(try harness.notes(0) == harness.notes(1))
    }
}
