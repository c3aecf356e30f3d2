import Foundation

/// The cheap identity of a file's state: if it is unchanged since the last hash, the content is too.
///
/// Size, mtime and ctime in nanoseconds, and inode. A `touch` changes it (so the file is hashed again) but the
/// digest, not the fingerprint, decides whether the note changed.
public struct StatFingerprint: Hashable, Sendable, Codable {
    public var size: Int64
    public var mtime: Int64
    public var ctime: Int64
    public var inode: UInt64

    public init(size: Int64, mtime: Int64, ctime: Int64, inode: UInt64) {
        self.size = size
        self.mtime = mtime
        self.ctime = ctime
        self.inode = inode
    }

    /// As the local state stores it: `size:mtime:ctime:inode`.
    public var stored: String { "\(size):\(mtime):\(ctime):\(inode)" }

    public init?(stored: String) {
        let parts = stored.split(separator: ":")
        guard parts.count == 4, let size = Int64(parts[0]), let mtime = Int64(parts[1]), let ctime = Int64(parts[2]),
            let inode = UInt64(parts[3])
        else { return nil }
        self.init(size: size, mtime: mtime, ctime: ctime, inode: inode)
    }

    /// A fingerprint no file has (size -1): recorded for a note whose state is not known to match its digest,
    /// so that the next scan hashes it.
    public static let unknown = StatFingerprint(size: -1, mtime: 0, ctime: 0, inode: 0)

    public init(_ info: stat) {
        self.init(
            size: Int64(info.st_size),
            mtime: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
            ctime: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec),
            inode: UInt64(info.st_ino))
    }
}
