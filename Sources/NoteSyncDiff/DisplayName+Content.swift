import NoteSyncSupport

extension DisplayName {
    /// Escapes one line of note content for display: the same controls as `escape(_:)` become
    /// `\u{XX}`, but tabs and backslashes stay as they are.
    ///
    /// A note's content must not drive the terminal (ESC sequences, CR overprinting, C1 CSI), yet
    /// a diff of ordinary text should read like the text. Pass a line without its `\n`; a `\r`
    /// before it is escaped too, which makes a line-ending change visible.
    public static func escapeContent(_ line: String) -> String {
        guard line.unicodeScalars.contains(where: needsEscape) else { return line }
        var out = ""
        out.reserveCapacity(line.utf8.count + 8)
        for scalar in line.unicodeScalars {
            if needsEscape(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09: false
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029: true
        default: false
        }
    }
}
