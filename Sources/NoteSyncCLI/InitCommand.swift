import ArgumentParser
import Foundation
import Logging
import NoteSync

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Connect a notes folder to a server directory.",
        discussion: """
            Keeps the local state in NOTES/.notesync/ (never synced). The server must already be a notesync \
            server unless --create-server is given (with --encrypt: an encrypted one).
            An encrypted server asks for its passphrase once (or the recovery key; --passphrase-file or \
            NOTESYNC_PASSPHRASE for scripts); the key is kept in NOTES/.notesync/vault-key (mode 600). Run on a \
            notes folder already synced with that server but without its key, init only keeps the key.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Option(help: "The notes folder (created if missing).") var notes: String
    @Option(help: "The server: a folder (local, or an NFS/SMB/sshfs mount), or s3://BUCKET/PREFIX.") var server: String
    @OptionGroup var location: EndpointOption
    @Option(help: "This device's name in conflict copies (default: the host name).") var deviceName: String?
    @Option(
        help: ArgumentHelp(
            "The largest note this device syncs (default \(FileSizeLimit.default); 0: no limit); see `notesync config`.",
            valueName: "size"))
    var maxFileSize: String?
    @Flag(help: "Make the server directory a new server if it is not one yet.") var createServer = false
    @Flag(help: "With --create-server: make it an encrypted server (`notesync server init --encrypt`).") var encrypt = false
    @OptionGroup var secret: PassphraseOptions
    @Flag(name: .shortAndLong, help: "Show no progress line (a terminal shows one for work longer than a second).")
    var quiet = false

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let folder = NotesFolder(root: notes)
            let sizeLimit = try maxFileSize.map(FileSizeLimit.init(parsing:))
            let serverRoot = try ServerAddress.normalized(server)
            let endpoint = location.endpoint
            if encrypt && !createServer {
                throw NoteSyncError(
                    .usage, path: serverRoot, "--encrypt makes a new server: it needs --create-server",
                    fix: "add --create-server (an existing server stays as it was made)")
            }
            if folder.isInitialized, Self.unreadableState(folder) == nil,
                let kept = try keepKey(folder, serverRoot: serverRoot, endpoint: endpoint, logger: logger)
            {
                return kept
            }
            if folder.isInitialized {
                // A state that cannot be read (emptied, damaged, replaced by a checkout) is moved aside and made
                // afresh; the notes stay, and the first sync adopts the ones the server has.
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
                print("the local state could not be read (\(damaged)); moved it to \(aside) and starting afresh: every note stays")
            }
            if let outer = NotesFolder.enclosing(FileIO.parent(of: folder.root)) {
                throw NoteSyncError(
                    .usage, path: folder.root,
                    "is inside the notes folder \(outer.root): notes folders cannot nest "
                        + "(the inner one would sync into the outer one's server again at every sync)",
                    fix: "use a folder outside \(outer.root), or sync the notes there through \(outer.root)")
            }
            // scrypt (half a second on purpose) on another core while the folder is walked, when the passphrase is
            // given by file or environment (one typed at a prompt is asked for after the walk, as before): the key of
            // a new encrypted server's passphrase, or the unlock of the server there.
            var newVault: ServerStore.NewVault?
            var unlockAhead: UnlockAhead?
            if secret.isGiven {
                if encrypt {
                    newVault = ServerStore.NewVault(passphrase: try secret.newPassphrase())
                } else {
                    unlockAhead = ServerStore.unlockAhead(
                        root: serverRoot, endpoint: endpoint, passphrase: try secret.passphrase(purpose: ""), logger: logger)
                }
            }
            // A large folder takes a while to walk: a progress line on a terminal.
            let line = ProgressLine.start(quiet: quiet)
            line?.progress.enter(.scanning)
            let nested = folder.nestedNotesFolder(progress: line?.progress)
            line?.finish()
            if let inner = nested {
                throw NoteSyncError(
                    .usage, path: folder.root, "holds the notes folder \(inner.root): notes folders cannot nest",
                    fix: "use a folder that holds no notes folder, or keep using \(inner.root) as it is")
            }
            if serverRoot == folder.root || serverRoot.hasPrefix(folder.root + "/") || folder.root.hasPrefix(serverRoot + "/") {
                throw NoteSyncError(
                    .usage, path: serverRoot, "the server and the notes folder must not contain each other",
                    fix: "choose a server folder outside the notes folder")
            }
            let id = FileIO.randomToken(bytes: 8)
            var created: ServerStore.NewVault?
            do {
                let found = try ServerStore(root: serverRoot, endpoint: endpoint, device: id, logger: logger)
                if encrypt && !found.marker.isEncrypted {
                    throw NoteSyncError(
                        .usage, path: serverRoot, "is a notesync server already, and it is not encrypted",
                        fix: "leave out --encrypt to sync with it as it is; to encrypt it, `notesync server encrypt`")
                }
            } catch let error as NoteSyncError
                where ServerAddress.isObjectStore(serverRoot) && error.kind == .notAServer && createServer
            {
                created = encrypt ? try newVault ?? ServerStore.NewVault(passphrase: try secret.newPassphrase()) : nil
                try ServerStore.create(root: serverRoot, endpoint: endpoint, logger: logger, encryption: created)
                print("created a new server in \(DisplayName.escape(serverRoot))")
                if let created { ServerInit.printRecovery(created.recovery) }
            } catch let error as NoteSyncError where error.kind == .notAServer || error.kind == .serverUnreachable {
                if ServerAddress.isObjectStore(serverRoot) { throw error }
                // The fix depends on what is there: only an empty or missing folder can become a new server.
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
                created = encrypt ? try newVault ?? ServerStore.NewVault(passphrase: try secret.newPassphrase()) : nil
                try ServerStore.create(root: serverRoot, logger: logger, encryption: created)
                print("created a new server in \(DisplayName.escape(serverRoot))")
                if let created { ServerInit.printRecovery(created.recovery) }
            }
            // The key before anything is written here: a wrong passphrase leaves the folder as it was.
            let opened = try ServerStore(root: serverRoot, endpoint: endpoint, device: id, logger: logger)
            let vault = try created?.vault ?? unlockAhead?.vault(for: opened) ?? secret.vault(opened)
            let name = Self.sanitize(deviceName ?? ProcessInfo.processInfo.hostName)
            try FileIO.makeDirectories(folder.root)
            try FileIO.makeDirectory(folder.stateDirectory, mode: NotesFolder.stateDirectoryMode)
            folder.keepOtherToolsOut()
            folder.keepStatePrivate()
            // A new state has not synced yet (a database deleted by hand, or one moved aside above): `status` says so.
            LocalState.removeLastSync(folder.database)
            let state = try LocalState(path: folder.database)
            let store = try ServerStore(root: serverRoot, endpoint: endpoint, device: id, logger: logger, vault: vault)
            if let vault { try VaultKeyFile.write(vault, serverID: store.marker.id, to: folder.vaultKeyFile) }
            // Bound to this server's id: another server found at this path later (a share not mounted and a new
            // server made in its place, another server mounted there) is refused, never synced into.
            try state.setMeta([
                .deviceID: id, .deviceName: name, .serverPath: serverRoot, .serverID: store.marker.id,
                .created: String(Clock.nowNanoseconds())
            ])
            if let endpoint, ServerAddress.isObjectStore(serverRoot) { try state.setMeta([.serverEndpoint: endpoint]) }
            if let sizeLimit { try state.setMeta([.maxFileSize: sizeLimit.stored]) }
            try LocalState.writeDeviceFile(folder.database, device: id)
            try? store.writeDeviceInfo(DeviceInfo(id: id, name: name, lastSeen: Clock.nowNanoseconds(), token: 0))
            print(
                "notes folder \(DisplayName.escape(folder.root)) is now synced with \(DisplayName.escape(serverRoot)) as device \"\(name)\""
            )
            print("next: `notesync sync --notes \(folder.root)` (or `notesync diff` to see what it would do)")
            return ExitCodes.ok
        }
    }

    /// For a notes folder that syncs with the encrypted server at `serverRoot` and has no key for it: asks for the
    /// passphrase and keeps the key; nothing else changes. Nil when that is not the case (the usual checks follow).
    func keepKey(_ folder: NotesFolder, serverRoot: String, endpoint: String?, logger: Logger) throws -> Int32? {
        let state = try LocalState(path: folder.database, readOnly: true)
        let config: FolderConfig
        do {
            defer { try? state.close() }
            config = try FolderConfig(state: state, folder: folder)
        } catch let error as NoteSyncError where error.kind == .key {
            // A key file that cannot be used: written again below.
            let state = try LocalState(path: folder.database, readOnly: true)
            defer { try? state.close() }
            guard let id = try state.meta(.serverID), try state.meta(.serverPath) == serverRoot else { return nil }
            return try keepKey(
                folder, serverRoot: serverRoot, endpoint: endpoint, serverID: id, device: try state.meta(.deviceID), logger: logger)
        }
        guard config.server == serverRoot, let id = config.serverID, config.vaultServerID != id || config.vault == nil else {
            return nil
        }
        return try keepKey(folder, serverRoot: serverRoot, endpoint: endpoint, serverID: id, device: config.deviceID, logger: logger)
    }

    private func keepKey(
        _ folder: NotesFolder, serverRoot: String, endpoint: String?, serverID: String, device: String?, logger: Logger
    ) throws -> Int32? {
        let store = try ServerStore(root: serverRoot, endpoint: endpoint, device: device ?? "init", logger: logger)
        guard store.marker.isEncrypted, store.marker.id == serverID else { return nil }
        let vault = try store.unlock(passphrase: try secret.passphrase(purpose: "passphrase of the server (or its recovery key)"))
        try VaultKeyFile.write(vault, serverID: serverID, to: folder.vaultKeyFile)
        print("kept the key of encrypted server \(serverID) in \(DisplayName.escape(folder.vaultKeyFile)); every note is as it was")
        return ExitCodes.ok
    }

    /// Why the folder's state cannot be used, or nil when it can.
    static func unreadableState(_ folder: NotesFolder) -> String? {
        do {
            let state = try LocalState(path: folder.database, readOnly: true)
            _ = try FolderConfig(state: state, folder: folder)
            try state.close()
            return nil
        } catch let error as NoteSyncError where error.kind == .key {
            // The state reads; only the kept key cannot be used (`init` writes it again).
            return nil
        } catch let error as NoteSyncError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    /// Device names go into conflict copy file names: no slashes, no control characters, short.
    static func sanitize(_ name: String) -> String {
        let cleaned = String(
            name.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F && $0 != "/" && $0 != "\\" }
                .map(Character.init)
        ).trimmingCharacters(in: .whitespaces)
        let short = String(cleaned.prefix(40))
        return short.isEmpty ? "device" : short
    }
}
