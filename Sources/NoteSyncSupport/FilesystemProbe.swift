import CSyscalls
import Foundation

/// What kind of filesystem holds a directory, and which publish primitive is atomic on it.
public struct FilesystemKind: Sendable, Hashable, CustomStringConvertible {
    /// statfs(2) `f_type`.
    public let magic: Int64

    public init(magic: Int64) { self.magic = magic }

    /// Reads `f_type` through the C shim (Glibc does not expose statfs to Swift).
    public init(path: String) throws {
        errno = 0
        let magic = ns_statfs_type(path)
        if magic == 0 && errno != 0 { throw NoteSyncError.posix("statfs", path: path, errno: errno) }
        self.magic = magic
    }

    public var name: String {
        switch UInt32(truncatingIfNeeded: magic) {
        case 0xEF53: return "ext4"
        case 0x5846_5342: return "xfs"
        case 0x9123_683E: return "btrfs"
        case 0x0102_1994: return "tmpfs"
        case 0x794C_7630: return "overlayfs"
        case 0x6969: return "nfs"
        case 0xFF53_4D42: return "cifs"
        case 0xFE53_4D42: return "smb2"
        case 0x517B: return "smb"
        case 0x6573_5546: return "fuse"
        case 0x2FC1_2FC1: return "zfs"
        case 0x4D44: return "vfat"
        case 0x5346_544E: return "ntfs"
        default: return String(format: "0x%llx", magic)
        }
    }

    /// A network filesystem: other devices' writes raise no inotify events here, so the agent polls.
    public var isNetwork: Bool { ["nfs", "cifs", "smb2", "smb", "fuse"].contains(name) }

    /// SMB's rename flag is only a client-side check: it must never be trusted for atomicity.
    public var renameNoReplaceIsAtomic: Bool { !["cifs", "smb2", "smb", "nfs", "fuse"].contains(name) }

    public var description: String { name }
}

/// Chooses the publish primitive for a server directory: from the mount type, then confirmed by a probe.
public enum FilesystemProbe {
    /// A chosen primitive and why it was chosen, in words for the debug log.
    public struct Choice: Sendable, Hashable {
        public let primitive: PublishPrimitive
        public let reason: String
    }

    /// Probes in `directory` (the zone's `tmp/`): tries a no-replace rename of a fresh file and, where that
    /// is refused or not atomic at the server, a hard link. Leaves no file behind.
    public static func choosePrimitive(in directory: String, device: String) throws -> PublishPrimitive {
        try probe(in: directory, device: device).primitive
    }

    /// Like ``choosePrimitive(in:device:)``, and says why: the filesystem type and what the probe found.
    public static func probe(in directory: String, device: String) throws -> Choice {
        let kind = try FilesystemKind(path: directory)
        let a = directory + "/" + device + "-probe-" + FileIO.randomToken()
        let b = a + ".b"
        try FileIO.createAndSync(a, Data("probe".utf8), sync: false)
        defer {
            unlink(a)
            unlink(b)
        }
        let renameRefused: String
        if kind.renameNoReplaceIsAtomic {
            if ns_rename_noreplace(AT_FDCWD, a, AT_FDCWD, b) == 0 {
                StopPoint.pass("server.published")
                return Choice(
                    primitive: .rename,
                    reason: "\(kind.name): renameat2(RENAME_NOREPLACE) worked in the probe and is atomic on a local filesystem")
            }
            let code = errno
            if !AtomicPublish.isUnsupported(renameErrno: code) {
                throw NoteSyncError.posix("renameat2 probe", path: directory, errno: code)
            }
            renameRefused = "renameat2(RENAME_NOREPLACE) failed in the probe (\(String(cString: strerror(code))))"
        } else {
            renameRefused = "renameat2(RENAME_NOREPLACE) is not tried: \(notAtomicBecause(kind))"
        }
        if Glibc.link(a, b) == 0 {
            StopPoint.pass("server.published")
            return Choice(primitive: .link, reason: "\(kind.name): \(renameRefused); link(2) worked in the probe")
        }
        let code = errno
        throw NoteSyncError(
            .unsupportedFilesystem, path: directory,
            "the \(kind.name) filesystem supports neither renameat2(RENAME_NOREPLACE) nor link(2), "
                + "so commits cannot be made atomic",
            fix: "put the server folder on a filesystem with hard links (ext4, xfs, NFS, SMB2, sshfs)",
            errno: code)
    }

    /// Why the rename flag cannot be trusted on a network filesystem.
    private static func notAtomicBecause(_ kind: FilesystemKind) -> String {
        switch kind.name {
        case "nfs": return "NFS has no no-replace rename at the server"
        case "fuse": return "FUSE filesystems such as sshfs refuse the flag (EINVAL) or cannot make it atomic at the server"
        default: return "the SMB client checks the flag only on this machine and sends ReplaceIfExists=1 to the server"
        }
    }
}
