import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// Connecting a notes folder to a server, as `notesync init` does: the checks that keep a folder from syncing
/// where it must not (nested notes folders, a server inside the notes, a folder that is neither empty nor a
/// server), the server made when asked, the encrypted server's key kept, and the state written bound to the
/// server's id. The command line only parses its options into this value and prints what ``run(announce:)``
/// tells.
///
/// What must hold: nothing is written in the notes folder before the server is opened and its key checked (a
/// wrong passphrase leaves the folder as it was); a state that cannot be read is moved aside, never deleted, and
/// every note stays; a server is made only in a missing or empty folder (or an S3 prefix that holds none).
public struct FolderSetup: Sendable {
    /// What happens along the way, told as it happens (a recovery key is shown only once: it is told as soon as
    /// the server exists, whatever fails after).
    public enum Notice: Sendable {
        /// The state that could not be read (why) was moved to `aside`.
        case stateMovedAside(reason: String, aside: String)
        /// The folder walk (the nested-folder check, counted in ``progress``) is over: a prompt may follow.
        case walked
        /// A new server was made at `root`; `recovery` for an encrypted one.
        case serverCreated(root: String, recovery: RecoveryKey?)
    }

    /// How the setup ended.
    public enum Outcome: Sendable, Equatable {
        /// The folder already synced with this encrypted server and lacked its key: only the key was kept.
        case keptKey(serverID: String, keyFile: String)
        /// The folder now syncs with the server as this device.
        case connected(notes: String, server: String, deviceID: String, deviceName: String)
    }

    public var notes: String
    /// The server as the user gave it (``ServerAddress/normalized(_:)`` is applied).
    public var server: String
    public var endpoint: String?
    /// This device's name in conflict copies (``deviceName(_:)`` cleans it).
    public var deviceName: String
    public var maxFileSize: FileSizeLimit?
    public var createServer = false
    public var encrypt = false
    public var secrets = Secrets.none
    /// Counts the folder walk, for a progress line.
    public var progress: SyncProgress?

    public init(notes: String, server: String, deviceName: String) {
        self.notes = notes
        self.server = server
        self.deviceName = deviceName
    }

    /// Connects the folder; `announce` is told each ``Notice`` as it happens.
    public func run(logger: Logger, announce: (Notice) -> Void = { _ in }) throws -> Outcome {
        let folder = NotesFolder(root: notes)
        let serverRoot = try ServerAddress.normalized(server)
        if encrypt && !createServer {
            throw NoteSyncError(
                .usage, path: serverRoot, "--encrypt makes a new server: it needs --create-server",
                fix: "add --create-server (an existing server stays as it was made)")
        }
        if folder.isInitialized, Self.unreadableState(folder) == nil,
            let kept = try keepKey(folder, serverRoot: serverRoot, logger: logger)
        {
            return kept
        }
        if folder.isInitialized { try moveStateAside(folder, announce: announce) }
        try checkNotNested(in: folder)
        // scrypt (half a second on purpose) on another core while the folder is walked, when the passphrase is
        // given by file or environment (one typed at a prompt is asked for after the walk).
        var newVault: ServerStore.NewVault?
        var unlockAhead: UnlockAhead?
        if secrets.isGiven {
            if encrypt {
                newVault = ServerStore.NewVault(passphrase: try secrets.newPassphrase())
            } else {
                unlockAhead = ServerStore.unlockAhead(
                    root: serverRoot, endpoint: endpoint, passphrase: try secrets.passphrase(""), logger: logger)
            }
        }
        try checkPlace(folder, serverRoot: serverRoot, announce: announce)
        let id = FileIO.randomToken(bytes: 8)
        let created = try findOrCreateServer(serverRoot, device: id, newVault: newVault, logger: logger, announce: announce)
        // The key before anything is written here: a wrong passphrase leaves the folder as it was.
        let opened = try ServerStore(root: serverRoot, endpoint: endpoint, device: id, logger: logger)
        let vault = try created?.vault ?? unlockAhead?.vault(for: opened) ?? secrets.vault(of: opened)
        let name = Self.deviceName(deviceName)
        try writeState(folder, serverRoot: serverRoot, device: id, name: name, vault: vault, logger: logger)
        return .connected(notes: folder.root, server: serverRoot, deviceID: id, deviceName: name)
    }

    /// A state that cannot be read (emptied, damaged, replaced by a checkout) is moved aside to be made afresh; the
    /// notes stay, and the first sync adopts the ones the server has. A state that reads is refused.
    private func moveStateAside(_ folder: NotesFolder, announce: (Notice) -> Void) throws {
        guard let damaged = Self.unreadableState(folder) else {
            throw NoteSyncError(
                .usage, path: folder.root, "is already a notesync notes folder",
                fix: "run `notesync sync` there; to move it to another server, `notesync recover --server DIR`")
        }
        let aside = folder.database + ".damaged-" + String(Clock.nowNanoseconds())
        for suffix in ["", "-wal", "-shm", ".replaced"] where FileIO.lstatInfo(folder.database + suffix) != nil {
            guard rename(folder.database + suffix, aside + suffix) == 0 else {
                throw NoteSyncError(
                    .io, path: folder.database + suffix, "cannot be moved aside",
                    fix: "check the permissions of \(folder.stateDirectory)", errno: errno)
            }
        }
        announce(.stateMovedAside(reason: damaged, aside: aside))
    }

    /// Refuses a notes folder inside another.
    private func checkNotNested(in folder: NotesFolder) throws {
        if let outer = NotesFolder.enclosing(FileIO.parent(of: folder.root)) {
            throw NoteSyncError(
                .usage, path: folder.root,
                "is inside the notes folder \(outer.root): notes folders cannot nest "
                    + "(the inner one would sync into the outer one's server again at every sync)",
                fix: "use a folder outside \(outer.root), or sync the notes there through \(outer.root)")
        }
    }

    /// Refuses a notes folder holding another (a walk of the folder), and a server and notes folder inside each
    /// other.
    private func checkPlace(_ folder: NotesFolder, serverRoot: String, announce: (Notice) -> Void) throws {
        progress?.enter(.scanning)
        let nested = folder.nestedNotesFolder(progress: progress)
        announce(.walked)
        if let inner = nested {
            throw NoteSyncError(
                .usage, path: folder.root, "holds the notes folder \(inner.root): notes folders cannot nest",
                fix: "use a folder that holds no notes folder, or keep using \(inner.root) as it is")
        }
        if FileIO.overlaps(serverRoot, folder.root) {
            throw NoteSyncError(
                .usage, path: serverRoot, "the server and the notes folder must not contain each other",
                fix: "choose a server folder outside the notes folder")
        }
    }

    /// Opens the server at `serverRoot`, or makes one there when asked and the place allows it; the new vault of
    /// an encrypted one made.
    private func findOrCreateServer(
        _ serverRoot: String, device: String, newVault: ServerStore.NewVault?, logger: Logger, announce: (Notice) -> Void
    ) throws -> ServerStore.NewVault? {
        do {
            let found = try ServerStore(root: serverRoot, endpoint: endpoint, device: device, logger: logger)
            if encrypt && !found.marker.isEncrypted {
                throw NoteSyncError(
                    .usage, path: serverRoot, "is a notesync server already, and it is not encrypted",
                    fix: "leave out --encrypt to sync with it as it is; to encrypt it, `notesync server encrypt`")
            }
            return nil
        } catch let error as NoteSyncError where error.kind == .notAServer || error.kind == .serverUnreachable {
            // A folder is examined first, so that the refusal names what is there; a service's location that
            // cannot be reached may hold a server all the same, and only one that answers with no server is made.
            if ServerAddress.isLocalPath(serverRoot) {
                try checkNewServerPlace(serverRoot, error: error)
            } else if !(error.kind == .notAServer && createServer) {
                throw error
            }
            let created = encrypt ? try newVault ?? ServerStore.NewVault(passphrase: try secrets.newPassphrase()) : nil
            try ServerStore.create(root: serverRoot, endpoint: endpoint, logger: logger, encryption: created)
            announce(.serverCreated(root: serverRoot, recovery: created?.recovery))
            return created
        }
    }

    /// Only a missing or empty folder can become a new server, and only with `createServer`: the refusal names
    /// what is there.
    private func checkNewServerPlace(_ serverRoot: String, error: NoteSyncError) throws {
        if let info = FileIO.lstatInfo(serverRoot), (info.st_mode & S_IFMT) != S_IFDIR {
            throw NoteSyncError(
                .usage, path: serverRoot, "is a file, not a folder",
                fix: "give the server's folder (or a new folder's path) as --server")
        }
        if let names = try FileIO.list(serverRoot), !names.isEmpty {
            throw NoteSyncError(
                .usage, path: serverRoot, "holds other files and no notesync server",
                fix: "if the server lives on a share, mount it there; for a new server, give an empty or new folder")
        }
        guard createServer else {
            throw NoteSyncError(
                .usage, path: serverRoot,
                "is not a notesync server (it is \(error.kind == .serverUnreachable ? "missing" : "empty"))",
                fix: "if the server lives on a share, mount it there; if this is the first device of a new server, "
                    + "add --create-server")
        }
    }

    /// The state folder and database, the key, and the meta binding the folder to the server's id: another server
    /// found at this path later (a share not mounted and a new server made in its place) is refused, never synced
    /// into.
    private func writeState(
        _ folder: NotesFolder, serverRoot: String, device id: String, name: String, vault: Vault?, logger: Logger
    ) throws {
        try FileIO.makeDirectories(folder.root)
        try FileIO.makeDirectory(folder.stateDirectory, mode: NotesFolder.stateDirectoryMode)
        folder.keepOtherToolsOut()
        folder.keepStatePrivate()
        // A new state has not synced yet (a database deleted by hand, or one moved aside): `status` says so.
        LocalState.removeLastSync(folder.database)
        let state = try LocalState(path: folder.database)
        let store = try ServerStore(root: serverRoot, endpoint: endpoint, device: id, logger: logger, vault: vault)
        if let vault { try VaultKeyFile.write(vault, serverID: store.marker.id, to: folder.vaultKeyFile) }
        try state.setMeta([
            .deviceID: id, .deviceName: name, .serverPath: serverRoot, .serverID: store.marker.id,
            .created: String(Clock.nowNanoseconds())
        ])
        if let endpoint, ServerAddress.takesEndpoint(serverRoot) { try state.setMeta([.serverEndpoint: endpoint]) }
        if let maxFileSize { try state.setMeta([.maxFileSize: maxFileSize.stored]) }
        try LocalState.writeDeviceFile(folder.database, device: id)
        try? store.writeDeviceInfo(DeviceInfo(id: id, name: name, lastSeen: Clock.nowNanoseconds(), token: 0))
    }

    /// For a notes folder that syncs with the encrypted server at `serverRoot` and has no usable key for it: asks
    /// for the passphrase and keeps the key; nothing else changes. Nil when that is not the case.
    private func keepKey(_ folder: NotesFolder, serverRoot: String, logger: Logger) throws -> Outcome? {
        let state = try LocalState(path: folder.database, readOnly: true)
        let config: FolderConfig
        do {
            defer { try? state.close() }
            config = try FolderConfig(state: state, folder: folder)
        } catch let error as NoteSyncError where error.kind == .key {
            // A key file that cannot be used: written again.
            let state = try LocalState(path: folder.database, readOnly: true)
            defer { try? state.close() }
            guard let id = try state.meta(.serverID), try state.meta(.serverPath) == serverRoot else { return nil }
            return try keepKey(folder, serverRoot: serverRoot, serverID: id, device: try state.meta(.deviceID), logger: logger)
        }
        guard config.server == serverRoot, let id = config.serverID, config.vaultServerID != id || config.vault == nil else {
            return nil
        }
        return try keepKey(folder, serverRoot: serverRoot, serverID: id, device: config.deviceID, logger: logger)
    }

    private func keepKey(
        _ folder: NotesFolder, serverRoot: String, serverID: String, device: String?, logger: Logger
    ) throws -> Outcome? {
        let store = try ServerStore(root: serverRoot, endpoint: endpoint, device: device ?? "init", logger: logger)
        guard store.marker.isEncrypted, store.marker.id == serverID else { return nil }
        let vault = try store.unlock(passphrase: try secrets.passphrase("passphrase of the server (or its recovery key)"))
        try VaultKeyFile.write(vault, serverID: serverID, to: folder.vaultKeyFile)
        return .keptKey(serverID: serverID, keyFile: folder.vaultKeyFile)
    }

    /// Why the folder's state cannot be used, or nil when it can (a kept key that cannot be used does not count:
    /// setup writes it again).
    public static func unreadableState(_ folder: NotesFolder) -> String? {
        do {
            let state = try LocalState(path: folder.database, readOnly: true)
            _ = try FolderConfig(state: state, folder: folder)
            try state.close()
            return nil
        } catch let error as NoteSyncError where error.kind == .key {
            return nil
        } catch let error as NoteSyncError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    /// A device name as it may go into conflict copy file names: no slashes, no control characters, at most 40
    /// characters; `device` when nothing is left.
    public static func deviceName(_ name: String) -> String {
        let cleaned = String(
            name.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F && $0 != "/" && $0 != "\\" }
                .map(Character.init)
        ).trimmingCharacters(in: .whitespaces)
        let short = String(cleaned.prefix(40))
        return short.isEmpty ? "device" : short
    }
}
