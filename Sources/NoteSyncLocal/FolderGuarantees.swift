import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// Which of the steps that make local writes safe the notes folder's filesystem offers, probed in `.notesync/`.
///
/// ``NoteApplier`` uses the best one there is (``FolderRename``): `RENAME_EXCHANGE` swaps a pulled version in and
/// checks the old one after; without it, the note is moved aside, checked, and the new version put in with
/// `RENAME_NOREPLACE` or a hard link; without those too (exFAT, vfat), the note is checked in place and a plain
/// `rename(2)` puts the new version over it, which is not one step with the check. ``warning`` says what that
/// costs the user.
public struct FolderGuarantees: Sendable, Hashable {
    public var filesystem: String
    public var renameNoReplace: Bool
    public var renameExchange: Bool
    public var hardLinks: Bool

    public init(filesystem: String, renameNoReplace: Bool, renameExchange: Bool, hardLinks: Bool) {
        self.filesystem = filesystem
        self.renameNoReplace = renameNoReplace
        self.renameExchange = renameExchange
        self.hardLinks = hardLinks
    }

    /// Tries each step on two fresh files in `directory` (created if missing) and removes them.
    public static func probe(in directory: String) throws -> FolderGuarantees {
        try FileIO.makeDirectories(directory)
        let base = directory + "/" + ReservedNames.agentTempPrefix + "probe-" + FileIO.randomToken()
        let (a, b, c) = (base + "-a", base + "-b", base + "-c")
        defer { for path in [a, b, c] { unlink(path) } }
        try FileIO.createAndSync(a, Data("a".utf8), sync: false)
        try FileIO.createAndSync(b, Data("b".utf8), sync: false)
        let exchange = FolderRename.renameExchange(a, b) == 0
        let noReplace = FolderRename.renameNoReplace(a, c) == 0
        let links = FolderRename.hardLink(noReplace ? c : a, noReplace ? a : c) == 0
        let kind = (try? FilesystemKind(path: directory).name) ?? "unknown"
        return FolderGuarantees(filesystem: kind, renameNoReplace: noReplace, renameExchange: exchange, hardLinks: links)
    }

    /// The steps it lacks, in words (empty: all of them).
    public var missing: [String] {
        (renameExchange ? [] : ["rename-exchange"]) + (renameNoReplace ? [] : ["rename-without-replace"])
            + (hardLinks ? [] : ["hard links"])
    }

    /// What the user must know, or nil where nothing a user saves can be overwritten by a pulled version (without
    /// rename-exchange alone, a note is moved aside for an instant, and nothing is lost).
    public var warning: String? {
        if !renameNoReplace && !hardLinks {
            return "this notes folder (\(filesystem)) has no rename-without-replace, rename-exchange or hard links: "
                + "notesync checks a note right before it puts a pulled version in its place, but a save made in that "
                + "same instant can be overwritten and lost; keep notes that several devices edit at once on a "
                + "folder that has them (ext4, xfs, btrfs, NFS)"
        }
        return nil
    }

    /// Whether a file can be put at a taken name's place without replacing what is there (no-replace rename or
    /// hard link): ``NoteApplier`` then moves a note aside to check it, else checks it in place.
    public var placesWithoutReplacing: Bool { renameNoReplace || hardLinks }

    /// The guarantees ``stored`` wrote; nil for a text that is not one.
    public init?(stored: String) {
        let lines = stored.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let filesystem = lines.first, !filesystem.isEmpty else { return nil }
        let missing = Set(lines.dropFirst())
        self.init(
            filesystem: filesystem, renameNoReplace: !missing.contains("rename-without-replace"),
            renameExchange: !missing.contains("rename-exchange"), hardLinks: !missing.contains("hard links"))
    }

    /// As the local state stores it (``MetaKey/folderGuarantees``): the filesystem, then what it lacks.
    public var stored: String { ([filesystem] + missing).joined(separator: "\n") }
}
