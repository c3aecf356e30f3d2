import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// The keys of the local state's `meta` table: the folder's identity and configuration, and what syncs keep between
/// runs. Named once here, so that the engine, the agent and the commands cannot disagree on a spelling.
public enum MetaKey: String, CaseIterable, Sendable {
    /// This device: its id (in log entries) and its name (in conflict copies).
    case deviceID = "device.id"
    case deviceName = "device.name"
    /// When `init` made the folder.
    case created
    /// The server folder's path and the id of the server the folder is bound to (its marker's).
    case serverPath = "server.path"
    case serverID = "server.id"
    /// The S3-compatible service of an `s3://` server (`init --endpoint`); absent for a folder or AWS S3.
    case serverEndpoint = "server.endpoint"
    /// The change token, the chain digest of the entry at it, those of the entries before it (`ZoneState.earlier`),
    /// and the stat fingerprint of the entry file last verified.
    case token
    case chain
    case chainEarlier = "chain.earlier"
    case chainFile = "chain.file"
    /// The token the last finished sync planned up to.
    case plannedToken = "planned.token"
    /// Set by `recover` as it forgets the server, cleared by the first sync that finishes after it: until then this
    /// device's own entries, read again from the log's start, give no base to a note absent here, so a delete the
    /// server lost is not pushed again (``SyncEngine``).
    case recovering
    /// Where a state database older than schema v4 (no `pendingWrite` table) records the versions a sync was about to
    /// write into notes (JSON): read (and cleared) once, so that a folder left mid-sync with such a database recovers.
    case pendingWrites = "pending.writes"
    /// The voided slots this device has checked its heads and bases against.
    case voidsSeen = "voids.seen"
    /// Local deletes held by the mass-delete guard (absent: none).
    case heldDeletes = "held.deletes"
    /// The time of the last sync that reached the server, as builds before `.notesync/last-sync` stored it
    /// (``LocalState/lastSync()`` reads both; the first sync of a newer build clears it).
    case lastSync = "last.sync"
    /// The error the last sync ended with.
    case lastError = "last.error"
    /// The notes folder's mount (`st_dev` and filesystem) and the steps it lacks (``FolderGuarantees/stored``), one
    /// a line: probed again when the mount changes.
    case folderGuarantees = "folder.guarantees"
    /// The largest note this device syncs, in bytes (``FileSizeLimit``); absent: the default, "0": no limit.
    case maxFileSize = "sync.max-file-size"
    /// The ``maxFileSize`` the agent's last full sync used: one that differs makes its next sync a full one.
    case maxFileSizeSynced = "sync.max-file-size.synced"
    /// The notes left out for their size, here or on the server (one name a line, escaped for display): a full sync
    /// sets them, a partial one adds those it met (absent: none). `status` lists them.
    case tooBig = "sync.too-big"
    /// The records that wait on a notes folder that folds case (``CasePairs``), a line each: the name, a tab, the
    /// owner of its group (names hold no control characters). Set by every sync on such a folder; `status` lists them.
    case caseWaiting = "sync.case-waiting"
}
