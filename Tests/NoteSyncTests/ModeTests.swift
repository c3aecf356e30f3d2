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

/// The modes of what notesync writes: notes keep theirs, server files follow the server folder's mode.
@Suite struct ModeTests {
    /// The permission bits (and setgid) of `path`.
    static func mode(_ path: String) -> mode_t? { FileIO.lstatInfo(path).map { $0.st_mode & 0o7777 } }

    /// This process's umask, read from /proc (umask(2) would change it for every thread meanwhile).
    static func currentUmask() throws -> mode_t {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("Umask:") })
        return try #require(mode_t(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8))
    }

    /// A pulled version is the note's own mode exactly, whatever the umask would take away (0664 under 022): a note
    /// made private stays private when an edit arrives (a merge is written the same way).
    @Test(arguments: [0o600, 0o664, 0o444, 0o640] as [mode_t])
    func aPulledVersionKeepsTheNotesMode(_ noteMode: mode_t) throws {
        let dir = try TempDirectory()
        let notes = dir.sub("notes")
        try FileIO.makeDirectories(notes)
        let applier = NoteApplier(root: notes, trash: dir.sub("trash"), deviceName: "dev-a")
        let first = Data("v1\n".utf8)
        _ = try applier.write(try name("p.md"), path: "p.md", data: first, modified: 1_000_000_000, expected: nil)
        #expect(chmod(notes + "/p.md", noteMode) == 0)
        let outcome = try applier.write(
            try name("p.md"), path: "p.md", data: Data("v2\n".utf8), modified: 2_000_000_000, expected: ContentDigest(of: first))
        guard case .written = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(try String(contentsOfFile: notes + "/p.md", encoding: .utf8) == "v2\n")
        #expect(Self.mode(notes + "/p.md") == noteMode)
    }

    /// A new note gets what an editor gives a new file: 0666 less the umask (0644 was fixed before the umask).
    @Test func aNewNoteGetsTheModeTheUmaskGivesANewFile() throws {
        let dir = try TempDirectory()
        let notes = dir.sub("notes")
        try FileIO.makeDirectories(notes)
        let applier = NoteApplier(root: notes, trash: dir.sub("trash"), deviceName: "dev-a")
        _ = try applier.write(try name("new.md"), path: "new.md", data: Data("x".utf8), modified: 0, expected: nil)
        let bulk = applier.writeNew([.init(name: try name("bulk.md"), path: "bulk.md", data: Data("y".utf8), modified: 0)])
        #expect(bulk.count == 1)
        let expected = 0o666 & ~(try Self.currentUmask())
        #expect(Self.mode(notes + "/new.md") == expected)
        #expect(Self.mode(notes + "/bulk.md") == expected)
    }

    /// A conflict copy written from the server's version takes its note's mode (`modeOf`).
    @Test func aConflictCopyTakesItsNotesMode() throws {
        let dir = try TempDirectory()
        let notes = dir.sub("notes")
        try FileIO.makeDirectories(notes)
        let applier = NoteApplier(root: notes, trash: dir.sub("trash"), deviceName: "dev-a")
        _ = try applier.write(try name("p.md"), path: "p.md", data: Data("mine\n".utf8), modified: 0, expected: nil)
        #expect(chmod(notes + "/p.md", 0o600) == 0)
        _ = try applier.write(
            try name("p (copy).md"), path: "p (copy).md", data: Data("theirs\n".utf8), modified: 0, expected: nil,
            modeOf: "p.md")
        #expect(Self.mode(notes + "/p (copy).md") == 0o600)
    }

    @Test func theServerRootsModeDecidesTheModesOfWhatIsWrittenInIt() {
        #expect(ServerModes(rootMode: S_IFDIR | 0o2775) == .group)
        #expect(ServerModes(rootMode: S_IFDIR | 0o2770) == .group)
        #expect(ServerModes(rootMode: S_IFDIR | 0o700) == .ownerOnly)
        #expect(ServerModes(rootMode: S_IFDIR | 0o755) == .byUmask)
        #expect(ServerModes(rootMode: S_IFDIR | 0o2755) == .byUmask, "setgid but not group-writable: not shared")
        #expect(ServerModes(rootMode: S_IFDIR | 0o775) == .byUmask, "no setgid: files would get each user's own group")
    }

    /// A group-shared server (setgid, group-writable root): folders 2775 and files 0664 whatever the umask, so
    /// that every member of the group can add to what another made.
    @Test func aGroupServersFoldersAndFilesAreGroupWritable() throws {
        let dir = try TempDirectory()
        let root = dir.sub("server")
        try FileIO.makeDirectory(root)
        #expect(chmod(root, 0o2775) == 0)
        let storage = FolderStorage(root: root, tmpDirectory: root + "/tmp", logger: testLogger)
        try storage.makeDirectory(root + "/tmp")
        try storage.makeDirectory(root + "/tmp/shard")
        #expect(Self.mode(root + "/tmp") == 0o2775)
        #expect(Self.mode(root + "/tmp/shard") == 0o2775)
        let staged = try storage.stage(Data("x".utf8), device: "dev", suffix: "entry", sync: false)
        #expect(try Self.mode(#require(staged.temp)) == 0o664)
        let sink = try storage.stagingSink(device: "dev", suffix: "pack")
        try sink.write(Data("pack".utf8), at: 0)
        let finished = try sink.finish()
        #expect(try Self.mode(#require(finished.temp)) == 0o664)
        #expect(try storage.move(#require(finished.temp), to: root + "/quarantine/deep/file"))
        #expect(Self.mode(root + "/quarantine") == 0o2775 && Self.mode(root + "/quarantine/deep") == 0o2775)
    }

    /// `server init --private`: the root 0700, its folders 0700, its files 0600, and what a device writes later too.
    @Test func aPrivateServerIsItsOwnersOnly() throws {
        let dir = try TempDirectory()
        let root = dir.sub("server")
        try ServerStore.create(root: root, logger: testLogger, ownerOnly: true)
        let layout = ServerLayout(root: root)
        #expect(Self.mode(root) == 0o700)
        for folder in [layout.zonesDirectory, layout.logDirectory, layout.assetsDirectory, layout.tmpDirectory] {
            #expect(Self.mode(folder) == 0o700, "\(folder)")
        }
        #expect(Self.mode(layout.marker) == 0o600)
        let storage = FolderStorage(root: root, tmpDirectory: layout.tmpDirectory, logger: testLogger)
        try storage.makeDirectory(layout.tmpDirectory + "/later")
        #expect(Self.mode(layout.tmpDirectory + "/later") == 0o700)
        let staged = try storage.stage(Data("x".utf8), device: "dev", suffix: "entry", sync: false)
        #expect(try Self.mode(#require(staged.temp)) == 0o600)
    }

    /// An object store has no modes: `--private` is refused there, before anything is sent.
    @Test func aPrivateObjectStoreIsRefused() throws {
        #expect {
            try ServerStore.create(root: "s3://bucket/prefix", logger: testLogger, ownerOnly: true)
        } throws: { error in
            (error as? NoteSyncError)?.message.contains("--private") == true
        }
    }

    /// The state folder holds the state, staged versions, the trash and an encrypted server's key: its owner's only.
    @Test func theStateFolderIsMadeTheOwnersOnly() throws {
        let dir = try TempDirectory()
        let folder = NotesFolder(root: dir.sub("notes"))
        try FileIO.makeDirectories(folder.stateDirectory)
        #expect(chmod(folder.stateDirectory, 0o755) == 0)
        folder.keepStatePrivate()
        #expect(Self.mode(folder.stateDirectory) == 0o700)
    }
}
