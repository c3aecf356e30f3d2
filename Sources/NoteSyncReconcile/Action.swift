import Foundation
import NoteSyncDiff
import NoteSyncModel
import NoteSyncSupport

/// What a sync does for one record, worked out once from its decision (by the engine, which reads what a merge
/// needs): merges are done and conflict copies named there. The dry run describes these actions and the sync does
/// them, so a dry run names the merge and the copy that the sync makes — Unison's split of `reconItem` and
/// `transportItem`.
public enum Action: Sendable {
    /// Commit the local note, based on `base`: `.upload`, `.resurrect` (edited here, deleted there), or `.merge`
    /// (the merge of both edits is the local text).
    case save(PlannedChange.Kind, base: Int64)
    /// Commit the note's delete, based on `base`.
    case delete(base: Int64)
    /// The server deleted the record: the note goes to the trash and its base is forgotten.
    case trash(RecordHead)
    /// Write the server's text over the note: `.download`, `.restore` (deleted here, edited there), or `.merge`
    /// (the merge of both edits is the server's text).
    case write(RecordHead, PlannedChange.Kind)
    /// Both sides already agree: the head becomes the base (none, when both deleted it).
    case adopt(RecordHead?)
    /// A clean merge that is neither side's text: written here, then committed on top of the head's tag.
    case writeMerged(Data, base: Int64)
    /// The edits overlap (or the note is binary): one version keeps the name, the other is kept as a copy.
    indirect case conflict(Conflict)
    /// Left alone and reported: `.newerVersion` or `.unreadable`.
    case leave(PlannedChange.Kind, String)
}

/// A conflict, resolved: who keeps the name, and the copy that keeps the other version.
public struct Conflict: Sendable {
    package var server: RecordHead
    /// The local version keeps the name (its `modified`, then the device id, is the later); the server's text
    /// becomes the copy. Otherwise the local note becomes the copy and the server's text takes the name.
    package var localWins: Bool
    package var copy: RecordName
    /// The device whose version the copy holds (in its name and in `notesync conflicts`).
    package var copyDevice: String
    /// The copy exists already: a sync killed after making it (an unsynced note with the server's text and
    /// time), found wherever the user moved it. It is not made again; it syncs as the new note it is.
    package var madeBefore: Bool
    package var binary: Bool
    /// Not merged for its size (``FileSizeLimit/mergeBytes``), whatever its content.
    package var tooBigToMerge = false

    package init(
        server: RecordHead, localWins: Bool, copy: RecordName, copyDevice: String, madeBefore: Bool, binary: Bool,
        tooBigToMerge: Bool = false
    ) {
        self.server = server
        self.localWins = localWins
        self.copy = copy
        self.copyDevice = copyDevice
        self.madeBefore = madeBefore
        self.binary = binary
        self.tooBigToMerge = tooBigToMerge
    }
}
