import Foundation

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

    public var description: String { DisplayName.escape(string) }
    public static func < (a: RecordName, b: RecordName) -> Bool { a.string < b.string }

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

    /// The components of the name, e.g. `["work", "plan.md"]`.
    public var components: [Substring] { string.split(separator: "/", omittingEmptySubsequences: false) }

    /// Why a name was refused.
    public struct NameError: Error, Sendable, Equatable, CustomStringConvertible {
        public let name: String
        public let reason: String
        public var description: String { "record name \"\(DisplayName.escape(name))\" refused: \(reason)" }
    }

    /// The one path validator: every rule a name must pass before it is used as a path.
    public static func validate(_ name: String) throws(NameError) {
        func refuse(_ reason: String) -> NameError { NameError(name: name, reason: reason) }
        if name.isEmpty { throw refuse("empty name") }
        if name.utf8.count > maxNameBytes { throw refuse("longer than \(maxNameBytes) bytes") }
        if name.hasPrefix("/") { throw refuse("absolute path") }
        for scalar in name.unicodeScalars {
            switch scalar.value {
            case 0x00: throw refuse("contains NUL")
            case 0x01...0x1F, 0x7F...0x9F: throw refuse("contains a control character")
            case 0xFFFD: throw refuse("contains U+FFFD (the name was not valid UTF-8)")
            default: break
            }
        }
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        for part in parts {
            if part.isEmpty { throw refuse("empty path component") }
            if part == "." || part == ".." { throw refuse("contains a \"\(part)\" component") }
            if part.utf8.count > maxComponentBytes {
                throw refuse("a component is longer than \(maxComponentBytes) bytes")
            }
            if IgnoreRules.isAgentOwned(String(part)) { throw refuse("names notesync's own state or temp files") }
        }
        // Swift's `==` on String ignores normalization: compare the bytes.
        if !name.precomposedStringWithCanonicalMapping.utf8.elementsEqual(name.utf8) {
            throw refuse("not in Unicode NFC")
        }
    }
}
