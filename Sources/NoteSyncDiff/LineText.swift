import Foundation
import NoteSyncSupport

/// A text split into lines that keep their terminators, the unit that diff and merge compare.
///
/// Lines are byte-exact: `"a\r\n"` and `"a\n"` are different lines, and a last line without a
/// newline differs from the same line with one, so a merge can never silently change line
/// endings or add or drop a final newline.
package struct LineText: Sendable {
    package let bytes: [UInt8]
    /// Byte ranges of the lines in `bytes`; every one ends with `\n` except possibly the last.
    package let lines: [Range<Int>]

    package init(_ data: Data) {
        self.init(bytes: [UInt8](data))
    }

    package init(bytes: [UInt8]) {
        var lines: [Range<Int>] = []
        var start = 0
        bytes.withUnsafeBufferPointer { buffer in
            for index in buffer.indices where buffer[index] == 0x0A {
                lines.append(start..<index + 1)
                start = index + 1
            }
        }
        if start < bytes.count {
            lines.append(start..<bytes.count)
        }
        self.bytes = bytes
        self.lines = lines
    }

    package var count: Int { lines.count }

    package subscript(line: Int) -> ArraySlice<UInt8> { bytes[lines[line]] }

    /// The bytes of a run of lines, contiguous in `bytes`.
    package subscript(lines range: Range<Int>) -> ArraySlice<UInt8> {
        guard !range.isEmpty else { return [] }
        return bytes[lines[range.lowerBound].lowerBound..<lines[range.upperBound - 1].upperBound]
    }

    /// Whether the text may be diffed and merged: valid UTF-8 without NUL.
    ///
    /// Anything else is treated as binary, which notesync never merges line by line.
    package var isText: Bool {
        !bytes.contains(0) && String(validating: bytes, as: UTF8.self) != nil
    }

    /// Whether the line ends with its terminator; only the last line of a text may not.
    func isTerminated(_ line: Int) -> Bool {
        bytes[lines[line].upperBound - 1] == 0x0A
    }

    /// Numbers every line of several texts so that equal lines get equal numbers, for all texts at once.
    ///
    /// Diff and merge then compare integers instead of bytes; the numbers are dense (`0..<distinct`),
    /// so callers can index arrays with them.
    static func interned(_ texts: [LineText]) -> [[Int]] {
        var numbers: [LineKey: Int] = [:]
        return texts.map { text in
            text.lines.map { range in
                let key = LineKey(text.bytes[range])
                if let number = numbers[key] {
                    return number
                }
                let number = numbers.count
                numbers[key] = number
                return number
            }
        }
    }
}

/// A line's bytes with a precomputed FNV-1a hash, so the dictionary hashes each line once.
private struct LineKey: Hashable {
    let hash: UInt64
    let bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        bytes.withUnsafeBufferPointer { buffer in
            for byte in buffer {
                hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            }
        }
        self.hash = hash
        self.bytes = bytes
    }

    static func == (lhs: LineKey, rhs: LineKey) -> Bool {
        lhs.hash == rhs.hash && lhs.bytes == rhs.bytes
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }
}
