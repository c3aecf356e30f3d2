import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// A validated record name: a note's path relative to the notes folder, `/`-separated, Unicode NFC.
///
/// Names from the server are untrusted: only a `RecordName` may ever be turned into a path, and making one
/// checks everything that could move a write outside the notes folder or into the local state.
public struct RecordName: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    public let string: String

    /// The longest component in bytes (NAME_MAX on ext4, xfs, btrfs, tmpfs).
    public static let maxComponentBytes = 255
    /// The longest whole name in bytes (PATH_MAX less room for the notes folder's own path).
    public static let maxNameBytes = 3072

    public init(validating string: String) throws(NameError) {
        try Self.validate(string)
        self.string = string
    }

    /// A name this process validated before it stored it (the local state): checked only for being non-empty,
    /// so loading ten thousand bases does not validate ten thousand names again. Never for server data.
    package init?(trusted string: String) {
        guard !string.isEmpty else { return nil }
        self.string = string
    }

    public var description: String { DisplayName.escape(string) }

    // Spelled out, and inlinable, so that the tables of other modules (``RecordTable``) compare and hash names
    // without a call: the same as the synthesized ones, `String`'s canonical equivalence.
    @inlinable public static func == (a: RecordName, b: RecordName) -> Bool { a.string == b.string }
    @inlinable public func hash(into hasher: inout Hasher) { hasher.combine(string) }
    /// Byte order of the UTF-8 names: fast, and the same on every device.
    public static func < (a: RecordName, b: RecordName) -> Bool { UTF8Bytes.precedes(a.string, b.string) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do { try self.init(validating: text) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(string)
    }

    /// `text` in Unicode NFC; ASCII (the common case) is returned as it is.
    ///
    /// The standard library's NFC (`_nfcCodeUnits`), the form `String ==` and so `RecordName ==` compare, not
    /// Foundation's: on Linux its tables are older and leave apart what Swift composes (U+16D67 U+16D67 and
    /// U+16D68), so two names it calls NFC could be one record.
    public static func nfc(_ text: String) -> String {
        UTF8Bytes.isASCII(text) ? text : String(decoding: text._nfcCodeUnits, as: UTF8.self)
    }

    /// Whether another string could have `text`'s NFC (``nfc(_:)``): any name with a non-ASCII character, and an
    /// ASCII one only through the three scalars whose NFC is ASCII (U+212A KELVIN SIGN is `K`, U+1FEF GREEK VARIA
    /// is a backtick, U+037E GREEK QUESTION MARK is `;`).
    package static func mayHaveUnicodeTwin(_ text: String) -> Bool {
        guard UTF8Bytes.isASCII(text) else { return true }
        return text.utf8.contains { $0 == UInt8(ascii: "K") || $0 == UInt8(ascii: "`") || $0 == UInt8(ascii: ";") }
    }

    /// Whether `text` is in the standard library's NFC (see `nfc(_:)`), compared byte by byte without copying.
    static func isNFC(_ text: String) -> Bool {
        var bytes = text.utf8.makeIterator()
        var same = true
        text._withNFCCodeUnits { unit in
            if same, bytes.next() != unit { same = false }
        }
        return same && bytes.next() == nil
    }

    /// The components of the name, e.g. `["work", "plan.md"]`.
    public var components: [Substring] { Self.components(of: string) }

    /// The components of a `/`-separated relative path, split at every `/` as the kernel splits it.
    ///
    /// Not `String.split(separator: "/")`: that compares Characters, and a `/` followed by a combining mark is
    /// one Character, so `a/\u{301}b` would be one component where the kernel walks through the folder `a`.
    public static func components(of path: String) -> [Substring] {
        path.unicodeScalars.split(separator: "/", omittingEmptySubsequences: false).map(Substring.init)
    }

    /// Why a name was refused.
    public struct NameError: Error, Sendable, Equatable, CustomStringConvertible {
        public let name: String
        public let reason: String
        public var description: String { "record name \"\(DisplayName.escape(name))\" refused: \(reason)" }
    }

    /// The one path validator: every rule a name must pass before it is used as a path.
    public static func validate(_ name: String) throws(NameError) {
        func refuse(_ reason: String) -> NameError { NameError(name: name, reason: reason) }
        var name = name
        // One pass over the bytes: this runs for every note of every scan, so no per-character String work.
        let (isASCII, problem): (Bool, String?) = name.withUTF8 { bytes in
            if bytes.isEmpty { return (true, "empty name") }
            if bytes.count > maxNameBytes { return (true, "longer than \(maxNameBytes) bytes") }
            if bytes[0] == 0x2F { return (true, "absolute path") }
            var ascii = true
            var componentStart = 0
            var index = 0
            while index <= bytes.count {
                let byte: UInt8 = index < bytes.count ? bytes[index] : 0x2F
                switch byte {
                case 0x00: return (ascii, "contains NUL")
                case 0x01...0x1F, 0x7F: return (ascii, "contains a control character")
                case 0xC2 where index + 1 < bytes.count && (0x80...0x9F).contains(bytes[index + 1]):
                    return (ascii, "contains a control character")
                case 0xEF where index + 2 < bytes.count && bytes[index + 1] == 0xBF && bytes[index + 2] == 0xBD:
                    return (ascii, "contains U+FFFD (the name was not valid UTF-8)")
                case 0x2F:
                    let length = index - componentStart
                    if length == 0 { return (ascii, "empty path component") }
                    if length == 1 && bytes[componentStart] == 0x2E { return (ascii, "contains a \".\" component") }
                    if length == 2 && bytes[componentStart] == 0x2E && bytes[componentStart + 1] == 0x2E {
                        return (ascii, "contains a \"..\" component")
                    }
                    if length > maxComponentBytes { return (ascii, "a component is longer than \(maxComponentBytes) bytes") }
                    // A component notesync's own could fold to starts with `.`, `n`/`N` or a non-ASCII scalar.
                    let lead = bytes[componentStart]
                    if lead == 0x2E || lead == 0x6E || lead == 0x4E || lead >= 0x80,
                        ReservedNames.isAgentOwned(
                            String(decoding: UnsafeBufferPointer(rebasing: bytes[componentStart..<index]), as: UTF8.self))
                    {
                        return (ascii, "names notesync's own state or temp files")
                    }
                    componentStart = index + 1
                default:
                    if byte >= 0x80 { ascii = false }
                }
                index += 1
            }
            return (ascii, nil)
        }
        if let problem { throw refuse(problem) }
        // ASCII is always NFC. Otherwise compare bytes: Swift's `==` on String ignores normalization.
        if !isASCII && !isNFC(name) {
            throw refuse("not in Unicode NFC")
        }
    }

}
