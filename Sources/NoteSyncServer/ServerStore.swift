import Crypto
import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport
import Synchronization

/// The marker file that makes a directory a notesync server; its absence means "not a server", never "empty".
public struct ServerMarker: Codable, Sendable, Hashable {
    public var format: Int
    public var id: String
    public var created: Int64
    public var zones: [String]
    /// The first slot whose entry must name the one before it: the slot after the end of the log `server upgrade`
    /// found on a format-1 server (whose entries 0.1.0 wrote without the link). Nil for a server made in format 2:
    /// every entry is linked.
    public var chainFrom: Int64? = nil
    /// Set on an encrypted server (format 4, docs/encryption.md): every entry, snapshot, mark, device file and
    /// asset is sealed with the server's vault key, whose wraps are in `keys/`. Nil: a plain server.
    public var encryption: ServerEncryption? = nil

    /// Whether the server's files are sealed with a vault key.
    public var isEncrypted: Bool { encryption != nil }

    /// The format of a new plain server, and the one `notesync server upgrade` moves older plain servers to.
    public static let plainFormat = 5
    /// The format of a new encrypted server, and the one `notesync server upgrade` moves format 4 to.
    public static let encryptedFormat = 6

    /// The server format this build writes (and the newest it reads). Format 2: the log is hash-chained (every
    /// entry names the digest of the one before it), so builds that write unchained entries must not write to it.
    /// Format 1 servers are read and written as they are (their entries gain the `prev` link, which format-1 builds
    /// ignore) until `notesync server upgrade` moves them to format 2.
    /// Format 3 (docs/retention.md): assets may be stored compressed, the log may start after a snapshot (gc
    /// compacted what was before it), and the server holds a retention policy (`retention/`) and gc's marks (`gc/`).
    /// A format 2 build cannot read those, so it finds a newer format and only reads. Formats 1 and 2 are read and
    /// written as they are (nothing compressed, no gc) until `notesync server upgrade`.
    /// Format 4 is format 3 encrypted (``encryption``): only an encrypted server has it.
    /// Formats 5 and 6 are formats 3 and 4 whose texts may be in packs (``AssetPack``): a build of format 4 would
    /// not find them, so it only reads. Formats 3 and 4 are read and written as they are (no packs written) until
    /// `notesync server upgrade`.
    public static let currentFormat = 6

    /// Whether `format` is one only an encrypted server has.
    public static func isEncryptedFormat(_ format: Int) -> Bool { format == 4 || format == 6 }

    /// The format `notesync server upgrade` moves this server to.
    public var upgradedFormat: Int {
        isEncrypted ? max(format, Self.encryptedFormat) : max(format, Self.plainFormat)
    }
}

/// How a server's files are encrypted (the marker's `encryption`).
public struct ServerEncryption: Codable, Sendable, Hashable {
    /// ``Vault/scheme``: the ciphers, key derivation and file layout.
    public var scheme: String
    /// Where the wrapped vault keys are, relative to the server's root.
    public var keys: String

    public init(scheme: String = Vault.scheme, keys: String = "keys/") {
        self.scheme = scheme
        self.keys = keys
    }
}

/// A server directory: content-addressed assets, a dense change log claimed slot by slot, snapshots.
///
/// Holds no mutable state about the log: callers keep their position in a ``ZoneState``. Safe to share
/// between tasks; the publish primitive is probed once, on the first write.
public final class ServerStore: Sendable {
    public let layout: ServerLayout
    public let marker: ServerMarker
    /// The device id that temp files and commits are written under.
    public let device: String
    /// True when the server's format is newer than this build: reading is allowed, writing is not.
    public let isReadOnly: Bool
    /// Format 3 and later: assets are stored compressed where that pays, and gc may compact the log.
    public var hasRetention: Bool { marker.format >= 3 }
    /// The key of an encrypted server, when this device has it: nil on a plain server, and on an encrypted one
    /// opened without it (fsck checks what it can; anything that reads or writes a sealed file says the key is
    /// needed).
    public let vault: Vault?
    package let logger: Logger
    /// The server is on NFS, SMB or FUSE: flush file by file, poll for changes.
    public var isNetwork: Bool { storage.isNetwork }
    /// Where the server's files are: a folder, or an object store.
    public let storage: any ServerStorage
    /// The packs' indexes read so far (formats 5 and 6).
    let packCatalog = PackCatalog()
    /// This device's clock minus the server's, as last measured by a commit (the published entry's mtime).
    private let clockSkew = Mutex<Int64?>(nil)

    func noteClockSkew(ofPublished path: String, at now: Int64) {
        // A simulation's clock is its own: the filesystem's times are not comparable with it.
        guard FaultPoint.simulatedNow() == nil, let info = storage.info(path) else { return }
        clockSkew.withLock { $0 = now - info.mtime }
    }

    /// The clock difference measured since the last call, if a commit measured one.
    public func takeClockSkew() -> Int64? {
        clockSkew.withLock { value in
            defer { value = nil }
            return value
        }
    }

    /// The largest entry or snapshot this build reads; anything bigger is damaged or hostile.
    public static let maxEntryBytes = 64 << 20
    public static let maxSnapshotBytes = 1 << 30

    /// Opens an existing server. A missing directory or marker is an error, never an empty server.
    /// `endpoint` is the S3-compatible service of an `s3://` server (nil: `NOTESYNC_S3_ENDPOINT`, else AWS S3).
    /// `vault` is the key of an encrypted server (see ``init(storage:device:logger:vault:)``).
    public convenience init(
        root: String, endpoint: String? = nil, device: String, primitive: PublishPrimitive? = nil, logger: Logger,
        vault: Vault? = nil
    ) throws {
        let layout = ServerLayout(root: root)
        try self.init(
            storage: try Self.openStorage(layout, endpoint: endpoint, primitive: primitive, logger: logger), device: device,
            logger: logger, vault: vault)
    }

    /// Opens the server held by `storage`. A missing marker is an error, never an empty server. `vault` is the
    /// server's key when it is encrypted; one given for a plain server is refused (a server put in the place of
    /// an encrypted one, with its id, must not be written in plain).
    public init(storage: any ServerStorage, device: String, logger: Logger, vault: Vault? = nil) throws {
        let layout = ServerLayout(root: storage.root)
        guard let data = try storage.read(layout.marker, limit: 1 << 20) else { throw storage.noServer(marker: layout.marker) }
        let marker = try Self.usableMarker(data, layout)
        try Self.validateDevice(device)
        if vault != nil && !marker.isEncrypted {
            throw NoteSyncError(
                .serverMismatch, path: layout.marker,
                "is the marker of a server that is not encrypted, but this notes folder's server is: nothing is read "
                    + "from it or written to it (another server was put in its place)",
                fix: "mount or restore this folder's own encrypted server at \(layout.root)")
        }
        self.vault = marker.isEncrypted ? vault : nil
        self.layout = layout
        self.storage = storage
        self.marker = marker
        self.device = device
        self.isReadOnly = marker.format > ServerMarker.currentFormat
        self.logger = logger
        if isReadOnly {
            logger.warning("server.format.newer", metadata: ["server.format": "\(marker.format)"])
        }
    }

    /// The server's log folder as a path of this machine whose inotify events include other devices' commits: that of
    /// a server folder on a local filesystem. Nil for an object store, a network or FUSE mount (another machine's
    /// writes raise no event here) and a folder that cannot be reached now: the agent polls those.
    public static func watchableLogDirectory(root: String) -> String? {
        guard !ServerAddress.isObjectStore(root) else { return nil }
        let directory = ServerLayout(root: root).logDirectory
        guard let kind = try? FilesystemKind(path: directory), !kind.isNetwork else { return nil }
        return directory
    }

    /// The storage of the server folder at `layout.root`: it must be there and be a folder.
    static func openStorage(
        _ layout: ServerLayout, endpoint: String? = nil, primitive: PublishPrimitive?, logger: Logger
    ) throws -> any ServerStorage {
        try ServerAddress.check(layout.root)
        if ServerAddress.isObjectStore(layout.root) {
            return try ServerAddress.openObjectStore(layout.root, endpoint: endpoint, logger: logger)
        }
        ServerRoots.register(layout.root)
        guard let info = FileIO.lstatInfo(layout.root) else {
            let code = errno
            // A FUSE mount whose process died (sshfs killed) stays mounted and answers nothing: it must be unmounted
            // before it can be mounted again.
            let unmount =
                code == ENOTCONN
                ? "unmount the dead mount first (`fusermount -u MOUNTPOINT`, or `umount -l MOUNTPOINT`), then mount the share "
                : "mount the share "
            throw NoteSyncError(
                .serverUnreachable, path: layout.root, "the server folder cannot be reached",
                fix: unmount + "(or bring the server folder back at this path); notes are kept and changes wait until then",
                errno: code)
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw NoteSyncError(
                .notAServer, path: layout.root, "is not a directory",
                fix: "point --server at the server folder")
        }
        return FolderStorage(root: layout.root, tmpDirectory: layout.tmpDirectory, primitive: primitive, logger: logger)
    }

    /// What makes a new server encrypted: its vault key, the passphrase and the recovery key that wrap it.
    ///
    /// The passphrase's scrypt key (half a second and 128 MiB, on purpose) is derived on a thread of its own from the
    /// moment this is made, so that `init` can walk the notes folder meanwhile; the server's creation waits for it.
    public struct NewVault: Sendable {
        public let vault: Vault
        public let passphrase: String
        public let recovery: RecoveryKey
        package let passphraseKey: Pending<(KDFParameters, Data)>

        public init(vault: Vault = .generate(), passphrase: String, recovery: RecoveryKey = .generate()) {
            self.vault = vault
            self.passphrase = passphrase
            self.recovery = recovery
            let logN = KDFParameters.configuredLogN
            passphraseKey = Pending.inBackground(named: "notesync-scrypt") {
                let kdf = KDFParameters.scrypt(logN: logN)
                return (kdf, try kdf.deriveKey(passphrase).withUnsafeBytes { Data($0) })
            }
        }
    }

    /// The marker of a new server, encrypted or not, with a fresh id.
    static func newMarker(_ layout: ServerLayout, encrypted: Bool) -> ServerMarker {
        var marker = ServerMarker(
            format: encrypted ? ServerMarker.encryptedFormat : ServerMarker.plainFormat, id: UUID().uuidString.lowercased(),
            created: Clock.nowNanoseconds(), zones: [layout.zone])
        if encrypted { marker.encryption = ServerEncryption() }
        return marker
    }

    /// The sealed key file of a new encrypted server (generation 1).
    static func firstKeys(_ encryption: NewVault, serverID: String) throws -> Data {
        let (kdf, passphraseKey) = try encryption.passphraseKey.wait()
        let keys = VaultKeys.make(
            vault: encryption.vault, kdf: kdf, passphraseKey: SymmetricKey(data: passphraseKey), recovery: encryption.recovery,
            serverID: serverID, generation: 1)
        return try SealedFile.seal(keys, kind: "keys")
    }

    /// Creates a new server in `root` (created if missing). Refuses a non-empty folder that is not a server.
    /// With `encryption`, the server is encrypted (docs/encryption.md): its key file is published before the marker,
    /// so a marker never names keys that are not there. With `ownerOnly` (`server init --private`), the folder is
    /// made mode 0700: only its owner can read it, and everything written in it later is 0600 or 0700
    /// (``ServerModes``); an object store has no modes (its bucket's policy says who may read it) and is refused so.
    @discardableResult
    public static func create(
        root: String, endpoint: String? = nil, logger: Logger, encryption: NewVault? = nil, ownerOnly: Bool = false
    ) throws -> ServerMarker {
        try ServerAddress.check(root)
        if ServerAddress.isObjectStore(root) {
            if ownerOnly {
                throw NoteSyncError(
                    .usage, path: root, "is an object store: its objects have no modes, and --private has nothing to set",
                    fix: "leave --private out; who may read the bucket is set by its policy (private unless you share it)")
            }
            return try ServerAddress.createObjectStore(root, endpoint: endpoint, logger: logger, encryption: encryption)
        }
        let layout = ServerLayout(root: root)
        ServerRoots.register(layout.root)
        if let names = try FileIO.list(layout.root) {
            if names.contains(ServerLayout.markerName) {
                throw NoteSyncError(
                    .usage, path: layout.root, "is already a notesync server",
                    fix: "use it as it is: `notesync init --server \(layout.root)`")
            }
            if !names.isEmpty {
                throw NoteSyncError(
                    .usage, path: layout.root,
                    "is not empty and not a notesync server; refusing to mix a server into it",
                    fix: "choose an empty or new folder")
            }
        } else {
            try FileIO.makeDirectories(layout.root)
        }
        if ownerOnly, chmod(layout.root, ServerModes.ownerOnly.folder) != 0 {
            throw NoteSyncError(
                .io, path: layout.root, "cannot be made private (mode 0700): \(String(cString: strerror(errno)))",
                fix: "create the server as the folder's owner, on a filesystem with modes, or leave --private out")
        }
        let modes = ServerModes(root: layout.root)
        for directory in [
            layout.zonesDirectory, layout.zoneDirectory, layout.logDirectory, layout.assetsDirectory,
            layout.snapshotsDirectory, layout.tmpDirectory, layout.devicesDirectory
        ] {
            try FileIO.makeDirectory(directory, mode: modes.folder, exactMode: modes.exact)
        }
        let marker = newMarker(layout, encrypted: encryption != nil)
        let primitive = try FilesystemProbe.choosePrimitive(in: layout.tmpDirectory, device: "init")
        if let encryption {
            try FileIO.makeDirectory(layout.keysDirectory, mode: modes.folder, exactMode: modes.exact)
            let keysTemp = layout.tmpDirectory + "/keys-" + FileIO.randomToken()
            try FileIO.createAndSync(
                keysTemp, try firstKeys(encryption, serverID: marker.id), mode: modes.file, exactMode: modes.exact)
            defer { unlink(keysTemp) }
            guard try AtomicPublish.publish(keysTemp, as: layout.keysPath(1), using: primitive) == .published else {
                throw NoteSyncError(
                    .usage, path: layout.root, "another process created a server here at the same time",
                    fix: "use the server it created")
            }
            try FileIO.syncDirectory(layout.keysDirectory)
        }
        let temp = layout.tmpDirectory + "/marker-" + FileIO.randomToken()
        try FileIO.createAndSync(temp, try encoded(marker), mode: modes.file, exactMode: modes.exact)
        defer { unlink(temp) }
        guard try AtomicPublish.publish(temp, as: layout.marker, using: primitive) == .published else {
            throw NoteSyncError(
                .usage, path: layout.root, "another process created a server here at the same time",
                fix: "use the server it created")
        }
        for directory in [layout.zoneDirectory, layout.zonesDirectory, layout.root] {
            try FileIO.syncDirectory(directory)
        }
        logger.info("server.created", metadata: ["server.root": "\(layout.root)"])
        return marker
    }

    /// Refuses a server whose id is not `bound`, the id the notes folder is bound to: it is not this folder's server.
    public func requireID(_ bound: String) throws {
        guard marker.id != bound else { return }
        throw NoteSyncError(
            .serverMismatch, path: layout.marker,
            "is the marker of notesync server \(marker.id), but this notes folder syncs with server "
                + "\(bound): this is not its server (another server was created or mounted at this path); "
                + "nothing is read from it or written to it",
            fix: "mount or restore this folder's own server at \(layout.root); to move this notes folder "
                + "to this server on purpose (the old one is retired), run `notesync recover --dry-run`, then "
                + "`notesync recover`")
    }

    /// The marker in `data` if this build can use it: it parses and lists the default zone. Any other marker is
    /// `corrupt`, with the fix that writes it again (``rewriteMarker(root:id:logger:)``).
    static func usableMarker(_ data: Data, _ layout: ServerLayout) throws -> ServerMarker {
        let fix =
            "run `notesync status` on a device that syncs with this server: it shows the server's id; then "
            + "`notesync server fsck \(layout.root) --repair --server-id ID` writes the marker again"
        let marker: ServerMarker
        do { marker = try JSONDecoder().decode(ServerMarker.self, from: data) } catch {
            throw NoteSyncError(.corrupt, path: layout.marker, "is not a valid server marker", fix: fix)
        }
        guard marker.zones.contains(layout.zone) else {
            throw NoteSyncError(.corrupt, path: layout.marker, "has no zone \"\(layout.zone)\"", fix: fix)
        }
        if let encryption = marker.encryption {
            guard ServerMarker.isEncryptedFormat(marker.format) || marker.format > ServerMarker.currentFormat else {
                throw NoteSyncError(
                    .corrupt, path: layout.marker, "says the server is encrypted but has format \(marker.format)", fix: fix)
            }
            guard encryption.scheme == Vault.scheme || marker.format > ServerMarker.currentFormat else {
                throw NoteSyncError(
                    .serverNewerFormat, path: layout.marker,
                    "is encrypted with \"\(DisplayName.escape(encryption.scheme))\", which this build does not know",
                    fix: "update notesync on this device")
            }
        } else if ServerMarker.isEncryptedFormat(marker.format) {
            // Formats 4 and 6 are only ever an encrypted server: a plain marker with one was changed.
            throw NoteSyncError(.corrupt, path: layout.marker, "has format \(marker.format) but no encryption", fix: fix)
        }
        return marker
    }

    /// Writes a new marker for the server in `root` whose marker is damaged, unusable (no default zone) or missing
    /// while its log is there (`notesync server fsck --repair --server-id ID`): the id devices are bound to, the
    /// default zone, and the format and creation time of the old marker when it still says them (else the current
    /// format). A usable marker is never replaced.
    public static func rewriteMarker(root: String, endpoint: String? = nil, id: String, logger: Logger) throws {
        let layout = ServerLayout(root: root)
        let storage = try openStorage(layout, endpoint: endpoint, primitive: nil, logger: logger)
        let old = try? storage.read(layout.marker, limit: 1 << 20)
        if let old, (try? usableMarker(old, layout)) != nil {
            throw NoteSyncError(
                .usage, path: layout.marker, "is a valid marker: it is not replaced", fix: "run `notesync server fsck` without --server-id")
        }
        let parsed = old.flatMap { try? JSONDecoder().decode(ServerMarker.self, from: $0) }
        guard storage.hasEntry(layout.logDirectory) else {
            throw NoteSyncError(
                .usage, path: layout.root, "holds no notesync log: this is not a server's folder",
                fix: "give the server's folder (the one with zones/\(layout.zone)/log)")
        }
        let uuid = id.lowercased()
        guard UUID(uuidString: uuid) != nil else {
            throw NoteSyncError(
                .usage, path: nil, "\"\(DisplayName.escape(id))\" is not a server id",
                fix: "copy the id `notesync status` shows (a UUID)")
        }
        // An encrypted server is told by its keys: the marker says so again, whatever the damaged one said.
        let encrypted = storage.hasEntry(layout.keysDirectory)
        let format =
            encrypted
            ? parsed.map(\.format).flatMap { ServerMarker.isEncryptedFormat($0) ? $0 : nil } ?? ServerMarker.encryptedFormat
            : parsed.map(\.format).flatMap { $0 >= 1 && !ServerMarker.isEncryptedFormat($0) ? $0 : nil } ?? ServerMarker.plainFormat
        var marker = ServerMarker(
            format: format, id: uuid, created: parsed?.created ?? Clock.nowNanoseconds(), zones: [layout.zone],
            chainFrom: parsed?.chainFrom)
        if encrypted { marker.encryption = ServerEncryption() }
        try storage.makeDirectory(layout.tmpDirectory)
        try replaceMarker(storage, with: marker)
        logger.notice("server.marker.rewritten", metadata: ["server.id": "\(uuid)"])
    }

    /// Rewrites the marker with the current format (`notesync server upgrade`), the id and zones unchanged: written
    /// to a temp file, fsynced, then renamed over the marker (the one file notesync ever replaces: a reader sees the
    /// old marker or the new one, never a torn one).
    /// A format-1 log keeps its unlinked entries: the chain is required from the slot after its end (``ServerMarker/chainFrom``).
    public func upgradeMarker() throws {
        var upgraded = marker
        upgraded.format = marker.upgradedFormat
        if marker.format < 2 {
            var end = ZoneState()
            _ = try fetch(into: &end)
            upgraded.chainFrom = end.token + 1
        }
        try Self.replaceMarker(storage, with: upgraded)
    }

    /// The marker as it is written: indented JSON, keys sorted, a final newline.
    package static func encoded(_ marker: ServerMarker) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var data = try encoder.encode(marker)
        data.append(0x0A)
        return data
    }

    /// Writes `marker` to a temp file, fsyncs it and renames it over the marker: the one file notesync ever
    /// replaces (a reader sees the old marker or the new one, never a torn one).
    private static func replaceMarker(_ storage: any ServerStorage, with marker: ServerMarker) throws {
        try storage.replace(ServerLayout(root: storage.root).marker, with: try encoded(marker), device: "marker")
    }

    func requireWritable() throws {
        if isReadOnly {
            throw NoteSyncError(
                .serverNewerFormat, path: layout.marker,
                "uses server format \(marker.format); this build writes format "
                    + "\(ServerMarker.currentFormat) only, so it will not write to it",
                fix: "update notesync on this device")
        }
        // Writes name these folders by path: a link planted in place of one would carry them out of the server
        // (O_NOFOLLOW guards only the last component). A missing one is left to the write (an unmounted share).
        for directory in [
            layout.zonesDirectory, layout.zoneDirectory, layout.logDirectory, layout.assetsDirectory,
            layout.snapshotsDirectory, layout.tmpDirectory, layout.devicesDirectory, layout.packsDirectory
        ] where storage.hasDirectories {
            if let info = storage.info(directory), info.kind != .directory {
                throw NoteSyncError(
                    .corrupt, path: directory,
                    info.kind == .link
                        ? "is a symbolic link; notesync never writes through links, so it writes nothing to this server"
                        : "is not a folder; notesync writes nothing to this server",
                    fix: "put the server's own folder back in its place (`notesync server fsck` lists what is wrong)")
            }
        }
    }

    /// Writes `data` to a fresh temp file (fsynced) and publishes it as `destination` if that name is free.
    /// Returns whether it was published; the temp file is gone either way.
    package func publish(_ data: Data, as destination: String, suffix: String) throws -> AtomicPublish.Outcome {
        try requireWritable()
        return try storage.create(data, as: destination, device: device, suffix: suffix)
    }

    static func validateDevice(_ device: String) throws {
        guard !device.isEmpty, device.utf8.count <= 64,
            device.utf8.allSatisfy({ $0 == 45 || (48...57).contains($0) || (97...122).contains($0) })
        else {
            throw NoteSyncError(
                .usage, path: nil, "device id \"\(DisplayName.escape(device))\" is not valid",
                fix: "use 1-64 characters of lowercase letters, digits and '-'")
        }
    }
}
