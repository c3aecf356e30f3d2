import Foundation
import NoteSyncSupport

/// The changed regions between two texts, compared line by line.
///
/// Lines keep their terminators, so a changed line ending (`\r\n` ↔ `\n`) or an added or
/// removed final newline is a change like any other. The diff is a shortest one (Myers'
/// algorithm in linear space), computed on interned line numbers so that large notes with few
/// changes cost little more than reading them.
public struct LineDiff: Sendable, Equatable {
    /// One changed region: the lines `oldLines` of the old text became the lines `newLines` of the new.
    ///
    /// Indices are 0-based line numbers; either range may be empty (a pure insertion or deletion),
    /// never both. Hunks are in order and separated by at least one unchanged line.
    public struct Hunk: Sendable, Hashable {
        public var oldLines: Range<Int>
        public var newLines: Range<Int>

        public init(oldLines: Range<Int>, newLines: Range<Int>) {
            self.oldLines = oldLines
            self.newLines = newLines
        }
    }

    /// The changed regions, in order; empty when the texts are equal.
    public let hunks: [Hunk]

    /// Diffs two texts; any bytes are accepted, split at `\n`.
    public init(old: Data, new: Data) {
        let numbers = LineText.interned([LineText(old), LineText(new)])
        self.init(old: numbers[0], new: numbers[1])
    }

    /// Diffs two sequences of interned line numbers (see `LineText.interned`).
    package init(old: [Int], new: [Int]) {
        let (deleted, inserted) = MyersDiff.changes(old: old, new: new)
        var hunks: [Hunk] = []
        var oldIndex = 0
        var newIndex = 0
        while oldIndex < old.count || newIndex < new.count {
            if oldIndex < old.count, newIndex < new.count, !deleted[oldIndex], !inserted[newIndex] {
                oldIndex += 1
                newIndex += 1
                continue
            }
            let oldStart = oldIndex
            let newStart = newIndex
            while oldIndex < old.count, deleted[oldIndex] { oldIndex += 1 }
            while newIndex < new.count, inserted[newIndex] { newIndex += 1 }
            hunks.append(Hunk(oldLines: oldStart..<oldIndex, newLines: newStart..<newIndex))
        }
        self.hunks = hunks
    }

    /// Splits bytes into lines, each keeping its `\n` (and a `\r` before it); the last line
    /// has no terminator when the text does not end with a newline.
    ///
    /// The lines concatenated give back the input exactly.
    public static func lines(of data: Data) -> [Data] {
        let text = LineText(data)
        return text.lines.map { Data(text.bytes[$0]) }
    }
}
