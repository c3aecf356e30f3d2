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

@Suite struct NoteApplierTests {
    /// A server name whose component starts with a combining mark (`link/\u{301}x/evil.md`) still has `link` as a
    /// folder: splitting it by Characters glued `/\u{301}` together, so the folder check never looked at `link`,
    /// and a note was written through a symlink to outside the notes folder (found by the name fuzz target).
    @Test(arguments: ["link/\u{301}x/evil.md", "link/evil.md", "a/link/\u{301}/evil.md"])
    func neverWritesThroughALinkedFolder(_ text: String) throws {
        let dir = try TempDirectory()
        let notes = dir.sub("notes")
        let outside = dir.sub("outside")
        try FileManager.default.createDirectory(atPath: notes + "/a", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        #expect(symlink(outside, notes + "/link") == 0)
        #expect(symlink(outside, notes + "/a/link") == 0)
        let applier = NoteApplier(root: notes, trash: dir.sub("trash"), deviceName: "dev-a")

        #expect(throws: NoteSyncError.self) {
            try applier.write(try name(text), path: text, data: Data("x".utf8), modified: 0, expected: nil)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
    }

    @Test func makesTheFoldersOfANameThatStartsAComponentWithACombiningMark() throws {
        let dir = try TempDirectory()
        let notes = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: notes, withIntermediateDirectories: true)
        let applier = NoteApplier(root: notes, trash: dir.sub("trash"), deviceName: "dev-a")
        let text = "a/\u{301}b/c.md"
        _ = try applier.write(try name(text), path: text, data: Data("x".utf8), modified: 0, expected: nil)
        #expect(FileManager.default.fileExists(atPath: notes + "/a/\u{301}b/c.md"))
    }
}
