import Crypto
import Foundation

/// A pack: many assets in one server file (formats 5 and 6; docs/server-format.md, "Packs").
///
/// `zones/<zone>/packs/<64 hex>.pack` holds a header line `notesync-pack 1 <count> <index length> <index sha256>`,
/// the index (per asset its stored name, the offset of its bytes in the file and their length: 48 bytes, sorted by
/// name, no name twice), then the blobs. A blob is exactly what a loose asset file holds, so it is checked as one
/// when read. The file is named by the SHA-256 of its index: a header or an index changed, or a pack put under
/// another name, is told from a whole one before any blob is read.
public enum AssetPack {
    static let magic = "notesync-pack"
    static let version = 1
    /// One index entry: 32 bytes of name, 8 of offset, 8 of length, big-endian.
    static let entrySize = 48
    /// The most assets one pack's index may list: what a reader accepts.
    static let maxCount = 1 << 20
    /// The header line's longest possible length.
    static let maxHeader = 160
    /// A batch writes packs from this many new texts on; fewer stay loose (the agent's single edits).
    public static let minimumBatch = 16
    /// A text stored bigger than this stays loose: a pack holds small texts, read whole by range.
    static let largestBlob = 1 << 20
    /// A batch's blobs go into packs of at most about this many bytes.
    static let targetSize = 32 << 20

    /// Where one asset is in a pack.
    struct Entry: Sendable, Hashable {
        var name: ContentDigest
        var offset: Int64
        var length: Int64
    }

    /// A pack's file name (without `.pack`) and its bytes in parts (header, index, then each blob: written in order
    /// without being joined), from the stored names and blobs of distinct assets.
    static func build(_ blobs: [(name: ContentDigest, blob: Data)]) -> (name: String, parts: [Data]) {
        let sorted = blobs.sorted { $0.name < $1.name }
        let indexLength = sorted.count * entrySize
        // The digest is fixed width and the two numbers do not depend on the offsets: the header's length is known
        // before the index is made.
        func header(_ digest: String) -> Data {
            Data("\(magic) \(version) \(sorted.count) \(indexLength) \(digest)\n".utf8)
        }
        let headerLength = header(String(repeating: "0", count: 64)).count
        var index = Data(capacity: indexLength)
        var offset = Int64(headerLength + indexLength)
        for item in sorted {
            index.append(item.name.bytes)
            appendWord(&index, UInt64(offset))
            appendWord(&index, UInt64(item.blob.count))
            offset += Int64(item.blob.count)
        }
        let digest = ContentDigest(of: index).hex
        return (digest, [header(digest), index] + sorted.map(\.blob))
    }

    /// ``build(_:)`` joined: the pack's bytes.
    static func bytes(_ blobs: [(name: ContentDigest, blob: Data)]) -> (name: String, data: Data) {
        let pack = build(blobs)
        var data = Data()
        for part in pack.parts { data.append(part) }
        return (pack.name, data)
    }

    private static func appendWord(_ data: inout Data, _ word: UInt64) {
        withUnsafeBytes(of: word.bigEndian) { data.append(contentsOf: $0) }
    }

    /// A pack's parsed index: what a reader keeps of each pack (48 bytes an asset).
    public struct Index: Sendable {
        /// The pack's name: the hex of its index's digest, the file name without `.pack`.
        let name: String
        /// The entries, as the file holds them.
        let raw: Data
        let count: Int
        /// Where the blobs start, and the file's size when the index was read.
        let blobsStart: Int64
        let fileSize: Int64

        func entry(_ position: Int) -> Entry {
            raw.withUnsafeBytes { bytes in
                let base = position * AssetPack.entrySize
                let name = ContentDigest(rawBytes: UnsafeRawBufferPointer(rebasing: bytes[base..<base + 32]))
                return Entry(name: name, offset: Self.word(bytes, base + 32), length: Self.word(bytes, base + 40))
            }
        }

        static func word(_ bytes: UnsafeRawBufferPointer, _ start: Int) -> Int64 {
            Int64(bitPattern: bytes[start..<start + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        }

        /// Every entry, in name order.
        var entries: [Entry] { (0..<count).map(entry) }

        /// Where `name` is in this pack, by binary search.
        func find(_ name: ContentDigest) -> Entry? {
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

        /// The bytes after the index.
        var blobBytes: Int64 { fileSize - blobsStart }
    }

    /// What is wrong with a pack that is not whole.
    struct Damage: Error, Sendable {
        var reason: String
    }

    /// The header of a pack: the count, the index's length and digest, and the header's own length.
    static func parseHeader(_ prefix: Data) throws(Damage) -> (count: Int, indexLength: Int, digest: String, length: Int) {
        guard let newline = prefix.prefix(maxHeader).firstIndex(of: 0x0A) else {
            throw Damage(reason: "does not start with a pack header")
        }
        let line = String(decoding: prefix[prefix.startIndex..<newline], as: UTF8.self)
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 5, fields[0] == magic else { throw Damage(reason: "does not start with a pack header") }
        guard fields[1] == "\(version)" else {
            throw Damage(reason: "is a pack of version \(fields[1]), which this build does not read")
        }
        guard let count = Int(fields[2]), count >= 1, count <= maxCount, let indexLength = Int(fields[3]),
            indexLength == count * entrySize, fields[4].utf8.count == 64, ContentDigest(hex: String(fields[4])) != nil
        else { throw Damage(reason: "has a damaged pack header") }
        return (count, indexLength, String(fields[4]), newline - prefix.startIndex + 1)
    }

    /// Checks a pack's index (read from `headerLength` on) against its header and its file: the name, the digest,
    /// names strictly increasing, every blob inside the file after the index and no two overlapping.
    static func index(
        _ index: Data, fileName: String, header: (count: Int, indexLength: Int, digest: String, length: Int),
        fileSize: Int64
    ) throws(Damage) -> Index {
        guard index.count == header.indexLength else { throw Damage(reason: "is shorter than its index") }
        guard ContentDigest(of: index).hex == header.digest else {
            throw Damage(reason: "has an index that does not match its header")
        }
        guard fileName == header.digest + ".pack" else {
            throw Damage(reason: "is not named by its index's digest (\(header.digest).pack)")
        }
        let blobsStart = Int64(header.length + header.indexLength)
        let parsed = Index(
            name: header.digest, raw: Data(index), count: header.count, blobsStart: blobsStart, fileSize: fileSize)
        var previous: Entry?
        var end = blobsStart
        for position in 0..<parsed.count {
            let entry = parsed.entry(position)
            if let previous, !(previous.name < entry.name) { throw Damage(reason: "has an index out of order") }
            guard entry.offset >= end, entry.length >= 0, entry.length <= fileSize,
                entry.offset <= fileSize - entry.length
            else { throw Damage(reason: "has an index entry outside its blobs") }
            end = entry.offset + entry.length
            previous = entry
        }
        return parsed
    }

    /// A whole pack's index, from the pack's bytes (fsck and tests).
    static func index(of data: Data, fileName: String) throws(Damage) -> Index {
        let header = try parseHeader(data)
        guard data.count >= header.length + header.indexLength else { throw Damage(reason: "is shorter than its index") }
        let start = data.startIndex + header.length
        return try index(
            data[start..<start + header.indexLength], fileName: fileName, header: header, fileSize: Int64(data.count))
    }

    /// Whether `name` is a pack's file name: 64 hex digits and `.pack`.
    static func isPackName(_ name: String) -> Bool {
        name.utf8.count == 69 && name.hasSuffix(".pack") && ContentDigest(hex: String(name.dropLast(5))) != nil
    }
}
