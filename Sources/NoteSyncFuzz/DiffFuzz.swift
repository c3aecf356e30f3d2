import Foundation
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// Fuzzes `LineDiff` and `UnifiedDiff` with an input split into `old NUL new`.
///
/// The hunks must describe `new` exactly and be a shortest edit (checked against an LCS table on small
/// inputs); the rendered diff must be safe to print and, read back line by line, give `new` from `old`.
enum DiffFuzz {
    static func check(_ input: Data) throws(FuzzViolation) {
        let parts = FuzzTarget.parts(input, count: 2)
        let old = parts[0]
        let new = parts[1]
        let oldLines = LineDiff.lines(of: old)
        let newLines = LineDiff.lines(of: new)
        try FuzzViolation.require(
            Data(oldLines.joined()) == old && Data(newLines.joined()) == new,
            "the lines do not concatenate to the text")
        try checkHunks(LineDiff(old: old, new: new).hunks, old: oldLines, new: newLines)
        for context in [3, 0, 1] {
            try checkUnified(old: old, new: new, oldLines: oldLines, newLines: newLines, context: context)
        }
    }

    // MARK: - LineDiff

    static func checkHunks(_ hunks: [LineDiff.Hunk], old: [Data], new: [Data]) throws(FuzzViolation) {
        var oldIndex = 0
        var newIndex = 0
        var edits = 0
        for hunk in hunks {
            try FuzzViolation.require(!hunk.oldLines.isEmpty || !hunk.newLines.isEmpty, "empty hunk \(hunk)")
            let unchanged = hunk.oldLines.lowerBound - oldIndex
            try FuzzViolation.require(
                unchanged == hunk.newLines.lowerBound - newIndex && (unchanged > 0 || (oldIndex == 0 && newIndex == 0)),
                "hunk \(hunk) is out of order or not separated from the previous one")
            try FuzzViolation.require(
                hunk.oldLines.upperBound <= old.count && hunk.newLines.upperBound <= new.count,
                "hunk \(hunk) is outside the texts")
            try requireEqual(old[oldIndex..<hunk.oldLines.lowerBound], new[newIndex..<hunk.newLines.lowerBound])
            oldIndex = hunk.oldLines.upperBound
            newIndex = hunk.newLines.upperBound
            edits += hunk.oldLines.count + hunk.newLines.count
        }
        try FuzzViolation.require(old.count - oldIndex == new.count - newIndex, "the texts end unevenly")
        try requireEqual(old[oldIndex...], new[newIndex...])
        if old.count * new.count <= 40_000 {
            let shortest = old.count + new.count - 2 * longestCommonSubsequence(old, new)
            try FuzzViolation.require(edits == shortest, "the diff has \(edits) line edits, the shortest has \(shortest)")
        }
    }

    static func requireEqual(_ old: ArraySlice<Data>, _ new: ArraySlice<Data>) throws(FuzzViolation) {
        try FuzzViolation.require(old.elementsEqual(new), "lines outside the hunks differ")
    }

    /// The length of a longest common subsequence, by the textbook quadratic table.
    static func longestCommonSubsequence(_ a: [Data], _ b: [Data]) -> Int {
        guard !a.isEmpty, !b.isEmpty else { return 0 }
        var previous = [Int](repeating: 0, count: b.count + 1)
        var current = previous
        for i in 1...a.count {
            for j in 1...b.count {
                current[j] = a[i - 1] == b[j - 1] ? previous[j - 1] + 1 : max(previous[j], current[j - 1])
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }

    // MARK: - UnifiedDiff

    /// One side's line as `UnifiedDiff` must print it: escaped, without its newline, and whether it had one.
    struct Rendered: Equatable {
        let body: String
        let terminated: Bool

        init(_ line: Data) {
            terminated = line.last == 0x0A
            body = DisplayName.escapeContent(String(decoding: terminated ? line.dropLast() : line, as: UTF8.self))
        }
    }

    static func checkUnified(
        old: Data, new: Data, oldLines: [Data], newLines: [Data], context: Int
    ) throws(FuzzViolation) {
        let output = UnifiedDiff.render(
            old: old, new: new, oldLabel: "old\u{1B}]0;x\u{7}", newLabel: "new\n",
            context: context, color: false)
        let colored = UnifiedDiff.render(
            old: old, new: new, oldLabel: "old\u{1B}]0;x\u{7}", newLabel: "new\n",
            context: context, color: true)
        try FuzzViolation.require(stripColor(colored) == output, "the colored diff differs from the plain one")
        guard old != new else {
            try FuzzViolation.require(output.isEmpty, "equal texts have a diff")
            return
        }
        try FuzzViolation.require(output.hasSuffix("\n"), "the diff does not end with a newline")
        var lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeLast()
        for line in lines {
            try FuzzViolation.require(
                FuzzViolation.isPrintable(line, allowing: ["\t"]),
                "the diff prints a control character: \(FuzzViolation.show(line))")
        }
        guard MergeFuzz.isText(old), MergeFuzz.isText(new) else {
            try FuzzViolation.require(
                lines.count == 1 && lines[0].hasPrefix("Binary files "),
                "binary content is not reported in one line")
            return
        }
        let oldLabel = DisplayName.escape("old\u{1B}]0;x\u{7}")
        let newLabel = DisplayName.escape("new\n")
        try FuzzViolation.require(
            lines.count > 2 && lines[0] == "--- " + oldLabel && lines[1] == "+++ " + newLabel,
            "the diff does not start with its labels")
        try replay(
            lines.dropFirst(2), old: oldLines.map(Rendered.init), new: newLines.map(Rendered.init),
            oldRaw: oldLines, newRaw: newLines, context: context)
    }

    /// Reads the hunks back and checks that they take `old` to `new`, with the line counts their headers promise.
    static func replay(
        _ lines: ArraySlice<String>, old: [Rendered], new: [Rendered], oldRaw: [Data], newRaw: [Data], context: Int
    ) throws(FuzzViolation) {
        var index = lines.startIndex
        var oldIndex = 0
        var newIndex = 0
        var hunkCount = 0
        while index < lines.endIndex {
            guard let header = parseHeader(lines[index]) else {
                throw FuzzViolation(message: "expected a hunk header, found \(FuzzViolation.show(lines[index]))")
            }
            index += 1
            let skipped = header.old.lowerBound - oldIndex
            try FuzzViolation.require(
                skipped == header.new.lowerBound - newIndex && (skipped > 0 || hunkCount == 0) && skipped >= 0,
                "hunk header \(header) does not follow the previous hunk")
            try requireEqual(
                oldRaw[oldIndex..<min(header.old.lowerBound, oldRaw.count)],
                newRaw[newIndex..<min(header.new.lowerBound, newRaw.count)])
            oldIndex = header.old.lowerBound
            newIndex = header.new.lowerBound
            var leading = 0
            var unchangedRun = 0
            var changed = false
            while index < lines.endIndex, !lines[index].hasPrefix("@@") {
                // The prefix is one scalar; as a Character it would take a combining mark that starts the line.
                let line = lines[index]
                let body = String(line.unicodeScalars.dropFirst())
                let terminated: Bool
                switch line.unicodeScalars.first {
                case " ":
                    try FuzzViolation.require(
                        oldIndex < old.count && newIndex < new.count
                            && oldRaw[oldIndex] == newRaw[newIndex] && old[oldIndex].body == body,
                        "context line \(FuzzViolation.show(line)) is not in both texts")
                    terminated = old[oldIndex].terminated
                    oldIndex += 1
                    newIndex += 1
                    unchangedRun += 1
                    if !changed { leading += 1 }
                case "-":
                    try FuzzViolation.require(
                        oldIndex < old.count && old[oldIndex].body == body,
                        "removed line \(FuzzViolation.show(line)) is not the old text's")
                    terminated = old[oldIndex].terminated
                    oldIndex += 1
                    changed = true
                    unchangedRun = 0
                case "+":
                    try FuzzViolation.require(
                        newIndex < new.count && new[newIndex].body == body,
                        "added line \(FuzzViolation.show(line)) is not the new text's")
                    terminated = new[newIndex].terminated
                    newIndex += 1
                    changed = true
                    unchangedRun = 0
                default:
                    throw FuzzViolation(message: "unexpected diff line \(FuzzViolation.show(line))")
                }
                try FuzzViolation.require(unchangedRun <= 2 * context, "hunks \(2 * context) lines apart were not split")
                index += 1
                if !terminated {
                    try FuzzViolation.require(
                        index < lines.endIndex && lines[index] == "\\ No newline at end of file",
                        "an unterminated line is not marked")
                    index += 1
                }
            }
            try FuzzViolation.require(changed, "hunk \(header) changes nothing")
            try FuzzViolation.require(
                leading <= context && unchangedRun <= context,
                "hunk \(header) has more than \(context) lines of context")
            try FuzzViolation.require(
                oldIndex - header.old.lowerBound == header.old.count
                    && newIndex - header.new.lowerBound == header.new.count,
                "hunk \(header) has other line counts than its header")
            hunkCount += 1
        }
        try FuzzViolation.require(old.count - oldIndex == new.count - newIndex, "the diff ends unevenly")
        try requireEqual(oldRaw[oldIndex...], newRaw[newIndex...])
    }

    /// Parses `@@ -a,b +c,d @@` into 0-based line ranges (GNU: a count of 0 names the line before).
    static func parseHeader(_ line: String) -> (old: Range<Int>, new: Range<Int>)? {
        let fields = line.split(separator: " ")
        guard fields.count == 4, fields[0] == "@@", fields[3] == "@@", fields[1].hasPrefix("-"), fields[2].hasPrefix("+"),
            let old = parseRange(fields[1].dropFirst()), let new = parseRange(fields[2].dropFirst())
        else { return nil }
        return (old, new)
    }

    static func parseRange(_ text: Substring) -> Range<Int>? {
        let numbers = text.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
        guard numbers.count == 1 || numbers.count == 2, let start = numbers[0], start >= 0 else { return nil }
        let count = numbers.count == 2 ? numbers[1] : 1
        guard let count, count >= 0, numbers.count == 2 || count == 1 else { return nil }
        let lower = count == 0 ? start : start - 1
        guard lower >= 0 else { return nil }
        return lower..<lower + count
    }

    /// `text` without its ANSI SGR sequences (`ESC [ digits m`).
    static func stripColor(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        var scalars = text.unicodeScalars[...]
        while let scalar = scalars.popFirst() {
            if scalar == "\u{1B}", scalars.first == "[" {
                scalars = scalars.drop { $0 != "m" }.dropFirst()
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }
}
