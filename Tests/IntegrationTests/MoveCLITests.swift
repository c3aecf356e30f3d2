import Foundation
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport
import Testing

/// Renames through the real `notesync` binary: the two cases of the moves issue, and what `diff`, `--json` and
/// `history` say of a rename.
@Suite struct MoveCLITests {
    private static func rename(_ from: String, _ to: String) throws {
        try FileManager.default.createDirectory(
            atPath: (to as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: from, toPath: to)
    }

    /// `mv work job` (most of the notes) syncs without `--allow-mass-delete`, as one line in `diff`, and fills no
    /// trash on the other device.
    @Test func aFolderRenameIsOneLineAndNoMassDelete() throws {
        let t = try TwoDevices("move-folder")
        for index in 0..<25 { try t.write(t.a, "work/n\(index).md", "note \(index)\n") }
        for index in 0..<5 { try t.write(t.a, "other\(index).md", "other \(index)\n") }
        try t.sync(t.a)
        try t.sync(t.b)
        try Self.rename(t.a + "/work", t.a + "/job")

        let diff = try t.expectOK(["diff", "--notes", t.a])
        #expect(diff.stdout.contains("renamed          work/ → job/  (25 notes, renamed here)"), "\(diff.stdout)")
        #expect(diff.stdout.split(separator: "\n").count == 2, "one line and the summary: \(diff.stdout)")
        let json = try t.expectOK(["diff", "--notes", t.a, "--json"])
        let report = try JSONDecoder().decode(SyncReport.self, from: Data(json.stdout.utf8))
        #expect(report.changes.count == 25 && report.changes.allSatisfy { $0.kind == .move })
        #expect(report.changes.contains { $0.from == "work/n3.md" && $0.name == "job/n3.md" })

        let pushed = try t.expectOK(["sync", "--notes", t.a])
        #expect(!pushed.stderr.contains("--allow-mass-delete"))
        let pulled = try t.expectOK(["sync", "--notes", t.b])
        #expect(pulled.stdout.contains("renamed          work/ → job/  (25 notes, renamed on alice)"), "\(pulled.stdout)")
        #expect(try t.notes(t.b) == t.notes(t.a))
        #expect(FileIO.lstatInfo(t.b + "/.notesync/trash") == nil, "no trash")
        #expect(FileIO.lstatInfo(t.b + "/work") == nil)
    }

    /// Alice renames `x.md` to `y.md`, Bob edits `x.md`: after the syncs both have `y.md` with Bob's edit, and no
    /// `x.md`.
    @Test func aRenameAndAnEditElsewhereGiveOneNote() throws {
        let t = try TwoDevices("move-edit")
        try t.write(t.a, "x.md", "one\ntwo\nthree\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try Self.rename(t.a + "/x.md", t.a + "/y.md")
        try t.write(t.b, "x.md", "one\ntwo by bob\nthree\n")
        try t.sync(t.a)
        let bob = try t.sync(t.b)
        #expect(bob.stdout.contains("renamed          x.md → y.md  (renamed on alice)"), "\(bob.stdout)")
        try t.sync(t.a)
        for folder in [t.a, t.b] { #expect(try t.notes(folder) == ["y.md": Data("one\ntwo by bob\nthree\n".utf8)]) }
        #expect(try t.expectOK(["conflicts", "--notes", t.b]).stdout.contains("no conflict"))

        let history = try t.expectOK(["history", "--notes", t.a, "y.md"]).stdout.split(separator: "\n")
        #expect(history.count == 3, "\(history)")
        #expect(history[0].hasPrefix("version 1") && history[0].hasSuffix("as x.md"))
        #expect(history[1].contains("renamed from x.md"))
        #expect(history[2].contains("synced here"))
        // Under its old name the move shows as a rename, not a delete.
        let old = try t.expectOK(["history", "--notes", t.a, "x.md"]).stdout
        #expect(old.contains("renamed to y.md") && !old.contains("deleted"), "\(old)")
        // A version from before the rename is one of the note's versions.
        try t.expectOK(["restore", "--notes", t.a, "y.md", "--version", "1"])
        #expect(t.read(t.a, "y.md") == "one\ntwo\nthree\n")
    }

    /// A rename with an edit shows the rename, then the edit's diff.
    @Test func aDiffOfARenameWithAnEditShowsBoth() throws {
        let t = try TwoDevices("move-diff")
        let text = (0..<8).map { "line \($0)\n" }.joined()
        try t.write(t.a, "x.md", text)
        try t.sync(t.a)
        try Self.rename(t.a + "/x.md", t.a + "/y.md")
        try t.write(t.a, "y.md", text + "added\n")
        let diff = try t.expectOK(["diff", "--notes", t.a]).stdout
        #expect(diff.contains("renamed          x.md → y.md  (renamed here)"), "\(diff)")
        #expect(diff.contains("--- server/x.md") && diff.contains("+++ local/y.md") && diff.contains("+added"), "\(diff)")
    }
}
