import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// Names of the temp files the agent writes next to a note (a new version before it is swapped in, the old one
/// after): `.notesync-tmp-<16 hex>-<note's file name>`, so that a temp an interrupted apply left behind still says
/// which note it belongs to (``SyncEngine`` turns an unknown one into a conflict copy of that note).
package enum AgentTempName {
    /// A fresh temp name for the note whose file name is `noteFileName`; the file name is shortened on a character
    /// boundary so that the whole name fits in 255 bytes.
    package static func make(for noteFileName: Substring) -> String {
        let head = ReservedNames.agentTempPrefix + FileIO.randomToken() + "-"
        var budget = ConflictCopyName.maximumComponentBytes - head.utf8.count
        var kept = ""
        for character in noteFileName {
            budget -= character.utf8.count
            guard budget >= 0 else { break }
            kept.append(character)
        }
        return head + kept
    }

    /// The note a temp at `relative` (a path in the notes folder) belongs to, or nil for a temp named otherwise.
    package static func note(ofTemp relative: String) -> String? {
        let slash = relative.lastIndex(of: "/")
        let directory = slash.map { String(relative[...$0]) } ?? ""
        let name = slash.map { relative[relative.index(after: $0)...] } ?? relative[...]
        guard name.hasPrefix(ReservedNames.agentTempPrefix) else { return nil }
        let rest = name.dropFirst(ReservedNames.agentTempPrefix.count)
        let token = rest.prefix(16)
        guard token.count == 16, token.allSatisfy(\.isHexDigit), rest.dropFirst(16).first == "-" else { return nil }
        let note = rest.dropFirst(17)
        return note.isEmpty ? nil : directory + note
    }
}
