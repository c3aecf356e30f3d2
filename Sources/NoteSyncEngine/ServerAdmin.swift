import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncServer
import NoteSyncSupport

/// The `notesync server` commands as use cases: each takes values, asks `Secrets` for a passphrase only where an
/// encrypted server needs one, and returns what happened for the command line to print. Nothing here prints.
///
/// What must hold: a server is made only where ``ServerStore/create(root:endpoint:logger:encryption:ownerOnly:)``
/// allows (a missing or empty folder, an empty prefix); an encrypted copy never overlaps its source and never writes
/// into it; a passphrase is changed only after the current one (or the recovery key) opened the key.
public enum ServerAdmin {
    /// A server made by ``create(root:endpoint:encrypt:ownerOnly:secrets:logger:)``.
    public struct Created: Sendable {
        public var marker: ServerMarker
        /// An encrypted server's recovery key: shown once, now.
        public var recovery: RecoveryKey?
    }

    /// Makes a server at `root` (a folder, or an S3 location with `endpoint`); encrypted with a new passphrase
    /// from `secrets` when `encrypt`; readable by its owner only when `ownerOnly`.
    public static func create(
        root: String, endpoint: String?, encrypt: Bool, ownerOnly: Bool, secrets: Secrets, logger: Logger
    ) throws -> Created {
        let encryption = encrypt ? ServerStore.NewVault(passphrase: try secrets.newPassphrase()) : nil
        let marker = try ServerStore.create(
            root: root, endpoint: endpoint, logger: logger, encryption: encryption, ownerOnly: ownerOnly)
        return Created(marker: marker, recovery: encryption?.recovery)
    }

    /// An encrypted copy made by ``encryptedCopy(of:to:endpoint:secrets:logger:)``.
    public struct EncryptedCopy: Sendable {
        public var report: EncryptedCopyReport
        /// Where the copy is, as it is stored and shown.
        public var destination: String
        public var recovery: RecoveryKey
    }

    /// Makes `destination` an encrypted copy of the plain server at `source`, with a new passphrase from `secrets`.
    /// The source is only read.
    public static func encryptedCopy(
        of source: String, to destination: String, endpoint: String?, secrets: Secrets, logger: Logger
    ) throws -> EncryptedCopy {
        // Both as stored and shown: a relative or unclean path (`srv`, `./srv//`) names the same folder.
        let source = try ServerAddress.normalized(source)
        let destination = try ServerAddress.normalized(destination)
        if FileIO.overlaps(destination, source) {
            throw NoteSyncError(
                .usage, path: destination, "the copy and the server must not contain each other",
                fix: "give a folder outside \(source)")
        }
        let store = try ServerStore(root: source, endpoint: endpoint, device: "encrypt", logger: logger)
        let encryption = ServerStore.NewVault(passphrase: try secrets.newPassphrase())
        let report = try ServerStore.encryptedCopy(
            of: store, to: destination, endpoint: endpoint, encryption: encryption, logger: logger)
        return EncryptedCopy(report: report, destination: destination, recovery: encryption.recovery)
    }

    /// Wraps the key of the encrypted server at `root` under a new passphrase: the current one (or the recovery
    /// key) from `current`, the new one from `fresh`. Returns the server's id and the new key file's generation.
    public static func changePassphrase(
        root: String, endpoint: String?, current: Secrets, fresh: () throws -> String, logger: Logger
    ) throws -> (serverID: String, generation: Int64) {
        let store = try ServerStore(root: root, endpoint: endpoint, device: "passphrase", logger: logger)
        let vault = try store.unlock(passphrase: try current.passphrase("current passphrase (or recovery key)"))
        let generation = try store.changePassphrase(vault: vault, to: try fresh())
        return (store.marker.id, generation)
    }

    /// Checks the server at `root` (``ServerFsck``), repairing what `repair` allows. An encrypted server is checked
    /// with its key when `secrets` gives a passphrase (never asked): without it, each file's integrity and the log's
    /// slots (the report says so).
    public static func fsck(
        root: String, endpoint: String?, repair: Bool, tempAge: Double, gapAge: Double, secrets: Secrets, logger: Logger
    ) throws -> FsckReport {
        var store = try ServerStore(root: root, endpoint: endpoint, device: "fsck", logger: logger)
        if let vault = try secrets.givenVault(of: store) {
            store = try ServerStore(storage: store.storage, device: "fsck", logger: logger, vault: vault)
        }
        return try ServerFsck(store: store).run(repair: repair, tempGraceSeconds: tempAge, gapGraceSeconds: gapAge)
    }

    /// Writes the marker of the server at `root` again with the id `id` (a damaged, unusable or missing one).
    public static func rewriteMarker(root: String, endpoint: String?, id: String, logger: Logger) throws {
        try ServerStore.rewriteMarker(root: try ServerAddress.normalized(root), endpoint: endpoint, id: id, logger: logger)
    }

    /// How ``upgrade(root:endpoint:logger:)`` ended.
    public enum Upgrade: Sendable, Equatable {
        /// The server was at `format`, this build's newest for it already.
        case alreadyAt(serverID: String, format: Int)
        /// The marker now says `format`.
        case upgraded(serverID: String, format: Int)
    }

    /// Moves the server at `root` to this build's newest format for it (only the marker is rewritten).
    public static func upgrade(root: String, endpoint: String?, logger: Logger) throws -> Upgrade {
        let store = try ServerStore(root: root, endpoint: endpoint, device: "upgrade", logger: logger)
        let target = store.marker.upgradedFormat
        if store.marker.format >= target { return .alreadyAt(serverID: store.marker.id, format: store.marker.format) }
        try store.upgradeMarker()
        return .upgraded(serverID: store.marker.id, format: target)
    }
}
