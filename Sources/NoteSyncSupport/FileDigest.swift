import Crypto
import Foundation

/// Streaming SHA-256 of a file, read in chunks so a large note does not sit in memory twice.
public enum FileDigest {
    /// The digest and size of a regular file and the fingerprint it had while it was read (``FileIO/stable(_:_:_:)``);
    /// `nil` when it does not exist.
    public static func stable(path: String) throws -> (digest: ContentDigest, size: Int64, fingerprint: StatFingerprint)? {
        guard let fd = try FileIO.openForReading(path) else { return nil }
        defer { close(fd) }
        let ((digest, size), fingerprint) = try FileIO.stable(fd, path) { _ in
            let (digest, size) = try of(fd: fd, path: path)
            return ((digest, size), Int(size))
        }
        return (digest, size, fingerprint)
    }

    public static func of(path: String) throws -> (digest: ContentDigest, size: Int64)? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw NoteSyncError.posix("open", path: path, errno: errno)
        }
        defer { close(fd) }
        return try of(fd: fd, path: path)
    }

    package static func of(fd: Int32, path: String) throws -> (digest: ContentDigest, size: Int64) {
        var hasher = SHA256()
        var size: Int64 = 0
        let chunk = 1 << 16
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let got = Glibc.read(fd, buffer.baseAddress, chunk)
            if got < 0 {
                if errno == EINTR { continue }
                throw NoteSyncError.posix("read", path: path, errno: errno)
            }
            if got == 0 { break }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            size += Int64(got)
        }
        return (ContentDigest(hasher.finalize()), size)
    }
}
