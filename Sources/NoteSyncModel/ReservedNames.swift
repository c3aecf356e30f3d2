import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// The names notesync keeps for itself in a notes folder: its state directory and its temp files. Never synced and
/// never re-includable by an ignore rule (syncing the local state or a half-written temp would corrupt the other
/// devices), and compared as the most lenient folder compares names (``isAgentOwned(_:)``).
public enum ReservedNames {
    /// The directory holding the agent's local state; never synced and never re-includable.
    public static let stateDirectoryName = ".notesync"

    /// The prefix of every temp file the agent writes in the notes folder.
    ///
    /// The applier must name its temps with this prefix: they are always ignored, so a scan or an
    /// inotify event never mistakes a half-written server version for a note.
    public static let agentTempPrefix = ".notesync-tmp-"

    /// The prefix of the agent's cookie files: written in the notes folder's root and awaited in the watch, so that
    /// every event before a command's request is seen before it is answered (as watchman's cookies). Under the temp
    /// prefix, so never scanned or synced.
    public static let cookiePrefix = agentTempPrefix + "cookie-"

    /// Whether `name` (one path component) belongs to the agent itself: its state directory or a temp, in any
    /// spelling some folder takes for the same name (the scalar overload says which).
    public static func isAgentOwned(_ name: String) -> Bool {
        isAgentOwned(name.unicodeScalars)
    }

    @usableFromInline static let stateDirectoryScalars = Array(stateDirectoryName.unicodeScalars)
    @usableFromInline static let agentTempPrefixScalars = Array(agentTempPrefix.unicodeScalars)

    /// Whether the component `name` is, on some notes folder, the state directory or a temp: compared as the most
    /// lenient folder compares names, so that a record never reaches `.notesync/` through another spelling and a
    /// file no other device could write is never synced. Unicode case folding (`.NoteSync`, `.noteſync`: a
    /// case-folding ext4, vfat, exFAT, CIFS), default-ignorable code points left out (case-folding filesystems
    /// that ignore them), trailing dots and spaces dropped (vfat and CIFS strip them), and the state directory's
    /// 8.3 short name (`NOTESY~1`, which vfat resolves to `.notesync`). Refused for every folder, whatever this
    /// one compares: a name that passes here must be writable on every device. Inlinable, so that the scanner (another
    /// module) runs it specialized for its scalar slices rather than through the generic collection's witnesses.
    @inlinable package static func isAgentOwned(_ name: some BidirectionalCollection<Unicode.Scalar>) -> Bool {
        // The first scalar that counts (default-ignorable code points are left out) must be `.` or `n`/`N`: no other
        // scalar case-folds to either. Nearly every name is ruled out here, by its first scalar, without a copy.
        guard let lead = name.first(where: { $0.isASCII || !$0.properties.isDefaultIgnorableCodePoint }),
            lead == "." || lead == "n" || lead == "N"
        else { return false }
        if name.allSatisfy(\.isASCII) { return isAgentOwnedASCII(name) }
        var key = String.UnicodeScalarView()
        for scalar in name where scalar.isASCII || !scalar.properties.isDefaultIgnorableCodePoint { key.append(scalar) }
        var folded = String(key).folding(options: [.caseInsensitive], locale: nil)
        while let last = folded.unicodeScalars.last, last == "." || last == " " { folded.unicodeScalars.removeLast() }
        return isAgentOwnedASCII(Array(folded.unicodeScalars))
    }

    /// ``isAgentOwned(_:)`` for an ASCII name (or one already folded): compared letter by letter in lower case, with
    /// trailing dots and spaces dropped, without making a string.
    @inlinable static func isAgentOwnedASCII(_ name: some BidirectionalCollection<Unicode.Scalar>) -> Bool {
        var end = name.endIndex
        while end > name.startIndex && [".", " "].contains(name[name.index(before: end)]) {
            end = name.index(before: end)
        }
        let name = name[name.startIndex..<end]
        func lowered(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
            ("A"..."Z").contains(scalar) ? Unicode.Scalar(UInt8(scalar.value) | 0x20) : scalar
        }
        func starts(with prefix: [Unicode.Scalar]) -> Bool {
            name.count >= prefix.count && zip(name, prefix).allSatisfy { lowered($0) == $1 }
        }
        if starts(with: agentTempPrefixScalars) { return true }
        if name.count == stateDirectoryScalars.count && starts(with: stateDirectoryScalars) { return true }
        guard starts(with: shortNamePrefixScalars) else { return false }
        let digits = name.dropFirst(shortNamePrefixScalars.count)
        return !digits.isEmpty && digits.allSatisfy { ("0"..."9").contains($0) }
    }

    /// The state directory's 8.3 short name on vfat, before its number: `NOTESY~1`, case-folded.
    @usableFromInline static let shortNamePrefixScalars = Array("notesy~".unicodeScalars)
}
