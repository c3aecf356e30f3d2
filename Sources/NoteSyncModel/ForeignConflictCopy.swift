import NoteSyncCrypto
import NoteSyncSupport

/// A conflict copy that another sync tool made in the notes folder, and the note it copies.
///
/// Notes folders often sit inside Dropbox, Syncthing or Nextcloud folders. Their conflict copies
/// are notes like any other and sync (they are not ignored), but they are reported so the user
/// resolves them (docs/reconciliation.md, "Conflict copies"). Names follow each tool's code:
/// - Syncthing: `<stem>.sync-conflict-YYYYMMDD-HHMMSS-<device><.ext>` (older: no `-<device>`);
/// - Dropbox: `<stem> (<who>'s conflicted copy YYYY-MM-DD[ (n)])<.ext>`, and the renames
///   `(Case Conflict[ n])`, `(Unicode Encoding Conflict[ n])`, `(Selective Sync Conflict[ n])`;
/// - Nextcloud/ownCloud: `<stem> (conflicted copy [<user> ]YYYY-MM-DD HHMMSS)<.ext>`,
///   older clients `<stem>_conflict-YYYYMMDD-HHMMSS<.ext>`.
/// Only the English Dropbox wording is known; localized Dropbox names are not recognised.
public struct ForeignConflictCopy: Sendable, Equatable {
    /// The sync tool that made a conflict copy.
    public enum Tool: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
        case syncthing
        case dropbox
        /// Nextcloud or ownCloud desktop clients, which share the naming.
        case nextcloud

        public var description: String {
            switch self {
            case .syncthing: "Syncthing"
            case .dropbox: "Dropbox"
            case .nextcloud: "Nextcloud/ownCloud"
            }
        }
    }

    /// The tool that made the copy.
    public let tool: Tool
    /// The path of the note this is a copy of: the same directory, the tool's marker removed.
    public let originalPath: String

    /// Recognises `path` (a relative path or a bare name) as a foreign conflict copy, or returns nil.
    public init?(path: String) {
        // Every conflict name these tools make contains "onflict" (any case): a cheap test of the whole path first,
        // before it is split into new strings, because the scanner asks about every note.
        guard Self.mayBeConflict(path) else { return nil }
        let (directory, name) = splitLastComponent(path)
        guard Self.mayBeConflict(name) else { return nil }
        let bytes = Array(name.utf8)
        guard
            let (tool, original) = Self.syncthing(bytes) ?? Self.nextcloudLegacy(bytes)
                ?? Self.conflictedCopy(bytes) ?? Self.dropboxRename(bytes)
        else { return nil }
        self.tool = tool
        originalPath = directory + String(decoding: original, as: UTF8.self)
    }

    /// The tool whose conflict copy `name` (a path or a bare name) is, or nil for any other name.
    private static let conflictPattern: [UInt8] = Array("onflict".utf8)

    private static func mayBeConflict(_ name: String) -> Bool {
        let pattern = conflictPattern
        guard name.utf8.count >= pattern.count else { return false }
        if let found = name.utf8.withContiguousStorageIfAvailable({ contains(pattern, in: $0) }) { return found }
        return contains(pattern, in: name.utf8)
    }

    /// Whether `bytes` holds `pattern` (lowercase), ASCII letters in any case.
    private static func contains(_ pattern: [UInt8], in bytes: some Sequence<UInt8>) -> Bool {
        var matched = 0
        for byte in bytes {
            let lower = (0x41...0x5A).contains(byte) ? byte | 0x20 : byte
            if lower == pattern[matched] {
                matched += 1
                if matched == pattern.count { return true }
            } else {
                matched = lower == pattern[0] ? 1 : 0
            }
        }
        return false
    }

    public static func detect(_ name: String) -> Tool? {
        ForeignConflictCopy(path: name)?.tool
    }

    private typealias Match = (Tool, [UInt8])

    private static func syncthing(_ name: [UInt8]) -> Match? {
        for marker in name.asciiRanges(of: ".sync-conflict-") {
            var index = marker.upperBound
            guard name.isCompactTimestamp(at: index) else { continue }
            index += 15
            if index < name.count, name[index] == UInt8(ascii: "-") {
                let device = name[(index + 1)...].prefix { $0.isASCIIAlphanumeric }
                guard !device.isEmpty else { continue }
                index += 1 + device.count
            }
            if let original = original(name, prefixEnd: marker.lowerBound, restStart: index) {
                return (.syncthing, original)
            }
        }
        return nil
    }

    private static func nextcloudLegacy(_ name: [UInt8]) -> Match? {
        for marker in name.asciiRanges(of: "_conflict-") where name.isCompactTimestamp(at: marker.upperBound) {
            if let original = original(name, prefixEnd: marker.lowerBound, restStart: marker.upperBound + 15) {
                return (.nextcloud, original)
            }
        }
        return nil
    }

    /// ` (… conflicted copy …)`: Nextcloud when the stamp has a time, Dropbox when it is a date.
    private static func conflictedCopy(_ name: [UInt8]) -> Match? {
        for marker in name.asciiRanges(of: "conflicted copy ", caseInsensitive: true) {
            guard let open = name[..<marker.lowerBound].lastASCIIRange(of: " (") else { continue }
            let who = name[open.upperBound..<marker.lowerBound]
            guard who.isEmpty || who.last == UInt8(ascii: " "),
                !who.contains(UInt8(ascii: "(")), !who.contains(UInt8(ascii: ")")),
                let close = name[marker.upperBound...].firstIndex(of: UInt8(ascii: ")"))
            else { continue }
            let stamp = name[marker.upperBound..<close]
            if stamp.count >= 17, name.isDate(at: close - 17), name[close - 7] == UInt8(ascii: " "),
                name.isDigits(at: close - 6, count: 6),
                stamp.count == 17 || (stamp.count > 18 && name[close - 18] == UInt8(ascii: " ")),
                let original = original(name, prefixEnd: open.lowerBound, restStart: close + 1)
            {
                return (.nextcloud, original)
            }
            guard name.isDate(at: marker.upperBound) else { continue }
            var end = marker.upperBound + 10
            if stamp.count > 10 {
                guard name[end...].starts(with: " (".utf8), name.isDigits(at: end + 2, count: close - end - 2),
                    close + 1 < name.count, name[close + 1] == UInt8(ascii: ")")
                else { continue }
                end = close + 1
            } else {
                end = close
            }
            if let original = original(name, prefixEnd: open.lowerBound, restStart: end + 1) {
                return (.dropbox, original)
            }
        }
        return nil
    }

    private static func dropboxRename(_ name: [UInt8]) -> Match? {
        for kind in [" (Case Conflict", " (Unicode Encoding Conflict", " (Selective Sync Conflict"] {
            for marker in name.asciiRanges(of: kind, caseInsensitive: true) {
                guard let close = name[marker.upperBound...].firstIndex(of: UInt8(ascii: ")")) else { continue }
                let counter = name[marker.upperBound..<close]
                let numbered =
                    counter.first == UInt8(ascii: " ")
                    && name.isDigits(at: marker.upperBound + 1, count: counter.count - 1)
                guard counter.isEmpty || numbered else { continue }
                if let original = original(name, prefixEnd: marker.lowerBound, restStart: close + 1) {
                    return (.dropbox, original)
                }
            }
        }
        return nil
    }

    /// The name without the marker, if what follows the marker is nothing or an extension.
    private static func original(_ name: [UInt8], prefixEnd: Int, restStart: Int) -> [UInt8]? {
        guard restStart <= name.count else { return nil }
        let rest = name[restStart...]
        guard rest.isEmpty || rest.first == UInt8(ascii: ".") else { return nil }
        let original = Array(name[..<prefixEnd] + rest)
        return original.isEmpty ? nil : original
    }
}

/// Splits a `/`-separated path into its directory (with the trailing `/`, or empty) and last component.
func splitLastComponent(_ path: String) -> (directory: String, name: String) {
    guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return ("", path) }
    let nameStart = path.utf8.index(after: slash)
    return (String(path[..<nameStart]), String(path[nameStart...]))
}

extension UInt8 {
    var isASCIIDigit: Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) }

    var isASCIILetter: Bool { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self | 0x20) }

    var isASCIIAlphanumeric: Bool { isASCIIDigit || isASCIILetter }
}

/// Byte-level scanning of UTF-8 names for ASCII markers; cutting at an ASCII byte keeps UTF-8 valid.
extension Array where Element == UInt8 {
    /// Every range where `needle` (ASCII) occurs, first to last, overlapping ones included.
    func asciiRanges(of needle: String, caseInsensitive: Bool = false) -> [Range<Int>] {
        let pattern = Array(needle.utf8)
        guard pattern.count <= count else { return [] }
        return (0...(count - pattern.count)).compactMap { start in
            let found = pattern.indices.allSatisfy { offset in
                let byte = self[start + offset]
                let wanted = pattern[offset]
                return byte == wanted || (caseInsensitive && wanted.isASCIILetter && byte | 0x20 == wanted | 0x20)
            }
            return found ? start..<(start + pattern.count) : nil
        }
    }

    func isDigits(at start: Int, count digits: Int) -> Bool {
        start >= 0 && digits > 0 && start + digits <= count
            && self[start..<(start + digits)].allSatisfy(\.isASCIIDigit)
    }

    /// `YYYY-MM-DD` at `start`.
    func isDate(at start: Int) -> Bool {
        start >= 0 && start + 10 <= count
            && isDigits(at: start, count: 4) && self[start + 4] == UInt8(ascii: "-")
            && isDigits(at: start + 5, count: 2) && self[start + 7] == UInt8(ascii: "-")
            && isDigits(at: start + 8, count: 2)
    }

    /// `YYYYMMDD-HHMMSS` at `start`.
    func isCompactTimestamp(at start: Int) -> Bool {
        start + 15 <= count
            && isDigits(at: start, count: 8) && self[start + 8] == UInt8(ascii: "-") && isDigits(at: start + 9, count: 6)
    }
}

extension ArraySlice where Element == UInt8 {
    func lastASCIIRange(of needle: String) -> Range<Int>? {
        let pattern = Array(needle.utf8)
        guard pattern.count <= count else { return nil }
        for start in stride(from: endIndex - pattern.count, through: startIndex, by: -1)
        where self[start..<(start + pattern.count)].elementsEqual(pattern) {
            return start..<(start + pattern.count)
        }
        return nil
    }
}
