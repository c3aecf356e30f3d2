import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport

/// `notesync recover` as a use case: a notes folder syncs again from scratch with its server, or moves to another
/// one, every note kept. The sync forgets what it knew of the server (``SyncOptions/forgetServer``): each note here
/// is pushed, pulled or kept as a conflict copy, as on a first sync with the notes this device holds.
///
/// What must hold: a recovery never makes a server (a missing one is refused before anything changes); the key
/// of an encrypted target comes before anything is written (a wrong passphrase changes nothing); the server and the
/// notes folder never hold each other; a dry run writes nothing anywhere.
public struct FolderRecovery {
    public var folder: NotesFolder
    public var state: LocalState
    public var config: FolderConfig
    /// The server to move to; nil: the one the folder syncs with.
    public var server: String?
    public var secrets = Secrets.none
    public var dryRun = false

    public init(folder: NotesFolder, state: LocalState, config: FolderConfig, server: String? = nil) {
        self.folder = folder
        self.state = state
        self.config = config
        self.server = server
    }

    /// The folder's configuration bound to ``server``: checked, its key kept (written to the folder unless a dry
    /// run), the state's server path set. The configuration as it is when no server is given.
    public func target(logger: Logger) throws -> FolderConfig {
        guard let server else { return config }
        var config = self.config
        config.server = try ServerAddress.normalized(server)
        if FileIO.overlaps(config.server, folder.root) {
            throw NoteSyncError(
                .usage, path: config.server, "the server and the notes folder must not contain each other",
                fix: "choose a server folder outside the notes folder")
        }
        let target = try ServerStore(root: config.server, endpoint: config.serverEndpoint, device: config.deviceID, logger: logger)
        // The key this device keeps for the target, if it is the one: else the passphrase (a plain server needs none).
        var kept: Vault?
        if target.marker.isEncrypted {
            kept = config.vaultServerID == target.marker.id ? config.vault : nil
            if kept == nil { kept = try secrets.vault(of: target) }
        }
        config.vaultKey = kept?.keyBytes
        config.vaultServerID = kept == nil ? nil : target.marker.id
        if !dryRun {
            if let kept {
                try VaultKeyFile.write(kept, serverID: target.marker.id, to: folder.vaultKeyFile)
            } else {
                unlink(folder.vaultKeyFile)
            }
            try state.setMeta([.serverPath: config.server])
        }
        return config
    }

    /// Recovers: binds the folder to the server (``target(logger:)``), then syncs forgetting what was known of the
    /// server. `options` gives the rest (diffs); its `dryRun` and `forgetServer` are this recovery's. `progress` is
    /// asked for once the server is bound and its key given (a progress line never draws over a passphrase prompt).
    /// Returns the sync's report and the configuration it synced with.
    public func run(
        _ options: SyncOptions = SyncOptions(), logger: Logger, progress: () -> SyncProgress? = { nil }
    ) throws -> (report: SyncReport, config: FolderConfig) {
        let config = try target(logger: logger)
        var options = options
        options.dryRun = dryRun
        options.forgetServer = true
        options.progress = progress()
        let report = try SyncEngine(folder: folder, state: state, config: config, logger: logger).sync(options)
        return (report, config)
    }
}
