import Foundation
import NoteSyncSupport

/// The outcome of a three-way merge of a note's text.
///
/// Only `.clean` may be written to a note or pushed; on `.conflict` and `.binary` the
/// reconciler keeps both versions as separate notes (a conflict copy) and never writes markers.
public enum MergeResult: Sendable, Equatable {
    /// Both sides' changes combined; the exact bytes to save.
    case clean(Data)
    /// The sides changed the same or adjacent lines differently.
    case conflict(ConflictInfo)
    /// A version is not UTF-8 text (or contains NUL); binary content is never merged.
    case binary
}
