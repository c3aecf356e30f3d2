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

/// The scan's own rules, apart from the sync around it.
@Suite struct ScannerTests {
    /// A warning names the path it is about as a value, not only in its text: the command line's JSON and the
    /// agent's log can say which note without parsing the message.
    @Test func warningsCarryTheirPath() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        try writeFile(root + "/sub/real.md", Data("real\n".utf8))
        #expect(symlink(root + "/sub/real.md", root + "/sub/link.md") == 0)
        #expect(mkfifo(root + "/pipe.md", 0o600) == 0)
        let scan = try FolderScanner(root: root, rules: .builtIn).scan(bases: [:], only: nil)
        let paths = scan.warnings.filter { $0.kind == .notANote }.compactMap(\.path).sorted()
        #expect(paths == ["pipe.md", "sub/link.md"], "\(scan.warnings)")
    }

    /// `init`'s check for a notes folder inside the one it sets up: found at any depth, never through a symlink,
    /// never inside another tool's folder (`.git`), and the folder's own state is not one.
    @Test func aNestedNotesFolderIsFoundAtAnyDepth() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        let elsewhere = dir.sub("elsewhere")
        for folder in [root + "/.notesync", root + "/a/b", root + "/.git/x/.notesync", elsewhere + "/.notesync"] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        for database in [root, root + "/.git/x", elsewhere] {
            try writeFile(NotesFolder(root: database).database, Data())
        }
        try writeFile(root + "/a/b/note.md", Data("note\n".utf8))
        #expect(symlink(elsewhere, root + "/a/link") == 0)
        let folder = NotesFolder(root: root)
        #expect(folder.nestedNotesFolder() == nil)
        let progress = SyncProgress()
        try FileManager.default.createDirectory(atPath: root + "/a/b/c/d/.notesync", withIntermediateDirectories: true)
        try writeFile(NotesFolder(root: root + "/a/b/c/d").database, Data())
        #expect(folder.nestedNotesFolder(progress: progress)?.root == NotesFolder(root: root + "/a/b/c/d").root)
        // A notes folder reached through a symlink (~/notes → /data/notes) is walked all the same.
        #expect(symlink(root, dir.sub("link")) == 0)
        #expect(NotesFolder(root: dir.sub("link")).nestedNotesFolder()?.root == NotesFolder(root: dir.sub("link") + "/a/b/c/d").root)
        #expect(progress.snapshot.done >= 6)
    }

    /// The case-folding probe: an ext4 or tmpfs notes folder tells `A` from `a`; the probe leaves nothing behind,
    /// and a folder without its state folder cannot be probed (nil, not a guess).
    @Test func theCaseProbeOfAFolderThatTellsCaseApart() throws {
        let dir = try TempDirectory()
        let folder = NotesFolder(root: dir.sub("notes"))
        #expect(folder.foldsCase() == nil)
        try FileManager.default.createDirectory(atPath: folder.stateDirectory, withIntermediateDirectories: true)
        #expect(folder.foldsCase() == false)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.stateDirectory).isEmpty)
    }

    /// A symlinked folder is listed through its link only when asked; its own symlinked subfolders never are.
    @Test func aSymlinkedFolderIsListedOnlyWhenFollowed() throws {
        let dir = try TempDirectory()
        try FileManager.default.createDirectory(atPath: dir.sub("real/sub"), withIntermediateDirectories: true)
        try writeFile(dir.sub("real/note.md"), Data("note\n".utf8))
        #expect(symlink(dir.sub("real/sub"), dir.sub("real/linked")) == 0)
        #expect(symlink(dir.sub("real"), dir.sub("link")) == 0)
        let followed = try #require(try FileIO.listSubdirectories(dir.sub("link"), followingLink: true))
        #expect(followed.names == ["sub"])
        #expect(followed.entries == 3)
        #expect(throws: NoteSyncError.self) { try FileIO.listSubdirectories(dir.sub("link")) }
        #expect(try FileIO.listSubdirectories(dir.sub("missing"), followingLink: true) == nil)
    }

    /// Two files whose names differ only in Unicode normalisation (ext4 keeps both) are one record: the first in
    /// byte order (NFD `e` + U+0301 sorts before NFC U+00E9) syncs, the other is skipped with a warning, in the
    /// root, in a subfolder (walked on another thread) and in a partial scan alike. A name without a twin is
    /// kept whatever its form.
    @Test func aNoteWithAUnicodeTwinIsSkippedWithAWarning() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        for folder in [root, root + "/sub"] {
            try writeFile(folder + "/caf\u{E9}.md", Data("composed\n".utf8))
            try writeFile(folder + "/cafe\u{301}.md", Data("decomposed\n".utf8))
            try writeFile(folder + "/plain.md", Data("plain\n".utf8))
        }
        try writeFile(root + "/sub/alone-e\u{301}.md", Data("alone\n".utf8))
        let scanner = FolderScanner(root: root, rules: .builtIn)

        for only in [nil, ["sub"]] as [[String]?] {
            let scan = try scanner.scan(bases: [:], only: only)
            let folders = only == nil ? ["", "sub/"] : ["sub/"]
            let expected = Set(
                try folders.flatMap { [try name($0 + "caf\u{E9}.md"), try name($0 + "plain.md")] }
                    + [try name("sub/alone-\u{E9}.md")])
            #expect(Set(scan.files.keys) == expected)
            for folder in folders {
                let file = try #require(scan.files[try name(folder + "caf\u{E9}.md")])
                #expect(file.path == folder + "cafe\u{301}.md")
                #expect(Array(file.path.utf8) == Array((folder + "cafe\u{301}.md").utf8))
                #expect(
                    scan.warnings.contains {
                        $0.kind == .unicodeTwin
                            && $0.message.contains(
                                "\"\(folder)caf\\u{E9}.md\" and \"\(folder)cafe\\u{301}.md\" are the same name in different Unicode forms")
                    })
            }
            #expect(scan.warnings.count == folders.count, "\(scan.warnings)")
            #expect(scan.files[try name("sub/alone-\u{E9}.md")]?.path == "sub/alone-e\u{301}.md")
        }
    }

    /// A folder named as notesync's state in another case (`.NoteSync` on ext4) is passed over as notesync's own, by
    /// a full and a partial scan: a device whose folder folds case could not write it anywhere but into its state.
    @Test func aFolderSpelledAsTheStateDirectoryIsNotScanned() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/.NoteSync", withIntermediateDirectories: true)
        try writeFile(root + "/.NoteSync/state.sqlite", Data("not a note\n".utf8))
        try writeFile(root + "/note.md", Data("note\n".utf8))
        let scanner = FolderScanner(root: root, rules: .builtIn)
        for only in [nil, [".NoteSync"], [".NoteSync/state.sqlite"]] as [[String]?] {
            let scan = try scanner.scan(bases: [:], only: only)
            #expect(scan.files.keys.allSatisfy { $0.string == "note.md" }, "\(String(describing: only))")
            #expect(scan.warnings.isEmpty, "\(String(describing: only)): \(scan.warnings)")
        }
        #expect(Set(try scanner.scan(bases: [:]).files.keys) == [try name("note.md")])
    }

    /// Twins whose folders differ in Unicode form are found too, though each folder is walked on a thread of its
    /// own and its files kept apart from the other's (``Candidates``): one syncs, the other is skipped with a
    /// warning, and the files after them are all there, in walk order.
    @Test func twinsInTwoFoldersWalkedApartAreFound() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        for folder in ["caf\u{E9}", "cafe\u{301}", "other"] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
            try writeFile(root + "/" + folder + "/n.md", Data(folder.utf8))
        }
        let scan = try FolderScanner(root: root, rules: .builtIn).scan(bases: [:])
        #expect(Set(scan.files.keys) == [try name("caf\u{E9}/n.md"), try name("other/n.md")])
        // Walk order is byte order: "cafe" + U+0301 comes before "caf" + U+00E9.
        #expect(scan.files[try name("caf\u{E9}/n.md")]?.path == "cafe\u{301}/n.md")
        #expect(scan.unicodeTwins == ["caf\u{E9}/n.md"])
        #expect(scan.warnings.filter { $0.kind == .unicodeTwin }.count == 1, "\(scan.warnings)")
    }

    /// A partial scan given one twin (the agent's scan of the one path inotify named), the other, both, or the
    /// record's NFC name keeps the twin a full scan keeps and leaves the other out with a warning, in the root and
    /// in twin folders; given a twin that is gone, it finds the one that is left. Without this every partial scan of
    /// either twin took its file as the record's, and the two overwrote each other's record under the agent.
    @Test func aPartialScanOfOneTwinSeesTheOther() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        for folder in [composed, decomposed] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
            try writeFile(root + "/" + folder + "/n.md", Data(folder.utf8))
            try writeFile(root + "/" + folder + ".md", Data(folder.utf8))
        }
        try writeFile(root + "/K.md", Data("ascii\n".utf8))
        try writeFile(root + "/\u{212A}.md", Data("kelvin\n".utf8))
        let scanner = FolderScanner(root: root, rules: .builtIn)
        let full = try scanner.scan(bases: [:])
        let cases: [[String]] = [
            [composed + ".md"], [decomposed + ".md"], [composed + ".md", decomposed + ".md"], [composed + "/n.md"],
            [decomposed + "/n.md"], [composed], [composed, decomposed + "/n.md"], ["K.md"], ["\u{212A}.md"]
        ]
        for only in cases {
            let scan = try scanner.scan(bases: [:], only: only)
            let names = Set(try only.filter { $0.hasSuffix(".md") }.map { try name(RecordName.nfc($0)) })
            for (name, file) in scan.files {
                let kept = try #require(full.files[name], "\(name)")
                #expect(Array(file.path.utf8) == Array(kept.path.utf8), "\(only)")
            }
            #expect(names.isSubset(of: Set(scan.files.keys)), "\(only)")
            let left = scan.unicodeTwins.map { Array($0.utf8) }
            #expect(Set(left).count == left.count, "each twin left out once: \(only)")
            #expect(scan.warnings.filter { $0.kind == .unicodeTwin }.count == left.count, "\(only)")
            #expect(!left.isEmpty, "\(only)")
            for path in scan.unicodeTwins { #expect(full.unicodeTwins.contains { UTF8Bytes.equal($0, path) }, "\(only)") }
        }
        // The twin kept by a full scan is gone: a partial scan of its path finds the other.
        try FileManager.default.removeItem(atPath: root + "/" + decomposed + ".md")
        let after = try scanner.scan(bases: [:], only: [decomposed + ".md"])
        let left = try #require(after.files[try name(composed + ".md")])
        #expect(Array(left.path.utf8) == Array((composed + ".md").utf8))
        #expect(after.unicodeTwins.isEmpty)
    }

    /// A partial scan of many names that may have twins, in one folder, lists that folder once (an agent pulling
    /// thousands of accented notes into one folder listed it once per note), and finds the same twins as a lookup
    /// of each name alone does.
    @Test func aPartialScanListsEachFolderOnce() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        let folder = "caf\u{E9}"
        try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        var paths: [String] = []
        for index in 0..<40 {
            let composed = folder + "/r\u{E9}sum\u{E9}-\(index).md"
            try writeFile(root + "/" + composed, Data("\(index)".utf8))
            paths.append(composed)
            if index % 4 == 0 {
                let decomposed = folder + "/re\u{301}sume\u{301}-\(index).md"
                try writeFile(root + "/" + decomposed, Data("twin \(index)".utf8))
                paths.append(decomposed)
            }
        }
        let scanner = FolderScanner(root: root, rules: .builtIn)
        var listings = FolderListings(root: root)
        for path in paths {
            var alone = FolderListings(root: root)
            let found = scanner.twins(of: path, listings: &listings)
            #expect(found.map { Array($0.utf8) } == scanner.twins(of: path, listings: &alone).map { Array($0.utf8) })
            #expect(found.count == (path.contains("-") && Int(path.split(separator: "-").last!.dropLast(3))! % 4 == 0 ? 2 : 1))
        }
        #expect(listings.listed == 2, "the root and the folder, once each")
        let full = try scanner.scan(bases: [:])
        let partial = try scanner.scan(bases: [:], only: paths)
        #expect(Set(partial.files.keys) == Set(full.files.keys))
        for (name, file) in partial.files { #expect(Array(file.path.utf8) == Array(full.files[name]!.path.utf8)) }
        #expect(partial.unicodeTwins.count == 10)
    }

    /// A partial scan that finds the notes under a folder through the state database's index takes the same scope
    /// as one that goes over every base: a folder gone, one renamed to a file, neighbours whose names start alike
    /// (`a/b-x`, `a/b0`, `a/bc/…`, `a/b` itself), and names past ASCII. A name only the database has (no base here)
    /// stays out; nil from the index falls back to the pass.
    @Test func namesUnderAFolderFromTheIndexMatchThePass() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/a", withIntermediateDirectories: true)
        try writeFile(root + "/a/kept.md", Data("kept\n".utf8))
        // "a/b" is a file now: the notes that were under the folder a/b are gone.
        try writeFile(root + "/a/b", Data("now a file\n".utf8))
        let names = [
            "a/b/one.md", "a/b/deep/two.md", "a/b-x.md", "a/b0.md", "a/bc/three.md", "a/b", "a/kept.md", "a/b/é.md",
            "a/bé/four.md", "gone/five.md", "gone/sub/six.md", "gonezo.md", "z.md"
        ]
        let state = try LocalState()
        var bases: RecordTable<BaseRecord> = [:]
        try state.update { batch in
            for string in names {
                let name = try RecordName(validating: string)
                let base = BaseRecord(tag: 1, digest: .empty, size: 0, modified: 1, fingerprint: nil)
                bases[name] = base
                try batch.setBase(name, base)
            }
            // Stored, but not a base of this scan (the database may hold a name the memo dropped): never in scope.
            try batch.setBase(
                try RecordName(validating: "gone/only-stored.md"),
                BaseRecord(tag: 1, digest: .empty, size: 0, modified: 1, fingerprint: nil))
        }
        let scanner = FolderScanner(root: root, rules: .builtIn)
        let index: (String) -> [RecordName]? = { try? state.baseNames(under: $0) }
        for paths in [["a/b"], ["gone"], ["a/b", "gone", "a"], ["a/bé"], (0..<10).map { "gone/\($0)" } + ["a/b", "gone"]] {
            let pass = try scanner.scan(bases: bases, only: paths)
            let indexed = try scanner.scan(bases: bases, only: paths, namesUnder: index)
            let fallback = try scanner.scan(bases: bases, only: paths, namesUnder: { _ in nil })
            #expect(indexed.scope == pass.scope, "\(paths)")
            #expect(fallback.scope == pass.scope, "\(paths)")
            #expect(Set(indexed.files.keys) == Set(pass.files.keys), "\(paths)")
        }
        let gone = try scanner.scan(bases: bases, only: ["gone"], namesUnder: index)
        #expect(gone.scope?.map(\.string).sorted() == ["gone", "gone/five.md", "gone/sub/six.md"])
        let file = try scanner.scan(bases: bases, only: ["a/b"], namesUnder: index)
        #expect(
            file.scope?.map(\.string).sorted() == ["a/b", "a/b/deep/two.md", "a/b/one.md", "a/b/é.md"],
            "the file a/b, and the notes of the folder it replaced")
    }

    /// The bases a walk's files are unchanged since, found on one thread (a few files) or on every core (4,096 and
    /// more): a file whose fingerprint matches its base's gets that base's row; one whose fingerprint differs, or that
    /// has no base, gets -1.
    @Test(arguments: [100, 5000]) func unchangedFilesFindTheRowOfTheirBase(count: Int) throws {
        var bases: RecordTable<BaseRecord> = [:]
        var candidates: [(name: RecordName, path: String, fingerprint: StatFingerprint)] = []
        var expected: [RecordName?] = []
        for index in 0..<count {
            let name = try RecordName(validating: "n\(index).md")
            let fingerprint = StatFingerprint(size: Int64(index), mtime: Int64(index) * 7, ctime: 1, inode: UInt64(index))
            // Every third file has no base; every third but one, a base with another fingerprint.
            if index % 3 != 0 {
                let kept = index % 3 == 1 ? fingerprint : StatFingerprint(size: -1, mtime: 0, ctime: 0, inode: 0)
                bases[name] = BaseRecord(
                    tag: Int64(index), digest: ContentDigest(of: Data("\(index)".utf8)), size: Int64(index),
                    modified: 0, fingerprint: kept)
            }
            candidates.append((name, name.string, fingerprint))
            expected.append(index % 3 == 1 ? name : nil)
        }
        let rows = FolderScanner.unchangedSinceBase(Candidates(candidates), bases: bases)
        #expect(rows.count == count)
        let found = rows.map { $0.row < 0 ? nil : bases.keys[Int($0.row)] }
        #expect(found == expected)
        #expect(rows.map(\.hash.value) == candidates.map { NameHash($0.name).value })
    }

    /// The walk names other tools' conflict copies, in any folder and any case of "conflict", and nothing else: a
    /// name with "onflict" in it that no tool makes is a note like any other.
    @Test func otherToolsConflictCopiesAreNamed() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        let copies = [
            "note.sync-conflict-20240101-120000-ABCDEFG.md", "sub/plan (CONFLICTED COPY 2024-01-02 101112).md",
            "sub/plan (Case Conflict).md"
        ]
        for name in copies + ["note.md", "sub/plan.md", "conflict.md", "sub/Conflicts and how to settle them.md"] {
            try writeFile(root + "/" + name, Data(name.utf8))
        }
        let scan = try FolderScanner(root: root, rules: .builtIn).scan(bases: [:])
        #expect(scan.foreignConflicts.map(\.string).sorted() == copies.sorted())
        #expect(scan.files.count == 7)
    }

    /// A partial scan given a note and its folder meets the note twice: it is one file, hashed and counted once.
    @Test func aNoteGivenWithItsFolderIsScannedOnce() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/a", withIntermediateDirectories: true)
        try writeFile(root + "/a/x.md", Data("x\n".utf8))
        try writeFile(root + "/a/y.md", Data("y\n".utf8))
        let scan = try FolderScanner(root: root, rules: .builtIn).scan(bases: [:], only: ["a/x.md", "a"])
        #expect(scan.changed.map(\.string).sorted() == ["a/x.md", "a/y.md"])
        #expect(scan.hashed == 2)
        #expect(scan.files.count == 2)
        #expect(scan.files[try RecordName(validating: "a/x.md")]?.digest == ContentDigest(of: Data("x\n".utf8)))
    }

    /// A full scan takes every file in walk order, whichever order the hashes finish in; an unchanged file holds its
    /// base's digest and size, a changed one its own, a file gone since its base is not among the files. (A file that
    /// cannot be read: HostileLocalTests, as a user root is not.)
    @Test func aScanKeepsWalkOrderAndTheBasesDigests() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        var names: [String] = []
        for index in 0..<60 {
            let name = (index % 2 == 0 ? "" : "sub/") + "n" + String(100 + index).dropFirst() + ".md"
            try writeFile(root + "/" + name, Data("text \(index)\n".utf8))
            names.append(name)
        }
        let scanner = FolderScanner(root: root, rules: .builtIn)
        let first = try scanner.scan(bases: [:], only: nil)
        let rootNames = names.filter { !$0.contains("/") }.sorted()
        let subNames = names.filter { $0.contains("/") }.sorted()
        #expect(first.changed.map(\.string) == rootNames + subNames)
        var bases: RecordTable<BaseRecord> = [:]
        for (name, file) in first.files {
            // A base whose digest is not the file's: only a scan that trusts the fingerprint reports it.
            bases[name] = BaseRecord(
                tag: 1, digest: ContentDigest(of: Data(name.string.utf8)), size: 7, modified: file.modified,
                fingerprint: file.fingerprint)
        }
        try writeFile(root + "/n00.md", Data("edited\n".utf8))
        try FileManager.default.removeItem(atPath: root + "/sub/n03.md")
        let again = try scanner.scan(bases: bases, only: nil)
        #expect(again.changed.map(\.string) == ["n00.md"])
        #expect(again.hashed == 1)
        #expect(again.baseMatches == 59)
        #expect(again.files.count == 59)
        #expect(again.files[try RecordName(validating: "sub/n03.md")] == nil)
        let kept = try RecordName(validating: "sub/n01.md")
        #expect(again.files[kept]?.digest == bases[kept]?.digest)
        #expect(again.files[kept]?.size == 7)
        #expect(again.files[kept]?.path == "sub/n01.md")
        #expect(again.files[try RecordName(validating: "n00.md")]?.digest == ContentDigest(of: Data("edited\n".utf8)))
    }

    /// A note whose name on disk is not in NFC keeps its path as it is on disk when its base (under the NFC name)
    /// matches: the scan hands it the base's name string, never the base's name as its path (the two are `==` as
    /// Swift strings, not as bytes, and a write, trash or rename by that path would miss the file).
    @Test func anUnchangedNoteNamedInNFDKeepsItsPathOnDisk() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        let onDisk = ["cafe\u{301}.md", "sub/cre\u{300}me.md"]
        for path in onDisk { try writeFile(root + "/" + path, Data("text\n".utf8)) }
        let scanner = FolderScanner(root: root, rules: .builtIn)
        let first = try scanner.scan(bases: [:], only: nil)
        var bases: RecordTable<BaseRecord> = [:]
        for (name, file) in first.files {
            #expect(Array(name.string.utf8) == Array(RecordName.nfc(file.path).utf8))
            bases[name] = BaseRecord(tag: 1, digest: file.digest, size: file.size, modified: file.modified, fingerprint: file.fingerprint)
        }
        #expect(bases.count == 2)
        // Given the records' NFC names (a later round's scope, a server change), the scan finds the files in NFD.
        let names = bases.keys.map(\.string)
        for scan in [
            try scanner.scan(bases: bases, only: nil), try scanner.scan(bases: bases, only: onDisk),
            try scanner.scan(bases: bases, only: names)
        ] {
            #expect(scan.hashed == 0)
            #expect(scan.baseMatches == 2)
            let paths = scan.files.values.map { Array($0.path.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
            #expect(paths == onDisk.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) })
            for file in scan.files.values { #expect(FileIO.lstatInfo(root + "/" + file.path) != nil) }
        }
    }
}
