import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// A reference to an asset: the content digest and byte size of a note's text.
public struct AssetRef: Codable, Hashable, Sendable {
    public var sha256: ContentDigest
    public var size: Int64

    public init(sha256: ContentDigest, size: Int64) {
        self.sha256 = sha256
        self.size = size
    }

    public init(of data: Data) {
        self.init(sha256: ContentDigest(of: data), size: Int64(data.count))
    }
}

/// What a record change does.
public enum RecordOp: String, Codable, Sendable, Hashable {
    case save
    case delete
}

/// One record change inside a log entry: the unit of compare-and-swap.
///
/// `base` is the change tag (log sequence) the change was based on, 0 for a new record; the change is valid
/// only if `base` is the record's head when the entry claims its slot.
public struct RecordChange: Codable, Hashable, Sendable {
    /// The record name as written; validated with ``RecordName`` before any use, so a bad name quarantines
    /// one change rather than making the whole entry unreadable.
    public var name: String
    public var base: Int64
    public var op: RecordOp
    public var text: AssetRef?
    /// The note's own modification time, nanoseconds since 1970.
    public var modified: Int64
    /// The record schema version.
    public var version: Int
    /// On the save half of a move: the name the record had before (the entry also deletes that name, with
    /// ``movedTo`` naming this one). A build that does not know moves reads the pair as a delete and a new note.
    public var movedFrom: String?
    /// On the delete half of a move: the name the record moved to (saved in the same entry).
    public var movedTo: String?

    /// The record schema version this build writes and understands.
    public static let currentVersion = 1

    /// The bytes ``appendJSON(to:)`` writes, counted without writing them: an entry's buffer is made at its size.
    /// Counted, not estimated at 20 digits a number, which would give a large entry's buffer far more than it takes.
    var jsonSize: Int {
        func digits(_ value: Int64) -> Int {
            var count = value < 0 ? 2 : 1
            var rest = value.magnitude / 10
            while rest > 0 {
                count += 1
                rest /= 10
            }
            return count
        }
        // {"base":N ,"modified":N ,"name":"S" ,"op":"S" ,"version":N}
        var size = 8 + digits(base) + 12 + digits(modified) + 10 + Self.jsonStringSize(name) + 8 + op.rawValue.utf8.count
        size += 12 + digits(Int64(version))
        if let movedFrom { size += 15 + Self.jsonStringSize(movedFrom) }  // ,"movedFrom":"S"
        if let movedTo { size += 13 + Self.jsonStringSize(movedTo) }  // ,"movedTo":"S"
        if let text { size += 93 + digits(text.size) }  // ,"text":{"sha256":"<64 hex>","size":N}
        return size
    }

    /// The bytes of `string` inside its quotes as ``appendJSONString(_:to:)`` writes it.
    static func jsonStringSize(_ string: String) -> Int {
        var size = 0
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x08, 0x09, 0x0A, 0x0C, 0x0D: size += 2
            case 0..<0x20: size += 6
            default: size += 1
            }
        }
        return size
    }

    /// Appends this change as `JSONEncoder` writes it with sorted keys and slashes left as they are, byte for byte
    /// (SealedFileTests checks it against `JSONEncoder` on names holding every character that needs escaping): the
    /// keys in order, optionals left out when nil, strings escaped as it escapes them (`\"`, `\\`, `\b`, `\t`, `\n`,
    /// `\f`, `\r`, other control characters as `\u00xx`; everything else as its UTF-8).
    func appendJSON(to out: inout [UInt8]) {
        func key(_ name: StaticString) {
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }
        func number(_ value: Int64) { out.append(contentsOf: String(value).utf8) }
        func comma() { out.append(UInt8(ascii: ",")) }
        out.append(UInt8(ascii: "{"))
        key("base")
        number(base)
        comma()
        key("modified")
        number(modified)
        if let movedFrom {
            comma()
            key("movedFrom")
            Self.appendJSONString(movedFrom, to: &out)
        }
        if let movedTo {
            comma()
            key("movedTo")
            Self.appendJSONString(movedTo, to: &out)
        }
        comma()
        key("name")
        Self.appendJSONString(name, to: &out)
        comma()
        key("op")
        Self.appendJSONString(op.rawValue, to: &out)
        if let text {
            comma()
            key("text")
            out.append(UInt8(ascii: "{"))
            key("sha256")
            out.append(UInt8(ascii: "\""))
            text.sha256.withHex { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "\""))
            comma()
            key("size")
            number(text.size)
            out.append(UInt8(ascii: "}"))
        }
        comma()
        key("version")
        number(Int64(version))
        out.append(UInt8(ascii: "}"))
    }

    /// `string` as a JSON string, escaped as `JSONEncoder` escapes it.
    static func appendJSONString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        defer { out.append(UInt8(ascii: "\"")) }
        guard string.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
            out.append(contentsOf: string.utf8)
            return
        }
        let hex = ContentDigest.digits
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0..<0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(contentsOf: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
    }

    public init(
        name: String, base: Int64, op: RecordOp, text: AssetRef?, modified: Int64,
        version: Int = RecordChange.currentVersion, movedFrom: String? = nil, movedTo: String? = nil
    ) {
        self.name = name
        self.base = base
        self.op = op
        self.text = text
        self.modified = modified
        self.version = version
        self.movedFrom = movedFrom
        self.movedTo = movedTo
    }

    public static func save(_ name: RecordName, base: Int64, text: AssetRef, modified: Int64) -> RecordChange {
        RecordChange(name: name.string, base: base, op: .save, text: text, modified: modified)
    }

    public static func delete(_ name: RecordName, base: Int64, modified: Int64) -> RecordChange {
        RecordChange(name: name.string, base: base, op: .delete, text: nil, modified: modified)
    }

    /// A move of the record at `from` (based on `fromBase`) to `to` (based on `toBase`: 0, or a tombstone's tag),
    /// with the text it has at its new name: two changes of one entry, the delete of the old name and the save of
    /// the new one, linked both ways, so the record keeps its line (its history) across the rename. The delete's
    /// `modified` is `time`, when the note was renamed (``RenameTimes``): when two devices rename a note to
    /// different names, the later rename keeps it.
    public static func move(
        from: RecordName, fromBase: Int64, to: RecordName, toBase: Int64, text: AssetRef, modified: Int64, time: Int64
    ) -> [RecordChange] {
        [
            RecordChange(
                name: from.string, base: fromBase, op: .delete, text: nil, modified: time, movedTo: to.string),
            RecordChange(
                name: to.string, base: toBase, op: .save, text: text, modified: modified, movedFrom: from.string)
        ]
    }
}

/// What a void entry says: the slot was found empty with later entries present (an entry lost by a replicating
/// tool, or deleted), and `notesync server fsck --repair` claimed it so that readers can go on.
public struct VoidSeal: Codable, Hashable, Sendable {
    /// Why the slot was sealed, for people reading the log.
    public var reason: String
    /// The digest the lost entry had, as the entry after it names it (its `prev`): the chain goes on from there.
    /// `nil` when the entry after it names none.
    public var lost: ContentDigest?

    public init(reason: String, lost: ContentDigest?) {
        self.reason = reason
        self.lost = lost
    }
}

/// One immutable entry of a zone's change log: an atomic batch of record changes from one device.
///
/// Entries are hash-chained: `prev` is the digest of the file of the entry before it (``digest``), so a device
/// that keeps the digest of the last entry it read finds out when the log it reads next does not continue that one
/// (a server replaced, forked, or restored from an older copy).
public struct LogEntry: Codable, Hashable, Sendable {
    /// The slot this entry was written for; a file found in another slot is misplaced, not applied.
    public var seq: Int64
    /// Unique per commit; how a writer recognises its own entry after an ambiguous error.
    public var commit: String
    public var device: String
    /// Wall-clock time of the commit, nanoseconds since 1970.
    public var time: Int64
    public var changes: [RecordChange]
    /// The digest of the entry file in slot `seq - 1`; `nil` in slot 1 and in entries of format-1 builds.
    public var prev: ContentDigest?
    /// The chain digests of the entries in slots `seq - 2`, `seq - 3` … (up to ``LogEntry/earlierLinks`` of them,
    /// stopping at slot 1; `nil` where the writer did not know one). What lets fsck seal a gap of a few lost entries
    /// only when the entry after it continues the log before it: an entry of another history (a server's earlier
    /// life delivered late, a fork) names other entries there, and is moved aside rather than applied.
    public var earlier: [ContentDigest?]?
    /// Set on a void entry: no changes, a slot sealed by fsck.
    public var void: VoidSeal?
    /// The digest of this entry's file as read from the server (or as sealed by its writer); not stored in it.
    public var digest: ContentDigest?

    package enum CodingKeys: String, CodingKey {
        case seq, commit, device, time, changes, prev, earlier, void
    }

    /// How many entries before `prev` an entry names (``earlier``): the longest gap fsck can seal.
    public static let earlierLinks = 4

    /// The chain digest this entry names for slot `slot` (before it): `prev`, or one of ``earlier``; `nil` when it
    /// names none there.
    public func link(to slot: Int64) -> ContentDigest? {
        if slot == seq - 1 { return prev }
        let index = Int(seq - 2 - slot)
        guard index >= 0, let earlier, index < earlier.count else { return nil }
        return earlier[index]
    }

    public init(
        seq: Int64, commit: String, device: String, time: Int64, changes: [RecordChange],
        prev: ContentDigest? = nil, earlier: [ContentDigest?]? = nil, void: VoidSeal? = nil
    ) {
        self.seq = seq
        self.commit = commit
        self.device = device
        self.time = time
        self.changes = changes
        self.prev = prev
        self.earlier = earlier
        self.void = void
    }

    /// The chain digest a reader holds after this entry: the digest of its file, or for a void entry, the digest
    /// the lost entry had (the next entry names that one).
    public var chainDigest: ContentDigest? { void.map { $0.lost ?? digest } ?? digest }

    public static func == (a: LogEntry, b: LogEntry) -> Bool {
        a.seq == b.seq && a.commit == b.commit && a.device == b.device && a.time == b.time && a.changes == b.changes
            && a.prev == b.prev && a.earlier == b.earlier && a.void == b.void
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(seq)
        hasher.combine(commit)
    }
}
