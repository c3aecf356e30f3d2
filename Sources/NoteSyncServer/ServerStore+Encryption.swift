import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// An encrypted server (docs/encryption.md): how its files are sealed and opened, where its assets are, and its keys.
extension ServerStore {
    /// The error for an encrypted server opened without its key, by anything that must read or write a sealed file.
    var keyNeeded: NoteSyncError {
        NoteSyncError(
            .key, path: layout.marker, "is the marker of an encrypted server, and this device has no key for it",
            fix: "give the passphrase: `--passphrase-file FILE` or NOTESYNC_PASSPHRASE (a notes folder keeps the key "
                + "from `notesync init --notes DIR --server \(layout.root)`)")
    }

    /// The vault of an encrypted server (nil for a plain one); throws ``keyNeeded`` when this device has no key.
    func requireVault() throws -> Vault? {
        guard marker.isEncrypted else { return nil }
        guard let vault else { throw keyNeeded }
        return vault
    }

    /// What a sealed file is bound to: the server, the kind, and its place (a slot, a device id, a file name). A
    /// file copied to another place, or from another server, does not open.
    func sealingContext(_ kind: String, _ place: String) -> String { "\(marker.id) \(kind) \(place)" }

    /// `value` sealed as the file of `kind` at `place`: plain on a plain server, encrypted on an encrypted one.
    package func seal<T: Encodable>(_ value: T, kind: String, place: String) throws -> Data {
        guard let vault = try requireVault() else { return try SealedFile.seal(value, kind: kind) }
        return try SealedFile.seal(value, kind: kind, vault: vault, context: sealingContext(kind, place))
    }

    /// Opens the file of `kind` at `place`. On an encrypted server opened without the key: `.encrypted`.
    package func open<T: Decodable>(_ data: Data, kind: String, place: String, as type: T.Type) throws(SealedFile.Failure) -> T {
        guard marker.isEncrypted else { return try SealedFile.open(data, kind: kind, as: type) }
        guard let vault else {
            _ = try SealedFile.verify(data, kind: kind)
            throw .encrypted
        }
        return try SealedFile.open(data, kind: kind, as: type, vault: vault, context: sealingContext(kind, place))
    }

    // MARK: assets

    /// The name an asset is stored under: the text's SHA-256 on a plain server; a keyed hash of it on an encrypted
    /// one (equal texts still share a file; the server cannot confirm a guessed text).
    public func storedName(_ digest: ContentDigest) -> ContentDigest {
        vault?.assetName(digest) ?? digest
    }

    public func assetPath(_ digest: ContentDigest) -> String { layout.assetPath(storedName(digest)) }

    public func assetShard(_ digest: ContentDigest) -> String { layout.assetShard(storedName(digest)) }

    /// The bytes stored for a text: compressed where that pays (format 3), and on an encrypted server sealed
    /// (``Vault/sealAsset(_:name:)``) behind a header whose digest checks the ciphertext without the key.
    /// `name` is the asset's stored name (``storedName(_:)``); a batch passes its `compressors`; `compact` as
    /// ``AssetCodec/encode(_:pool:compact:)`` takes it.
    func encodeAsset(
        _ text: Data, name: ContentDigest, vault: Vault?, compressors: AssetCodec.CompressorPool? = nil,
        compact: Bool = false
    ) -> Data {
        // Sealed, the bytes are copied out anyway.
        let stored = hasRetention ? AssetCodec.encode(text, pool: compressors, compact: compact && vault == nil) : text
        guard let vault else { return stored }
        return SealedFile.wrap(vault.sealAsset(stored, name: name), kind: "asset", format: SealedFile.encryptedFormat)
    }

    /// The text in an asset file, checked against its digest and size; nil when it is not that text. `name` is its
    /// stored name (``storedName(_:)``).
    func decodeAsset(_ file: Data, _ ref: AssetRef, name: ContentDigest) -> Data? {
        guard marker.isEncrypted else { return AssetCodec.decode(file, digest: ref.sha256, size: ref.size) }
        guard let vault, let sealed = try? SealedFile.verifyFormat(file, kind: "asset"),
            sealed.format == SealedFile.encryptedFormat,
            let stored = try? vault.openAsset(sealed.body, name: name)
        else { return nil }
        return AssetCodec.decode(stored, digest: ref.sha256, size: ref.size)
    }

    /// Sizes are taken as at most this (1 PiB) in what is computed from them.
    static let largestAssetSize: Int64 = 1 << 50

    /// The largest file an asset of `size` bytes can be stored as.
    func maxStoredAssetSize(_ size: Int64) -> Int64 {
        // A size no note has (a damaged or hostile entry) must not overflow what is computed from it.
        let size = min(max(size, 0), Self.largestAssetSize)
        guard marker.isEncrypted else { return size }
        let sealed = Int64(Vault.sealedAssetSize(Int(clamping: size)))
        return sealed + 100  // the header: kind, format, two numbers and a digest
    }

    // MARK: keys

    /// The wrapped vault keys in force: the highest generation in `keys/` that reads. Nil when there is none.
    public func vaultKeys() throws -> VaultKeys? {
        let generations = (try storage.list(layout.keysDirectory) ?? []).compactMap { ServerLayout.sequence(ofFileName: $0) }
        for generation in generations.sorted(by: >) {
            let path = layout.keysPath(generation)
            do {
                guard let data = try storage.read(path, limit: 1 << 16) else { continue }
                let keys = try SealedFile.open(data, kind: "keys", as: VaultKeys.self)
                guard keys.generation == generation else { continue }
                return keys
            } catch {
                logger.error("server.keys.damaged", metadata: ["server.path": "\(path)", "reason": "\(error)"])
            }
        }
        return nil
    }

    /// Publishes `keys` as its generation (create-if-absent): false when another device published that generation
    /// first.
    func publishKeys(_ keys: VaultKeys) throws -> Bool {
        try requireWritable()
        try storage.makeDirectory(layout.keysDirectory)
        let outcome = try publish(try SealedFile.seal(keys, kind: "keys"), as: layout.keysPath(keys.generation), suffix: "keys")
        try storage.syncDirectory(layout.keysDirectory)
        return outcome == .published
    }

    /// The vault of this encrypted server, unlocked with `passphrase` (or a recovery key, when it parses as one).
    /// A wrong passphrase is a clear error (exit 1); nothing is written.
    public func unlock(passphrase: String) throws -> Vault {
        guard marker.isEncrypted else {
            throw NoteSyncError(
                .usage, path: layout.marker, "is the marker of a server that is not encrypted: it needs no passphrase",
                fix: "leave out --passphrase-file and NOTESYNC_PASSPHRASE")
        }
        guard let keys = try vaultKeys() else {
            throw NoteSyncError(
                .corrupt, path: layout.keysDirectory, "holds no readable key file: the encrypted server cannot be opened",
                fix: "put the server's keys/ folder back from a backup (`notesync server fsck` lists what is wrong)")
        }
        do {
            if let recovery = RecoveryKey(text: passphrase) {
                if let vault = try? keys.unlock(recovery: recovery, serverID: marker.id) { return vault }
            }
            return try keys.unlock(passphrase: passphrase, serverID: marker.id)
        } catch .wrongPassphrase {
            throw NoteSyncError(
                .key, path: layout.keysPath(keys.generation),
                "the passphrase does not open this server's key (wrong passphrase, or a recovery key mistyped)",
                fix: "give the server's passphrase (or the recovery key printed when it was made); nothing was written")
        } catch {
            throw NoteSyncError(
                .corrupt, path: layout.keysPath(keys.generation), "the key file cannot be used: \(error)",
                fix: "put the server's keys/ folder back from a backup")
        }
    }

    /// ``unlock(passphrase:)`` of the encrypted server at `root`, begun now on a thread of its own: `init` walks the
    /// notes folder meanwhile (scrypt takes half a second on purpose). Whatever goes wrong here (no server, a plain
    /// one, a wrong passphrase) is left to the unlock `init` does in its turn.
    public static func unlockAhead(
        root: String, endpoint: String?, passphrase: String, logger: Logger
    ) -> UnlockAhead {
        UnlockAhead(
            Pending.inBackground(named: "notesync-scrypt") {
                let store = try ServerStore(root: root, endpoint: endpoint, device: "init", logger: logger)
                return (store.marker.id, try store.unlock(passphrase: passphrase))
            })
    }

    /// Wraps the vault under a new passphrase (`notesync server passphrase`): the next generation of `keys/`, the
    /// recovery wrap kept; older generations are removed once the new one is published. Nothing is re-encrypted.
    public func changePassphrase(vault: Vault, to passphrase: String) throws -> Int64 {
        guard let keys = try vaultKeys() else { throw keyNeeded }
        for _ in 0..<16 {
            let current = try vaultKeys() ?? keys
            let next = try current.rewrapped(vault: vault, passphrase: passphrase, serverID: marker.id)
            if try publishKeys(next) {
                for generation in ((try? storage.list(layout.keysDirectory)) ?? []).compactMap({
                    ServerLayout.sequence(ofFileName: $0)
                }) where generation < next.generation {
                    _ = try? storage.remove(layout.keysPath(generation))
                }
                return next.generation
            }
        }
        throw NoteSyncError(
            .io, path: layout.keysDirectory, "another device kept changing the passphrase at the same time",
            fix: "try again")
    }
}

/// An unlock begun ahead (``ServerStore/unlockAhead(root:endpoint:passphrase:logger:)``).
public final class UnlockAhead: Sendable {
    private let pending: Pending<(String, Vault)>

    package init(_ pending: Pending<(String, Vault)>) { self.pending = pending }

    /// The vault of `store`, when the unlock ahead opened this very server; nil otherwise (the caller unlocks it
    /// itself, and reports what is wrong).
    public func vault(for store: ServerStore) -> Vault? {
        guard let (id, vault) = try? pending.wait(), id == store.marker.id else { return nil }
        return vault
    }
}

/// What `notesync server encrypt` copied (``ServerStore/encryptedCopy(of:to:endpoint:encryption:logger:)``).
public struct EncryptedCopyReport: Sendable {
    public var marker: ServerMarker
    /// Log entries written, void ones included.
    public var entries = 0
    /// Slots whose entry was damaged on the source: sealed void on the copy (their changes were never applied).
    public var voided = 0
    public var texts = 0
    /// The snapshot the copy starts from, when the source's log was compacted.
    public var snapshot: Int64?
}

extension ServerStore {
    /// A new encrypted server at `root` holding what the plain server `source` holds: every log entry in its slot
    /// (sealed again, chained anew), the snapshot a compacted log starts from with the history it keeps, every text
    /// they reference, and the retention policy. Devices move to it with `notesync recover --server ROOT`. The
    /// source is only read; a copy that stops half way leaves a server no device is bound to (remove it, run again).
    public static func encryptedCopy(
        of source: ServerStore, to root: String, endpoint: String?, encryption: NewVault, logger: Logger
    ) throws -> EncryptedCopyReport {
        guard !source.marker.isEncrypted else {
            throw NoteSyncError(
                .usage, path: source.layout.marker, "is the marker of a server that is encrypted already",
                fix: "sync with it as it is")
        }
        if source.isReadOnly { try source.requireWritable() }
        let fsck = "run `notesync server fsck --repair \(source.layout.root)` first (it seals old gaps), then copy again"
        let (sequences, base) = try wholeLog(of: source, fsck: fsck)
        var slots: [SlotContent] = []
        for seq in sequences { slots.append(try source.readSlot(seq)) }
        var texts: [ContentDigest: AssetRef] = [:]
        for head in base?.heads ?? [] { if let text = head.head.text { texts[text.sha256] = text } }
        for version in base?.history ?? [] { if let text = version.text { texts[text.sha256] = text } }
        for case .entry(let entry) in slots { for change in entry.changes { if let text = change.text { texts[text.sha256] = text } } }

        try create(root: root, endpoint: endpoint, logger: logger, encryption: encryption)
        let copy = try ServerStore(root: root, endpoint: endpoint, device: "encrypt", logger: logger, vault: encryption.vault)
        var report = EncryptedCopyReport(marker: copy.marker)
        // The texts first: no entry names a text the copy does not hold.
        try copyTexts(texts, from: source, to: copy, report: &report)
        var chain: ContentDigest?
        var earlier: [ContentDigest?]? = base == nil ? [] : nil
        for (seq, slot) in zip(sequences, slots) {
            var entry: LogEntry
            switch slot {
            case .entry(let original):
                entry = original
                entry.void = original.void.map { VoidSeal(reason: $0.reason, lost: nil) }
            case .damaged(let damage):
                entry = LogEntry(
                    seq: seq, commit: "void-" + UUID().uuidString.lowercased(), device: "encrypt", time: Clock.nowNanoseconds(),
                    changes: [], prev: nil,
                    void: VoidSeal(reason: "damaged on the plain server this copy was made from: \(damage.reason)", lost: nil))
                report.voided += 1
            case .missing:
                throw NoteSyncError(.logGap, path: source.layout.entryPath(seq), "vanished while it was copied", fix: fsck)
            }
            entry.prev = chain
            entry.earlier = earlier
            let data = try copy.seal(entry, kind: "entry", place: String(seq))
            try copy.storage.makeDirectory(copy.layout.shardDirectory(of: seq))
            guard try copy.publish(data, as: copy.layout.entryPath(seq), suffix: "entry") == .published else {
                throw NoteSyncError(
                    .conflict, path: copy.layout.entryPath(seq), "another device wrote to the new server while it was made",
                    fix: "remove \(root) and copy again before any device uses it")
            }
            // As a device's state moves on (``ZoneState``): the chain before this entry goes in front of the earlier ones.
            earlier = chain.map { [$0] + (earlier ?? []).prefix(LogEntry.earlierLinks - 1) } ?? []
            chain = ContentDigest(of: data)
            report.entries += 1
            if let base, seq == base.seq {
                // The snapshot the copy's log starts from, bound to the copy's entry at its slot.
                var snapshot = base
                snapshot.chain = chain
                snapshot.earlier = nil
                snapshot.linksFrom = nil
                snapshot.links = nil
                try copy.storage.makeDirectory(copy.layout.snapshotsDirectory)
                _ = try copy.publish(
                    try copy.seal(snapshot, kind: "snapshot", place: String(seq)), as: copy.layout.snapshotPath(seq),
                    suffix: "snapshot")
                report.snapshot = seq
            }
        }
        for shard in Set(sequences.map { copy.layout.shardDirectory(of: $0) }) { try copy.storage.syncDirectory(shard) }
        if source.hasRetention {
            let (policy, number) = try source.retentionPolicy()
            if number > 0 { try copy.setRetentionPolicy(policy) }
        }
        logger.notice(
            "server.encrypted.copy",
            metadata: ["server.root": "\(root)", "copy.entries": "\(report.entries)", "copy.texts": "\(report.texts)"])
        return report
    }

    /// The slots of `source`'s log, in order, and the snapshot it starts from when its first entries are gone
    /// (compacted); a log with an empty slot is not whole and is not copied (`fsck`: the fix).
    private static func wholeLog(of source: ServerStore, fsck: String) throws -> (sequences: [Int64], base: Snapshot?) {
        var sequences: [Int64] = []
        for shard in try source.storage.list(source.layout.logDirectory) ?? [] {
            for name in try source.storage.list(source.layout.logDirectory + "/" + shard) ?? [] {
                if let seq = ServerLayout.sequence(ofFileName: name) { sequences.append(seq) }
            }
        }
        sequences.sort()
        for (index, seq) in sequences.enumerated() where index > 0 && seq != sequences[index - 1] + 1 {
            throw NoteSyncError(
                .logGap, path: source.layout.entryPath(sequences[index - 1] + 1),
                "is an empty slot before entry \(seq): the log is not whole, so it is not copied", fix: fsck)
        }
        var base: Snapshot?
        if let first = sequences.first, first > 1 {
            guard let snapshot = source.anchoredSnapshot(first) else {
                throw NoteSyncError(
                    .corrupt, path: source.layout.snapshotPath(first),
                    "the log starts at entry \(first) and no snapshot there reads", fix: fsck)
            }
            base = snapshot
        }
        return (sequences, base)
    }

    /// Copies the texts `texts` from `source` to `copy`, sealed with its key: 512 at once, a big text a piece at a
    /// time (``BigText``).
    private static func copyTexts(
        _ texts: [ContentDigest: AssetRef], from source: ServerStore, to copy: ServerStore, report: inout EncryptedCopyReport
    ) throws {
        let refs = texts.values.sorted { $0.sha256 < $1.sha256 }
        let scratch = FileManager.default.temporaryDirectory.path + "/notesync-encrypt-" + FileIO.randomToken()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        for start in stride(from: 0, to: refs.count, by: 512) {
            let slice = refs[start..<min(start + 512, refs.count)]
            // A big text is copied a piece at a time (``BigText``), the others whole, 512 at once.
            let batch = try slice.filter { !BigText.streams($0.size) }.map { try source.readAsset($0) }
            _ = try copy.putAssets(batch)
            for ref in slice where BigText.streams(ref.size) { try copy.copyBigText(ref, from: source, scratch: scratch) }
            report.texts += slice.count
        }
    }
}
