import Foundation
import Testing

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

@Suite struct SealedFileTests {
    let entry = LogEntry(
        seq: 7, commit: "c1", device: "dev-a", time: 1,
        changes: [
            RecordChange(name: "a.md", base: 0, op: .save, text: AssetRef(of: Data("hi".utf8)), modified: 5)
        ])

    @Test func roundTrips() throws {
        let data = try SealedFile.seal(entry, kind: "entry")
        #expect(try SealedFile.open(data, kind: "entry", as: LogEntry.self) == entry)
    }

    @Test func detectsEveryTruncation() throws {
        let data = try SealedFile.seal(entry, kind: "entry")
        for length in 0..<data.count {
            #expect(throws: SealedFile.Failure.self) {
                try SealedFile.open(data.prefix(length), kind: "entry", as: LogEntry.self)
            }
        }
    }

    @Test func detectsAppendedBytes() throws {
        var data = try SealedFile.seal(entry, kind: "entry")
        data.append(contentsOf: Array("x".utf8))
        #expect(
            throws: SealedFile.Failure.truncated(expected: data.count - 1 - headerLength(data), actual: data.count - headerLength(data))
        ) {
            try SealedFile.open(data, kind: "entry", as: LogEntry.self)
        }
    }

    @Test func detectsEveryFlippedBodyByte() throws {
        let data = try SealedFile.seal(entry, kind: "entry")
        for index in headerLength(data)..<data.count {
            var damaged = data
            damaged[index] ^= 0x20
            #expect(throws: SealedFile.Failure.checksumMismatch) {
                try SealedFile.open(damaged, kind: "entry", as: LogEntry.self)
            }
        }
    }

    @Test func refusesMalformedJSONWithAValidChecksum() throws {
        let body = Data("{\"seq\": 1, \"commit\": ".utf8)
        var data = Data("notesync-entry 1 \(body.count) \(ContentDigest(of: body).hex)\n".utf8)
        data.append(body)
        #expect {
            try SealedFile.open(data, kind: "entry", as: LogEntry.self)
        } throws: { error in
            if case .malformed = error as? SealedFile.Failure { return true }
            return false
        }
    }

    @Test func refusesOtherKindsAndNewerFormats() throws {
        let data = try SealedFile.seal(entry, kind: "snapshot")
        #expect(throws: SealedFile.Failure.wrongKind("notesync-snapshot")) {
            try SealedFile.open(data, kind: "entry", as: LogEntry.self)
        }
        let body = Data("{}".utf8)
        var newer = Data("notesync-entry 3 \(body.count) \(ContentDigest(of: body).hex)\n".utf8)
        newer.append(body)
        #expect(throws: SealedFile.Failure.newerFormat(3)) { try SealedFile.verify(newer, kind: "entry") }
        // Format 2 is an encrypted body: its header checks without the key, and it opens only with one.
        let encrypted = SealedFile.wrap(body, kind: "entry", format: 2)
        #expect(try SealedFile.verify(encrypted, kind: "entry") == body)
        #expect(throws: SealedFile.Failure.encrypted) { try SealedFile.open(encrypted, kind: "entry", as: LogEntry.self) }
        #expect(throws: SealedFile.Failure.badHeader) { try SealedFile.verify(Data("garbage".utf8), kind: "entry") }
    }

    /// Changes of every kind, with names holding every character JSON escapes and some it does not.
    private func awkwardChanges() throws -> [RecordChange] {
        var changes: [RecordChange] = []
        let names = ["a.md", "dir/say \"hi\".md", "back\\slash.md", "é/日本語 🗒.md", "{\"changes\":[]}.md", "a/b/c.txt"]
        for (index, string) in names.enumerated() {
            let name = try RecordName(validating: string)
            let text = AssetRef(of: Data(string.utf8))
            changes.append(.save(name, base: Int64(index), text: text, modified: Int64(index) * 1_000_000_007))
            changes.append(.delete(name, base: Int64(index + 7), modified: -Int64(index)))
            let to = try RecordName(validating: "moved/" + string)
            changes += RecordChange.move(
                from: name, fromBase: Int64(index), to: to, toBase: 0, text: text, modified: 5, time: Int64(index))
        }
        changes.append(RecordChange(name: "x.md", base: 1, op: .save, text: nil, modified: 2, version: 9))
        // Names no RecordName allows, with every character JSON escapes and some it does not, and random ones made of
        // them: the change writer escapes exactly as `JSONEncoder` does.
        let awkward = (0..<0x20).map { Character(UnicodeScalar($0)!) } + Array("\"\\/\u{7F}\u{2028}\u{2029}\u{FEFF}é🗒 ab")
        var random = SystemRandomNumberGenerator()
        var strings = [String(awkward), ""]
        for _ in 0..<300 {
            strings.append(String((0..<Int.random(in: 0...12, using: &random)).map { _ in awkward.randomElement(using: &random)! }))
        }
        for (index, string) in strings.enumerated() {
            changes.append(
                RecordChange(
                    name: string, base: Int64.random(in: Int64.min...Int64.max, using: &random), op: index % 2 == 0 ? .save : .delete,
                    text: index % 3 == 0 ? nil : AssetRef(of: Data(string.utf8)), modified: Int64(index) - 150,
                    movedFrom: index % 5 == 1 ? strings[index / 2] : nil, movedTo: index % 7 == 2 ? string + "→" : nil))
        }
        return changes
    }

    /// Entries of `changes` (one bare, one with every link to earlier entries), of `first` alone, and of none.
    private static func entries(_ changes: [RecordChange], first: RecordChange) -> [LogEntry] {
        [
            LogEntry(seq: 12, commit: "c/1", device: "dev-a", time: 99, changes: changes),
            LogEntry(
                seq: 13, commit: "c2", device: "dev-b", time: 100, changes: changes,
                prev: ContentDigest(of: Data("p".utf8)), earlier: [nil, ContentDigest(of: Data("e".utf8))]),
            LogEntry(seq: 14, commit: "c3", device: "dev-c", time: 101, changes: [first]),
            LogEntry(seq: 15, commit: "c4", device: "dev-d", time: 102, changes: [])
        ]
    }

    /// A big entry is encoded change by change (``SealedFile/encodeJSON(_:chunkingAbove:headerRoom:)``): the bytes must be
    /// exactly `JSONEncoder`'s of the whole entry, whatever its changes, names and optional fields hold.
    @Test func anEntryEncodedChangeByChangeIsByteForByteTheWholeEncoding() throws {
        let changes = try awkwardChanges()
        let entries = Self.entries(changes, first: changes[0])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Each change's size is counted exactly, escapes, signs and all (the buffer is made at the sum).
        for change in changes + [RecordChange(name: "a", base: Int64.min, op: .delete, text: nil, modified: -1)] {
            var bytes: [UInt8] = []
            change.appendJSON(to: &bytes)
            #expect(change.jsonSize == bytes.count, "\(String(decoding: bytes, as: UTF8.self))")
        }
        for entry in entries {
            let whole = try encoder.encode(entry)
            #expect(try SealedFile.encodeJSON(entry, chunkingAbove: 0) == whole, "\(entry.changes.count) changes")
            #expect(try SealedFile.encodeJSON(entry) == whole)
            let sealed = try SealedFile.seal(entry, kind: "entry")
            #expect(sealed == Data("notesync-entry 1 \(whole.count) \(ContentDigest(of: whole).hex)\n".utf8) + whole)
            #expect(SealedFile.wrap(whole, kind: "entry", format: 1) == sealed)
            #expect(try SealedFile.open(sealed, kind: "entry", as: LogEntry.self) == entry)
        }
        // A value that is not an entry is sealed from `JSONEncoder`'s bytes, behind the same header.
        let other = ["b": 2, "a": 1]
        let whole = try encoder.encode(other)
        #expect(try SealedFile.seal(other, kind: "k") == Data("notesync-k 1 \(whole.count) \(ContentDigest(of: whole).hex)\n".utf8) + whole)
    }

    /// A large plain entry sealed a piece at a time (``SealedFile/sealEntry(_:minimumBytes:into:)``) is the very file
    /// ``SealedFile/seal(_:kind:)`` makes, into a buffer and into a temp file, with that file's digest. An entry under
    /// the threshold makes no sink; a sink that fails part way is discarded and its error thrown.
    @Test func anEntrySealedPieceByPieceIsTheFileSealedWhole() throws {
        let changes = try awkwardChanges()
        // Several pieces of 256 KiB, and a last one shorter.
        let many = Array(repeating: changes, count: 1 + 700_000 / max(changes.count, 1) / 40).flatMap { $0 }
        let entries = Self.entries(many, first: changes[0])
        let dir = try TempDirectory()
        for (index, entry) in entries.enumerated() {
            let whole = try SealedFile.seal(entry, kind: "entry")
            let inMemory = try #require(try SealedFile.sealEntry(entry, minimumBytes: 0) { AssetPack.MemorySink() })
            #expect(inMemory.staged.data == whole, "\(entry.changes.count) changes")
            #expect(inMemory.digest == ContentDigest(of: whole))
            let path = dir.path + "/entry-\(index)"
            let file = try #require(try SealedFile.sealEntry(entry, minimumBytes: 0) { try FileIO.WriteFile(path) })
            #expect(file.staged.temp == path)
            #expect(try FileIO.read(path) == whole)
            #expect(file.digest == ContentDigest(of: whole))
            #expect(try SealedFile.open(whole, kind: "entry", as: LogEntry.self) == entry)
            // Under the threshold: sealed whole by the caller, no sink made.
            var made = 0
            let none = try SealedFile.sealEntry(entry, minimumBytes: whole.count) {
                made += 1
                return AssetPack.MemorySink()
            }
            #expect(none == nil && made == 0)
            // At the threshold exactly it is written in pieces; a byte over it, not (the shell is encoded to know).
            let json = whole.count - (whole.firstIndex(of: 0x0A)! + 1)
            #expect(try SealedFile.sealEntry(entry, minimumBytes: json) { AssetPack.MemorySink() } != nil)
            #expect(try SealedFile.sealEntry(entry, minimumBytes: json + 1) { AssetPack.MemorySink() } == nil)
        }
        #expect(try FileIO.read(dir.path + "/entry-0")!.count > 4 * FileIO.WriteFile.gather)
        // A write that fails (a full disk) part way: the sink is discarded, the error thrown.
        let failing = FailingSink(failAt: 3)
        #expect(throws: NoteSyncError.self) { try SealedFile.sealEntry(entries[0], minimumBytes: 0) { failing } }
        #expect(failing.writes == 3 && failing.discarded)
    }

    /// An entry read change by change is exactly what `JSONDecoder` reads, or left to it: on entries as written, and
    /// on thousands of damaged ones (a byte changed, dropped or added), whatever the fast reader accepts
    /// `JSONDecoder` accepts too, with the same value.
    @Test func anEntryReadChangeByChangeIsWhatJSONDecoderReads() throws {
        let changes = try awkwardChanges()
        var plain = changes.filter { change in
            ([change.name, change.movedFrom, change.movedTo].compactMap { $0 }).allSatisfy { name in
                !name.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
            }
        }
        #expect(plain.count > 10 && plain.count < changes.count)
        // And names of JSON's own characters, which need no escape.
        var random = SystemRandomNumberGenerator()
        let letters = Array("aZ09 é日🗒/-.{}[]:,\u{7F}\u{2028}")
        for index in 0..<200 {
            let name = String((0..<Int.random(in: 1...10, using: &random)).map { _ in letters.randomElement(using: &random)! })
            plain.append(
                RecordChange(
                    name: name, base: Int64.random(in: Int64.min...Int64.max, using: &random), op: index % 2 == 0 ? .save : .delete,
                    text: index % 3 == 0 ? nil : AssetRef(of: Data(name.utf8)), modified: Int64(index) - 100,
                    version: index % 11 == 0 ? 0 : 1, movedFrom: index % 5 == 1 ? name + "<" : nil,
                    movedTo: index % 7 == 2 ? name + ">" : nil))
        }
        let entries = [
            LogEntry(seq: 12, commit: "c/1", device: "dev-a", time: 99, changes: plain),
            LogEntry(
                seq: 13, commit: "c2", device: "dev-b", time: -100, changes: plain,
                prev: ContentDigest(of: Data("p".utf8)), earlier: [nil, ContentDigest(of: Data("e".utf8))]),
            LogEntry(seq: 15, commit: "c4", device: "dev-d", time: 102, changes: []),
            LogEntry(
                seq: 16, commit: "v", device: "fsck", time: 1, changes: [],
                void: VoidSeal(reason: "lost", lost: ContentDigest(of: Data("l".utf8))))
        ]
        for entry in entries {
            let body = try SealedFile.encodeJSON(entry)
            #expect(LogEntry.decodeChangeByChange(body) == entry)
            #expect(try JSONDecoder().decode(LogEntry.self, from: body) == entry)
        }
        // Read a piece at a time (``LogEntryStream``), whatever the pieces: the same entry.
        for entry in entries {
            let body = try SealedFile.encodeJSON(entry)
            for size in [1, 2, 7, 9, 10, 57, 300, 4096, body.count] {
                var stream = LogEntryStream(bodyBytes: body.count)
                var fed = true
                for start in stride(from: 0, to: body.count, by: size) where fed {
                    fed = stream.feed(body[start..<min(start + size, body.count)])
                }
                #expect(fed && stream.finish() == entry, "pieces of \(size)")
            }
        }
        // A second `changes` key, plain or escaped: whatever the fast reader reads, `JSONDecoder` reads too.
        let one = LogEntry(seq: 2, commit: "c", device: "d", time: 1, changes: Array(plain.prefix(2)))
        let written = String(decoding: try SealedFile.encodeJSON(one), as: UTF8.self)
        for key in [#""changes""#, #""chang\u0065s""#] {
            for array in ["[]", String(written.dropFirst(#"{"changes":"#.count).prefix { $0 != "]" }) + "]"] {
                let doubled = Data(
                    written.replacingOccurrences(of: #"],"commit""#, with: "],\(key):\(array),\"commit\"").utf8)
                #expect(doubled.count > written.utf8.count)
                if let fast = LogEntry.decodeChangeByChange(doubled) {
                    #expect(fast == (try? JSONDecoder().decode(LogEntry.self, from: doubled)))
                }
            }
        }
        // Names with escapes are left to `JSONDecoder`, and still read right.
        let escaped = LogEntry(seq: 14, commit: "c3", device: "dev-c", time: 101, changes: changes)
        #expect(LogEntry.decodeChangeByChange(try SealedFile.encodeJSON(escaped)) == nil)
        #expect(try SealedFile.open(try SealedFile.seal(escaped, kind: "entry"), kind: "entry", as: LogEntry.self) == escaped)

        let small = LogEntry(
            seq: 3, commit: "c", device: "d", time: 5, changes: Array(plain.prefix(4) + plain.suffix(6)),
            prev: ContentDigest(of: Data("p".utf8)))
        let body = Array(try SealedFile.encodeJSON(small))
        let alphabet = Array(#"{}[]":,\-0123456789.eE tuna"#.utf8) + [0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xFF]
        var accepted = 0
        for _ in 0..<4000 {
            var damaged = body
            for _ in 0..<Int.random(in: 1...2, using: &random) {
                let index = Int.random(in: 0..<damaged.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: damaged[index] = alphabet.randomElement(using: &random)!
                case 1: damaged.remove(at: index)
                default: damaged.insert(alphabet.randomElement(using: &random)!, at: index)
                }
            }
            // Read a piece at a time, the damaged body gives the whole read's entry or nil (then it is read whole).
            for size in [3, 64] {
                var stream = LogEntryStream(bodyBytes: damaged.count)
                var fed = true
                for start in stride(from: 0, to: damaged.count, by: size) where fed {
                    fed = stream.feed(Data(damaged[start..<min(start + size, damaged.count)]))
                }
                if fed, let streamed = stream.finish() {
                    #expect(streamed == LogEntry.decodeChangeByChange(Data(damaged)), "\(String(decoding: damaged, as: UTF8.self))")
                }
            }
            guard let fast = LogEntry.decodeChangeByChange(Data(damaged)) else { continue }
            accepted += 1
            let whole = try? JSONDecoder().decode(LogEntry.self, from: Data(damaged))
            #expect(whole == fast, "\(String(decoding: damaged, as: UTF8.self))")
        }
        // Some damage leaves valid JSON of the same shape (a digit or a letter of a name changed): those are read.
        #expect(accepted > 100)
    }

    private func headerLength(_ data: Data) -> Int { (data.firstIndex(of: 0x0A) ?? 0) + 1 }
}

/// A sink whose write number `failAt` (from 1) fails as a full disk does.
private final class FailingSink: StagingSink {
    let failAt: Int
    private(set) var writes = 0
    private(set) var discarded = false

    init(failAt: Int) { self.failAt = failAt }

    func write(_ bytes: Data, at offset: Int64) throws {
        writes += 1
        if writes == failAt { throw NoteSyncError.posix("write", path: "entry", errno: ENOSPC) }
    }

    func finish() throws -> StagedFile { StagedFile(data: Data()) }

    func discard() { discarded = true }
}
