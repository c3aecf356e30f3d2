import Foundation
import Logging

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
    func seal<T: Encodable>(_ value: T, kind: String, place: String) throws -> Data {
        guard let vault = try requireVault() else { return try SealedFile.seal(value, kind: kind) }
        return try SealedFile.seal(value, kind: kind, vault: vault, context: sealingContext(kind, place))
    }

    /// Opens the file of `kind` at `place`. On an encrypted server opened without the key: `.encrypted`.
    func open<T: Decodable>(_ data: Data, kind: String, place: String, as type: T.Type) throws(SealedFile.Failure) -> T {
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
    func encodeAsset(_ text: Data, digest: ContentDigest, vault: Vault?) -> Data {
        let stored = hasRetention ? AssetCodec.encode(text) : text
        guard let vault else { return stored }
        return SealedFile.wrap(
            vault.sealAsset(stored, name: vault.assetName(digest)), kind: "asset", format: SealedFile.encryptedFormat)
    }

    /// The text in an asset file, checked against its digest and size; nil when it is not that text.
    func decodeAsset(_ file: Data, _ ref: AssetRef) -> Data? {
        guard marker.isEncrypted else { return AssetCodec.decode(file, digest: ref.sha256, size: ref.size) }
        guard let vault, let sealed = try? SealedFile.verifyFormat(file, kind: "asset"),
            sealed.format == SealedFile.encryptedFormat,
            let stored = try? vault.openAsset(sealed.body, name: vault.assetName(ref.sha256))
        else { return nil }
        return AssetCodec.decode(stored, digest: ref.sha256, size: ref.size)
    }

    /// The largest file an asset of `size` bytes can be stored as.
    func maxStoredAssetSize(_ size: Int64) -> Int64 {
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
