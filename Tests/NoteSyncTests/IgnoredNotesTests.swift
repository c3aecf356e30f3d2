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

/// A note the ignore rules take out of the sync (a rule added to `.notesyncignore` for a synced note, or for its
/// folder) is left as it is on every side: its file is not read as deleted, a change the server has for it is not
/// written into it (nor kept as a conflict copy), nothing is queued for it, and once the rule goes the note is
/// decided against the base it kept (``SyncEngine/plan(scan:bases:zone:deviceID:similarity:isIgnored:historyBase:)``).
@Suite struct IgnoredNotesTests {
    private static func text(_ lines: String...) -> Data { Data(lines.map { $0 + "\n" }.joined().utf8) }

    private static func kinds(_ report: SyncReport) -> [String] {
        report.changes.map { "\($0.kind.rawValue) \($0.name)" }.sorted()
    }

    private static func trash(_ harness: SyncHarness, _ device: Int) -> [String] {
        (try? FileIO.listEntries(harness.devices[device].folder.root + "/.notesync/trash"))??.map(\.name) ?? []
    }

    @Test func aRuleForSyncedNotesDeletesThemNowhere() throws {
        let harness = try SyncHarness(deviceCount: 2)
        try harness.write(0, "private.md", Self.text("mine"))
        try harness.write(0, "drafts/d1.md", Self.text("draft"))
        try harness.write(0, "shared.md", Self.text("shared"))
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        // B edits the note before it has the rule; A takes the note and a folder out of the sync.
        try harness.write(1, "private.md", Self.text("mine", "B's line"))
        try harness.write(0, ".notesyncignore", Self.text("private.md", "drafts/"))
        #expect(Self.kinds(try harness.sync(0, SyncHarness.dryRunOptions)) == ["upload .notesyncignore"])
        #expect(Self.kinds(try harness.sync(0)) == ["upload .notesyncignore"])
        #expect(try harness.devices[0].state.outbox().isEmpty, "nothing queued for the ignored notes")
        // B pulls the rules; its edit, made before it had them, is pushed.
        #expect(Self.kinds(try harness.sync(1)) == ["download .notesyncignore", "upload private.md"])
        // A passes the server's change over: its own file stays as it is.
        #expect(Self.kinds(try harness.sync(0)).isEmpty)
        #expect(try harness.read(0, "private.md") == Self.text("mine"))
        #expect(try harness.read(0, "drafts/d1.md") == Self.text("draft"))
        #expect(try harness.read(1, "drafts/d1.md") == Self.text("draft"))
        #expect(Self.trash(harness, 0).isEmpty && Self.trash(harness, 1).isEmpty)
        // With the rules, B's later edits and new notes stay on B; nothing reaches A's ignored files, nor a copy.
        try harness.write(1, "private.md", Self.text("mine", "B's line", "more"))
        try harness.write(1, "drafts/d2.md", Self.text("another draft"))
        #expect(Self.kinds(try harness.sync(1)).isEmpty)
        try harness.write(0, "drafts/d2.md", Self.text("A's own d2"))
        #expect(Self.kinds(try harness.sync(0)).isEmpty)
        #expect(try harness.read(0, "drafts/d2.md") == Self.text("A's own d2"))
        #expect(try harness.notes(0).keys.filter { $0.contains("conflict") }.isEmpty)

        // The rule goes: each note is decided against the base it kept. A's private.md is as synced, so it takes
        // the server's text; d1 is unchanged on both sides.
        try harness.delete(0, ".notesyncignore")
        let back = Self.kinds(try harness.sync(0))
        #expect(back == ["download private.md", "upload drafts/d2.md", "upload-delete .notesyncignore"], "\(back)")
        #expect(try harness.read(0, "private.md") == Self.text("mine", "B's line"))
        #expect(Self.trash(harness, 0).isEmpty)
    }
}
