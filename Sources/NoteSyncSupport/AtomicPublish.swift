import CSyscalls
import Foundation

/// The atomic no-replace publish primitive a server directory uses.
public enum PublishPrimitive: String, Sendable, CaseIterable, Codable {
    /// `renameat2(RENAME_NOREPLACE)`: local filesystems (ext4, xfs, btrfs, tmpfs).
    case rename
    /// `link(2)` then `unlink(2)` of the temp: NFS, sshfs and FUSE reject the rename flag with `EINVAL`, and
    /// CIFS/SMB accepts it but sends `ReplaceIfExists=1` to the server, so only `link` is atomic there.
    case link
}

/// The one atomic-publish helper: makes a fully written, fsynced temp file visible under its final name,
/// only if that name is free. Never check-then-rename (Foundation's `moveItem` does that).
public enum AtomicPublish {
    /// What publishing found at the destination.
    public enum Outcome: Sendable, Equatable {
        /// The temp file now has the destination name (and no longer its temp name).
        case published
        /// The destination already existed; the temp file is still there for the caller to remove.
        case exists
    }

    /// Publishes `temp` as `destination` with `primitive`. Throws on any error other than "exists";
    /// the caller decides how to confirm an ambiguous failure (NFS may fail an operation that succeeded).
    public static func publish(_ temp: String, as destination: String, using primitive: PublishPrimitive) throws
        -> Outcome
    {
        switch primitive {
        case .rename:
            if ns_rename_noreplace(AT_FDCWD, temp, AT_FDCWD, destination) == 0 {
                StopPoint.pass("server.published")
                return .published
            }
            let code = errno
            if code == EEXIST { return .exists }
            if isUnsupported(renameErrno: code) {
                throw NoteSyncError(
                    .unsupportedFilesystem, path: destination,
                    "the filesystem does not support renameat2(RENAME_NOREPLACE)",
                    fix: "open the server again so that it probes for the link primitive",
                    errno: code)
            }
            throw NoteSyncError.posix("renameat2(RENAME_NOREPLACE)", path: destination, errno: code)
        case .link:
            if Glibc.link(temp, destination) == 0 {
                unlink(temp)
                StopPoint.pass("server.published")
                return .published
            }
            let code = errno
            if code == EEXIST { return .exists }
            throw NoteSyncError.posix("link", path: destination, errno: code)
        }
    }

    package static func isUnsupported(renameErrno code: Int32) -> Bool {
        code == EINVAL || code == ENOSYS || code == EOPNOTSUPP
    }
}
