import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// Something a sync reports without failing: a note left alone, a name skipped, a server problem, deletes held.
/// Each says what it is about and the fix; its kind lets the agent, the command line and the tests tell them
/// apart without reading the text.
public struct SyncWarning: Codable, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Codable, Sendable {
        /// A note or folder that cannot be read or listed: left alone, never taken as deleted.
        case unreadable
        /// A name notesync cannot sync (not UTF-8, unsafe, reserved): skipped until renamed.
        case skippedName = "skipped-name"
        /// A symbolic link, FIFO, socket or device: never synced.
        case notANote = "not-a-note"
        /// A folder where a synced note was: the note is left alone.
        case folderOverNote = "folder-over-note"
        /// Two names that differ only in Unicode form.
        case unicodeTwin = "unicode-twin"
        /// Two records whose names are one file in a notes folder that does not tell case apart: one waits.
        case casePair = "case-pair"
        /// A note modified in the future, or a clock far from the server's.
        case clock
        /// A conflict copy another sync tool made, in the notes folder or inside the server.
        case foreignConflictCopy = "foreign-conflict-copy"
        /// The server's log holds a change or entry that is skipped (quarantined, damaged).
        case server
        /// Local deletes held by the mass-delete guard.
        case deletesHeld = "deletes-held"
        /// A note renamed on two devices to different names: the later rename keeps it, the other name is said.
        case moveConflict = "move-conflict"
        /// A note whose deletion the server's retention forgot while this device was away: kept and pushed again.
        case deleteForgotten = "delete-forgotten"
        /// A note edited during the sync: left for the next round.
        case note
        /// A notes folder whose filesystem lacks what keeps a save from being overwritten (``FolderGuarantees``):
        /// said by the first sync on it.
        case folder
        /// A note bigger than the folder's `max-file-size`, here or on the server: left out of the sync (never deleted),
        /// every other note syncs.
        case tooBig = "too-big"
        /// A note whose change could not be made (it could not be read, written or deleted: a read-only folder, a
        /// full disk): tried again by the next sync; the sync stops short (exit 1).
        case failed
    }

    public var kind: Kind
    /// The note, folder or server file it is about (relative to the notes folder for notes), when it is about one.
    public var path: String?
    public var message: String

    public init(_ kind: Kind, path: String? = nil, _ message: String) {
        self.kind = kind
        self.path = path
        self.message = message
    }

    public var description: String { message }

    /// A note's change that raised `error`: `.failed` when the filesystem refused it (read-only, no permission,
    /// full, an I/O error), and the sync stops short; else `.note` (a folder, link or name in the way, a damaged
    /// server text: left alone and reported, and the sync goes on).
    package static func note(_ name: some CustomStringConvertible, _ error: NoteSyncError) -> SyncWarning {
        let refused = error.kind == .io && [EROFS, EACCES, EPERM, ENOSPC, EDQUOT, EIO].contains(error.errno ?? 0)
        return SyncWarning(refused ? .failed : .note, path: name.description, "\(name): \(error)")
    }
}
