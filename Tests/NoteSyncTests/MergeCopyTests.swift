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

/// A clean merge written while the user saves the note again: the applier keeps the user's save as a conflict copy
/// beside the merged note. That copy is a conflict like any other: recorded (`notesync conflicts` lists it),
/// reported, and synced.
@Suite struct MergeCopyTests {
    @Test func anEditSavedWhileAMergeIsWrittenIsAReportedConflictCopy() throws {
        let harness = try SyncHarness(deviceCount: 2)
        try harness.write(0, "n.md", Data("one\ntwo\nthree\n".utf8))
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        try harness.write(0, "n.md", Data("one, first device\ntwo\nthree\n".utf8))
        _ = try harness.sync(0)
        try harness.write(1, "n.md", Data("one\ntwo\nthree, second device\n".utf8))

        // The second device saves again just after the merged text was staged, before it is swapped in.
        let path = harness.path(1, "n.md")
        let hooks = FaultPoint.Hooks.once(at: "apply.tempWritten") {
            try Data("one\ntwo\nthree, saved during the merge\n".utf8).write(to: URL(fileURLWithPath: path))
        }
        let report = try FaultPoint.with(hooks) { try harness.sync(1) }
        let copies = report.changes.filter { $0.kind == .conflict }.compactMap(\.detail)
        #expect(copies.count == 1, "\(report.changes)")
        let conflicts = try harness.devices[1].state.conflicts()
        #expect(conflicts.map(\.copy.description) == copies, "\(conflicts)")
        if let copy = copies.first {
            #expect(try FileIO.read(harness.path(1, copy)) == Data("one\ntwo\nthree, saved during the merge\n".utf8))
        }
        #expect(try FileIO.read(path) == Data("one, first device\ntwo\nthree, second device\n".utf8))
    }
}

/// A conflict is forgotten once its copy is deleted and the delete synced, on the device that deleted it and on the
/// one that made it: the conflict table keeps only open conflicts.
@Suite struct ResolvedConflictTests {
    @Test func deletingTheCopyResolvesTheConflictOnEveryDevice() throws {
        let harness = try SyncHarness(deviceCount: 2)
        try harness.write(0, "n.md", Data("one\n".utf8))
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        try harness.write(0, "n.md", Data("one, first\n".utf8))
        try harness.write(1, "n.md", Data("one, second\n".utf8))
        _ = try harness.sync(0)
        let made = try harness.sync(1)
        let copy = try #require(made.conflictCopies.first, "\(made.changes)")
        #expect(try harness.devices[1].state.conflicts().map(\.copy.description) == [copy])
        _ = try harness.sync(0)

        try harness.delete(0, copy)
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        #expect(try harness.read(1, copy) == nil, "the delete reached the device that made the copy")
        #expect(try harness.devices[1].state.conflicts().isEmpty, "the conflict was resolved")
        #expect(try harness.devices[0].state.conflicts().isEmpty)
    }
}
