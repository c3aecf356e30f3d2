import CSyscalls
import Foundation

/// The one way a file is put at a name in the notes folder (notes, conflict copies, renames, folders moved into
/// the trash): the strongest step the filesystem under the name offers.
///
/// `renameat2(RENAME_NOREPLACE)`; where the filesystem refuses the flag (FUSE, NFS), `link(2)` then `unlink(2)`;
/// where it has neither (exFAT, vfat: EINVAL and EPERM), an `lstat` right before a plain `rename(2)`, so that the
/// file still arrives: a file created at the name between the two is replaced (``FolderGuarantees`` says so).
/// Never a copy: what is renamed keeps its inode, so a write made meanwhile through an open descriptor lands in it.
public enum FolderRename {
    /// Steps a test takes away from every filesystem, for the current task (and the tasks it creates): they then fail
    /// as exFAT fails them (EINVAL for the rename flags, EPERM for `link`).
    public struct Lacking: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let exchange = Lacking(rawValue: 1)
        public static let noReplace = Lacking(rawValue: 2)
        public static let links = Lacking(rawValue: 4)
        /// What exFAT and vfat lack.
        public static let exfat: Lacking = [.exchange, .noReplace, .links]
    }

    @TaskLocal package static var lacking: Lacking = []

    /// Runs `body` as on a filesystem without `lacking` (a test hook; production never calls it).
    public static func without<R>(_ lacking: Lacking, _ body: () throws -> R) rethrows -> R {
        try $lacking.withValue(lacking, operation: body)
    }

    /// What the filesystem holding `target` lacks for a test: the current task's (``without(_:_:)``) and its folder's
    /// (``SimulatedFolders``); empty in production.
    private static func lacking(at target: String) -> Lacking {
        lacking.union(SimulatedFolders.personality(at: target)?.lacking ?? [])
    }

    /// `renameat2(RENAME_NOREPLACE)`: 0, or -1 with errno set.
    package static func renameNoReplace(_ source: String, _ target: String) -> Int32 {
        if lacking(at: target).contains(.noReplace) { return refuse(EINVAL) }
        return ns_rename_noreplace(AT_FDCWD, source, AT_FDCWD, target)
    }

    /// `renameat2(RENAME_EXCHANGE)`: 0, or -1 with errno set.
    package static func renameExchange(_ source: String, _ target: String) -> Int32 {
        if lacking(at: target).contains(.exchange) { return refuse(EINVAL) }
        return ns_rename_exchange(AT_FDCWD, source, AT_FDCWD, target)
    }

    /// `link(2)`: 0, or -1 with errno set.
    package static func hardLink(_ source: String, _ target: String) -> Int32 {
        if lacking(at: target).contains(.links) { return refuse(EPERM) }
        return Glibc.link(source, target)
    }

    private static func refuse(_ code: Int32) -> Int32 {
        errno = code
        return -1
    }

    /// Puts `source` at `target` only if nothing has that name; false when something has (`source` stays).
    package static func noReplace(_ source: String, _ target: String) throws -> Bool {
        if renameNoReplace(source, target) == 0 { return true }
        var code = errno
        if code == EEXIST { return false }
        guard AtomicPublish.isUnsupported(renameErrno: code) else {
            throw NoteSyncError.posix("rename", path: target, errno: code)
        }
        if hardLink(source, target) == 0 {
            unlink(source)
            return true
        }
        code = errno
        if code == EEXIST { return false }
        // A folder (never linked) or a filesystem without hard links.
        guard linkIsUnsupported(code) || isFolder(source) else { throw NoteSyncError.posix("link", path: target, errno: code) }
        if FileIO.lstatInfo(target) != nil { return false }
        guard rename(source, target) == 0 else { throw NoteSyncError.posix("rename", path: target, errno: errno) }
        return true
    }

    /// Renames `source` over the regular file at `target` only if that file still has the fingerprint `expected`
    /// (checked right before the rename); false when it changed or is gone (`source` stays). For a folder without
    /// `RENAME_EXCHANGE`, `RENAME_NOREPLACE` or hard links: the old file stays in place until the new one is there.
    package static func replace(_ source: String, over target: String, ifStill expected: StatFingerprint) throws -> Bool {
        guard let info = FileIO.lstatInfo(target), (info.st_mode & S_IFMT) == S_IFREG, StatFingerprint(info) == expected
        else { return false }
        guard rename(source, target) == 0 else { throw NoteSyncError.posix("rename", path: target, errno: errno) }
        return true
    }

    /// Whether the filesystem holding the file `file` can put a file at a taken name's place without replacing
    /// one (no-replace rename or hard link), asked with `file` itself: renamed to a free name and back, or linked
    /// and unlinked. The folder's own answer, whatever is mounted where. A process killed between the two renames
    /// leaves `file` at its name with ``probeSuffix``: staging recovery settles it as `file` (``withoutProbeSuffix(_:)``).
    package static func placesWithoutReplacing(probe file: String) -> Bool {
        let probe = file + probeSuffix
        if renameNoReplace(file, probe) == 0 {
            if renameNoReplace(probe, file) != 0 { rename(probe, file) }
            return true
        }
        if hardLink(file, probe) == 0 {
            unlink(probe)
            return true
        }
        return false
    }

    /// What ``placesWithoutReplacing(probe:)`` appends to the temp it probes with.
    static let probeSuffix = "-probe"

    /// The path a temp had before ``placesWithoutReplacing(probe:)`` renamed it (`path` less ``probeSuffix``).
    package static func withoutProbeSuffix(_ path: String) -> String {
        path.hasSuffix(probeSuffix) ? String(path.dropLast(probeSuffix.count)) : path
    }

    /// `link(2)` errors that mean the filesystem has no hard links (exFAT and vfat: EPERM).
    static func linkIsUnsupported(_ code: Int32) -> Bool {
        code == EPERM || code == EOPNOTSUPP || code == ENOSYS || code == EINVAL
    }

    private static func isFolder(_ path: String) -> Bool {
        (FileIO.lstatInfo(path).map { $0.st_mode & S_IFMT } ?? 0) == S_IFDIR
    }
}
