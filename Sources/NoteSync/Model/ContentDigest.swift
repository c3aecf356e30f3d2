import Crypto
import Foundation

/// A SHA-256 content digest, as 64 lowercase hex characters: the one digest function of notesync.
///
/// Assets on the server are named by it, and it alone decides whether a note changed (never mtime).
public struct ContentDigest: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    public let hex: String

    /// Validates a digest read from outside (a server entry or a file name).
    public init?(hex: String) {
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            return nil
        }
        self.hex = hex
    }

    public init(of data: Data) {
        self.hex = Self.hexString(SHA256.hash(data: data))
    }

    public init(of bytes: UnsafeRawBufferPointer) {
        self.hex = Self.hexString(SHA256.hash(data: bytes))
    }

    init(_ digest: SHA256.Digest) {
        self.hex = Self.hexString(digest)
    }

    /// The digest of the empty text: the ancestor of two notes created on both sides.
    public static let empty = ContentDigest(of: Data())

    public var description: String { hex }
    public static func < (a: ContentDigest, b: ContentDigest) -> Bool { a.hex < b.hex }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let digest = ContentDigest(hex: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad sha256"))
        }
        self = digest
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }

    private static let digits = Array("0123456789abcdef".utf8)

    private static func hexString(_ digest: SHA256.Digest) -> String {
        var bytes = [UInt8]()
        bytes.reserveCapacity(64)
        for byte in digest {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Streaming SHA-256 of a file, read in chunks so a large note does not sit in memory twice.
public enum FileDigest {
    public static func of(path: String) throws -> (digest: ContentDigest, size: Int64)? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw NoteSyncError.posix("open", path: path, errno: errno)
        }
        defer { close(fd) }
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
