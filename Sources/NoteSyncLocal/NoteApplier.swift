import CSyscalls
import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport
import Synchronization

/// Writes server changes into the notes folder without ever overwriting an edit the user made meanwhile.
///
/// A new version is written to a temp file under `.notesync/staging/`, fsynced, given the record's mtime, then
/// swapped in with `renameat2(RENAME_EXCHANGE)` (which works between two folders of one filesystem): the note is
/// never missing, and the old version lands in the staging folder, where it is checked against the base. A
/// mismatch means the user edited it during the sync: that version is kept as a conflict copy. Until that check,
/// the displaced version lives where nothing the user does to their notes (deleting or renaming the note's
/// folder) can reach it; a process killed before the check leaves it there, and the next sync settles it
/// (``stagedLeftovers()``). Where the note's folder is on another filesystem than `.notesync/` (a mount inside the
/// notes folder), the temp goes beside the note instead. Where the filesystem has no exchange, the note is moved
/// aside first and checked before the new file is renamed in (no-replace). Deletes move the note into
/// `.notesync/trash/`.
public struct NoteApplier: Sendable {
    public let root: String
    public let trash: String
    /// Where versions wait on their way into and out of the notes folder: `<staging>/<temp name>/<note's path>`.
    public let staging: String
    public let deviceName: String
    /// Whether each folder a temp was put in can place a file without replacing one
    /// (``FolderRename/placesWithoutReplacing(probe:)``), asked once per applier: on NFS or sshfs a probe is two
    /// round trips, and every pulled update on a folder without rename-exchange needs the answer.
    let placements: Placements

    /// The answers ``placements`` holds, by folder: the staging folder (``staging``), or a note's folder for a temp
    /// beside the note.
    final class Placements: Sendable {
        private let answers: Mutex<[String: Bool]>

        package init(_ known: [String: Bool]) { answers = Mutex(known) }

        package func answer(for folder: String, probe: () -> Bool) -> Bool {
            if let known = answers.withLock({ $0[folder] }) { return known }
            let probed = probe()
            answers.withLock { $0[folder] = probed }
            return probed
        }
    }

    /// How an apply ended.
    public enum Outcome: Hashable, Sendable {
        /// The new content is in place with this fingerprint.
        case written(StatFingerprint)
        /// The new content is in place, and a local edit made during the sync was kept as `copy`.
        case writtenKeepingLocalEdit(StatFingerprint, copy: RecordName)
        /// The note was moved to the trash.
        case trashed
        /// The note had been edited since the base: it was not deleted (the edit wins).
        case keptEdited
        /// Nothing was there to delete.
        case alreadyGone
    }

    /// `guarantees`: what the staging folder's filesystem offers, as probed and stored for the folder
    /// (``FolderGuarantees``); nil to probe it at the first pulled update that needs it.
    public init(
        root: String, trash: String, staging: String? = nil, deviceName: String, guarantees: FolderGuarantees? = nil
    ) {
        self.root = root
        self.trash = trash
        let staging = staging ?? NotesFolder(root: root).staging
        self.staging = staging
        self.deviceName = deviceName
        placements = Placements(guarantees.map { [staging: $0.placesWithoutReplacing] } ?? [:])
    }

    public init(folder: NotesFolder, deviceName: String, guarantees: FolderGuarantees? = nil) {
        self.init(
            root: folder.root, trash: folder.trash, staging: folder.staging, deviceName: deviceName, guarantees: guarantees)
    }

    /// A temp file for a version of the note at `relative` (in folder `directory`): under the staging folder, in
    /// a folder of its own that mirrors the note's path, or beside the note when `.notesync/` is on another
    /// filesystem than the note's folder (renames cannot cross filesystems).
    package struct Temp {
        /// The temp file's path.
        package let path: String
        /// The staging folder made for it (removed with ``NoteApplier/discard(_:keepingFile:)``), or nil beside the note.
        package let folder: String?
    }

    func makeTemp(for relative: String, in directory: String, beside: Bool = false) throws -> Temp {
        try FileIO.makeDirectories(staging)
        if !beside, let here = FileIO.lstatInfo(directory), let there = FileIO.lstatInfo(staging), here.st_dev == there.st_dev {
            let folder = staging + "/" + ReservedNames.agentTempPrefix + FileIO.randomToken()
            var current = folder
            try FileIO.makeDirectory(current)
            // By components of scalars: a component may start with a combining mark, which a Character split
            // would fuse with the slash before it.
            for component in RecordName.components(of: relative).dropLast() {
                current += "/" + component
                try FileIO.makeDirectory(current)
            }
            return Temp(path: folder + "/" + relative, folder: folder)
        }
        return Temp(path: directory + "/" + AgentTempName.make(for: relative.split(separator: "/").last ?? ""), folder: nil)
    }

    /// A version an interrupted apply left in the staging folder: `note` is the note's path when the temp's place
    /// says it (a version on its way in or out of that note), nil for a flat temp of ``writeNew(_:)``.
    public struct StagedLeftover: Sendable {
        public var path: String
        public var note: String?

        package init(path: String, note: String? = nil) {
            self.path = path
            self.note = note
        }
    }

    /// The versions an interrupted apply left in the staging folder (one `opendir` when there are none).
    public func stagedLeftovers() throws -> [StagedLeftover] {
        guard let entries = try FileIO.listEntries(staging) else { return [] }
        var found: [StagedLeftover] = []
        for entry in entries.sorted(by: { $0.name < $1.name }) {
            let path = staging + "/" + entry.name
            guard let info = FileIO.lstatInfo(path) else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                found.append(StagedLeftover(path: path, note: nil))
            case S_IFDIR:
                for relative in (FileManager.default.subpaths(atPath: path) ?? []).sorted() {
                    guard let info = FileIO.lstatInfo(path + "/" + relative), (info.st_mode & S_IFMT) == S_IFREG else { continue }
                    // A temp a probe renamed is the same version: it settles as a version of the same note.
                    found.append(
                        StagedLeftover(path: path + "/" + relative, note: FolderRename.withoutProbeSuffix(relative)))
                }
            default:
                continue
            }
        }
        return found
    }

    /// Removes the staging folders that hold nothing any more (after the leftovers were settled).
    public func removeEmptyStagingFolders() {
        for entry in (try? FileIO.listEntries(staging)) ?? [] {
            let path = staging + "/" + entry.name
            if let info = FileIO.lstatInfo(path), (info.st_mode & S_IFMT) == S_IFDIR { FileIO.removeEmptyFolders(path) }
        }
    }

    /// Removes a temp (unless `keepingFile`: it was renamed away, or must stay for the next sync to settle) and the
    /// staging folders made for it, as far as they are empty.
    package func discard(_ temp: Temp, keepingFile: Bool = false) {
        if !keepingFile { unlink(temp.path) }
        if let folder = temp.folder { FileIO.removeEmptyFolders(folder) }
    }

    /// Writes `data` as the note `name` (at `path`, relative). `expected` is the digest the file must still have
    /// (its base), or `nil` when the note must not exist yet. The version gets the mode of the file at `modeOf`
    /// (relative; the note's own path when nil): see ``mode(for:)``.
    public func write(
        _ name: RecordName, path relative: String, data: Data, modified: Int64,
        expected: ContentDigest?, modeOf: String? = nil
    ) throws -> Outcome {
        try write(name, path: relative, contents: .bytes(data), modified: modified, expected: expected, modeOf: modeOf)
    }

    /// ``write(_:path:data:modified:expected:modeOf:)`` of `contents`: a big text is written into its temp a piece at a
    /// time, and a fill that throws (a damaged asset) leaves the note as it was. `keepingMode`: the permission bits the
    /// note had before (a restore of a note a sync just moved to the trash), taken exactly instead of the file's.
    public func write(
        _ name: RecordName, path relative: String, contents: NoteContents, modified: Int64,
        expected: ContentDigest?, modeOf: String? = nil, keepingMode: mode_t? = nil
    ) throws -> Outcome {
        let mode = keepingMode.map { (bits: $0, exact: true) } ?? Self.mode(for: root + "/" + (modeOf ?? relative))
        do {
            return try write(
                name, path: relative, contents: contents, modified: modified, expected: expected, mode: mode, beside: false)
        } catch let error as NoteSyncError where error.errno == EXDEV {
            // The note's folder is another mount of the same filesystem (a bind mount): renames cannot cross it, and
            // nothing was moved yet. The temp goes beside the note.
            return try write(
                name, path: relative, contents: contents, modified: modified, expected: expected, mode: mode, beside: true)
        }
    }

    /// The mode of a version to be written as the file at `path`: a file there keeps its own permission bits
    /// exactly (a note the user made private stays private when an edit arrives from another device, and is never
    /// readable by others in the staging folder on its way in); a new file gets what an editor gives one, 0666 less
    /// the umask.
    package static func mode(for path: String) -> (bits: mode_t, exact: Bool) {
        guard let info = FileIO.lstatInfo(path), (info.st_mode & S_IFMT) == S_IFREG else { return (Self.newNoteMode, false) }
        return (info.st_mode & 0o777, true)
    }

    /// A new note's mode before the umask, as editors create files.
    static let newNoteMode: mode_t = 0o666

    private func write(
        _ name: RecordName, path relative: String, contents: NoteContents, modified: Int64,
        expected: ContentDigest?, mode: (bits: mode_t, exact: Bool), beside: Bool
    ) throws -> Outcome {
        try FaultPoint.hit("apply.begin")
        let path = root + "/" + relative
        let directory = FileIO.parent(of: path)
        try makeParents(of: relative)
        let staged = try makeTemp(for: relative, in: directory, beside: beside)
        let temp = staged.path
        var cleanup = true
        defer { discard(staged, keepingFile: !cleanup) }
        try contents.create(at: temp, mode: mode.bits, exactMode: mode.exact)
        try setModified(temp, modified)
        let written = try writtenFingerprint(temp)
        try FaultPoint.hit("apply.tempWritten")

        if expected == nil {
            if try FolderRename.noReplace(temp, path) {
                cleanup = false
                try FaultPoint.hit("apply.renamedIn")
                return try finish(path, directory, written)
            }
            // Someone created the note while we synced: keep theirs as a conflict copy, then put ours in place.
            return try replaceExisting(
                name, relative: relative, temp: temp, directory: directory, expected: nil,
                written: written, beside: beside, cleanup: &cleanup)
        }
        return try replaceExisting(
            name, relative: relative, temp: temp, directory: directory, expected: expected,
            written: written, beside: beside, cleanup: &cleanup)
    }

    /// A note to create, for ``writeNew(_:)``.
    public struct NewNote: Sendable {
        public var name: RecordName
        public var path: String
        public var data: Data
        public var modified: Int64

        public init(name: RecordName, path: String, data: Data, modified: Int64) {
            self.name = name
            self.path = path
            self.data = data
            self.modified = modified
        }
    }

    /// Writes notes that do not exist here yet, many at once (a first sync downloads thousands): every note
    /// goes to a temp file in the staging folder (beside it where that is another filesystem) with the record's mtime, one `syncfs` makes all of them durable, each is
    /// published with rename-no-replace, and one more `syncfs` makes the new names durable. The guarantees of
    /// ``write(_:path:data:modified:expected:)`` note by note — no note appears before its bytes are on disk,
    /// none replaces a file — for two flushes per batch instead of two per note. A note whose name was taken
    /// meanwhile, or a filesystem without rename-no-replace, goes through that one-note path.
    public func writeNew(_ notes: [NewNote]) -> [Result<Outcome, NoteSyncError>] {
        var results = [Result<Outcome, NoteSyncError>?](repeating: nil, count: notes.count)
        var temps = [String?](repeating: nil, count: notes.count)
        var writtenPrints = [StatFingerprint?](repeating: nil, count: notes.count)
        func fail(_ index: Int, _ error: any Error) {
            results[index] = .failure(error as? NoteSyncError ?? NoteSyncError(.io, path: notes[index].path, "\(error)"))
        }
        // One flat temp per note: nothing is displaced by a no-replace rename, so a leftover holds a server version.
        let stagingDevice: dev_t? =
            notes.isEmpty ? nil : (try? FileIO.makeDirectories(staging)).flatMap { FileIO.lstatInfo(staging)?.st_dev }
        for (index, note) in notes.enumerated() {
            do {
                try makeParents(of: note.path)
                let directory = FileIO.parent(of: root + "/" + note.path)
                let temp =
                    (stagingDevice != nil && FileIO.lstatInfo(directory)?.st_dev == stagingDevice ? staging : directory)
                    + "/" + ReservedNames.agentTempPrefix + FileIO.randomToken()
                try FileIO.createAndSync(temp, note.data, mode: Self.newNoteMode, sync: false)
                temps[index] = temp
                try setModified(temp, note.modified)
                writtenPrints[index] = try writtenFingerprint(temp)
            } catch {
                if let temp = temps[index] { unlink(temp) }
                temps[index] = nil
                fail(index, error)
            }
        }
        defer { for temp in temps.compactMap({ $0 }) { unlink(temp) } }
        do {
            try FileIO.syncFilesystem(root)
        } catch {
            for index in notes.indices where results[index] == nil { fail(index, error) }
            return results.map { $0! }
        }
        var published: [Int] = []
        for (index, note) in notes.enumerated() {
            guard let temp = temps[index] else { continue }
            if (try? FolderRename.noReplace(temp, root + "/" + note.path)) == true {
                temps[index] = nil
                published.append(index)
                continue
            }
            unlink(temp)
            temps[index] = nil
            do {
                results[index] = .success(
                    try write(
                        note.name, path: note.path, data: note.data, modified: note.modified,
                        expected: nil))
            } catch {
                fail(index, error)
            }
        }
        do {
            try FileIO.syncFilesystem(root)
        } catch {
            for index in published { fail(index, error) }
            return results.map { $0! }
        }
        for index in published {
            do {
                results[index] = .success(
                    .written(
                        try Self.publishedFingerprint(
                            root + "/" + notes[index].path,
                            written: writtenPrints[index]!)))
            } catch {
                fail(index, error)
            }
        }
        return results.map { $0! }
    }

    private func replaceExisting(
        _ name: RecordName, relative: String, temp: String, directory: String,
        expected: ContentDigest?, written: StatFingerprint, beside: Bool,
        cleanup: inout Bool
    ) throws -> Outcome {
        let path = root + "/" + relative
        try requireNoteOrNothing(path)
        if FolderRename.renameExchange(temp, path) == 0 {
            // `temp` now holds what was at `path`: from here on it is never unlinked unseen. If a folder or link
            // took the name since the check, swap back: it must neither be hidden under a temp name nor deleted.
            cleanup = false
            if let swapped = notANote(temp) {
                // Should swapping back fail, both stay as they are, and the next sync settles the temp.
                if FolderRename.renameExchange(temp, path) == 0 { cleanup = true }
                throw Self.notANoteError(path, swapped)
            }
            try FaultPoint.hit("apply.exchanged")
            let old = try FileDigest.of(path: temp)
            try FaultPoint.hit("apply.checked")
            if let old, old.digest != expected {
                let copy = try keepAsConflictCopy(name, from: temp)
                try FaultPoint.hit("apply.copyKept")
                return .writtenKeepingLocalEdit(try fingerprint(path, directory, written), copy: copy)
            }
            cleanup = true
            return try finish(path, directory, written)
        }
        let code = errno
        if code == ENOENT {
            // The note vanished (deleted by the user meanwhile): put the new version in place, no-replace.
            if try FolderRename.noReplace(temp, path) {
                cleanup = false
                try FaultPoint.hit("apply.renamedIn")
                return try finish(path, directory, written)
            }
            throw NoteSyncError.posix("rename", path: path, errno: EEXIST)
        }
        guard AtomicPublish.isUnsupported(renameErrno: code) else {
            throw NoteSyncError.posix("renameat2(RENAME_EXCHANGE)", path: path, errno: code)
        }
        let tempFolder = temp.hasPrefix(staging + "/") ? staging : directory
        if !placements.answer(for: tempFolder, probe: { FolderRename.placesWithoutReplacing(probe: temp) }) {
            return try replaceInPlace(
                name, path: path, temp: temp, directory: directory, expected: expected, written: written,
                cleanup: &cleanup)
        }
        // No exchange here: move the note aside, check it, then rename the new version in (no-replace).
        let asideTemp = try makeTemp(for: relative, in: directory, beside: beside)
        let aside = asideTemp.path
        if rename(path, aside) != 0 {
            let code = errno
            discard(asideTemp, keepingFile: true)
            if code != ENOENT { throw NoteSyncError.posix("rename", path: path, errno: code) }
        }
        if let moved = notANote(aside) {
            // Put it back without replacing anything: no-replace rename, else link (a link or FIFO), else rename(2)
            // for a folder, which it cannot put over anything but an empty folder.
            if FolderRename.renameNoReplace(aside, path) != 0 {
                if FolderRename.hardLink(aside, path) == 0 { unlink(aside) } else if moved == Self.folder { rename(aside, path) }
            }
            discard(asideTemp, keepingFile: true)
            throw Self.notANoteError(path, moved)
        }
        var copy: RecordName?
        if let old = try FileDigest.of(path: aside) {
            if old.digest != expected { copy = try keepAsConflictCopy(name, from: aside) } else { unlink(aside) }
        }
        discard(asideTemp, keepingFile: true)
        return try putIn(temp, path: path, directory: directory, written: written, copy: copy, cleanup: &cleanup)
    }

    /// Puts the new version `temp` at `path`, which was just emptied (no-replace); `copy` is the conflict copy a
    /// local edit was kept as. A file that took the name meanwhile stays, and so does the new version, in its temp.
    private func putIn(
        _ temp: String, path: String, directory: String, written: StatFingerprint, copy: RecordName?, cleanup: inout Bool
    ) throws -> Outcome {
        guard try FolderRename.noReplace(temp, path) else {
            cleanup = false
            throw NoteSyncError(
                .io, path: path, "a new file appeared while notesync replaced it; the server version stays at \(temp)",
                fix: "sync again", errno: EEXIST)
        }
        cleanup = false
        let print = try finish(path, directory, written)
        guard case .written(let fp) = print else { return print }
        return copy.map { .writtenKeepingLocalEdit(fp, copy: $0) } ?? print
    }

    /// Replaces the note at `path` with `temp` on a folder without `RENAME_EXCHANGE`, `RENAME_NOREPLACE` or hard links
    /// (exFAT, vfat), keeping the note in place until the new version is there: the note is hashed, and if it is
    /// still `expected` (nil: nothing may be there), `rename(2)` puts the new version over it, its fingerprint checked
    /// right before. A note that is not `expected` is the user's: moved to a conflict copy first. A note that changes
    /// while it is checked is checked again; one that keeps changing is left alone and the sync says so.
    private func replaceInPlace(
        _ name: RecordName, path: String, temp: String, directory: String, expected: ContentDigest?,
        written: StatFingerprint, cleanup: inout Bool
    ) throws -> Outcome {
        for _ in 0..<3 {
            guard let info = FileIO.lstatInfo(path) else {
                return try putIn(temp, path: path, directory: directory, written: written, copy: nil, cleanup: &cleanup)
            }
            if let what = notANote(path) { throw Self.notANoteError(path, what) }
            let before = StatFingerprint(info)
            guard let old = try FileDigest.of(path: path) else { continue }
            if old.digest == expected {
                if try FolderRename.replace(temp, over: path, ifStill: before) {
                    cleanup = false
                    try FaultPoint.hit("apply.renamedIn")
                    return try finish(path, directory, written)
                }
                continue
            }
            let copy = try keepAsConflictCopy(name, from: path)
            try FaultPoint.hit("apply.copyKept")
            return try putIn(temp, path: path, directory: directory, written: written, copy: copy, cleanup: &cleanup)
        }
        throw NoteSyncError(
            .conflict, path: path, "changed each time notesync checked it: left as it is, the server's version is not written",
            fix: "sync again once it is saved")
    }

    /// Gives a note that already holds the record's bytes the record's `modified` as its mtime, so every device
    /// ends with the same file, mtime included (both sides saved the same text at different times). Only if the
    /// file is still the one that was scanned (`expected` fingerprint); otherwise it is left alone and the next
    /// scan sees the change. Returns the new fingerprint, or `nil` when nothing was changed.
    public func adoptModified(path relative: String, modified: Int64, expected: StatFingerprint) -> StatFingerprint? {
        guard expected.mtime != modified else { return nil }
        let path = root + "/" + relative
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, StatFingerprint(info) == expected else { return nil }
        var times = [Self.timespecOf(modified), Self.timespecOf(modified)]
        guard futimens(fd, &times) == 0, fstat(fd, &info) == 0 else { return nil }
        return StatFingerprint(info)
    }

    static func timespecOf(_ nanoseconds: Int64) -> timespec {
        timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    }

    /// Where a deleted note waits until it is checked: moved aside first (so an edit made meanwhile is never lost
    /// in a check-then-move race), compared with its base, then moved on to the trash. A folder of its own, which
    /// exists only while a delete is under way or a killed process left one: a sync looks for those leftovers
    /// without listing the whole trash.
    var uncheckedTrash: String { trash + ".unchecked" }

    /// Moves the note `name` to the trash if it still has the `expected` content; an edited note stays.
    ///
    /// The note goes to `trash.unchecked/<stamp>/` first and is compared there; a process killed before the
    /// comparison leaves it there, and ``recoverUncheckedDeletes(bases:)`` finishes the job at the next sync.
    public func delete(_ name: RecordName, path relative: String, expected: ContentDigest) throws -> Outcome {
        let path = root + "/" + relative
        guard FileIO.lstatInfo(path) != nil else { return .alreadyGone }
        let stamp = String(Clock.nowNanoseconds())
        let unchecked = uncheckedTrash + "/" + stamp
        let target = unchecked + "/" + relative
        try FileIO.makeDirectories(FileIO.parent(of: target))
        guard rename(path, target) == 0 else {
            let code = errno
            try? FileManager.default.removeItem(atPath: unchecked)
            rmdir(uncheckedTrash)
            if code == ENOENT { return .alreadyGone }
            throw NoteSyncError.posix("rename to trash", path: path, errno: code)
        }
        try FaultPoint.hit("delete.trashed")
        if let moved = try FileDigest.of(path: target), moved.digest != expected {
            // Edited while we synced: the edit wins, put it back (no-replace, in case a new note took the name).
            try putBack(target, as: relative, name: name)
            try? FileManager.default.removeItem(atPath: unchecked)
            rmdir(uncheckedTrash)
            return .keptEdited
        }
        try moveToTrash(unchecked, as: stamp)
        try FileIO.syncDirectory(FileIO.parent(of: path))
        removeEmptyParents(of: relative)
        return .trashed
    }

    /// Moves a version that must not be deleted back to its note's name (no-replace); a file that took the name
    /// meanwhile stays, and the version becomes a conflict copy of it.
    private func putBack(_ source: String, as relative: String, name: RecordName) throws {
        let path = root + "/" + relative
        try makeParents(of: relative)
        if try FolderRename.noReplace(source, path) { return }
        _ = try keepAsConflictCopy(name, from: source)
    }

    /// Finishes the deletes a killed process left unchecked in the trash (``delete(_:path:expected:)``): a note
    /// that is still its base goes on to the trash proper (the next sync plans its delete again); any other is an
    /// edit made during that sync and goes back to its name, where the scan finds it and the edit wins. Returns
    /// the names put back.
    @discardableResult
    public func recoverUncheckedDeletes(bases: RecordTable<BaseRecord>) throws -> [RecordName] {
        guard let entries = try FileIO.listEntries(uncheckedTrash) else { return [] }
        var restored: [RecordName] = []
        for entry in entries {
            let folder = uncheckedTrash + "/" + entry.name
            for relative in (FileManager.default.subpaths(atPath: folder) ?? []).sorted() {
                let source = folder + "/" + relative
                guard let info = FileIO.lstatInfo(source), (info.st_mode & S_IFMT) == S_IFREG,
                    let name = try? RecordName(validating: RecordName.nfc(relative)),
                    let (digest, _) = try FileDigest.of(path: source)
                else { continue }
                if digest == bases[name]?.digest { continue }
                try putBack(source, as: relative, name: name)
                restored.append(name)
            }
            // What is left is checked: a trash folder like any other (never removed: it may hold a version).
            try moveToTrash(folder, as: entry.name)
        }
        return restored
    }

    /// Moves a checked folder of deleted notes into the trash as `trash/<stamp>` (with a suffix if that is taken),
    /// and removes the unchecked folder once nothing waits there.
    private func moveToTrash(_ folder: String, as stamp: String) throws {
        try FileIO.makeDirectories(trash)
        let final = trash + "/" + stamp
        guard try FolderRename.noReplace(folder, final) || FolderRename.noReplace(folder, final + "-" + FileIO.randomToken())
        else { throw NoteSyncError.posix("rename into the trash", path: folder, errno: EEXIST) }
        rmdir(uncheckedTrash)
    }

    /// Renames `source` to a free conflict-copy name of `name` made on this device (no-replace, so an
    /// existing file is never replaced: a clash picks the next name). Names for which `isTaken` is true (a
    /// record of that name on the server) are passed over too.
    public func keepAsConflictCopy(
        _ name: RecordName, from source: String, date: Date = Date(),
        avoiding isTaken: (RecordName) -> Bool = { _ in false }
    ) throws -> RecordName {
        var attempt = 1
        while true {
            let copyName = try RecordName(
                validating: ConflictCopyName.notesyncConflictName(
                    for: name.string, device: deviceName, date: date, attempt: attempt))
            if isTaken(copyName) && attempt < 100 {
                attempt += 1
                continue
            }
            // The note's folder may be gone (deleted by the user while the version waited in the staging folder).
            try makeParents(of: copyName.string)
            let target = root + "/" + copyName.string
            if try FolderRename.noReplace(source, target) {
                try FileIO.syncDirectory(FileIO.parent(of: target))
                return copyName
            }
            if attempt < 100 {
                attempt += 1
                continue
            }
            throw NoteSyncError.posix("rename to conflict copy", path: target, errno: EEXIST)
        }
    }

    /// Renames the note at `from` to `to` (relative paths), as a rename made on another device: never over a file
    /// (`renameat2(RENAME_NOREPLACE)`, or `link` then `unlink` where the filesystem lacks it), the new name's folders
    /// made, the old name's emptied folders removed. Only a regular file is renamed. With `flush`, both folders are
    /// flushed; otherwise the caller flushes them (``flushRenames(_:)``) before it records the rename.
    public func follow(rename name: RecordName, from: String, to: String, flush: Bool = true) throws {
        let source = root + "/" + from
        let target = root + "/" + to
        if let what = notANote(source) { throw Self.notANoteError(source, what) }
        try makeParents(of: to)
        guard try FolderRename.noReplace(source, target) || Self.changesOnlyCase(source, target, from: from, to: to) else {
            throw NoteSyncError(
                .conflict, path: target,
                "was renamed from \(DisplayName.escape(from)) on another device, but a file has this name here now: "
                    + "left as it is", fix: "sync again: the two are then reconciled as two notes")
        }
        try FaultPoint.hit("apply.followedRename")
        if flush { try flushRenames([from, to]) }
        removeEmptyParents(of: from)
    }

    /// On a notes folder that folds case, a rename changing only case (`b/c.md` to `b/C.md`, made on a device that
    /// tells case apart) finds the note itself at the new name, and a no-replace rename refuses: there, when
    /// `target` is `source` (the same file, with no other link), a plain rename changes the case and replaces
    /// nothing. The file may have the new spelling already (made here in that case): then nothing is to be done.
    private static func changesOnlyCase(_ source: String, _ target: String, from: String, to: String) -> Bool {
        guard let old = RecordName(trusted: from), let new = RecordName(trusted: to),
            CasePairs.fold(old) == CasePairs.fold(new), let found = FileIO.lstatInfo(source), let there = FileIO.lstatInfo(target),
            found.st_ino == there.st_ino, found.st_dev == there.st_dev, found.st_nlink == 1, (found.st_mode & S_IFMT) == S_IFREG
        else { return false }
        return from == to || rename(source, target) == 0
    }

    /// Makes renames durable: the folders of `paths` (relative) flushed, one `syncfs` when there are many (a folder
    /// renamed elsewhere). A folder emptied and removed since is flushed through the nearest one still there.
    public func flushRenames(_ paths: some Collection<String>) throws {
        var folders = Set<String>()
        for path in paths {
            var folder = FileIO.parent(of: root + "/" + path)
            while folder.count > root.count && FileIO.lstatInfo(folder) == nil { folder = FileIO.parent(of: folder) }
            folders.insert(folder)
        }
        if folders.count > 16 {
            // One syncfs per filesystem the folders are on (a folder of notes may be another mount).
            var byDevice: [UInt64: String] = [:]
            for folder in folders.sorted() {
                if let info = FileIO.lstatInfo(folder), byDevice[UInt64(info.st_dev)] == nil { byDevice[UInt64(info.st_dev)] = folder }
            }
            for folder in byDevice.values.sorted() { try FileIO.syncFilesystem(folder) }
        } else {
            for folder in folders.sorted() { try FileIO.syncDirectory(folder) }
        }
    }

    /// What is at `path` when it is something other than a regular file ("a folder", "a symbolic link" …);
    /// `nil` for a regular file or nothing.
    private func notANote(_ path: String) -> String? {
        guard let info = FileIO.lstatInfo(path) else { return nil }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return Self.folder
        case S_IFLNK: return "a symbolic link"
        default: return "a special file (FIFO, socket or device)"
        }
    }

    private static let folder = "a folder"

    /// Refuses to replace anything but a note: a server version never takes the place of a folder, a link or
    /// a FIFO that has the note's name here (replacing would hide the folder or delete the link).
    private func requireNoteOrNothing(_ path: String) throws {
        if let what = notANote(path) { throw Self.notANoteError(path, what) }
    }

    private static func notANoteError(_ path: String, _ what: String) -> NoteSyncError {
        NoteSyncError(
            .conflict, path: path, "is \(what), not a note: left alone, the server's version of the note is not written here",
            fix: "rename or remove it; the note then syncs into its place")
    }

    /// Creates the folders above a note, refusing to go through a symlink (confinement to the notes folder).
    func makeParents(of relative: String) throws {
        var current = root
        for component in RecordName.components(of: relative).dropLast() {
            current += "/" + component
            if let info = FileIO.lstatInfo(current) {
                guard (info.st_mode & S_IFMT) == S_IFDIR else {
                    throw NoteSyncError(
                        .conflict, path: current, "is not a folder (a file or link has the name a folder of notes needs)",
                        fix: "rename it; notesync never writes through links")
                }
            } else {
                try FileIO.makeDirectory(current)
            }
        }
    }

    /// Removes folders left empty by a delete, up to the notes folder.
    func removeEmptyParents(of relative: String) {
        var components = RecordName.components(of: relative).dropLast()
        while !components.isEmpty {
            if rmdir(root + "/" + components.joined(separator: "/")) != 0 { return }
            components = components.dropLast()
        }
    }

    private func finish(_ path: String, _ directory: String, _ written: StatFingerprint) throws -> Outcome {
        .written(try fingerprint(path, directory, written))
    }

    private func fingerprint(_ path: String, _ directory: String, _ written: StatFingerprint) throws -> StatFingerprint {
        try FileIO.syncDirectory(directory)
        return try Self.publishedFingerprint(path, written: written)
    }

    /// The fingerprint of the file just written at a temp name (inode, size, the record's mtime), before it is
    /// published: what ``publishedFingerprint(_:written:)`` checks the published note against.
    private func writtenFingerprint(_ temp: String) throws -> StatFingerprint {
        guard let info = FileIO.lstatInfo(temp) else {
            throw NoteSyncError(.io, path: temp, "vanished right after it was written", fix: "sync again")
        }
        return StatFingerprint(info)
    }

    /// The fingerprint to record as the base of a note just published at `path`, taken after publishing (the
    /// rename changes the ctime). The user may save the note between the rename and this `lstat`: then the file
    /// there is no longer the one written (another inode, size or mtime), and its fingerprint must not be recorded
    /// with the written content's digest — the next scan would take the edit for the base and never upload it.
    /// Such a note gets ``StatFingerprint/unknown``, which no file has: the next scan hashes it and sees the edit.
    static func publishedFingerprint(_ path: String, written: StatFingerprint) throws -> StatFingerprint {
        guard let info = FileIO.lstatInfo(path) else {
            throw NoteSyncError(.io, path: path, "vanished right after it was written", fix: "sync again")
        }
        let now = StatFingerprint(info)
        guard (info.st_mode & S_IFMT) == S_IFREG, now.inode == written.inode, now.size == written.size,
            now.mtime == written.mtime
        else { return .unknown }
        return now
    }

    private func setModified(_ path: String, _ modified: Int64) throws {
        let seconds = modified / 1_000_000_000
        let nanos = modified % 1_000_000_000
        var times = [timespec(tv_sec: Int(seconds), tv_nsec: Int(nanos)), timespec(tv_sec: Int(seconds), tv_nsec: Int(nanos))]
        if utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) != 0 {
            throw NoteSyncError.posix("utimensat", path: path, errno: errno)
        }
    }
}
