import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// When a note was renamed here, as the file system tells it: what decides which of two renames of one note, made on
/// two devices, keeps it (the later one).
///
/// A note renamed in its folder (`mv a/x.md a/y.md`) or moved up (`mv a/b/x.md a/`): its file's ctime, which the
/// rename sets. A note whose folders changed (`mv a b`, or `mv a/x.md b/c/x.md`): the later ctime of the first folder
/// on its new path that its old path lacks (`b`) and of its own folder (`b/c`). Renaming a folder sets that folder's
/// ctime and not its notes': the notes of a folder renamed on two devices to two names all get the same time on
/// each, so the whole folder ends at one name; their own ctimes (an edit, or a merge this device wrote into one) split
/// it note by note. The time is never earlier than the rename, but it can be later: a folder's ctime moves whenever
/// a file is made, removed or renamed in it (an editor's swap file, a save by rename), and the rename then counts as
/// made at that time. Nothing records the moment of a `mv` itself.
///
/// Each folder is looked up once (`lstat`); the few folders of a rename of many notes cost a few calls.
package final class RenameTimes {
    private let root: String
    private var folders: [Substring: Int64?] = [:]

    package init(root: String) {
        self.root = root
    }

    /// The time of the rename of the note at `from` (its base's name) to `to`, whose file the scan found as `file`
    /// (its folders are looked up by the file's path as it is on disk).
    package func time(from: RecordName, to: RecordName, file: LocalFile) -> Int64 {
        let fileTime = file.fingerprint.ctime
        let old = from.string.utf8
        let new = file.path
        // The old and new folders' paths ("" for the notes folder itself).
        guard let newSlash = new.utf8.lastIndex(of: UInt8(ascii: "/")) else {
            // Now at the top: renamed in it, or moved up to it. No folder rename moves a note up: the note itself was
            // renamed, and its ctime is the rename's (the notes folder's moves with every temp file made in it).
            return fileTime
        }
        let newFolder = new[..<newSlash]
        let oldFolder = old.lastIndex(of: UInt8(ascii: "/")).map { from.string[..<$0] } ?? ""
        if newFolder == oldFolder { return fileTime }
        // The folders from the first component the two paths differ in, down to the note's own.
        var common = newFolder.startIndex
        var newIndex = newFolder.startIndex
        var oldIndex = oldFolder.startIndex
        while newIndex < newFolder.endIndex, oldIndex < oldFolder.endIndex, newFolder[newIndex] == oldFolder[oldIndex] {
            if newFolder[newIndex] == "/" { common = newFolder.index(after: newIndex) }
            newIndex = newFolder.index(after: newIndex)
            oldIndex = oldFolder.index(after: oldIndex)
        }
        if oldIndex == oldFolder.endIndex && newIndex < newFolder.endIndex && newFolder[newIndex] == "/" {
            common = newFolder.index(after: newIndex)
        }
        // Moved up into a folder the old path holds (`a/b/x.md` to `a/x.md`): the note itself was renamed.
        if newIndex == newFolder.endIndex && oldIndex < oldFolder.endIndex && oldFolder[oldIndex] == "/" {
            return fileTime
        }
        // The first folder of the new path that the old one lacks (what `mv` renamed, or made), and the note's own
        // folder (what a note moved into an existing folder changed): one of the two is what the `mv` touched. For
        // the notes of a renamed folder the first is the same, and the second unchanged since unless a file was made
        // or removed in it later.
        let end = newFolder[common...].firstIndex(of: "/") ?? newFolder.endIndex
        let first = folderTime(newFolder[..<end])
        let own = end == newFolder.endIndex ? first : folderTime(newFolder)
        guard let first, let own else { return first ?? own ?? fileTime }
        return max(first, own)
    }

    /// A folder's ctime (`path` relative to the notes folder; empty for the notes folder), nil when it cannot be
    /// read.
    private func folderTime(_ path: Substring) -> Int64? {
        if let known = folders[path] { return known }
        let info = FileIO.lstatInfo(path.isEmpty ? root : root + "/" + path)
        let time = info.map { Int64($0.st_ctim.tv_sec) * 1_000_000_000 + Int64($0.st_ctim.tv_nsec) }
        folders[path] = time
        return time
    }
}
