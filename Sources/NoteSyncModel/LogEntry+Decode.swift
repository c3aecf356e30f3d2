import Foundation
import NoteSyncCrypto
import NoteSyncSupport

extension LogEntry {
    /// Decodes an entry as ``SealedFile/encodeJSON(_:chunkingAbove:headerRoom:)`` writes it: the changes one by one,
    /// straight from the bytes, and the rest (`seq`, `commit`, the chain…) through `JSONDecoder`. Returns nil for
    /// anything else (spaces, keys in another order or unknown, escapes, numbers that are not plain integers), and
    /// the caller decodes the whole body with `JSONDecoder`; so what this accepts, `JSONDecoder` reads the same.
    ///
    /// `JSONDecoder` builds a map of the whole document first, bigger than the JSON, with the decoded array then
    /// growing beside it: for a large entry (a folder renamed is one entry of a move per note) that would be the peak
    /// of the sync of every device that reads it (docs/benchmarks.md, "Why these settings").
    static func decodeChangeByChange(_ body: Data) -> LogEntry? {
        body.withUnsafeBytes { raw -> LogEntry? in
            var reader = ChangeReader(raw.bindMemory(to: UInt8.self))
            guard reader.skip(#"{"changes":["#) else { return nil }
            // Each change starts `{"base":`, which no string holds unescaped: so many changes at most. And no more than
            // the body has room for (the shortest change is 57 bytes): a hostile body of `{"base":` repeated would
            // otherwise reserve 16 times its size.
            var changes: [RecordChange] = []
            changes.reserveCapacity(min(raw.count(of: #"{"base":"#.utf8), raw.count / 57 + 1))
            guard reader.changes(into: &changes) else { return nil }
            return withChanges(changes, rest: UnsafeRawBufferPointer(rebasing: raw[reader.offset...]))
        }
    }

    /// The entry whose body is `{"changes":[`, then `changes`, then `]` and `rest`: the keys after the changes through
    /// `JSONDecoder`; nil where they are not an entry's.
    fileprivate static func withChanges(_ changes: [RecordChange], rest: UnsafeRawBufferPointer) -> LogEntry? {
        // A second `changes` key is left to `JSONDecoder`. (One escaped, `"chang\u0065s"`, gets past this test: that
        // is safe because `JSONDecoder` keeps a duplicate key's first value, the shell's empty array here and the
        // real array in the whole body, so both read the array this reader read.)
        guard rest.firstRange(of: #""changes""#.utf8) == nil else { return nil }
        var shell = Data(#"{"changes":[]"#.utf8)
        shell.append(contentsOf: rest)
        guard var entry = try? JSONDecoder().decode(LogEntry.self, from: shell), entry.changes.isEmpty else {
            return nil
        }
        entry.changes = changes
        return entry
    }
}

/// Decodes an entry's body as it is read, a piece at a time, as ``LogEntry/decodeChangeByChange(_:)`` decodes it
/// whole: the same entry, or nil where that returns nil (the caller then reads the file whole). Only the bytes of the
/// change a piece ends in are held from one piece to the next: a device reading a large entry never holds its JSON
/// whole beside the changes decoded from it.
///
/// A change is known complete when the next one has begun: `},{"base":` is found nowhere else in an entry this reader
/// accepts (a string without escapes holds no `"`), and where it is found anyway (in the keys after the changes) the
/// change read there fails, and the whole decode decides.
package struct LogEntryStream {
    private var pending: [UInt8] = []
    private var changes: [RecordChange] = []
    private var previous: RecordChange?
    private var started = false
    private var failed = false
    private let bodyBytes: Int
    /// The bytes of the body read into `changes` so far.
    private var consumed = 0

    /// `bodyBytes`: the body's length. Room for the changes is made once the first piece's are read, for as many as
    /// the body holds at their size (and a tenth more): an array grown by doubling holds its old and new storage at
    /// once, and room for the most a body could hold (a change of 57 bytes) would be four times what a rename needs.
    package init(bodyBytes: Int) {
        self.bodyBytes = bodyBytes
    }

    /// Takes the next bytes of the body; false once the body is not one this reader decodes.
    package mutating func feed(_ bytes: Data) -> Bool {
        guard !failed else { return false }
        pending.append(contentsOf: bytes)
        if !started {
            let prefix = #"{"changes":["#.utf8
            guard pending.count >= prefix.count else { return true }
            guard pending.starts(with: prefix) else { return fail() }
            pending.removeFirst(prefix.count)
            started = true
        }
        guard let boundary = Self.lastBoundary(in: pending) else { return true }
        // The changes before the boundary's `,` are complete: read, and their bytes let go.
        guard read(upTo: boundary + 1) else { return fail() }
        pending.removeFirst(boundary + 2)
        return true
    }

    /// The entry, once every byte of the body was fed; nil where ``LogEntry/decodeChangeByChange(_:)`` gives nil.
    package mutating func finish() -> LogEntry? {
        guard !failed, started else { return nil }
        var changes = self.changes
        self.changes = []
        let previous = self.previous
        return pending.withUnsafeBytes { raw -> LogEntry? in
            var reader = ChangeReader(raw.bindMemory(to: UInt8.self))
            reader.previous = previous
            guard reader.changes(into: &changes) else { return nil }
            return LogEntry.withChanges(changes, rest: UnsafeRawBufferPointer(rebasing: raw[reader.offset...]))
        }
    }

    private mutating func fail() -> Bool {
        failed = true
        pending = []
        changes = []
        return false
    }

    /// Reads the changes in `pending[0..<end]`, separated by commas, to exactly `end`.
    private mutating func read(upTo end: Int) -> Bool {
        var previous = self.previous
        var read: [RecordChange] = []
        let whole = pending.withUnsafeBufferPointer { all -> Bool in
            var reader = ChangeReader(UnsafeBufferPointer(rebasing: all[0..<end]))
            reader.previous = previous
            repeat {
                guard let change = reader.change() else { return false }
                read.append(change)
            } while reader.skip(",")
            previous = reader.previous
            return reader.offset == end
        }
        guard whole else { return false }
        consumed += end + 1
        if changes.isEmpty, !read.isEmpty {
            let each = max(Double(consumed) / Double(read.count), 57)
            changes.reserveCapacity(min(Int(Double(bodyBytes) / each * 1.1) + 16, bodyBytes / 57 + 1))
        }
        changes.append(contentsOf: read)
        self.previous = previous
        return true
    }

    /// Where the last `},{"base":` in `bytes` begins.
    private static func lastBoundary(in bytes: [UInt8]) -> Int? {
        let needle = Array(#"},{"base":"#.utf8)
        guard bytes.count >= needle.count else { return nil }
        var start = bytes.count - needle.count
        while start >= 0 {
            if bytes[start] == needle[0] && bytes[start..<(start + needle.count)].elementsEqual(needle) { return start }
            start -= 1
        }
        return nil
    }
}

/// Reads the changes of an entry in the exact form ``RecordChange/appendJSON(to:)`` writes: keys in sorted order, no
/// spaces, integers as digits, strings without escapes. Each read returns nil at anything else.
private struct ChangeReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var offset = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Moves past `literal` if the bytes at the offset are it.
    mutating func skip(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - offset >= count,
            memcmp(bytes.baseAddress! + offset, literal.utf8Start, count) == 0
        else { return false }
        offset += count
        return true
    }

    /// `-?(0|[1-9][0-9]*)` within Int64.
    mutating func integer() -> Int64? {
        let negative = offset < bytes.count && bytes[offset] == UInt8(ascii: "-")
        var index = negative ? offset + 1 : offset
        let start = index
        var value: Int64 = 0
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
            let digit = Int64(bytes[index] &- UInt8(ascii: "0"))
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            // Gathered as a negative number: Int64.min has no positive twin.
            let (next, underflow) = times.subtractingReportingOverflow(digit)
            guard !overflow && !underflow else { return nil }
            value = next
            index += 1
        }
        guard index > start, index - start == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        if !negative {
            guard value != .min else { return nil }
            value = -value
        }
        offset = index
        return value
    }

    /// The bytes of a string with no escape and no control character, without its quotes.
    mutating func stringBytes() -> UnsafeBufferPointer<UInt8>? {
        guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else { return nil }
        var index = offset + 1
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let string = UnsafeBufferPointer(rebasing: bytes[(offset + 1)..<index])
                offset = index + 1
                return string
            }
            guard byte != UInt8(ascii: "\\") && byte >= 0x20 else { return nil }
            index += 1
        }
        return nil
    }

    /// The change read before, whose names the next one may repeat.
    var previous: RecordChange?

    mutating func string() -> String? {
        stringBytes().flatMap { String(validating: $0, as: UTF8.self) }
    }

    /// A string; `candidate` itself when it has the same bytes, so the two share their storage. The halves of a move
    /// name each other (the delete `movedTo` the save's name, the save `movedFrom` the delete's): 50,000 moves
    /// read 100,000 names fewer.
    mutating func string(reusing candidate: String?) -> String? {
        guard let bytes = stringBytes() else { return nil }
        if var candidate, candidate.utf8.count == bytes.count,
            bytes.isEmpty || candidate.withUTF8({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 })
        {
            return candidate
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Reads the rest of the changes array, up to and past its `]`, appending each change to `changes`.
    mutating func changes(into changes: inout [RecordChange]) -> Bool {
        if skip("]") { return true }
        repeat {
            guard let change = change() else { return false }
            changes.append(change)
        } while skip(",")
        return skip("]")
    }

    mutating func change() -> RecordChange? {
        guard skip(#"{"base":"#), let base = integer(), skip(#","modified":"#), let modified = integer() else {
            return nil
        }
        var movedFrom: String?
        if skip(#","movedFrom":"#) {
            guard let string = string(reusing: previous?.name) else { return nil }
            movedFrom = string
        }
        var movedTo: String?
        if skip(#","movedTo":"#) {
            guard let string = string() else { return nil }
            movedTo = string
        }
        guard skip(#","name":"#), let name = string(reusing: previous?.movedTo), skip(#","op":"#),
            let op = stringBytes().flatMap({ String(validating: $0, as: UTF8.self) }).flatMap(RecordOp.init(rawValue:))
        else { return nil }
        var text: AssetRef?
        if skip(#","text":{"sha256":"#) {
            guard let hex = stringBytes(), let digest = ContentDigest(hexBytes: hex), skip(#","size":"#),
                let size = integer(), skip("}")
            else { return nil }
            text = AssetRef(sha256: digest, size: size)
        }
        guard skip(#","version":"#), let version = integer(), let version = Int(exactly: version), skip("}") else {
            return nil
        }
        let change = RecordChange(
            name: name, base: base, op: op, text: text, modified: modified, version: version, movedFrom: movedFrom,
            movedTo: movedTo)
        previous = change
        return change
    }
}

extension UnsafeRawBufferPointer {
    /// How many times `pattern` occurs in these bytes, not overlapping.
    fileprivate func count(of pattern: some Collection<UInt8>) -> Int {
        let needle = Array(pattern)
        guard let base = baseAddress, let first = needle.first else { return 0 }
        var found = 0
        var offset = 0
        while offset + needle.count <= count, let hit = memchr(base + offset, Int32(first), count - offset) {
            offset = base.distance(to: UnsafeRawPointer(hit))
            guard offset + needle.count <= count else { break }
            if memcmp(base + offset, needle, needle.count) == 0 {
                found += 1
                offset += needle.count
            } else {
                offset += 1
            }
        }
        return found
    }
}
