import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// Names of notesync's own conflict copies: `<stem> (conflict <device> <YYYY-MM-DD HHMMSS>).<ext>`.
///
/// A conflict copy is a normal note that syncs everywhere (docs/reconciliation.md, "Conflict copies"), so its name
/// must be a valid
/// record name on every device: the device name loses `/`, control and format characters, the
/// characters Windows and SMB reject, and parentheses (so the marker can be found again); the stem
/// is shortened on a character boundary so the component fits in 255 bytes (NAME_MAX); the time is
/// UTC so every device spells it alike.
public enum ConflictCopyName {
    /// The longest file name component Linux filesystems accept, in UTF-8 bytes.
    public static let maximumComponentBytes = 255

    static let maximumDeviceBytes = 64
    static let maximumExtensionBytes = 16
    private static let marker = " (conflict "

    /// The conflict copy name for the note at `path`, made on `device` at `date`.
    ///
    /// `a/b/c.md` gives `a/b/c (conflict laptop 2024-05-01 093000).md`; a name without extension
    /// or a dotfile such as `.bashrc` gets the marker at its end. The extension is the part from
    /// the last dot when it is at most 16 bytes and has no space. `attempt` > 1 appends a counter
    /// (`… 093000 2)`) for when the first name is already taken: a copy never overwrites a file.
    public static func notesyncConflictName(for path: String, device: String, date: Date, attempt: Int = 1) -> String {
        let (directory, name) = splitLastComponent(path)
        let counter = attempt > 1 ? " \(attempt)" : ""
        let suffix = "\(marker)\(cleanDevice(device)) \(stamp(date))\(counter))"
        var (stem, ext) = splitExtension(name)
        if maximumComponentBytes - suffix.utf8.count - ext.utf8.count < 1 {
            (stem, ext) = (name[...], "")
        }
        let budget = maximumComponentBytes - suffix.utf8.count - ext.utf8.count
        var shortened = prefix(stem, maxBytes: budget)
        if shortened.endIndex < stem.endIndex {
            let trimmed = shortened.trimmingSuffix(while: \.isWhitespace)
            if !trimmed.isEmpty {
                shortened = trimmed
            }
        }
        return directory + shortened + suffix + ext
    }

    /// Whether the last component of `path` has the shape `notesyncConflictName` gives.
    public static func isNotesyncConflictCopy(_ path: String) -> Bool {
        let name = Array(splitLastComponent(path).name.utf8)
        guard let open = name[...].lastASCIIRange(of: marker), open.lowerBound > 0,
            let close = name[open.upperBound...].firstIndex(of: UInt8(ascii: ")"))
        else { return false }
        let rest = name[(close + 1)...]
        guard rest.isEmpty || rest.first == UInt8(ascii: ".") else { return false }
        func endsWithStamp(_ end: Int) -> Bool {
            end - 18 > open.upperBound && name[end - 18] == UInt8(ascii: " ") && name.isDate(at: end - 17)
                && name[end - 7] == UInt8(ascii: " ") && name.isDigits(at: end - 6, count: 6)
        }
        if endsWithStamp(close) {
            return true
        }
        guard let space = name[open.upperBound..<close].lastIndex(of: UInt8(ascii: " ")) else { return false }
        return name.isDigits(at: space + 1, count: close - space - 1) && endsWithStamp(space)
    }

    /// `YYYY-MM-DD HHMMSS` in UTC.
    package static func stamp(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .gmt
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func padded(_ value: Int?, _ width: Int) -> String {
            let digits = String(value ?? 0)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(padded(parts.year, 4))-\(padded(parts.month, 2))-\(padded(parts.day, 2)) "
            + "\(padded(parts.hour, 2))\(padded(parts.minute, 2))\(padded(parts.second, 2))"
    }

    /// The device name as it may appear inside a file name: one line, no path or Windows-reserved
    /// characters, no parentheses, NFC, at most 64 bytes.
    static func cleanDevice(_ device: String) -> String {
        var cleaned = String.UnicodeScalarView()
        for scalar in RecordName.nfc(device).unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .surrogate, .privateUse, .unassigned:
                continue
            case .lineSeparator, .paragraphSeparator, .spaceSeparator:
                if cleaned.last != " " {
                    cleaned.append(" ")
                }
            default:
                cleaned.append("/\\<>:\"|?*()".unicodeScalars.contains(scalar) ? "-" : scalar)
            }
        }
        let trimmed = String(cleaned).trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return "unknown device" }
        return String(prefix(trimmed[...], maxBytes: maximumDeviceBytes)).trimmingCharacters(in: .whitespaces)
    }

    private static func splitExtension(_ name: String) -> (stem: Substring, ext: Substring) {
        let utf8 = name.utf8
        guard let firstNonDot = utf8.firstIndex(where: { $0 != UInt8(ascii: ".") }),
            let dot = utf8[firstNonDot...].lastIndex(of: UInt8(ascii: "."))
        else { return (name[...], "") }
        let ext = name[dot...]
        guard (2...(maximumExtensionBytes + 1)).contains(ext.utf8.count), !ext.contains(" ") else {
            return (name[...], "")
        }
        return (name[..<dot], ext)
    }

    /// The longest prefix of whole characters that fits in `maxBytes` of UTF-8.
    private static func prefix(_ text: Substring, maxBytes: Int) -> Substring {
        var bytes = 0
        var end = text.startIndex
        for character in text {
            bytes += character.utf8.count
            guard bytes <= maxBytes else { break }
            end = text.index(after: end)
        }
        return text[..<end]
    }
}

extension Substring {
    fileprivate func trimmingSuffix(while predicate: (Character) -> Bool) -> Substring {
        var end = endIndex
        while end > startIndex {
            let previous = index(before: end)
            guard predicate(self[previous]) else { break }
            end = previous
        }
        return self[..<end]
    }
}
