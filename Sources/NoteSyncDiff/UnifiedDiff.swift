import Foundation
import NoteSyncSupport

/// Renders the difference between two versions of a note as a unified diff, for a terminal.
///
/// The output is what `diff -u --label OLD --label NEW` prints (hunks of `context` lines
/// around changes, nearby hunks joined, `\ No newline at end of file` after an unterminated
/// line), except that it is made safe to print: labels and lines are escaped through
/// `DisplayName`, so neither a note's name nor its content can reach the terminal as an
/// escape sequence. A `\r` shows as `\u{d}`, which makes a CRLF ↔ LF change visible.
public enum UnifiedDiff {
    /// The diff of `old` and `new`: empty when they are equal, one line for binary content.
    ///
    /// Content that is not UTF-8 text, or contains NUL, is reported as
    /// `Binary files OLD and NEW differ (N bytes, M bytes)` instead of being printed.
    /// With `color`, headers are bold, hunk ranges cyan, removed lines red and added lines green
    /// (ANSI SGR codes); callers enable it only when the output is a terminal.
    public static func render(
        old: Data, new: Data, oldLabel: String, newLabel: String, context: Int = 3, color: Bool
    ) -> String {
        guard old != new else { return "" }
        let oldText = LineText(old)
        let newText = LineText(new)
        let oldName = DisplayName.escape(oldLabel)
        let newName = DisplayName.escape(newLabel)
        guard oldText.isText, newText.isText else {
            return "Binary files \(oldName) and \(newName) differ (\(old.count) bytes, \(new.count) bytes)\n"
        }
        let ids = LineText.interned([oldText, newText])
        let hunks = LineDiff(old: ids[0], new: ids[1]).hunks
        let style = Style(color: color)
        let context = max(context, 0)

        var out = style.header("--- " + oldName) + style.header("+++ " + newName)
        var first = 0
        while first < hunks.count {
            var last = first
            while last + 1 < hunks.count,
                hunks[last + 1].oldLines.lowerBound - hunks[last].oldLines.upperBound <= 2 * context
            {
                last += 1
            }
            let oldStart = max(0, hunks[first].oldLines.lowerBound - context)
            let oldEnd = min(oldText.count, hunks[last].oldLines.upperBound + context)
            let newStart = hunks[first].newLines.lowerBound - (hunks[first].oldLines.lowerBound - oldStart)
            let newEnd = hunks[last].newLines.upperBound + (oldEnd - hunks[last].oldLines.upperBound)
            out += style.hunk("@@ -\(Self.range(oldStart..<oldEnd)) +\(Self.range(newStart..<newEnd)) @@")

            var line = oldStart
            for hunk in hunks[first...last] {
                for index in line..<hunk.oldLines.lowerBound {
                    out += Self.line(index, of: oldText, prefix: " ", style: style)
                }
                for index in hunk.oldLines {
                    out += Self.line(index, of: oldText, prefix: "-", style: style)
                }
                for index in hunk.newLines {
                    out += Self.line(index, of: newText, prefix: "+", style: style)
                }
                line = hunk.oldLines.upperBound
            }
            for index in line..<oldEnd {
                out += Self.line(index, of: oldText, prefix: " ", style: style)
            }
            first = last + 1
        }
        return out
    }

    /// A hunk range as GNU diff prints it: 1-based start and count, `,1` omitted, and an empty
    /// range named by the line before it (`0,0` at the top), which is what `patch` expects.
    private static func range(_ lines: Range<Int>) -> String {
        switch lines.count {
        case 0: "\(lines.lowerBound),0"
        case 1: "\(lines.lowerBound + 1)"
        default: "\(lines.lowerBound + 1),\(lines.count)"
        }
    }

    private static func line(_ index: Int, of text: LineText, prefix: Character, style: Style) -> String {
        let terminated = text.isTerminated(index)
        let bytes = terminated ? text[index].dropLast() : text[index]
        let body = String(prefix) + DisplayName.escapeContent(String(decoding: bytes, as: UTF8.self))
        let rendered =
            switch prefix {
            case "-": style.removed(body)
            case "+": style.added(body)
            default: body + "\n"
            }
        return terminated ? rendered : rendered + "\\ No newline at end of file\n"
    }

    /// ANSI SGR colouring of whole output lines, or none.
    private struct Style {
        let color: Bool

        func header(_ line: String) -> String { paint(line, "1") }
        func hunk(_ line: String) -> String { paint(line, "36") }
        func removed(_ line: String) -> String { paint(line, "31") }
        func added(_ line: String) -> String { paint(line, "32") }

        private func paint(_ line: String, _ code: String) -> String {
            color ? "\u{1B}[\(code)m" + line + "\u{1B}[0m\n" : line + "\n"
        }
    }
}
