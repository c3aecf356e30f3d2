import Foundation
import NoteSyncSupport

/// The recovery key of an encrypted server: 32 random bytes that open the keys file without the passphrase.
///
/// Printed once, at `server init --encrypt`, as 13 groups of 4 characters of RFC 4648 base32 (`A-Z2-7`, 52
/// characters, no padding) joined with `-`. It wraps the vault key directly, without scrypt: it is already random.
public struct RecoveryKey: Sendable, Equatable {
    /// The 32 bytes that wrap the vault key.
    public let bytes: Data

    package static let byteCount = 32
    static let characterCount = 52
    static let groupSize = 4
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    /// A new recovery key from the system's secure generator.
    public static func generate() -> RecoveryKey {
        RecoveryKey(bytes: Vault.randomBytes(byteCount))
    }

    package init(bytes: Data) {
        precondition(bytes.count == Self.byteCount, "a recovery key has 32 bytes")
        self.bytes = bytes
    }

    /// The key a person typed or pasted: case, spaces, tabs, line breaks and dashes are ignored; any other character,
    /// a length other than 52, or trailing bits that ``text`` never writes make it nil.
    public init?(text: String) {
        var values: [UInt8] = []
        values.reserveCapacity(Self.characterCount)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "A"..."Z": values.append(UInt8(scalar.value - 65))
            case "a"..."z": values.append(UInt8(scalar.value - 97))
            case "2"..."7": values.append(UInt8(scalar.value - 50 + 26))
            case " ", "\t", "\n", "\r", "-": continue
            default: return nil
            }
            guard values.count <= Self.characterCount else { return nil }
        }
        guard values.count == Self.characterCount else { return nil }
        var bytes = Data(capacity: Self.byteCount)
        var buffer: UInt32 = 0
        var bits = 0
        for value in values {
            buffer = buffer << 5 | UInt32(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
                buffer &= (1 << UInt32(bits)) - 1
            }
        }
        // 52 characters carry 260 bits: the 4 after the 256th are zero in a key ``text`` wrote.
        guard bytes.count == Self.byteCount, buffer == 0 else { return nil }
        self.bytes = bytes
    }

    /// The key as printed: 13 groups of 4 base32 characters joined with `-`.
    public var text: String {
        var characters: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        func emit(_ value: UInt32) {
            if !characters.isEmpty, characters.count % (Self.groupSize + 1) == Self.groupSize {
                characters.append(UInt8(ascii: "-"))
            }
            characters.append(Self.alphabet[Int(value & 31)])
        }
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                emit(buffer >> UInt32(bits))
            }
            buffer &= (1 << UInt32(bits)) - 1
        }
        if bits > 0 {
            emit(buffer << UInt32(5 - bits))
        }
        return String(decoding: characters, as: UTF8.self)
    }
}
