import Foundation
import Synchronization
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

@Suite struct ServerStoreTests {
    /// The agent watches the log with inotify only where other devices' commits raise events: a server folder on a
    /// local filesystem whose log folder is there. An object store, or a log folder not there (yet), is polled.
    @Test func theLogIsWatchedOnlyInALocalServerFolder() throws {
        let dir = try TempDirectory()
        let log = ServerLayout(root: dir.path).logDirectory
        #expect(ServerStore.watchableLogDirectory(root: dir.path) == nil)
        try FileIO.makeDirectories(log)
        #expect(ServerStore.watchableLogDirectory(root: dir.path) == log)
        #expect(ServerStore.watchableLogDirectory(root: "s3://bucket/notes") == nil)
    }

    /// `FileIO.parent(of:)` gives what `NSString.deletingLastPathComponent` gives, without its trap on
    /// one-character relative paths.
    @Test(arguments: [
        ("a", ""), ("S", ""), ("b/", ""), ("ab", ""), ("/a", "/"), ("/", "/"), ("a/b", "a"),
        ("a/b/", "a"), ("/x/y/z.md", "/x/y"), ("a//b", "a"), ("//a", "/")
    ])
    func parentOfAPath(_ path: String, _ parent: String) {
        #expect(FileIO.parent(of: path) == parent)
    }

    /// A first sync's batch: written, flushed and published on every core. Duplicates and assets already there
    /// are written once or not at all, every asset reads back verified, and no temp file is left, with either
    /// publish primitive.
    @Test(arguments: TestServer.primitives([.rename, .link]))
    func aBigBatchOfAssetsIsPublishedOnceEach(_ primitive: PublishPrimitive) throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir, primitive: primitive)
        let texts = (0..<700).map { Data("note \($0 % 600)\n".utf8 + Data(repeating: UInt8($0 % 251), count: $0 % 5000)) }
        let early = try store.putAsset(texts[5])
        let refs = try store.putAssets(texts)
        #expect(refs == texts.map(AssetRef.init(of:)))
        #expect(refs[5] == early)
        for (ref, text) in zip(refs, texts) { #expect(try store.readAsset(ref) == text) }
        let files = ServerFiles(store)
        #expect(try files.names(in: store.layout.tmpDirectory).isEmpty)
        // One text was there loose; the others went into one pack, once each.
        let assets = store.layout.assetsDirectory.dropFirst(store.layout.root.count + 1) + "/"
        #expect(try files.listing().keys.filter { $0.hasPrefix(assets) && !$0.hasSuffix("/") }.count == 1)
        let packs = try files.names(in: store.layout.packsDirectory)
        #expect(packs.count == 1)
        #expect(try store.readPackIndex(try #require(packs.first))?.count == Set(refs).count - 1)
    }

    /// A batch that cannot be published (a file stands where a shard folder must go) fails with that file named,
    /// and leaves no temp file behind; the assets that could be published are there and verified. A batch under 16
    /// texts is published loose, one file each.
    @Test(.folderOnly("a file stands where a folder must be: a bucket has no folders"))
    func aBatchThatFailsLeavesNoTempFile() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let texts = (0..<15).map { Data("text \($0)\n".utf8) }
        let blocked = AssetRef(of: texts[12])
        try FileIO.makeDirectory(store.layout.assetsDirectory)
        try writeFile(store.assetShard(blocked.sha256), Data("in the way".utf8))
        #expect {
            try store.putAssets(texts)
        } throws: { ($0 as? NoteSyncError)?.path == store.assetShard(blocked.sha256) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.layout.tmpDirectory).isEmpty)
        for text in texts where store.storedName(AssetRef(of: text).sha256).hex.prefix(2) != store.storedName(blocked.sha256).hex.prefix(2)
        {
            if store.hasAsset(AssetRef(of: text).sha256) { #expect(try store.readAsset(AssetRef(of: text)) == text) }
        }
    }

    /// A batch packed (formats 5 and 6) that cannot be published (a file stands where the packs' folder must go)
    /// fails with that file named, leaves no temp file behind, and publishes nothing.
    @Test(.folderOnly("a file stands where a folder must be: a bucket has no folders"))
    func aPackThatCannotBePublishedLeavesNoTempFile() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let texts = (0..<300).map { Data("text \($0)\n".utf8) }
        try writeFile(store.layout.packsDirectory, Data("in the way".utf8))
        #expect {
            try store.putAssets(texts)
        } throws: { ($0 as? NoteSyncError)?.path == store.layout.packsDirectory }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.layout.tmpDirectory).isEmpty)
        #expect(store.missingAssets(texts.map(AssetRef.init(of:))).count == 300)
    }

    @Test func createRefusesForeignAndExistingFolders() throws {
        let dir = try TempDirectory()
        let foreign = try TestServer.root(dir, "foreign")
        let files = try ServerFiles(root: foreign)
        try files.write(foreign + "/notes.txt", Data("mine".utf8))
        #expect(throws: NoteSyncError.self) { try TestServer.create(foreign) }
        #expect(try files.read(foreign + "/notes.txt") == Data("mine".utf8))
        let fresh = try TestServer.root(dir, "fresh/nested")
        try TestServer.create(fresh)
        #expect(throws: NoteSyncError.self) { try TestServer.create(fresh) }
    }

    /// The tip is checked a piece at a time (``ServerStore/digestOfEntryFile(_:)``): the digest of a file of several
    /// pieces, of one, of exactly one piece, and of an empty one is its bytes' digest; a missing file has none.
    @Test func anEntryFilesDigestIsTakenAPieceAtATime() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let files = ServerFiles(store)
        let piece = ServerStore.entryPieceBytes
        var random = SplitMix(seed: 7)
        for size in [piece * 2 + 12345, piece, piece - 1, 100, 0] {
            let data = Data((0..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            let path = store.layout.root + "/tip-\(size)"
            try files.write(path, data)
            #expect(try store.digestOfEntryFile(path) == ContentDigest(of: data), "\(size) bytes")
        }
        #expect(try store.digestOfEntryFile(store.layout.root + "/none") == nil)
    }

    /// A folder that is not there is unreachable (a share not mounted); a prefix with nothing in it is no server.
    @Test func openWithoutMarkerIsNotAnEmptyServer() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        try ServerFiles(store).remove(store.layout.marker)
        #expect {
            try ServerStore(root: store.layout.root, device: "dev-a", logger: testLogger, vault: TestServer.vault)
        } throws: { ($0 as? NoteSyncError)?.kind == .notAServer }
        #expect {
            try ServerStore(root: try TestServer.root(dir, "gone"), device: "dev-a", logger: testLogger, vault: TestServer.vault)
        } throws: { ($0 as? NoteSyncError)?.kind == (TestServer.isFolder ? .serverUnreachable : .notAServer) }
    }

    /// An entry of 1 MiB of JSON or more is written to its temp a piece at a time on a plain server (never held whole;
    /// ``SealedFile/sealEntry(_:minimumBytes:into:)``), sealed whole on an encrypted one. Either way it reads back as
    /// committed, its digest is its file's, the next entry names that digest, another device reads the log with its
    /// chain checked, and no temp is left.
    @Test func aLargeEntryReadsBackAndChains() throws {
        let dir = try TempDirectory()
        let sunk = Mutex<[String]>([])
        let storage = RacingStorage(try makeServer(dir).storage, sinking: { suffix in sunk.withLock { $0.append(suffix) } })
        let store = try ServerStore(storage: storage, device: "dev-a", logger: testLogger, vault: TestServer.vault)
        var state = ZoneState()
        let text = try store.putAsset(Data("the same text".utf8))
        let prefix = String(repeating: "a long folder name/", count: 8)
        let changes = try (0..<6_000).map { index in
            RecordChange.save(try name("\(prefix)note \(index).md"), base: 0, text: text, modified: Int64(index))
        }
        guard case .committed(let first) = try store.commit(changes, into: &state) else {
            Issue.record("the commit raced with nobody")
            return
        }
        let files = ServerFiles(store)
        let bytes = try #require(try files.read(store.layout.entryPath(1)))
        #expect(bytes.count > SealedFile.streamedEntryBytes)
        let streamed = !TestServer.isEncrypted && storage.stagesTempFiles
        #expect(sunk.withLock { $0 } == (streamed ? ["entry"] : []), "written a piece at a time on a plain folder only")
        #expect(first.digest == ContentDigest(of: bytes))
        guard case .entry(let read) = try store.readSlot(1) else {
            Issue.record("entry 1 does not read back")
            return
        }
        #expect(read.changes == changes && read.commit == first.commit)
        #expect(try files.names(in: store.layout.tmpDirectory).isEmpty)
        let gone = try name(prefix + "note 0.md")
        guard case .committed(let second) = try store.commit([.delete(gone, base: 1, modified: 9)], into: &state) else {
            Issue.record("the second commit raced with nobody")
            return
        }
        #expect(second.prev == first.digest)
        let other = try makeServer(dir, device: "dev-b")
        var theirs = ZoneState()
        try other.fetch(into: &theirs)
        #expect(theirs.token == 2 && theirs.chain == state.chain && theirs.heads.count == 6_000)
        #expect(theirs.heads[gone]?.deleted == true)
    }

    /// An entry of more than one piece (``ServerStore/entryPieceBytes``) is read a piece at a time on a plain folder
    /// (``ServerStore/streamEntry(_:seq:)``), and reads back as committed, with its file's digest. Torn, damaged,
    /// lengthened or misplaced, or with a name the fast decoder leaves to `JSONDecoder`, it is read whole again and
    /// judged as before; an entry of one piece is the file itself.
    @Test func aLargeEntryIsReadAPieceAtATime() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        let text = try store.putAsset(Data("the same text".utf8))
        let prefix = String(repeating: "a long folder name/", count: 8)
        // Moves, as a rename writes them: each save names the delete before it (the decoder shares those names).
        let changes = try (0..<8_000).flatMap { index in
            let from = try name("\(prefix)note \(index).md")
            let to = try name("renamed \(prefix)note \(index).md")
            return RecordChange.move(from: from, fromBase: 0, to: to, toBase: 0, text: text, modified: Int64(index), time: 1)
        }
        guard case .committed(let first) = try store.commit(changes, into: &state) else {
            Issue.record("the commit raced with nobody")
            return
        }
        let files = ServerFiles(store)
        let path = store.layout.entryPath(1)
        let bytes = try #require(try files.read(path))
        #expect(bytes.count > 3 * ServerStore.entryPieceBytes)
        let pieces = !TestServer.isEncrypted && !store.storage.billsRequests
        if pieces {
            guard case .entry(let streamed) = try store.streamEntry(path, seq: 1) else {
                Issue.record("a plain folder's large entry is not read a piece at a time")
                return
            }
            #expect(streamed == (try SealedFile.open(bytes, kind: "entry", as: LogEntry.self)))
            #expect(streamed.changes == changes && streamed.digest == ContentDigest(of: bytes))
        }
        guard case .entry(let read) = try store.readSlot(1) else {
            Issue.record("entry 1 does not read back")
            return
        }
        #expect(read.changes == changes && read.commit == first.commit && read.digest == ContentDigest(of: bytes))

        // Damaged copies in slot 2: each judged as a whole read judges it.
        let slot2 = store.layout.entryPath(2)
        func judged(_ data: Data, _ expected: String) throws {
            try? FileManager.default.removeItem(atPath: slot2)
            try files.write(slot2, data)
            if pieces, case .entry = try store.streamEntry(slot2, seq: 2) {
                Issue.record("a damaged entry was taken a piece at a time (\(expected))")
            }
            guard case .damaged(let damage) = try store.readSlot(2) else {
                Issue.record("a damaged entry was not found damaged (\(expected))")
                return
            }
            #expect(damage.reason.contains(expected), "\(damage.reason)")
        }
        try judged(bytes.dropLast(), "torn")
        try judged(bytes + Data("x".utf8), "torn")
        var flipped = bytes
        flipped[flipped.count - ServerStore.entryPieceBytes - 7] ^= 0x01
        try judged(flipped, "checksum")
        // (Sealed for its slot on an encrypted server: another slot's key does not open it.)
        try judged(bytes, TestServer.isEncrypted ? "does not open" : "misplaced")
        // A header promising a length no entry may have: torn, as a whole read finds it (not a reader trapping on it).
        let line = String(decoding: bytes.prefix(200), as: UTF8.self).prefix { $0 != "\n" }
        let fields = line.split(separator: " ")
        var lying = Data("\(fields[0]) \(fields[1]) 999999999999999999 \(fields[3])".utf8)
        lying.append(bytes[(bytes.startIndex + line.utf8.count)...])
        try judged(lying, "torn")

        // A name with a backslash is written escaped: left to `JSONDecoder`, and read all the same.
        let escaped = (0..<4_000).map { index in
            RecordChange.save(try! name("\(prefix)back\\slash \(index).md"), base: 0, text: text, modified: 1)
        }
        // (Slot 2 holds the misplaced copy: the commit takes the next free slot.)
        guard case .committed(let committed) = try store.commit(escaped, into: &state) else {
            Issue.record("the second commit raced with nobody")
            return
        }
        let secondPath = store.layout.entryPath(committed.seq)
        #expect(try #require(try files.read(secondPath)).count > ServerStore.entryPieceBytes)
        if pieces, case .entry = try store.streamEntry(secondPath, seq: committed.seq) {
            Issue.record("an entry with escapes was taken a piece at a time")
        }
        guard case .entry(let second) = try store.readSlot(committed.seq) else {
            Issue.record("the entry with escapes does not read back")
            return
        }
        #expect(second.changes == escaped)

        // One piece: the file as it is.
        guard case .committed(let small) = try store.commit([.delete(try name("x.md"), base: 0, modified: 1)], into: &state)
        else {
            Issue.record("the third commit raced with nobody")
            return
        }
        if pieces {
            guard case .whole(let whole) = try store.streamEntry(store.layout.entryPath(small.seq), seq: small.seq) else {
                Issue.record("a small entry is not read in one piece")
                return
            }
            #expect(whole == (try files.read(store.layout.entryPath(small.seq))))
            guard case .missing = try store.streamEntry(store.layout.entryPath(small.seq + 1), seq: small.seq + 1) else {
                Issue.record("an empty slot is not missing")
                return
            }
        }
    }

    @Test func newerFormatIsReadOnly() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        _ = try store.commit([.save(try name("a.md"), base: 0, text: try store.putAsset(Data("a".utf8)), modified: 1)], into: &state)
        let files = ServerFiles(store)
        let text = String(decoding: try #require(try files.read(store.layout.marker)), as: UTF8.self).replacingOccurrences(
            of: "\"format\" : \(store.marker.format)", with: "\"format\" : \(ServerMarker.currentFormat + 1)")
        try files.write(store.layout.marker, Data(text.utf8))
        let newer = try ServerStore(root: store.layout.root, device: "dev-b", logger: testLogger, vault: TestServer.vault)
        #expect(newer.isReadOnly)
        var other = ZoneState()
        try newer.fetch(into: &other)
        #expect(other.token == 1)
        #expect { try newer.putAsset(Data("b".utf8)) } throws: { ($0 as? NoteSyncError)?.kind == .serverNewerFormat }
        #expect {
            try newer.commit([.delete(try name("a.md"), base: 1, modified: 2)], into: &other)
        } throws: { ($0 as? NoteSyncError)?.kind == .serverNewerFormat }
    }

    @Test func assetsAreContentAddressedAndVerified() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let data = Data("hello notes\n".utf8)
        let ref = try store.putAsset(data)
        let path = store.assetPath(ref.sha256)
        let files = ServerFiles(store)
        // The file's identity: its inode in a folder, its ETag in a bucket (a reuse touches it: its time changes).
        let written = try #require(store.storage.info(path)).fingerprint.inode
        #expect(try store.putAsset(data) == ref)
        #expect(try #require(store.storage.info(path)).fingerprint.inode == written, "an existing digest is not rewritten")
        #expect(try store.readAsset(ref) == data)
        #expect(try files.names(in: store.layout.tmpDirectory) == [], "no temp file left behind")

        try files.write(path, Data("hello NOTES\n".utf8))
        #expect { try store.readAsset(ref) } throws: { ($0 as? NoteSyncError)?.kind == .corrupt }
        try files.remove(path)
        #expect { try store.readAsset(ref) } throws: { ($0 as? NoteSyncError)?.kind == .corrupt }
    }

    @Test(arguments: TestServer.primitives())
    func commitClaimsTheNextSlotAndDetectsConflicts(_ primitive: PublishPrimitive) throws {
        let dir = try TempDirectory()
        let a = try makeServer(dir, device: "dev-a", primitive: primitive)
        let b = try ServerStore(root: a.layout.root, device: "dev-b", primitive: primitive, logger: testLogger, vault: TestServer.vault)
        var stateA = ZoneState()
        var stateB = ZoneState()
        let note = try name("n.md")
        let other = try name("o.md")

        guard
            case .committed(let first) = try a.commit(
                [.save(note, base: 0, text: try a.putAsset(Data("1".utf8)), modified: 1)], into: &stateA)
        else {
            Issue.record("first commit must succeed")
            return
        }
        #expect(first.seq == 1 && stateA.tag(of: note) == 1)

        // B has not read entry 1: its save of a different record claims slot 2 after folding entry 1 in.
        guard
            case .committed(let second) = try b.commit(
                [.save(other, base: 0, text: try b.putAsset(Data("o".utf8)), modified: 2)], into: &stateB)
        else {
            Issue.record("a commit on another record is no conflict")
            return
        }
        #expect(second.seq == 2 && stateB.token == 2 && stateB.tag(of: note) == 1)

        // A, still at token 1, saves note on base 1 while B deletes it on base 1: one wins, the other conflicts.
        guard case .committed = try b.commit([.delete(note, base: 1, modified: 3)], into: &stateB) else {
            Issue.record("B's delete is based on the head")
            return
        }
        let ours = RecordChange.save(note, base: 1, text: try a.putAsset(Data("2".utf8)), modified: 4)
        guard case .conflicts(let conflicts) = try a.commit([ours], into: &stateA) else {
            Issue.record("A's save lost the race and must conflict")
            return
        }
        #expect(conflicts == [ServerChangedConflict(name: note, base: 1, ours: ours, server: stateB.heads[note])])
        #expect(stateA == stateB, "the lost claim folded the winner in")
        #expect(try ServerFiles(a).names(in: a.layout.tmpDirectory) == [])
        let report = try ServerFsck(store: a).run(repair: false)
        #expect(report.isClean && report.entries == 3, "\(report.findings)")
    }

    @Test func snapshotsBootstrapTheSameState() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        for index in 0..<20 {
            let note = try name("dir/n\(index % 7).md")
            _ = try store.commit(
                [.save(note, base: state.tag(of: note), text: try store.putAsset(Data("\(index)".utf8)), modified: Int64(index))],
                into: &state)
        }
        try store.writeSnapshot(of: state)
        try store.writeSnapshot(of: state)
        var later = state
        _ = try store.commit([.delete(try name("dir/n1.md"), base: later.tag(of: try name("dir/n1.md")), modified: 99)], into: &later)
        #expect(try store.snapshotSequences() == [20])
        #expect(try store.bootstrap() == later)
        #expect(try store.readSnapshot(20).state.heads == state.heads)
        #expect(try ServerFsck(store: store).run(repair: false).isClean)
    }

    @Test(.plainOnly("plants hostile entries sealed in plain: on an encrypted server each is simply damaged"))
    func hostileEntriesAreQuarantinedAndTheRestApplied() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        _ = try store.commit([.save(try name("good.md"), base: 0, text: try store.putAsset(Data("g".utf8)), modified: 1)], into: &state)
        let text = try store.putAsset(Data("evil".utf8))
        let hostile = [
            "../escape.md", "/etc/passwd", "nul\u{0}.md", "ctl\u{1B}[2J.md", String(repeating: "y", count: 300), "cafe\u{301}.md"
        ]
        try plant(
            store, seq: 2,
            LogEntry(
                seq: 2, commit: "x", device: "evil", time: 0,
                changes: hostile.map { RecordChange(name: $0, base: 0, op: .save, text: text, modified: 1) }
                    + [RecordChange(name: "fine.md", base: 0, op: .save, text: text, modified: 1)]))
        var torn = try SealedFile.seal(LogEntry(seq: 3, commit: "t", device: "evil", time: 0, changes: []), kind: "entry")
        torn.removeLast(5)
        try plantBytes(store, seq: 3, torn)
        var flipped = try SealedFile.seal(LogEntry(seq: 4, commit: "f", device: "evil", time: 0, changes: []), kind: "entry")
        flipped[flipped.count - 3] ^= 1
        try plantBytes(store, seq: 4, flipped)
        try plant(store, seq: 5, LogEntry(seq: 9, commit: "m", device: "evil", time: 0, changes: []))
        // A link to the marker in a folder; in a bucket, which has no links, a copy of it.
        if TestServer.isFolder {
            symlink(store.layout.marker, store.layout.entryPath(6))
        } else {
            try plantBytes(store, seq: 6, try #require(try ServerFiles(store).read(store.layout.marker)))
        }
        try plant(
            store, seq: 7,
            LogEntry(
                seq: 7, commit: "ok", device: "dev-b", time: 0,
                changes: [RecordChange(name: "late.md", base: 0, op: .save, text: text, modified: 1)]))

        var fresh = ZoneState()
        let slots = try store.fetch(into: &fresh)
        #expect(fresh.token == 7)
        #expect(slots.filter { if case .damaged = $0 { true } else { false } }.count == 4)
        #expect(Set(fresh.heads.keys.map(\.string)) == ["good.md", "fine.md", "late.md"])
        #expect(fresh.quarantined.count == hostile.count)
        #expect(fresh.quarantined.allSatisfy { !$0.description.contains("\u{1B}") && !$0.description.contains("\u{0}") })

        // A writer at the old token claims past the damaged slots, never re-using one.
        guard case .committed(let entry) = try store.commit([.save(try name("good.md"), base: 1, text: text, modified: 2)], into: &state)
        else {
            Issue.record("commit after damaged slots")
            return
        }
        #expect(entry.seq == 8)

        let report = try ServerFsck(store: store).run(repair: false)
        let kinds = report.findings.map(\.kind)
        #expect(kinds.filter { $0 == .damagedEntry }.count == (TestServer.isFolder ? 3 : 4))
        #expect(kinds.contains(.symlink) == TestServer.isFolder)
        #expect(kinds.filter { $0 == .quarantinedChange }.count == hostile.count)
        #expect(!report.isClean)
    }

    @Test func fsckReportsForeignTempMissingAndCorruptFilesAndRepairs() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        let keep = try store.putAsset(Data("keep".utf8))
        let lose = try store.putAsset(Data("lose".utf8))
        let damage = try store.putAsset(Data("damage".utf8))
        _ = try store.commit(
            [
                .save(try name("k.md"), base: 0, text: keep, modified: 1),
                .save(try name("l.md"), base: 0, text: lose, modified: 1),
                .save(try name("d.md"), base: 0, text: damage, modified: 1)
            ], into: &state)
        #expect(try ServerFsck(store: store).run(repair: false).isClean)

        let files = ServerFiles(store)
        try files.remove(store.assetPath(lose.sha256))
        try files.write(store.assetPath(damage.sha256), Data("DAMAGE".utf8))
        let conflictCopy = store.layout.shardDirectory(of: 1) + "/000000000001.sync-conflict-20240101-120000-ABCDEFG"
        try files.write(conflictCopy, Data("x".utf8))
        let dropbox = store.layout.root + "/notesync-server (Ann's conflicted copy 2024-01-01).json"
        try files.write(dropbox, Data("x".utf8))
        try files.write(store.layout.tmpDirectory + "/dev-a-0011.entry", Data("partial".utf8))

        let before = try files.listing()
        let report = try ServerFsck(store: store).run(repair: false)
        #expect(try files.listing() == before, "fsck changes nothing unless asked to repair")
        let byKind = Dictionary(grouping: report.findings, by: \.kind)
        #expect(byKind[.missingAsset]?.count == 2)
        #expect(byKind[.corruptAsset]?.first?.path == store.assetPath(damage.sha256))
        #expect(Set(byKind[.foreignFile]?.map(\.path) ?? []) == [conflictCopy, dropbox])
        #expect(byKind[.tempFile]?.count == 1)
        #expect(!report.isClean)

        let repaired = try ServerFsck(store: store).run(repair: true, tempGraceSeconds: 0)
        #expect(
            repaired.findings.filter { $0.repaired == nil }.map(\.kind).sorted { $0.rawValue < $1.rawValue } == [
                .missingAsset, .missingAsset
            ])
        #expect(!files.exists(conflictCopy) && !files.exists(dropbox))
        #expect(try files.names(in: store.layout.tmpDirectory) == [])
        #expect(try store.readAsset(keep) == Data("keep".utf8))
    }

    /// Plants `entry` in slot `seq`, chained to the file in the slot before it (as a device writes it).
    private func plant(_ store: ServerStore, seq: Int64, _ entry: LogEntry) throws {
        var entry = entry
        if entry.prev == nil, let before = (try? ServerFiles(store).read(store.layout.entryPath(seq - 1))) ?? nil {
            entry.prev = ContentDigest(of: before)
        }
        try plantBytes(store, seq: seq, try SealedFile.seal(entry, kind: "entry"))
    }

    private func plantBytes(_ store: ServerStore, seq: Int64, _ data: Data) throws {
        try ServerFiles(store).write(store.layout.entryPath(seq), data)
    }
}
