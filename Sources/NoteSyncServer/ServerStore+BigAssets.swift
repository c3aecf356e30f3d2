import Crypto
import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// Big texts (``BigText``) to and from the server a piece at a time (docs/server-format.md, "Big texts"): stored as
/// they are (a reader takes an asset that is not `NSZ1` as the text itself), sealed chunk by chunk on an encrypted
/// server, never packed; read back, opened, inflated and verified as they stream.
extension ServerStore {
    /// Stages the text of the note at `path` (absolute) a piece at a time: hashed once, then, unless the server has
    /// it, read again, sealed on an encrypted server, and written to a temp (``ServerStorage/bigStagingSink(device:scratch:)``:
    /// the server's `tmp/`, or a file in `scratch` for an object store, sent from there when published). The
    /// fingerprint is the note's throughout: a note that changed between or during the reads throws (and is left
    /// for the next sync). Nil when there is no note.
    package func stageBigText(at path: String, scratch: String) throws -> (staged: StagedAssets, fingerprint: StatFingerprint)? {
        try requireWritable()
        let vault = try requireVault()
        guard let fd = try FileIO.openForReading(path) else { return nil }
        defer { close(fd) }
        let ((digest, size), fingerprint) = try FileIO.stable(fd, path) { _ in
            let (digest, size) = try FileDigest.of(fd: fd, path: path)
            return ((digest, size), Int(size))
        }
        let ref = AssetRef(sha256: digest, size: size)
        let name = storedName(digest)
        let assetPath = layout.assetPath(name)
        if let info = storage.info(assetPath), isStored(info, ref) {
            if hasRetention { storage.touch(assetPath) }
            return (StagedAssets(storage: storage, refs: [ref], names: [name], missing: [], files: [], batched: false), fingerprint)
        }
        if hasPacks, packCatalog.loaded != nil, let pack = findPacked([name], refs: [ref], refresh: false)[0] {
            if hasRetention { storage.touch(pack) }
            let staged = StagedAssets(storage: storage, refs: [ref], names: [name], missing: [], files: [], batched: false)
            staged.setPacks(found: [(0, pack)], duplicates: [])
            return (staged, fingerprint)
        }
        try FaultPoint.hit("bigText.hashed")
        guard lseek(fd, 0, SEEK_SET) == 0 else { throw NoteSyncError.posix("lseek", path: path, errno: errno) }
        let sink = try storage.bigStagingSink(device: device, scratch: scratch)
        do {
            let again = try writeStored(fd: fd, path: path, ref: ref, name: name, vault: vault, into: sink)
            var after = stat()
            guard fstat(fd, &after) == 0 else { throw NoteSyncError.posix("fstat", path: path, errno: errno) }
            guard again == digest, StatFingerprint(after) == fingerprint else {
                throw NoteSyncError(
                    .io, path: path, "changed while it was uploaded; it is left as it is for the next sync",
                    fix: "nothing to do: the next sync uploads it once it is quiet")
            }
            let file = try sink.finish()
            try FaultPoint.hit("assets.tempWritten")
            return (
                StagedAssets(storage: storage, refs: [ref], names: [name], missing: [0], files: [file], batched: false),
                fingerprint
            )
        } catch {
            sink.discard()
            throw error
        }
    }

    /// Reads `fd` to its end a piece at a time and writes what is stored for it to `sink`: the text itself, or on an
    /// encrypted server the asset sealed (``Vault/AssetSealer``) behind its header, written last into the room left
    /// for it. Returns the digest of what was read.
    private func writeStored(
        fd: Int32, path: String, ref: AssetRef, name: ContentDigest, vault: Vault?, into sink: any StagingSink
    ) throws -> ContentDigest {
        var text = SHA256()
        var sealer = vault.map { Vault.AssetSealer(vault: $0, name: name, size: Int(ref.size)) }
        let kind = "asset"
        let format = SealedFile.encryptedFormat
        let room = sealer.map {
            SealedFile.header(kind: kind, format: format, length: $0.sealedSize, digest: ContentDigest(of: Data())).utf8.count
        }
        var body = SHA256()
        var offset = Int64(room ?? 0)
        func put(_ bytes: Data) throws {
            body.update(data: bytes)
            try sink.write(bytes, at: offset)
            offset += Int64(bytes.count)
        }
        if let sealer { try put(sealer.salt) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: BigText.pieceBytes, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let got = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if got < 0 {
                if errno == EINTR { continue }
                throw NoteSyncError.posix("read", path: path, errno: errno)
            }
            if got == 0 { break }
            let piece = Data(bytes: buffer.baseAddress!, count: got)
            text.update(data: piece)
            if sealer != nil { try sealer!.add(piece, put) } else { try put(piece) }
        }
        let digest = ContentDigest(text.finalize())
        guard var sealer, let room else { return digest }
        do { try sealer.finish(put) } catch is VaultFailure { return ContentDigest(of: Data("changed".utf8)) }
        let header = Data(
            SealedFile.header(kind: kind, format: format, length: sealer.sealedSize, digest: ContentDigest(body.finalize())).utf8)
        guard header.count == room, offset == Int64(room + sealer.sealedSize) else {
            return ContentDigest(of: Data("changed".utf8))
        }
        try sink.write(header, at: 0)
        return digest
    }

    /// Stages and publishes the big text of the note at `path` (a text gc swept between its staging and the
    /// commit, put back); nil when the note is gone.
    package func putBigText(at path: String, scratch: String) throws -> AssetRef? {
        guard let (staged, _) = try stageBigText(at: path, scratch: scratch) else { return nil }
        return try publish(staged).first
    }

    /// Copies the big text of `ref` from `source` into this store a piece at a time (``encryptedCopy(of:to:endpoint:encryption:logger:)``):
    /// streamed and verified into a file in `scratch` (a local folder, made if missing), staged and published from
    /// there, and the file removed.
    func copyBigText(_ ref: AssetRef, from source: ServerStore, scratch: String) throws {
        try FileIO.makeDirectories(scratch, mode: 0o700)
        let path = scratch + "/" + FileIO.randomToken() + ".text"
        defer { unlink(path) }
        try NoteContents.pieces { writer in try source.streamAsset(ref) { try writer.write($0) } }
            .create(at: path, mode: 0o600, exactMode: true, sync: false)
        guard let (staged, _) = try stageBigText(at: path, scratch: scratch), try publish(staged).first == ref else {
            throw NoteSyncError(
                .io, path: path, "the copy of text \(ref.sha256.hex) changed while it was copied", fix: "copy again")
        }
    }

    /// The text of `ref` for a note: read whole when it is small, else streamed into the note's file as it is read
    /// (``streamAsset(_:into:)``), which throws before the note is touched when the asset is missing or damaged.
    package func contents(of ref: AssetRef) throws -> NoteContents {
        guard BigText.streams(ref.size) else { return .bytes(try readAsset(ref)) }
        return .pieces { writer in try self.streamAsset(ref) { try writer.write($0) } }
    }

    /// Reads, opens and verifies the asset of `ref` a piece at a time, as ``readAsset(_:)`` does whole: `emit` gets
    /// the text's pieces in order, and what it got counts only when this returns; a missing or damaged asset throws
    /// the errors ``readAsset(_:)`` throws.
    public func streamAsset(_ ref: AssetRef, into emit: (Data) throws -> Void) throws {
        let name = storedName(ref.sha256)
        let path = layout.assetPath(name)
        let limit = Int(clamping: maxStoredAssetSize(max(ref.size, 0))) + 1
        if let info = storage.info(path), info.isFile {
            guard info.size < limit else { throw damagedAsset(path, name: name, loose: true) }
            var reader = try StoredAssetReader(store: self, ref: ref, name: name, storedSize: info.size)
            let read = try decoding(path, name: name, loose: true) {
                try storage.readPieces(path, limit: limit, pieceBytes: BigText.pieceBytes) { piece in
                    try reader.add(piece, emit)
                    return true
                }
            }
            // Gone since it was seen (gc moved it into a pack, or removed it): looked for in the packs.
            if let read {
                guard read else { throw damagedAsset(path, name: name, loose: true) }
                return try decoding(path, name: name, loose: true) { try reader.finish(emit) }
            }
        }
        // In a pack (a text stored small enough by an earlier build): one piece.
        if hasPacks, let packed = packed(name, refresh: true), let stored = try readPacked(packed, limit: limit) {
            var reader = try StoredAssetReader(store: self, ref: ref, name: name, storedSize: Int64(stored.count))
            return try decoding(packed.pack, name: name, loose: false) {
                try reader.add(stored, emit)
                try reader.finish(emit)
            }
        }
        throw NoteSyncError(
            .corrupt, path: path, "asset is missing from the server; the note is left as it is here",
            fix: "edit and save the note on a device that has it, so that its text is uploaded again; "
                + "`notesync server fsck` lists every missing asset")
    }

    /// Reads the asset of `ref` through and verifies it, holding a piece at a time; throws as ``readAsset(_:)``.
    package func verifyAsset(_ ref: AssetRef) throws {
        try streamAsset(ref) { _ in }
    }

    /// `body`, with what says the stored bytes are not the text (a digest, a seal, a stream that does not decode)
    /// thrown as the error ``readAsset(_:)`` throws for a damaged asset.
    private func decoding<T>(_ path: String, name: ContentDigest, loose: Bool, _ body: () throws -> T) throws -> T {
        do { return try body() } catch is AssetStreamDecoder.Mismatch {
            throw damagedAsset(path, name: name, loose: loose)
        } catch is VaultFailure {
            throw damagedAsset(path, name: name, loose: loose)
        } catch is SealedFile.Failure {
            throw damagedAsset(path, name: name, loose: loose)
        }
    }

    private func damagedAsset(_ path: String, name: ContentDigest, loose: Bool) -> NoteSyncError {
        NoteSyncError(
            .corrupt, path: path,
            loose
                ? "asset content does not match its digest; the note is left as it is here"
                : "holds asset \(name.hex), whose content does not match its digest; the note is left as it is here",
            fix: "run `notesync server fsck --repair` to quarantine it, then edit and save the note on a "
                + "device that has it, so that its text is uploaded again")
    }
}

/// An asset's stored bytes turned into its text as they come: on an encrypted server the header checked (its length
/// at once, its digest at the end) and the chunks opened (``Vault/AssetOpener``), then decoded
/// (``AssetStreamDecoder``).
private struct StoredAssetReader {
    let vault: Vault?
    let ref: AssetRef
    let name: ContentDigest
    let storedSize: Int64
    private var header = Data()
    private var headerRead: Bool
    private var body = SHA256()
    private var bodyDigest: ContentDigest?
    private var opener: Vault.AssetOpener?
    private var decoder: AssetStreamDecoder?

    init(store: ServerStore, ref: AssetRef, name: ContentDigest, storedSize: Int64) throws {
        self.ref = ref
        self.name = name
        self.storedSize = storedSize
        if store.marker.isEncrypted {
            guard let vault = store.vault else { throw store.keyNeeded }
            self.vault = vault
            headerRead = false
        } else {
            vault = nil
            headerRead = true
            decoder = AssetStreamDecoder(ref: ref, storedSize: storedSize)
        }
    }

    mutating func add(_ bytes: Data, _ emit: (Data) throws -> Void) throws {
        guard vault != nil else { return try decoder!.add(bytes, emit) }
        var rest = bytes[...]
        if !headerRead {
            header.append(contentsOf: rest)
            guard header.prefix(200).contains(0x0A) || header.count >= 200 else { return }
            let parsed = try SealedFile.header(header, kind: "asset")
            guard parsed.format == SealedFile.encryptedFormat, Int64(parsed.size + parsed.length) == storedSize,
                let vault
            else { throw AssetStreamDecoder.Mismatch() }
            bodyDigest = parsed.digest
            opener = try Vault.AssetOpener(vault: vault, name: name, sealedSize: parsed.length)
            decoder = AssetStreamDecoder(ref: ref, storedSize: Int64(opener!.openedSize))
            rest = header.dropFirst(parsed.size)
            header = Data()
            headerRead = true
        }
        guard !rest.isEmpty else { return }
        let sealed = Data(rest)
        body.update(data: sealed)
        // Taken out while they work, so that neither copies its buffer.
        guard var opener, var decoder else { throw AssetStreamDecoder.Mismatch() }
        (self.opener, self.decoder) = (nil, nil)
        defer { (self.opener, self.decoder) = (opener, decoder) }
        try opener.add(sealed) { try decoder.add($0, emit) }
    }

    /// Emits the last of the text and checks it all: the header's digest, the last chunk, the text's digest.
    mutating func finish(_ emit: (Data) throws -> Void) throws {
        guard headerRead, var decoder else { throw AssetStreamDecoder.Mismatch() }
        if var opener {
            try opener.finish { try decoder.add($0, emit) }
            guard ContentDigest(body.finalize()) == bodyDigest else { throw AssetStreamDecoder.Mismatch() }
        }
        try decoder.finish()
    }
}
