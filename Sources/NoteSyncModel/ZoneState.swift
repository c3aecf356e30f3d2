import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// The server head of one record: its latest change in the log.
public struct RecordHead: Codable, Hashable, Sendable {
    /// The change tag: the sequence of the entry that last changed the record.
    public var tag: Int64
    public var text: AssetRef?
    /// Declared after `text`, whose optional's tag byte it shares a word with: 112 bytes a head, not 120.
    public var deleted: Bool
    public var modified: Int64
    public var version: Int
    public var device: String
    /// The sequence of the latest change in this record's line whose base was not the head it replaced in the log
    /// as read here (its base is a lost or damaged slot's, or another history's), 0 when every link was checked.
    /// A base older than that may not be an ancestor of this head: a device holding such a base cannot take the
    /// head as a plain successor of its version (see ``Reconciler``). What this device could check, so not part
    /// of equality: a device that read the lost entry before it went missing holds 0.
    public var unverifiedSince: Int64
    /// Set when the change at ``tag`` was a move: on a tombstone, the name the record moved to; on a live head, the
    /// name it moved from. A later change of the name clears it.
    public var moved: RecordName?

    public init(
        tag: Int64, deleted: Bool, text: AssetRef?, modified: Int64, version: Int, device: String,
        unverifiedSince: Int64 = 0, moved: RecordName? = nil
    ) {
        self.tag = tag
        self.deleted = deleted
        self.text = text
        self.modified = modified
        self.version = version
        self.device = device
        self.unverifiedSince = unverifiedSince
        self.moved = moved
    }

    /// The name the record moved to, when this head is the tombstone a move left.
    public var movedTo: RecordName? { deleted ? moved : nil }
    /// The name the record moved from, when this head is the save of a move.
    public var movedFrom: RecordName? { deleted ? nil : moved }

    package enum CodingKeys: String, CodingKey {
        case tag, deleted, text, modified, version, device, unverifiedSince, moved
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            tag: try container.decode(Int64.self, forKey: .tag), deleted: try container.decode(Bool.self, forKey: .deleted),
            text: try container.decodeIfPresent(AssetRef.self, forKey: .text),
            modified: try container.decode(Int64.self, forKey: .modified),
            version: try container.decode(Int.self, forKey: .version), device: try container.decode(String.self, forKey: .device),
            unverifiedSince: try container.decodeIfPresent(Int64.self, forKey: .unverifiedSince) ?? 0,
            moved: try container.decodeIfPresent(RecordName.self, forKey: .moved))
    }

    public static func == (a: RecordHead, b: RecordHead) -> Bool {
        a.tag == b.tag && a.deleted == b.deleted && a.text == b.text && a.modified == b.modified && a.version == b.version
            && a.device == b.device && a.moved == b.moved
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(tag)
        hasher.combine(text)
    }
}

/// A record change that was not applied because it is unsafe or malformed, kept for reporting.
public struct QuarantinedChange: Codable, Hashable, Sendable, CustomStringConvertible {
    public var seq: Int64
    /// The name as found on the server, escaped for display.
    public var name: String
    public var reason: String

    public var description: String { "entry \(seq): \(name): \(reason)" }

    /// The name as it is shown: escaped, and cut short (a hostile name may be kilobytes long).
    static func displayName(_ raw: String) -> String {
        let escaped = DisplayName.escape(raw)
        return escaped.count > 120 ? escaped.prefix(120) + "… (\(raw.utf8.count) bytes)" : escaped
    }
}

/// A log entry that could not be read (torn, damaged, misplaced): its slot is skipped, never applied.
public struct DamagedEntry: Hashable, Sendable, CustomStringConvertible {
    public var seq: Int64
    public var path: String
    public var reason: String

    public var description: String { "\(path): \(reason)" }

    /// The digest of the file's bytes, when it could be read: the entry after it names it as `prev`.
    public var digest: ContentDigest?

    /// Whether the entry was sealed in a format newer than this build's: it may be valid, only unreadable here.
    public var isNewerFormat = false

    /// The device its bytes name as the writer (its name and id, escaped), when they still say it (a plain server's
    /// entry torn after its `device` field, or damaged elsewhere): a hint for the user, never trusted for anything
    /// else.
    public var writer: String?

    /// The note names its bytes still hold (at most 5, escaped, and how many more): what is missing where it was
    /// skipped. A hint, as ``writer``.
    public var names: [String] = []

    /// Who can push again what the entry held: its writer, named when its bytes say which.
    package var fix: String {
        let notes = names.isEmpty ? "" : " (by its bytes: \(names.joined(separator: ", ")))"
        return "on the device that wrote it\(writer.map { " (by its bytes: \($0))" } ?? ""), `notesync recover` "
            + "pushes those notes again\(notes)"
    }

    /// The note names a plain entry's bytes hold whole (`"name":"…"`), escaped for display, at most `limit` and a
    /// count of the rest.
    package static func noteNames(in data: Data, limit: Int = 5) -> [String] {
        let key = Array(#""name":""#.utf8)
        var found: [String] = []
        var more = 0
        var from = data.startIndex
        while let range = data[from...].firstRange(of: key) {
            var end = range.upperBound
            var escaped = false
            while end < data.endIndex, escaped || data[end] != UInt8(ascii: "\"") {
                escaped = !escaped && data[end] == UInt8(ascii: "\\")
                end = data.index(after: end)
            }
            guard end < data.endIndex else { break }
            if found.count < limit {
                let raw = String(decoding: data[range.upperBound..<end], as: UTF8.self)
                let text = (try? JSONDecoder().decode(String.self, from: Data(("\"" + raw + "\"").utf8))) ?? raw
                found.append(DisplayName.escape(text))
            } else {
                more += 1
            }
            from = data.index(after: end)
        }
        if more > 0 { found.append("\(more) more") }
        return found
    }

    /// The device id a plain entry's bytes name (`"device":"<hex>"`), when they hold it whole.
    package static func writerID(in data: Data) -> String? {
        let key = Array(#""device":""#.utf8)
        guard let start = data.firstRange(of: key)?.upperBound else { return nil }
        let digits = data[start...].prefix {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
        }
        guard (1...64).contains(digits.count), data.index(start, offsetBy: digits.count) < data.endIndex,
            data[data.index(start, offsetBy: digits.count)] == UInt8(ascii: "\"")
        else { return nil }
        return String(decoding: digits, as: UTF8.self)
    }

    package init(
        seq: Int64, path: String, reason: String, digest: ContentDigest? = nil, isNewerFormat: Bool = false, writer: String? = nil,
        names: [String] = []
    ) {
        self.seq = seq
        self.path = path
        self.reason = reason
        self.digest = digest
        self.isNewerFormat = isNewerFormat
        self.writer = writer
        self.names = names
    }
}

/// The heads of every record in a zone as of one log position (the change token).
///
/// Folding the log in order is deterministic: every device that has read to the same token holds the same
/// heads, whatever order it read them in.
public struct ZoneState: Sendable, Hashable {
    /// The change token: the sequence of the last entry folded in.
    public var token: Int64
    /// The digest of the entry at `token` (``LogEntry/chainDigest``): the next entry must name it as `prev`.
    /// `nil` at token 0, and where it is not known (a token stored by a build before the chain).
    public var chain: ContentDigest?
    /// The chain digests of the entries before `token`: `token - 1`, `token - 2` … (up to
    /// ``LogEntry/earlierLinks``; `nil` where not known). What a commit names as ``LogEntry/earlier``.
    public var earlier: [ContentDigest?] = []
    public var heads: RecordTable<RecordHead>
    public var quarantined: [QuarantinedChange]
    /// Changes whose `base` was not the head when their entry claimed its slot. A correct writer never
    /// produces one; fsck reports them.
    public var casViolations: [QuarantinedChange]
    /// Log slots passed over because their entry could not be read (torn, damaged, misplaced, a link).
    public var damaged: [DamagedEntry]

    /// Names whose head changed since the last ``takeUnsaved()``: what the local state must store along with
    /// the token, so the stored token never runs ahead of the stored heads (an entry folded in while a commit
    /// lost its race would otherwise be skipped for good by the next process). Not part of equality.
    public private(set) var unsaved: Set<RecordName> = []
    /// Names whose head changed since a sync last planned them: a partial (agent) sync plans these along with
    /// the paths it was given, including records of an entry folded in while a commit lost its race. Not part
    /// of equality.
    public var unplanned: Set<RecordName> = []
    /// The file of the entry at `token` as it was when last read and found to be the entry read (its digest), so
    /// that a quick check of the log's end needs only an `lstat`. Not stored, not part of equality.
    public var verifiedTail: StatFingerprint?
    /// Slots whose entry could not be read (damaged) or was lost (a void entry): a change based on one of them is
    /// not a compare-and-swap violation. Not stored, not part of equality.
    public var unreadableSlots: Set<Int64> = []
    /// The token this state had before it last jumped to a snapshot (``jump(to:)``), nil when it never did. Not
    /// stored, not part of equality.
    public var jumpedFrom: Int64?
    /// The position of the gc snapshot this state was read from (0 when none): a name it has no head for may have
    /// had a tombstone the retention policy forgot, so a change based on a slot up to here and finding no head is
    /// taken as checked (docs/retention.md). Not stored, not part of equality.
    public var compactedAt: Int64 = 0

    public init(token: Int64 = 0, chain: ContentDigest? = nil, heads: RecordTable<RecordHead> = [:]) {
        self.token = token
        self.chain = chain
        self.heads = heads
        self.quarantined = []
        self.casViolations = []
        self.damaged = []
    }

    /// What a sync reports about the server: every change quarantined and every entry skipped, each with the
    /// file or entry it is about and the fix.
    public var problems: [String] {
        quarantined.map {
            "quarantined on the server: \($0); this change is skipped, no note is written for it\n"
                + "  fix: rename the note on the device that saved it; `notesync server fsck` lists every bad entry"
        }
            + damaged.map {
                "\($0); every device skips this entry, what it held is not applied\n"
                    + "  fix: run `notesync server fsck` on the server folder; \($0.fix)"
            }
    }

    public static func == (a: ZoneState, b: ZoneState) -> Bool {
        a.token == b.token && a.chain == b.chain && a.heads == b.heads && a.quarantined == b.quarantined
            && a.casViolations == b.casViolations
            && a.damaged == b.damaged
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(token)
        hasher.combine(heads)
    }

    /// Marks every head saved: the caller stored the heads of ``unsaved`` itself (``SyncEngine`` stores them straight
    /// from ``heads``, with no dictionary of them made first).
    public mutating func markSaved() {
        unsaved = []
    }

    /// The heads changed since the last call, to be stored with ``token``; forgets them. `nil` for a head that is
    /// gone (a jump to a snapshot that forgot it). An array made at its size, not a dictionary grown a head at a time:
    /// the commit of a folder renamed changes a head per note moved, and that dictionary would be much of its peak.
    public mutating func takeUnsaved() -> [(name: RecordName, head: RecordHead?)] {
        var changed: [(name: RecordName, head: RecordHead?)] = []
        changed.reserveCapacity(unsaved.count)
        for name in unsaved { changed.append((name, heads[name])) }
        unsaved = []
        return changed
    }

    /// Takes the snapshot's state in place of the log this device could not read any more (gc removed the entries
    /// after its token: docs/retention.md). Every head that changes, appears or goes is marked unsaved and unplanned;
    /// ``jumpedFrom`` keeps the token before.
    public mutating func jump(to snapshot: ZoneState) {
        let old = heads
        jumpedFrom = token
        token = snapshot.token
        chain = snapshot.chain
        earlier = snapshot.earlier
        heads = snapshot.heads
        compactedAt = snapshot.compactedAt
        verifiedTail = nil
        for (name, head) in heads where old[name] != head {
            unsaved.insert(name)
            unplanned.insert(name)
        }
        for name in old.keys where heads[name] == nil {
            unsaved.insert(name)
            unplanned.insert(name)
        }
    }

    /// The current tag of `name` (0 when the record was never seen).
    public func tag(of name: RecordName) -> Int64 { heads[name]?.tag ?? 0 }

    /// Folds the entry at `token + 1` into the heads. An `own` entry is this device's commit, just landed: its names
    /// were planned by the sync that made it, so they are not marked unplanned (else the next partial sync would
    /// read those notes again, and an agent would commit a note saved meanwhile without waiting for its pace).
    public mutating func apply(_ entry: LogEntry, own: Bool = false) {
        precondition(entry.seq == token + 1, "entries are folded in order")
        advance(to: entry.seq, chain: entry.chainDigest)
        if entry.void != nil { unreadableSlots.insert(entry.seq) }
        let moves = MoveLinks(entry)
        // Room for the entry's new names at once: a rename adds a head per note moved (the old names stay, as
        // tombstones), and appended one by one they would grow the rows by doubling, to up to twice that, at the
        // peak of the device that folds it in. The sets of names too: grown by doubling, a set holds its old and new
        // buckets at once, at the peak of the commit that folds them in. Only the names each lacks count (a rename
        // and its rename back, folded in before the names are stored, would otherwise double it for nothing).
        if entry.changes.count > 1 {
            var newHeads = 0
            var newUnsaved = 0
            var newUnplanned = 0
            for change in entry.changes {
                // An empty name is quarantined below, never added.
                guard let name = RecordName(trusted: change.name) else { continue }
                if !heads.contains(name) { newHeads += 1 }
                if !unsaved.contains(name) { newUnsaved += 1 }
                if !own && !unplanned.contains(name) { newUnplanned += 1 }
            }
            heads.reserveRoom(forAdding: newHeads)
            unsaved.reserveCapacity(unsaved.count + newUnsaved)
            if !own { unplanned.reserveCapacity(unplanned.count + newUnplanned) }
        }
        for (index, change) in entry.changes.enumerated() {
            let name: RecordName
            do { name = try RecordName(validating: change.name) } catch {
                quarantined.append(
                    QuarantinedChange(
                        seq: entry.seq, name: QuarantinedChange.displayName(change.name),
                        reason: error.reason))
                continue
            }
            if change.op == .save && change.text == nil {
                quarantined.append(
                    QuarantinedChange(
                        seq: entry.seq, name: name.description,
                        reason: "a save without text"))
                continue
            }
            // A change based on a slot whose entry is lost (damaged, or sealed void) cannot be checked. Either way the
            // change is applied (every device that read the lost entry applied it), but its line is marked: what it
            // replaced may not be in it (an entry of another history delivered after a gap).
            let previous = heads[name]
            var unverifiedSince = previous?.unverifiedSince ?? 0
            if change.base != (previous?.tag ?? 0) && !(previous == nil && change.base <= compactedAt) {
                unverifiedSince = entry.seq
                if !unreadableSlots.contains(change.base) {
                    casViolations.append(
                        QuarantinedChange(
                            seq: entry.seq, name: name.description,
                            reason: "based on \(change.base) but the head was \(tag(of: name))"))
                }
            }
            unsaved.insert(name)
            // A name an entry folded in before this one left unplanned stays so.
            if !own { unplanned.insert(name) }
            // The other half's name as the heads hold it, when they do (the save's name moved from is a head
            // already): the entry's own copy is let go.
            let moved = moves.moved(at: index, name: name).map { heads.storedName($0) ?? $0 }
            heads[name] = RecordHead(
                tag: entry.seq, deleted: change.op == .delete,
                text: change.op == .delete ? nil : change.text,
                modified: change.modified, version: change.version, device: entry.device,
                unverifiedSince: unverifiedSince, moved: moved)
        }
    }

    /// The moves of an entry, both ways: for the delete's name, the name moved to, and for the save's, the name moved
    /// from. A link counts only when both halves are in the entry and name each other (a save that names a delete
    /// it does not come with is a plain save).
    ///
    /// A ``RecordTable``, not a `Dictionary` (the same semantics: the last link that names a name counts): smaller
    /// than a dictionary's buckets, and held through the fold of the entry, where a rename's commit peaks.
    package static func moves(in entry: LogEntry) -> RecordTable<RecordName> {
        guard entry.changes.contains(where: { $0.movedFrom != nil }) else { return [:] }
        // Made at their size: grown by doubling, an entry of 50,000 moves held their old and new buckets at once.
        let halves = entry.changes.lazy.filter { $0.movedTo != nil }.count
        var deletes: [String: String] = [:]
        deletes.reserveCapacity(halves)
        for change in entry.changes where change.op == .delete {
            if let to = change.movedTo { deletes[change.name] = to }
        }
        var moves = RecordTable<RecordName>(minimumCapacity: halves * 2)
        for change in entry.changes where change.op == .save {
            guard let from = change.movedFrom, from != change.name, deletes[from] == change.name,
                let fromName = try? RecordName(validating: from), let toName = try? RecordName(validating: change.name)
            else { continue }
            moves[toName] = fromName
            moves[fromName] = toName
        }
        return moves
    }

    /// The moves of an entry as ``moves(in:)`` finds them, asked for by the change: for each change, the index of the
    /// other half of its move. Where every name of the entry (and every name its moves give) is in NFC, as every
    /// valid name is, and none comes twice, the halves are found in the changes sorted by name, two 4-byte indices a
    /// change, with no table of names (nor a dictionary to make it) at the fold of the entry, where the commit of a
    /// rename peaks. Otherwise (a name twice, where the last link counts; a
    /// name not in NFC, equal as Unicode to another that is not the same bytes) it is ``moves(in:)``'s table.
    struct MoveLinks {
        private enum Form {
            case none
            case partners([Int32], [RecordChange])
            case table(RecordTable<RecordName>)
        }
        private let form: Form

        package init(_ entry: LogEntry) {
            let changes = entry.changes
            guard changes.contains(where: { $0.movedFrom != nil }) else {
                form = .none
                return
            }
            let plain =
                changes.count < Int32.max
                && changes.allSatisfy { change in
                    Self.isNFC(change.name) && (change.movedFrom.map(Self.isNFC) ?? true) && (change.movedTo.map(Self.isNFC) ?? true)
                }
            guard plain, let order = Self.nameOrder(changes) else {
                form = .table(ZoneState.moves(in: entry))
                return
            }
            func changeNamed(_ name: String) -> Int? {
                let low = BinarySearch.lowerBound(order.count) { UTF8Bytes.precedes(changes[Int(order[$0])].name, name) }
                guard low < order.count, UTF8Bytes.equal(changes[Int(order[low])].name, name) else { return nil }
                return Int(order[low])
            }
            var partners = [Int32](repeating: -1, count: changes.count)
            for (index, change) in changes.enumerated() where change.op == .save {
                guard let from = change.movedFrom, from != change.name, let other = changeNamed(from),
                    changes[other].op == .delete, changes[other].movedTo == change.name,
                    (try? RecordName(validating: from)) != nil, (try? RecordName(validating: change.name)) != nil
                else { continue }
                partners[index] = Int32(other)
                partners[other] = Int32(index)
            }
            form = .partners(partners, changes)
        }

        /// Whether `text` is in NFC, where `String ==` (Unicode's canonical equivalence, which the table's lookups use)
        /// is byte equality. Every valid name is (``RecordName/init(validating:)``).
        private static func isNFC(_ text: String) -> Bool { UTF8Bytes.isASCII(text) || RecordName.isNFC(text) }

        /// The indices of `changes` in byte order of their names; nil when a name comes twice.
        private static func nameOrder(_ changes: [RecordChange]) -> [Int32]? {
            var order = [Int32](unsafeUninitializedCapacity: changes.count) { buffer, count in
                for index in 0..<changes.count { buffer[index] = Int32(index) }
                count = changes.count
            }
            order.sort { UTF8Bytes.precedes(changes[Int($0)].name, changes[Int($1)].name) }
            for position in order.indices.dropFirst()
            where UTF8Bytes.equal(changes[Int(order[position])].name, changes[Int(order[position - 1])].name) {
                return nil
            }
            return order
        }

        /// Whether the halves were found by index (not in ``moves(in:)``'s table): for the tests.
        var isByIndex: Bool {
            if case .partners = form { true } else { false }
        }

        /// The other name of the move the change at `index` (named `name`) is half of, if it is.
        package func moved(at index: Int, name: RecordName) -> RecordName? {
            switch form {
            case .none: nil
            case .table(let table): table[name]
            case .partners(let partners, let changes):
                partners[index] < 0 ? nil : RecordName(trusted: changes[Int(partners[index])].name)
            }
        }
    }

    /// Where the record that had `name` is now, following its moves: the live head's name at the end of the line of
    /// moves that starts at `name`'s tombstone. `nil` when `name`'s head is not a move's tombstone, or the line ends
    /// in a delete, or loops.
    public func destination(of name: RecordName) -> RecordName? {
        var current = name
        var seen: Set<RecordName> = [name]
        while let head = heads[current], let next = head.movedTo {
            guard let nextHead = heads[next], seen.insert(next).inserted else { return nil }
            if !nextHead.deleted {
                // The save of the move, or a later save of that name in the same line (it was based on the move).
                return next
            }
            current = next
        }
        return nil
    }

    /// Passes over a slot whose entry is damaged: the token moves, nothing is applied, and the chain is not bound
    /// to the damaged file's bytes (the entry after it is taken as it comes).
    public mutating func skip(seq: Int64) {
        precondition(seq == token + 1, "entries are folded in order")
        advance(to: seq, chain: nil)
        unreadableSlots.insert(seq)
    }

    private mutating func advance(to seq: Int64, chain next: ContentDigest?) {
        if token > 0 {
            earlier.insert(chain, at: 0)
            if earlier.count > LogEntry.earlierLinks { earlier.removeLast(earlier.count - LogEntry.earlierLinks) }
        }
        token = seq
        chain = next
    }
}

extension RecordTable<RecordHead> {
    /// Makes each head's ``RecordHead/moved`` share the string of the head it names (the other half of its move),
    /// where there is one: for heads decoded from a snapshot, each a string of its own (``Snapshot/state``;
    /// ``LocalState/zoneState()`` does the same as it loads the heads, without making the copies). Call it on a table
    /// nothing else holds: on a shared one, the first change copies every row.
    package mutating func shareMovedNames() {
        for row in 0..<count {
            guard let moved = value(atRow: row).moved, let stored = storedName(moved) else { continue }
            modifyValue(atRow: row) { $0.moved = stored }
        }
    }
}
