import Crypto
import Foundation

/// A SHA-256 content digest: the one digest function of notesync. Written as 64 lowercase hex characters.
///
/// Assets on the server are named by it, and it alone decides whether a note changed (never mtime). Held as four
/// words, not as its hex text: a sync keeps one for every note's base, head and scan (three per note), and a
/// string would be a heap allocation each.
public struct ContentDigest: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    /// The 32 bytes as four big-endian words: comparing the tuple in order compares the bytes (and the hex).
    @usableFromInline package let words: (UInt64, UInt64, UInt64, UInt64)

    /// Validates a digest read from outside (a server entry, a file name, the local state).
    public init?(hex: String) {
        var hex = hex
        guard let words = hex.withUTF8({ Self.parse($0) }) else { return nil }
        self.words = words
    }

    /// A digest from its hex digits' UTF-8 bytes (as SQLite hands them over, without making a string).
    @inlinable package init?(hexBytes: UnsafeBufferPointer<UInt8>) {
        guard let words = Self.parse(hexBytes) else { return nil }
        self.words = words
    }

    /// The digest written as `hex`: exactly 64 lowercase hex digits.
    @inlinable package static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64, UInt64, UInt64)? {
        guard bytes.count == 64 else { return nil }
        return hexValues.withUnsafeBufferPointer { values in
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            var invalid: UInt8 = 0
            func word(_ start: Int) -> UInt64 {
                var word: UInt64 = 0
                for index in start..<start + 16 {
                    let value = values[Int(bytes[index])]
                    invalid |= value
                    word = word << 4 | UInt64(value & 0x0F)
                }
                return word
            }
            words = (word(0), word(16), word(32), word(48))
            return invalid & 0x80 == 0 ? words : nil
        }
    }

    /// Each byte's value as a lowercase hex digit, or 0x80 for a byte that is not one.
    @usableFromInline static let hexValues: [UInt8] = (0...255).map { byte in
        switch byte {
        case 48...57: UInt8(byte - 48)
        case 97...102: UInt8(byte - 87)
        default: 0x80
        }
    }

    public init(of data: Data) {
        self.init(SHA256.hash(data: data))
    }

    public init(of bytes: UnsafeRawBufferPointer) {
        self.init(SHA256.hash(data: bytes))
    }

    package init(_ digest: SHA256.Digest) {
        words = digest.withUnsafeBytes(Self.words)
    }

    /// An HMAC-SHA256 code taken as a digest: the keyed name of an encrypted server's asset (``Vault/assetName(_:)``).
    package init(_ code: HashedAuthenticationCode<SHA256>) {
        words = code.withUnsafeBytes(Self.words)
    }

    /// A digest from its 32 bytes (a pack's index holds names so).
    package init(rawBytes raw: UnsafeRawBufferPointer) {
        precondition(raw.count == 32)
        words = Self.words(raw)
    }

    /// The four big-endian words of 32 bytes.
    private static func words(_ raw: UnsafeRawBufferPointer) -> (UInt64, UInt64, UInt64, UInt64) {
        func word(_ start: Int) -> UInt64 { raw[start..<start + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        return (word(0), word(8), word(16), word(24))
    }

    /// The 32 bytes, as SHA-256 produced them.
    package var bytes: Data {
        var data = Data(capacity: 32)
        for word in [words.0, words.1, words.2, words.3] {
            withUnsafeBytes(of: word.bigEndian) { data.append(contentsOf: $0) }
        }
        return data
    }

    /// The first four bytes, never 0 (a first four bytes of 0 is taken as 1): the link a snapshot keeps of each
    /// compacted entry (``Snapshot/links``), where 0 means "not known".
    public var link: UInt32 { max(1, UInt32(truncatingIfNeeded: words.0 >> 32)) }

    /// The digest of the empty text: the ancestor of two notes created on both sides.
    public static let empty = ContentDigest(of: Data())

    /// The 64 lowercase hex digits: an asset's file name, and the digest in entries and the local state.
    public var hex: String {
        withHex { String(decoding: $0, as: UTF8.self) }
    }

    public var description: String { hex }

    /// The 64 hex digits in a buffer on the stack, for writing them out without making a string.
    package func withHex<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { buffer in
            func write(_ word: UInt64, at start: Int) {
                for nibble in 0..<16 {
                    buffer[start + nibble] = Self.digits[Int(truncatingIfNeeded: word >> UInt64(60 - 4 * nibble)) & 0xF]
                }
            }
            write(words.0, at: 0)
            write(words.1, at: 16)
            write(words.2, at: 32)
            write(words.3, at: 48)
            return try body(UnsafeBufferPointer(buffer))
        }
    }

    // Inlinable: the local state, the scanner and the reconciler (other modules) compare digests for every note.
    @inlinable public static func == (a: ContentDigest, b: ContentDigest) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    @inlinable public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    public static func < (a: ContentDigest, b: ContentDigest) -> Bool { a.words < b.words }

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

    package static let digits: [UInt8] = Array("0123456789abcdef".utf8)
}
