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

/// A device whose notes folder is on a real exFAT volume (``FilesystemMount/exfat(at:)``): no rename flags, no hard
/// links, no modes, whole-second mtimes, inode numbers given anew at each mount. Every kind of change travels both
/// ways, nothing vanishes, nothing is left in `.notesync/staging/`, and a sync that has nothing to do sees nothing,
/// after a remount too.
@Suite(.serialized, .enabled(if: FilesystemMount.exfatAvailable))
struct ExfatTests {
    @Test func everyChangeTravelsToAndFromAnExfatNotesFolder() throws {
        let scratch = try Scratch("exfat")
        let stick = try FilesystemMount.exfat(at: scratch.path + "/stick")
        defer { stick.unmount() }
        let server = scratch.path + "/server"
        let a = scratch.path + "/A"
        let b = stick.path + "/B"
        func run(_ arguments: [String]) throws -> ProcessResult {
            let result = try notesync(arguments, scratch: scratch.path)
            #expect(result.status == 0, "notesync \(arguments.joined(separator: " ")): \(result.stdout) \(result.stderr)")
            return result
        }
        func sync(_ folder: String) throws -> ProcessResult { try run(["sync", "--notes", folder]) }
        func write(_ folder: String, _ name: String, _ text: String) throws {
            let path = folder + "/" + name
            try FileManager.default.createDirectory(atPath: FileIO.parent(of: path), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        }
        func read(_ folder: String, _ name: String) -> String? {
            try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)
        }
        func staged() -> [String] {
            (FileManager.default.subpaths(atPath: b + "/.notesync/staging") ?? []).filter {
                (FileIO.lstatInfo(b + "/.notesync/staging/" + $0)?.st_mode ?? 0) & S_IFMT == S_IFREG
            }
        }

        try write(a, "n1.md", "one\n")
        try write(a, "n2.md", "two\n")
        try write(a, "dir/n3.md", "three\n")
        try run(["init", "--notes", a, "--server", server, "--device-name", "alice", "--create-server"])
        try sync(a)
        try run(["init", "--notes", b, "--server", server, "--device-name", "bob"])
        let first = try sync(b)
        #expect(first.stderr.contains("no rename-without-replace"), "the first sync says what exFAT lacks: \(first.stderr)")
        #expect(!(try sync(b)).stderr.contains("rename-without-replace"), "said once")
        #expect(read(b, "n1.md") == "one\n" && read(b, "n2.md") == "two\n" && read(b, "dir/n3.md") == "three\n")
        let status = try run(["status", "--notes", b])
        #expect(status.stdout.contains("folder:    fuse, without rename-exchange, rename-without-replace, hard links"), "\(status.stdout)")

        // A pulled update (the defect: the note vanished), twice.
        for text in ["one, edited on A\n", "one, edited on A again\n"] {
            try write(a, "n1.md", text)
            try sync(a)
            try sync(b)
            #expect(read(b, "n1.md") == text)
            #expect(staged().isEmpty)
        }

        // An edit pushed from exFAT, and a note retyped there.
        try write(b, "n2.md", "two, edited on B\n")
        try sync(b)
        try sync(a)
        #expect(read(a, "n2.md") == "two, edited on B\n")
        try write(b, "n1.md", "one, retyped on B\n")
        try sync(b)
        try sync(a)
        #expect(read(a, "n1.md") == "one, retyped on B\n")

        // A delete and a rename from the other side.
        unlink(a + "/dir/n3.md")
        try FileManager.default.createDirectory(atPath: a + "/moved", withIntermediateDirectories: true)
        #expect(rename(a + "/n2.md", a + "/moved/n2.md") == 0)
        try sync(a)
        try sync(b)
        #expect(read(b, "dir/n3.md") == nil && read(b, "n2.md") == nil)
        #expect(read(b, "moved/n2.md") == "two, edited on B\n")
        let trashed = FileManager.default.subpaths(atPath: b + "/.notesync/trash") ?? []
        #expect(trashed.contains { $0.hasSuffix("n3.md") }, "\(trashed)")

        // Edits of the same line on both sides: one keeps the note, the other is a conflict copy; both texts stay.
        try write(a, "n1.md", "one, A's last word\n")
        try write(b, "n1.md", "one, B's last word\n")
        try sync(a)
        try sync(b)
        try sync(a)
        for folder in [a, b] {
            let texts = try FileManager.default.contentsOfDirectory(atPath: folder).compactMap { read(folder, $0) }
            #expect(texts.contains { $0.contains("A's last word") } && texts.contains { $0.contains("B's last word") })
        }
        #expect(staged().isEmpty)

        // Nothing to do is nothing to do: mtimes in whole seconds, modes 0777, inodes renumbered by a remount.
        #expect(try sync(b).stdout.contains("nothing to do"))
        try stick.remount()
        let again = try sync(b)
        #expect(again.stdout.contains("nothing to do"), "\(again.stdout)")
        #expect(try sync(a).stdout.contains("nothing to do"))
        #expect(staged().isEmpty)
    }

    /// An encrypted server from an exFAT notes folder: the key file `init` writes in `.notesync/` has mode 0777 there
    /// (exFAT has no modes, chmod changes nothing), and was refused as readable by others with the fix "chmod 600",
    /// which could not be followed: no sync ever ran. Where the filesystem keeps modes the refusal stands.
    @Test func anEncryptedServerSyncsFromAnExfatNotesFolder() throws {
        let scratch = try Scratch("exfat-key")
        let stick = try FilesystemMount.exfat(at: scratch.path + "/stick")
        defer { stick.unmount() }
        let environment = ["NOTESYNC_PASSPHRASE": "correct horse battery staple", "NOTESYNC_SCRYPT_LOG_N": "10"]
        func run(_ arguments: [String]) throws -> ProcessResult {
            try NotesyncProcess(arguments, scratch: scratch.path, environment: environment).wait()
        }
        let a = scratch.path + "/A"
        let b = stick.path + "/B"
        let server = scratch.path + "/server"
        try FileManager.default.createDirectory(atPath: a, withIntermediateDirectories: true)
        try Data("sealed\n".utf8).write(to: URL(fileURLWithPath: a + "/n.md"))
        for arguments in [
            ["init", "--notes", a, "--server", server, "--device-name", "alice", "--create-server", "--encrypt"],
            ["sync", "--notes", a], ["init", "--notes", b, "--server", server, "--device-name", "bob"],
            ["sync", "--notes", b]
        ] {
            let result = try run(arguments)
            #expect(result.status == 0, "notesync \(arguments.joined(separator: " ")): \(result.stdout) \(result.stderr)")
        }
        #expect((try? String(contentsOfFile: b + "/n.md", encoding: .utf8)) == "sealed\n")
        // On A's folder (modes kept) a key file others may read is still refused, and the printed fix works.
        let key = try #require(
            (FileManager.default.subpaths(atPath: a + "/.notesync") ?? []).first { $0.hasSuffix("vault-key") })
        #expect(chmod(a + "/.notesync/" + key, 0o644) == 0)
        let refused = try run(["sync", "--notes", a])
        #expect(refused.status != 0 && refused.stderr.contains("chmod 600"), "\(refused.stderr)")
        #expect(chmod(a + "/.notesync/" + key, 0o600) == 0)
        #expect(try run(["sync", "--notes", a]).status == 0)
    }
}
