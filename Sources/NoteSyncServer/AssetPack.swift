import Crypto
import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// A pack: many assets in one server file (formats 5 and 6; docs/server-format.md, "Packs").
///
/// `zones/<zone>/packs/<64 hex>.pack` holds a header of 128 bytes (the line `notesync-pack 1 <count> <index offset>
/// <index length> <index sha256>`, padded with spaces to a newline at byte 127), the blobs, then the index (per asset
/// its stored name, the offset of its bytes in the file and their length: 48 bytes, sorted by name, no name twice),
/// which ends the file. A blob is exactly what a loose asset file holds, so it is checked as one when read. The file
/// is named by the SHA-256 of its index: a header or an index changed, or a pack put under another name, is told from
/// a whole one before any blob is read. The index comes last so that a writer streams the blobs to the file as they
/// are compressed, holding none of them, and writes the header last.
public enum AssetPack {
    package static let magic = "notesync-pack"
    package static let version = 1
    /// One index entry: 32 bytes of name, 8 of offset, 8 of length, big-endian.
    static let entrySize = 48
    /// The most assets one pack's index may list: what a reader accepts.
    static let maxCount = 1 << 20
    /// The header's length: the line, padded with spaces, its newline the last byte.
    static let headerSize = 128
    /// A batch writes packs from this many new texts on; fewer stay loose (the agent's single edits).
    public static let minimumBatch = 16
    /// A batch of at least this many texts not found loose is looked for in the packs even when their indexes were not
    /// read yet (a first sync); a smaller one only in the indexes read already.
    public static let lookupBatch = 500
    /// A text stored bigger than this stays loose: a pack holds small texts, read whole by range.
    static let largestBlob = 1 << 20

    /// Where one asset is in a pack.
    package struct Entry: Sendable, Hashable {
        package var name: ContentDigest
        package var offset: Int64
        package var length: Int64
    }

    /// A pack being made: texts added one by one and written to a sink at once (their buffers freed), then the index
    /// and the header.
    struct Builder {
        private var entries: [(name: ContentDigest, offset: Int64, length: Int64)] = []
        package private(set) var end = Int64(AssetPack.headerSize)
        package let sink: any StagingSink

        package init(sink: any StagingSink) { self.sink = sink }

        /// The bytes of the texts added so far.
        package var size: Int64 { end - Int64(AssetPack.headerSize) }
        package var isEmpty: Bool { entries.isEmpty }

        /// Adds a text's stored bytes under its stored name (no name twice).
        package mutating func add(_ name: ContentDigest, _ blob: Data) throws {
            try sink.write(blob, at: end)
            entries.append((name, end, Int64(blob.count)))
            end += Int64(blob.count)
        }

        /// Writes the index and the header, and stages the pack: its name (the file name without `.pack`).
        package func finish() throws -> (name: String, file: StagedFile) {
            let sorted = entries.sorted { $0.name < $1.name }
            var index = Data(capacity: sorted.count * entrySize)
            for entry in sorted {
                index.append(entry.name.bytes)
                appendWord(&index, UInt64(entry.offset))
                appendWord(&index, UInt64(entry.length))
            }
            let digest = ContentDigest(of: index).hex
            try sink.write(index, at: end)
            try sink.write(header(count: sorted.count, indexOffset: end, indexLength: index.count, digest: digest), at: 0)
            return (digest, try sink.finish())
        }
    }

    /// The header of a pack, padded to ``headerSize``.
    package static func header(count: Int, indexOffset: Int64, indexLength: Int, digest: String) -> Data {
        var line = Array("\(magic) \(version) \(count) \(indexOffset) \(indexLength) \(digest)".utf8)
        line += [UInt8](repeating: 0x20, count: max(0, headerSize - 1 - line.count))
        line.append(0x0A)
        return Data(line)
    }

    /// A sink that keeps the pack in memory (tests, and an object store's single request).
    final class MemorySink: StagingSink {
        package var data = Data()
        private let stage: (Data) throws -> StagedFile

        package init(stage: @escaping (Data) throws -> StagedFile = { StagedFile(data: $0) }) { self.stage = stage }

        package func write(_ bytes: Data, at offset: Int64) throws {
            let offset = Int(offset)
            if data.count < offset + bytes.count { data.append(Data(count: offset + bytes.count - data.count)) }
            data.replaceSubrange(offset..<offset + bytes.count, with: bytes)
        }

        package func finish() throws -> StagedFile { try stage(data) }

        package func discard() { data = Data() }
    }

    /// A pack of `blobs` (stored names and bytes of distinct texts), in memory: its file name and its bytes.
    package static func bytes(_ blobs: [(name: ContentDigest, blob: Data)]) -> (name: String, data: Data) {
        let sink = MemorySink()
        var builder = Builder(sink: sink)
        for item in blobs { try! builder.add(item.name, item.blob) }
        let name = try! builder.finish().name
        return (name, sink.data)
    }

    private static func appendWord(_ data: inout Data, _ word: UInt64) {
        withUnsafeBytes(of: word.bigEndian) { data.append(contentsOf: $0) }
    }

    /// A pack's parsed index: what a reader keeps of each pack (48 bytes an asset).
    public struct Index: Sendable {
        /// The pack's name: the hex of its index's digest, the file name without `.pack`.
        package let name: String
        /// The entries, as the file holds them.
        package let raw: Data
        package let count: Int
        /// Where the blobs start and end (where the index starts).
        let blobsStart: Int64
        let blobsEnd: Int64

        package func entry(_ position: Int) -> Entry {
            raw.withUnsafeBytes { bytes in
                let base = position * AssetPack.entrySize
                let name = ContentDigest(rawBytes: UnsafeRawBufferPointer(rebasing: bytes[base..<base + 32]))
                return Entry(name: name, offset: Self.word(bytes, base + 32), length: Self.word(bytes, base + 40))
            }
        }

        package static func word(_ bytes: UnsafeRawBufferPointer, _ start: Int) -> Int64 {
            Int64(bitPattern: bytes[start..<start + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        }

        /// Every entry, in name order.
        package var entries: [Entry] { (0..<count).map(entry) }

        /// Where `name` is in this pack, by binary search.
        package func find(_ name: ContentDigest) -> Entry? {
            var low = 0
            var high = count
            while low < high {
                let middle = (low + high) / 2
                let found = entry(middle)
                if found.name == name { return found }
                if found.name < name { low = middle + 1 } else { high = middle }
            }
            return nil
        }

        /// The bytes of the blobs.
        var blobBytes: Int64 { blobsEnd - blobsStart }
    }

    /// What is wrong with a pack that is not whole.
    package struct Damage: Error, Sendable {
        package var reason: String
    }

    /// What a pack's header says: the count, where the index is, its length and digest.
    package struct Header: Sendable {
        package var count: Int
        var indexOffset: Int64
        var indexLength: Int
        package var digest: String
    }

    /// The header of a pack, from its first ``headerSize`` bytes.
    package static func parseHeader(_ prefix: Data) throws(Damage) -> Header {
        guard prefix.count >= headerSize, prefix[prefix.startIndex + headerSize - 1] == 0x0A,
            prefix.prefix(magic.utf8.count + 1).elementsEqual(Array((magic + " ").utf8))
        else { throw Damage(reason: "does not start with a pack header") }
        let line = String(decoding: prefix[prefix.startIndex..<prefix.startIndex + headerSize - 1], as: UTF8.self)
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 2, fields[1] == "\(version)" else {
            throw Damage(reason: "is a pack of version \(fields.count > 1 ? String(fields[1]) : "?"), which this build does not read")
        }
        guard fields.count == 6, let count = Int(fields[2]), count >= 1, count <= maxCount,
            let indexOffset = Int64(fields[3]), indexOffset >= Int64(headerSize), let indexLength = Int(fields[4]),
            indexLength == count * entrySize, indexOffset <= ServerStore.largestAssetSize, fields[5].utf8.count == 64,
            ContentDigest(hex: String(fields[5])) != nil
        else { throw Damage(reason: "has a damaged pack header") }
        return Header(count: count, indexOffset: indexOffset, indexLength: indexLength, digest: String(fields[5]))
    }

    /// Checks a pack's index (read from `headerLength` on) against its header and its file: the name, the digest,
    /// names strictly increasing, every blob inside the file after the index and no two overlapping (blobs may lie in
    /// any order; an empty one overlaps nothing).
    package static func index(_ index: Data, fileName: String, header: Header, fileSize: Int64) throws(Damage) -> Index {
        guard index.count == header.indexLength, header.indexOffset + Int64(header.indexLength) <= fileSize else {
            throw Damage(reason: "is shorter than its index")
        }
        guard header.indexOffset + Int64(header.indexLength) == fileSize else {
            throw Damage(reason: "has bytes after its index")
        }
        guard ContentDigest(of: index).hex == header.digest else {
            throw Damage(reason: "has an index that does not match its header")
        }
        guard fileName == header.digest + ".pack" else {
            throw Damage(reason: "is not named by its index's digest (\(header.digest).pack)")
        }
        let blobsStart = Int64(headerSize)
        let parsed = Index(
            name: header.digest, raw: Data(index), count: header.count, blobsStart: blobsStart,
            blobsEnd: header.indexOffset)
        var previous: Entry?
        var spans: [(offset: Int64, length: Int64)] = []
        spans.reserveCapacity(parsed.count)
        for position in 0..<parsed.count {
            let entry = parsed.entry(position)
            if let previous, !(previous.name < entry.name) { throw Damage(reason: "has an index out of order") }
            guard entry.offset >= blobsStart, entry.length >= 0, entry.length <= header.indexOffset,
                entry.offset <= header.indexOffset - entry.length
            else { throw Damage(reason: "has an index entry outside its blobs") }
            // An empty text (a note saved empty) takes no byte: it lies where the next text starts, and overlaps none.
            if entry.length > 0 { spans.append((entry.offset, entry.length)) }
            previous = entry
        }
        spans.sort { $0.offset < $1.offset }
        for (before, after) in zip(spans, spans.dropFirst()) where before.offset + before.length > after.offset {
            throw Damage(reason: "has index entries whose texts overlap")
        }
        return parsed
    }

    /// A whole pack's index, from the pack's bytes (fsck and tests).
    package static func index(of data: Data, fileName: String) throws(Damage) -> Index {
        let header = try parseHeader(data)
        guard Int64(data.count) >= header.indexOffset + Int64(header.indexLength) else {
            throw Damage(reason: "is shorter than its index")
        }
        let start = data.startIndex + Int(header.indexOffset)
        return try index(
            data[start..<start + header.indexLength], fileName: fileName, header: header, fileSize: Int64(data.count))
    }

    /// Whether `name` is a pack's file name: 64 hex digits and `.pack`.
    static func isPackName(_ name: String) -> Bool {
        name.utf8.count == 69 && name.hasSuffix(".pack") && ContentDigest(hex: String(name.dropLast(5))) != nil
    }
}
