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

/// Big texts (``BigText``) go the streaming way end to end: read, hashed, sealed, staged and sent a piece at a time,
/// and read back, opened, verified and written a piece at a time. The threshold is lowered for these tests (a task
/// local), so the texts are a few MiB.
@Suite struct BigTextTests {
    static let threshold: Int64 = 256 << 10

    /// `count` bytes that do not compress, the same for the same `seed`.
    static func noise(_ count: Int, seed: UInt64) -> Data {
        var generator = SplitMix(seed: seed)
        var data = Data(count: count)
        data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
            for index in 0..<count { buffer[index] = UInt8(truncatingIfNeeded: generator.next()) }
        }
        return data
    }

    /// `data` cut at the sizes of `cuts`, again and again: pieces that do not fall on chunk boundaries.
    static func pieces(_ data: Data, _ cuts: [Int]) -> [Data] {
        var result: [Data] = []
        var start = data.startIndex
        var index = 0
        while start < data.endIndex {
            let end = min(start + cuts[index % cuts.count], data.endIndex)
            result.append(data[start..<end])
            start = end
            index += 1
        }
        return result
    }

    @Test(arguments: [0, 1, 65_535, 65_536, 65_537, 200_000, 3 * 65_536])
    func theStreamedSealIsSealAssetsAndOpensBothWays(_ size: Int) throws {
        let vault = Vault.generate()
        let name = ContentDigest(of: Data("name \(size)".utf8))
        let salt = Vault.randomBytes(Vault.saltByteCount)
        let bytes = Self.noise(size, seed: UInt64(size) + 7)
        var sealer = Vault.AssetSealer(vault: vault, name: name, size: size, salt: salt)
        var sealed = sealer.salt
        for piece in Self.pieces(bytes, [1_000, 70_000, 65_536, 3]) { sealer.add(piece) { sealed.append($0) } }
        try sealer.finish { sealed.append($0) }
        #expect(sealed == vault.sealAsset(bytes, name: name, salt: salt))
        #expect(sealed.count == sealer.sealedSize)
        #expect(try vault.openAsset(sealed, name: name) == bytes)

        var opener = try Vault.AssetOpener(vault: vault, name: name, sealedSize: sealed.count)
        var opened = Data()
        for piece in Self.pieces(sealed, [5, 65_552, 100_000, 1]) { try opener.add(piece) { opened.append($0) } }
        try opener.finish { opened.append($0) }
        #expect(opened == bytes && opener.openedSize == size)
    }

    @Test func aSealedAssetDamagedOrCutDoesNotOpenAPieceAtATime() throws {
        let vault = Vault.generate()
        let name = ContentDigest(of: Data("damaged".utf8))
        var sealed = vault.sealAsset(Self.noise(200_000, seed: 3), name: name)
        func open(_ sealed: Data) throws {
            var opener = try Vault.AssetOpener(vault: vault, name: name, sealedSize: sealed.count)
            for piece in Self.pieces(sealed, [40_000]) { try opener.add(piece) { _ in } }
            try opener.finish { _ in }
        }
        try open(sealed)
        sealed[sealed.startIndex + 100_000] ^= 1
        #expect(throws: VaultFailure.self) { try open(sealed) }
        sealed[sealed.startIndex + 100_000] ^= 1
        // Cut at a chunk boundary: the last chunk left is not marked last.
        #expect(throws: VaultFailure.self) { try open(sealed.prefix(Vault.saltByteCount + 2 * (Vault.chunkSize + 16))) }
    }

    @Test func theDecoderInflatesOrPassesAndChecksTheDigest() throws {
        let text = Data(String(repeating: "a line that compresses well\n", count: 50_000).utf8)
        let ref = AssetRef(of: text)
        for stored in [AssetCodec.encode(text), text] {
            #expect(stored.count < text.count || stored == text)
            var decoder = AssetStreamDecoder(ref: ref, storedSize: Int64(stored.count))
            var out = Data()
            for piece in Self.pieces(stored, [2, 9_000, 65_536]) { try decoder.add(piece) { out.append($0) } }
            try decoder.finish()
            #expect(out == text)
        }
        var wrong = AssetStreamDecoder(ref: AssetRef(sha256: ContentDigest(of: Data()), size: ref.size), storedSize: ref.size)
        try wrong.add(text) { _ in }
        #expect(throws: AssetStreamDecoder.Mismatch.self) { try wrong.finish() }
    }

    /// Zero blocks are holes; the file has its size and its bytes.
    @Test func thePieceWriterLeavesHolesWhereTheTextIsZeros() throws {
        let directory = try TempDirectory("bigtext-holes")
        let path = directory.sub("sparse")
        var text = Data(count: 8 << 20)
        text.replaceSubrange((3 << 20)..<((3 << 20) + 5), with: Data("hello".utf8))
        try NoteContents.pieces { writer in for piece in Self.pieces(text, [1 << 20, 12_345]) { try writer.write(piece) } }
            .create(at: path, mode: 0o644, exactMode: false)
        #expect(try FileIO.read(path) == text)
        let info = try #require(FileIO.lstatInfo(path))
        #expect(Int64(info.st_blocks) * 512 < 1 << 20, "\(info.st_blocks) blocks")
    }

    /// A new server in a folder of its own (whatever the run's backend), encrypted or not, and a store of it.
    static func folderServer(_ label: String, encrypted: Bool) throws -> (TempDirectory, ServerStore, Vault?) {
        let directory = try TempDirectory(label)
        let root = directory.sub("server")
        let vault = encrypted ? Vault.generate() : nil
        try ServerStore.create(
            root: root, logger: testLogger, encryption: vault.map { ServerStore.NewVault(vault: $0, passphrase: "big text") })
        return (directory, try ServerStore(root: root, device: "dev-a", logger: testLogger, vault: vault), vault)
    }

    /// A big text staged and published a piece at a time is stored as it is (not compressed) on a plain server,
    /// opens with the whole reader, and streams back; an asset written whole (compressed) streams back too.
    @Test(arguments: [false, true])
    func aStreamedAssetOpensWithEveryReader(_ encrypted: Bool) throws {
        let (directory, store, _) = try Self.folderServer("bigtext-store", encrypted: encrypted)
        let text = Data(String(repeating: "a compressible line of a big note\n", count: 40_000).utf8)
        let note = directory.sub("note.md")
        try FileIO.createAndSync(note, text)
        let (staged, fingerprint) = try #require(try store.stageBigText(at: note, scratch: directory.sub("uploads")))
        #expect(fingerprint == StatFingerprint(try #require(FileIO.lstatInfo(note))))
        let ref = try #require(try store.publish(staged).first)
        #expect(ref == AssetRef(of: text))
        let info = try #require(store.storage.info(store.assetPath(ref.sha256)))
        let sealed = Vault.sealedAssetSize(text.count)
        let header = SealedFile.header(kind: "asset", format: 2, length: sealed, digest: ContentDigest(of: Data())).utf8.count
        #expect(info.size == (encrypted ? Int64(sealed + header) : ref.size), "stored as it is, not compressed")
        #expect(try store.readAsset(ref) == text)
        var streamed = Data()
        try store.streamAsset(ref) { streamed.append($0) }
        #expect(streamed == text)
        // Staged again: the server has it, nothing is written.
        let again = try #require(try store.stageBigText(at: note, scratch: directory.sub("uploads")))
        #expect(again.staged.missing.isEmpty)

        let whole = Data(String(repeating: "another line, written whole\n", count: 40_000).utf8)
        let wholeRef = try store.putAsset(whole)
        var back = Data()
        try store.streamAsset(wholeRef) { back.append($0) }
        #expect(back == whole)
    }

    /// fsck reads a big asset a piece at a time (never whole: a bucket's or a sealed one over 1 GiB was taken for
    /// damaged, and `--repair` moved it to quarantine): stored as it is or compressed, plain or sealed, it holds its
    /// text; a byte changed, it does not.
    @Test(arguments: [false, true])
    func fsckChecksABigAssetAPieceAtATime(_ encrypted: Bool) throws {
        let (directory, store, vault) = try Self.folderServer("bigtext-fsck", encrypted: encrypted)
        let note = directory.sub("note.md")
        try FileIO.createAndSync(note, Self.noise(1 << 20, seed: 31))
        let (staged, _) = try #require(try store.stageBigText(at: note, scratch: directory.sub("uploads")))
        let raw = try #require(try store.publish(staged).first)
        let lines = (0..<40_000).map { "line \($0 % 977) of a note that compresses\n" }.joined()
        let compressed = try store.putAsset(Data(lines.utf8))
        let files = ServerFiles(store)
        for ref in [raw, compressed] {
            let path = store.assetPath(ref.sha256)
            let name = store.storedName(ref.sha256)
            let size = try #require(store.storage.info(path)).size
            func holds() throws -> Bool {
                try ServerFsck.holdsStreamed(path, name, size: size, in: store.storage, vault: vault, encrypted: encrypted)
            }
            #expect(try holds(), "\(ref.size) bytes")
            #expect(try BigText.$threshold.withValue(1 << 10) { try ServerFsck(store: store).run(repair: false).isClean })
            var stored = try #require(try files.read(path))
            stored[stored.startIndex + stored.count - 100] ^= 1
            try files.write(path, stored)
            #expect(try !holds())
            let report = try BigText.$threshold.withValue(1 << 10) { try ServerFsck(store: store).run(repair: false) }
            #expect(report.findings.map(\.kind) == [.corruptAsset], "\(report.findings)")
            stored[stored.startIndex + stored.count - 100] ^= 1
            try files.write(path, stored)
        }
    }

    /// `server encrypt` copies a big text a piece at a time: the encrypted copy holds it, sealed as any reader opens.
    @Test(.plainOnly("copies a plain server"))
    func anEncryptedCopyHoldsABigText() throws {
        try BigText.$threshold.withValue(Self.threshold) {
            let harness = try SyncHarness(deviceCount: 1)
            let text = Data((0..<40_000).map { "line \($0) of a big note, copied\n" }.joined().utf8)
            try harness.write(0, "big.md", text)
            _ = try harness.sync(0)
            let source = try ServerStore(root: harness.serverRoot, device: "checker", logger: testLogger)
            let root = harness.directory.sub("encrypted")
            let encryption = ServerStore.NewVault(passphrase: "big text")
            let report = try ServerStore.encryptedCopy(
                of: source, to: root, endpoint: nil, encryption: encryption, logger: testLogger)
            #expect(report.texts == 1)
            let copy = try ServerStore(root: root, device: "dev-b", logger: testLogger, vault: encryption.vault)
            #expect(try copy.readAsset(AssetRef(of: text)) == text)
            // Streamed: stored as it is, sealed, not compressed whole.
            let stored = try #require(copy.storage.info(copy.assetPath(ContentDigest(of: text)))).size
            #expect(stored > Int64(Vault.sealedAssetSize(text.count)), "\(stored) bytes for \(text.count)")
        }
    }

    @Test func aBigTextRoundTripsAndItsEditsArrive() throws {
        try BigText.$threshold.withValue(Self.threshold) {
            let harness = try SyncHarness(deviceCount: 2)
            let first = Self.noise(3 << 20, seed: 11)
            try harness.write(0, "big.md", first)
            try harness.write(0, "small.md", Data("small\n".utf8))
            let up = try harness.sync(0)
            #expect(up.warnings.isEmpty && up.pending == 0, "\(up.warnings)")
            _ = try harness.sync(1)
            #expect(try harness.read(1, "big.md") == first)
            #expect(try harness.read(1, "small.md") == Data("small\n".utf8))
            // An edit, pulled over the note that is there.
            let second = first + Data("an appended line\n".utf8)
            try harness.write(0, "big.md", second)
            _ = try harness.sync(0)
            let pulled = try harness.sync(1)
            #expect(pulled.warnings.isEmpty, "\(pulled.warnings)")
            #expect(try harness.read(1, "big.md") == second)
            #expect(try harness.serverNotes()["big.md"]?.data == second)
            let uploads = harness.devices[0].folder.uploads
            #expect(((try? FileIO.list(uploads)) ?? nil ?? []).isEmpty, "nothing left to send")
        }
    }

    /// The note changes between its two reads (hashed, then sealed and staged): it is not committed with a digest
    /// of other bytes; the sync says so and the next one uploads it.
    @Test func aBigTextChangedWhileItIsReadIsLeftForTheNextSync() throws {
        try BigText.$threshold.withValue(Self.threshold) {
            let harness = try SyncHarness(deviceCount: 2)
            let path = harness.path(0, "big.md")
            try harness.write(0, "big.md", Self.noise(1 << 20, seed: 5))
            try harness.write(0, "other.md", Data("other\n".utf8))
            let changed = Self.noise(1 << 20, seed: 5) + Data("saved while it was read\n".utf8)
            let hooks = FaultPoint.Hooks.once(at: "bigText.hashed") { try changed.write(to: URL(fileURLWithPath: path)) }
            let report = try FaultPoint.with(hooks) { try harness.sync(0) }
            #expect(report.warnings.contains { $0.path == "big.md" }, "\(report.warnings)")
            #expect(try harness.serverState().heads[try RecordName(validating: "big.md")] == nil)
            #expect(try harness.serverNotes()["other.md"]?.data == Data("other\n".utf8))
            let next = try harness.sync(0)
            #expect(next.warnings.isEmpty, "\(next.warnings)")
            _ = try harness.sync(1)
            #expect(try harness.read(1, "big.md") == changed)
        }
    }

    /// A damaged asset never reaches the note: the note there keeps its text, a new one does not appear, and no
    /// half-written version is left in the notes folder.
    @Test func aDamagedBigAssetNeverReachesTheNote() throws {
        try BigText.$threshold.withValue(Self.threshold) {
            let harness = try SyncHarness(deviceCount: 2)
            let first = Self.noise(1 << 20, seed: 21)
            try harness.write(0, "big.md", first)
            _ = try harness.sync(0)
            _ = try harness.sync(1)
            let second = Self.noise(1 << 20, seed: 22)
            let fresh = Self.noise(1 << 20, seed: 23)
            try harness.write(0, "big.md", second)
            try harness.write(0, "new.md", fresh)
            _ = try harness.sync(0)
            let store = try ServerStore(root: harness.serverRoot, device: "checker", logger: testLogger, vault: TestServer.vault)
            let files = ServerFiles(store)
            for text in [second, fresh] {
                let path = store.assetPath(ContentDigest(of: text))
                var stored = try #require(try files.read(path))
                stored[stored.startIndex + stored.count / 2] ^= 0x40
                try files.write(path, stored)
                #expect(throws: NoteSyncError.self) { try store.readAsset(AssetRef(of: text)) }
            }
            let pulled = Result { try harness.sync(1) }
            if case .success(let report) = pulled { #expect(!report.warnings.isEmpty, "damage said") }
            #expect(try harness.read(1, "big.md") == first)
            #expect(try harness.read(1, "new.md") == nil)
            let staging = harness.devices[1].folder.staging
            let left = (FileManager.default.subpaths(atPath: staging) ?? []).filter {
                (FileIO.lstatInfo(staging + "/" + $0)?.st_mode ?? 0) & S_IFMT == S_IFREG
            }
            #expect(left.isEmpty, "\(left)")
        }
    }

    /// A process killed while it wrote a big text leaves its version cut short (``PieceWriter/partialSuffix``): the
    /// next sync removes it, and keeps no conflict copy of it (it is no one's edit).
    @Test func aBigTextCutShortByAKillIsRemovedNotKeptAsACopy() throws {
        let harness = try SyncHarness(deviceCount: 1)
        try harness.write(0, "big.md", Data("the note\n".utf8))
        _ = try harness.sync(0)
        let staging = harness.devices[0].folder.staging + "/" + ReservedNames.agentTempPrefix + "0123456789abcdef"
        try FileIO.makeDirectories(staging)
        let partial = staging + "/big.md" + PieceWriter.partialSuffix
        try FileIO.createAndSync(partial, Self.noise(100_000, seed: 9))
        let report = try harness.sync(0)
        #expect(report.conflictCopies.isEmpty && report.changes.isEmpty, "\(report.changes)")
        #expect(FileIO.lstatInfo(partial) == nil)
        #expect(try harness.notes(0) == ["big.md": Data("the note\n".utf8)])
    }

    /// A sparse note arrives sparse: its zero blocks are holes on the receiving device.
    @Test func aSparseBigTextStaysSparse() throws {
        try BigText.$threshold.withValue(Self.threshold) {
            let harness = try SyncHarness(deviceCount: 2)
            let path = harness.path(0, "disk.img")
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            #expect(fd >= 0)
            #expect(ftruncate(fd, 16 << 20) == 0)
            #expect(pwrite(fd, "sparse", 6, 5 << 20) == 6)
            close(fd)
            _ = try harness.sync(0)
            _ = try harness.sync(1)
            #expect(try harness.read(1, "disk.img") == (try harness.read(0, "disk.img")))
            let info = try #require(FileIO.lstatInfo(harness.path(1, "disk.img")))
            #expect(info.st_size == 16 << 20)
            #expect(Int64(info.st_blocks) * 512 < 1 << 20, "\(info.st_blocks) blocks of 512 bytes")
        }
    }
}
