import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// The versions a sync writes into notes, recorded before it writes them (the state database's `pendingWrite` table).
///
/// A process killed between writing a note and recording its base leaves a note that holds a server version with no
/// base (or an older one). Taken as the user's, such a note undid a delete made meanwhile by another device, or was
/// merged against the wrong ancestor. The engine finds the version in the
/// log's history; once gc has compacted the log past it (and the policy thinned it from the snapshot's history)
/// only this device can know. So the versions are recorded locally first, and the next sync adopts each as the base
/// of a note that holds exactly it: the same text and the same mtime (a pull gives the note the record's).
package struct PendingWrite: Codable, Hashable, Sendable {
    package var name: RecordName
    package var tag: Int64
    package var text: AssetRef
    package var modified: Int64

    package init?(_ name: RecordName, _ head: RecordHead) {
        guard !head.deleted, let text = head.text else { return nil }
        self.init(name: name, tag: head.tag, text: text, modified: head.modified)
    }

    package init(name: RecordName, tag: Int64, text: AssetRef, modified: Int64) {
        self.name = name
        self.tag = tag
        self.text = text
        self.modified = modified
    }

    /// The base of `file` when it holds exactly this version. Without the note's fingerprint: the write may have
    /// displaced a save of the user's into a temp file, which is then kept as a conflict copy; with the fingerprint
    /// the note would pass for the very file its base recorded, never swapped in, and the temp for a stale one.
    package func base(of file: LocalFile) -> BaseRecord? {
        guard file.digest == text.sha256, file.modified == modified else { return nil }
        return BaseRecord(tag: tag, digest: text.sha256, size: text.size, modified: modified, fingerprint: nil)
    }

    /// The record a state database older than schema v4 keeps in `meta` (a JSON array of the writes). An unreadable
    /// record only loses this recovery (the log's history is the other one): never the sync.
    static func decodeList(_ stored: String) -> [PendingWrite] {
        (try? JSONDecoder().decode([PendingWrite].self, from: Data(stored.utf8))) ?? []
    }
}
