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

/// A notes folder without `RENAME_EXCHANGE`, `RENAME_NOREPLACE` and hard links (exFAT, vfat): every way a file is
/// put into it works, and no note is ever missing from the folder at the end (the steps are taken away with
/// ``FolderRename/without(_:_:)``; IntegrationTests' ExfatTests run the same on a real exFAT volume).
@Suite struct FolderRenameTests {
    private struct Folder {
        let dir: TempDirectory
        let notes: String
        let applier: NoteApplier

        init() throws {
            dir = try TempDirectory()
            notes = dir.sub("notes")
            try FileManager.default.createDirectory(atPath: notes, withIntermediateDirectories: true)
            applier = NoteApplier(root: notes, trash: notes + "/.notesync/trash", deviceName: "dev-b")
        }

        func text(_ relative: String) -> String? { try? String(contentsOfFile: notes + "/" + relative, encoding: .utf8) }

        func put(_ relative: String, _ text: String) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: notes + "/" + relative))
        }

        /// Files left under `.notesync/staging/`: none once an apply ended.
        var staged: [String] {
            (FileManager.default.subpaths(atPath: applier.staging) ?? []).filter {
                (FileIO.lstatInfo(applier.staging + "/" + $0)?.st_mode ?? 0) & S_IFMT == S_IFREG
            }
        }
    }

    private static func digest(_ text: String) -> ContentDigest { ContentDigest(of: Data(text.utf8)) }

    @Test(arguments: [FolderRename.Lacking.exfat, [.exchange, .noReplace], [.exchange]])
    func aPulledUpdateReplacesTheNote(_ lacking: FolderRename.Lacking) throws {
        let folder = try Folder()
        try folder.put("a.md", "old")
        let outcome = try FolderRename.without(lacking) {
            try folder.applier.write(
                try name("a.md"), path: "a.md", data: Data("new".utf8), modified: 1_700_000_000_000_000_000,
                expected: Self.digest("old"))
        }
        #expect(folder.text("a.md") == "new")
        guard case .written(let print) = outcome else {
            Issue.record("not written: \(outcome)")
            return
        }
        #expect(FileIO.lstatInfo(folder.notes + "/a.md").map(StatFingerprint.init) == print)
        #expect(folder.staged.isEmpty)
        // And again: the next pulled update too (the defect failed every later sync the same way).
        _ = try FolderRename.without(lacking) {
            try folder.applier.write(
                try name("a.md"), path: "a.md", data: Data("newer".utf8), modified: 1_700_000_001_000_000_000,
                expected: Self.digest("new"))
        }
        #expect(folder.text("a.md") == "newer")
        #expect(folder.staged.isEmpty)
    }

    @Test func aLocalEditMadeDuringTheSyncIsKeptAsAConflictCopy() throws {
        let folder = try Folder()
        try folder.put("a.md", "edited here")
        let outcome = try FolderRename.without(.exfat) {
            try folder.applier.write(
                try name("a.md"), path: "a.md", data: Data("pulled".utf8), modified: 0, expected: Self.digest("base"))
        }
        guard case .writtenKeepingLocalEdit(_, let copy) = outcome else {
            Issue.record("no copy kept: \(outcome)")
            return
        }
        #expect(folder.text("a.md") == "pulled")
        #expect(folder.text(copy.string) == "edited here")
        #expect(folder.staged.isEmpty)
    }

    @Test func newNotesArriveAndATakenNameKeepsBoth() throws {
        let folder = try Folder()
        try folder.put("taken.md", "mine")
        let results = FolderRename.without(.exfat) {
            folder.applier.writeNew([
                .init(name: try! name("sub/new.md"), path: "sub/new.md", data: Data("one".utf8), modified: 0),
                .init(name: try! name("taken.md"), path: "taken.md", data: Data("theirs".utf8), modified: 0)
            ])
        }
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        #expect(folder.text("sub/new.md") == "one")
        #expect(folder.text("taken.md") == "theirs")
        let copies = try FileManager.default.contentsOfDirectory(atPath: folder.notes).filter { $0.contains("conflict") }
        #expect(copies.count == 1 && copies.first.flatMap { folder.text($0) } == "mine")
        #expect(folder.staged.isEmpty)
    }

    @Test func deletesRenamesAndPutBacksWork() throws {
        let folder = try Folder()
        try folder.put("gone.md", "base")
        try folder.put("edited.md", "edited")
        try folder.put("from.md", "moved")
        try FolderRename.without(.exfat) {
            #expect(try folder.applier.delete(try name("gone.md"), path: "gone.md", expected: Self.digest("base")) == .trashed)
            #expect(
                try folder.applier.delete(try name("edited.md"), path: "edited.md", expected: Self.digest("base"))
                    == .keptEdited)
            try folder.applier.follow(rename: try name("to.md"), from: "from.md", to: "dir/to.md")
            try folder.put("from2.md", "x")
            #expect(throws: NoteSyncError.self) {
                try folder.applier.follow(rename: try name("dir/to.md"), from: "from2.md", to: "dir/to.md")
            }
        }
        #expect(folder.text("gone.md") == nil)
        #expect(folder.text("edited.md") == "edited")
        #expect(folder.text("dir/to.md") == "moved" && folder.text("from.md") == nil && folder.text("from2.md") == "x")
        let trashed = FileManager.default.subpaths(atPath: folder.applier.trash) ?? []
        #expect(trashed.contains { $0.hasSuffix("/gone.md") })
    }

    @Test func theProbeSaysWhatTheFolderLacks() throws {
        let dir = try TempDirectory()
        let lacking = try FolderRename.without(.exfat) { try FolderGuarantees.probe(in: dir.sub("staging")) }
        #expect(lacking.missing == ["rename-exchange", "rename-without-replace", "hard links"])
        #expect(lacking.warning?.contains("can be overwritten") == true)
        let linksOnly = try FolderRename.without([.exchange, .noReplace]) { try FolderGuarantees.probe(in: dir.sub("staging")) }
        #expect(linksOnly.hardLinks && linksOnly.warning == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.sub("staging")).isEmpty)
        let stored = try #require(FolderGuarantees(stored: lacking.stored))
        #expect(stored == lacking && !stored.placesWithoutReplacing && linksOnly.placesWithoutReplacing)
    }

    /// An applier asks a folder whether it can place a file without replacing one once, not at every pulled update
    /// (a probe is two round trips on NFS and sshfs), and not at all when it was given the stored answer.
    @Test func theApplierProbesAFolderOnce() throws {
        let folder = try Folder()
        try folder.put("a.md", "old")
        try FolderRename.without(.exfat) {
            _ = try folder.applier.write(
                try name("a.md"), path: "a.md", data: Data("new".utf8), modified: 1_700_000_000_000_000_000,
                expected: Self.digest("old"))
        }
        let probedAgain = folder.applier.placements.answer(for: folder.applier.staging) {
            Issue.record("probed again")
            return true
        }
        #expect(!probedAgain)
        let given = NoteApplier(
            root: folder.notes, trash: folder.applier.trash, deviceName: "dev-b",
            guarantees: FolderGuarantees(filesystem: "exfat", renameNoReplace: false, renameExchange: false, hardLinks: false))
        let givenAnswer = given.placements.answer(for: given.staging) {
            Issue.record("probed though it was given")
            return true
        }
        #expect(!givenAnswer)
    }

    /// A process killed between the probe's two renames leaves the pulled version as `<temp>-probe` in the staging
    /// folder: the next sync settles it as a version of its note, as it does the temp itself (removed when the note
    /// is still its base, so nothing was swapped in, or the server has its text; else kept as a conflict copy of the
    /// note), never as a note of its own named `…-probe`.
    @Test func aProbeLeftoverIsSettledAsItsNote() throws {
        let harness = try SyncHarness(deviceCount: 1)
        try harness.write(0, "a.md", Data("synced\n".utf8))
        _ = try harness.sync(0)
        let staging = harness.devices[0].folder.staging
        func leave(_ token: String, _ text: String) throws {
            let folder = staging + "/" + ReservedNames.agentTempPrefix + token
            try FileIO.makeDirectories(folder)
            try writeFile(folder + "/a.md" + FolderRename.probeSuffix, Data(text.utf8))
        }
        try leave("0123456789abcdef", "synced\n")
        try leave("fedcba9876543210", "merged, never swapped in\n")
        _ = try harness.sync(0)
        #expect(try harness.notes(0) == ["a.md": Data("synced\n".utf8)])
        #expect((FileManager.default.subpaths(atPath: staging) ?? []).isEmpty)
        // The note saved since: the leftover is a version no one else has, kept beside it.
        try harness.write(0, "a.md", Data("saved meanwhile\n".utf8))
        try leave("00112233445566ff", "swapped out\n")
        _ = try harness.sync(0)
        let notes = try harness.notes(0)
        #expect(notes["a.md"] == Data("saved meanwhile\n".utf8))
        let copies = notes.filter { $0.key != "a.md" }
        #expect(copies.count == 1, "\(notes.keys.sorted())")
        for (copy, text) in copies {
            #expect(text == Data("swapped out\n".utf8))
            #expect(copy.hasPrefix("a") && !copy.contains("probe"), "\(copy)")
        }
        #expect((FileManager.default.subpaths(atPath: staging) ?? []).isEmpty)
    }
}
