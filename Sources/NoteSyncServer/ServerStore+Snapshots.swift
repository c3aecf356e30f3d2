import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// A snapshot: the heads of every record (tombstones included) as of log position `seq`.
///
/// Format 3 (docs/retention.md): gc publishes one at the log's end, with the chain digest of entry `seq` and the
/// older versions the retention policy keeps (``history``), and then removes the entries before it. A device whose
/// token is older jumps to it (``ServerStore/jump(_:)``); `history` and `restore` read its versions.
public struct Snapshot: Codable, Sendable, Hashable {
    public struct Head: Codable, Sendable, Hashable {
        public var name: RecordName
        public var head: RecordHead
        /// The commit time of the entry that made this head (format 3; absent in older snapshots).
        public var time: Int64?
    }

    public var seq: Int64
    public var time: Int64
    public var device: String
    public var heads: [Head]
    /// The chain digest of the entry at `seq` (format 3): a device that jumps here checks that entry against it.
    public var chain: ContentDigest?
    /// The chain digests of the entries before `seq` (``ZoneState/earlier``).
    public var earlier: [ContentDigest?]?
    /// The versions before the heads that the retention policy keeps, by name then sequence (format 3).
    public var history: [RecordVersion]?
    /// The entry ``links`` starts at.
    public var linksFrom: Int64?
    /// Four bytes of the chain digest of every entry from ``linksFrom`` up to `seq` (``ContentDigest/link``; 0 where
    /// the slot was damaged), big-endian, so that the log's history outlives the entries gc removes: a device that
    /// jumps here from a token it read checks that entry against its link, and a server restored from an older copy
    /// (or another server) is told from a compacted log (docs/retention.md). Optional: a snapshot without it knows
    /// only its own entry's link (``link(at:)``).
    public var links: Data?

    /// The link of the entry at `seq`, when this snapshot knows it.
    public func link(at seq: Int64) -> UInt32? {
        if seq == self.seq { return chain?.link }
        if let links, let from = linksFrom, seq >= from, (seq - from + 1) * 4 <= Int64(links.count) {
            let offset = links.startIndex + Int(seq - from) * 4
            let value = links[offset..<offset + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if value != 0 { return value }
        }
        // The entries just before the snapshot's (``ZoneState/earlier``): earlier[0] is entry seq - 1.
        let back = self.seq - 1 - seq
        if let earlier, back >= 0, back < Int64(earlier.count), let digest = earlier[Int(back)] { return digest.link }
        return nil
    }

    public init(state: ZoneState, device: String, time: Int64 = Clock.nowNanoseconds()) {
        self.seq = state.token
        self.time = time
        self.device = device
        self.heads = state.heads.sorted { $0.key < $1.key }.map { Head(name: $0.key, head: $0.value) }
        self.chain = state.chain
        self.earlier = state.earlier
    }

    /// The zone state this snapshot describes: a table of every head, built anew each time it is asked (take it
    /// once, not inside a loop over the heads).
    public var state: ZoneState {
        var table = RecordTable<RecordHead>(minimumCapacity: heads.count)
        for head in heads { table[head.name] = head.head }
        // Decoded, each name moved to or from is a string of its own: shared here, while the table is this
        // function's alone (once a state holds it, changing a row would copy every row first).
        table.shareMovedNames()
        var state = ZoneState(token: seq, chain: chain, heads: table)
        state.earlier = earlier ?? []
        if history != nil { state.compactedAt = seq }
        return state
    }
}

/// One version of a record as a snapshot keeps it: what the change at `seq` made the record.
public struct RecordVersion: Codable, Sendable, Hashable {
    public var name: RecordName
    public var seq: Int64
    /// The commit time of the entry, ns since 1970.
    public var time: Int64
    public var device: String
    public var deleted: Bool
    public var text: AssetRef?
    public var modified: Int64
    /// On a move's tombstone the name moved to; on a move's save the name moved from.
    public var moved: RecordName?

    public init(name: RecordName, seq: Int64, time: Int64, head: RecordHead) {
        self.name = name
        self.seq = seq
        self.time = time
        self.device = head.device
        self.deleted = head.deleted
        self.text = head.text
        self.modified = head.modified
        self.moved = head.moved
    }
}

extension ServerStore {
    /// Writes a snapshot of `state`. A snapshot of the same position already there is left as it is
    /// (snapshots are deterministic: the same log gives the same heads).
    public func writeSnapshot(of state: ZoneState) throws {
        let data = try seal(Snapshot(state: state, device: device), kind: "snapshot", place: String(state.token))
        if try publish(data, as: layout.snapshotPath(state.token), suffix: "snapshot") == .published {
            try storage.syncDirectory(layout.snapshotsDirectory)
        }
    }

    /// Sequences of the snapshots on the server, newest first.
    public func snapshotSequences() throws -> [Int64] {
        let names = try storage.list(layout.snapshotsDirectory) ?? []
        return names.compactMap { ServerLayout.sequence(ofFileName: $0) }.sorted(by: >)
    }

    /// Reads and verifies the snapshot at `seq`.
    public func readSnapshot(_ seq: Int64) throws -> Snapshot {
        let path = layout.snapshotPath(seq)
        guard let data = try storage.read(path, limit: Self.maxSnapshotBytes) else {
            throw NoteSyncError(.corrupt, path: path, "snapshot is missing")
        }
        do {
            let snapshot = try open(data, kind: "snapshot", place: String(seq), as: Snapshot.self)
            guard snapshot.seq == seq else {
                throw NoteSyncError(
                    .corrupt, path: path, "holds snapshot \(snapshot.seq): misplaced",
                    fix: "run `notesync server fsck`")
            }
            return snapshot
        } catch let failure as SealedFile.Failure {
            if case .encrypted = failure, marker.isEncrypted { throw keyNeeded }
            throw NoteSyncError(.corrupt, path: path, failure.description, fix: "run `notesync server fsck`")
        }
    }

    /// The zone state of a device that knows nothing yet: the newest snapshot that reads and belongs to this log
    /// (``anchoredSnapshot(_:)``), then every later entry. A damaged snapshot is reported and the next older one
    /// used; with none, the whole log is read.
    public func bootstrap() throws -> ZoneState {
        var state = newestAnchoredSnapshot()?.state ?? ZoneState()
        try fetch(into: &state)
        return state
    }

    /// The snapshot at `seq` if it reads and belongs to the log on the server now: its entry `seq` is there with the
    /// chain digest it names (gc keeps that entry), or, that entry lost, the entry after it names it. A snapshot of
    /// an earlier life of the server (its entry replaced since) is not. A snapshot without a chain (never written by
    /// a build that compacts) is taken as it is.
    public func anchoredSnapshot(_ seq: Int64) -> Snapshot? {
        let snapshot: Snapshot
        do { snapshot = try readSnapshot(seq) } catch {
            // Without the key nothing reads: not a damaged snapshot (the caller's own reads say what is missing).
            if (error as? NoteSyncError)?.kind != .key {
                logger.error("server.snapshot.damaged", metadata: ["server.seq": "\(seq)", "reason": "\(error)"])
            }
            return nil
        }
        guard let chain = snapshot.chain else { return snapshot }
        switch try? readSlot(seq) {
        case .entry(let entry)?: return entry.chainDigest == chain ? snapshot : nil
        case .missing?:
            if case .entry(let next)? = try? readSlot(seq + 1), next.prev == chain { return snapshot }
            return nil
        default: return nil
        }
    }

    /// The newest snapshot that reads and belongs to this log, if any.
    public func newestAnchoredSnapshot(after token: Int64 = -1) -> Snapshot? {
        for seq in (try? snapshotSequences()) ?? [] where seq > token {
            if let snapshot = anchoredSnapshot(seq) { return snapshot }
        }
        return nil
    }

    /// The entry in slot `seq` when it is the one this log holds there, for a walk back through a record's
    /// versions; nil for a slot that is empty, damaged, or not the log's. At or below the position of a gc snapshot
    /// the log was compacted, and an entry found there is one a gc stopped halfway has not removed yet, or one a
    /// replicating tool delivered late into the freed slot: an entry of a history the log does not have (the slot
    /// was taken again while it was held). Only an entry whose link the snapshot keeps (``Snapshot/link(at:)``) is
    /// the log's; walked as one, another is a version the record never had, taken as a note's base. Above every
    /// snapshot the entry is the log's: devices check its chain as they fetch it. Lists the snapshots; one is read
    /// only for a slot at or below one.
    public func logEntry(_ seq: Int64) -> LogEntry? {
        guard case .entry(let entry)? = try? readSlot(seq) else { return nil }
        guard hasRetention, let newest = try? snapshotSequences().first, seq <= newest,
            let snapshot = newestAnchoredSnapshot(after: seq - 1), snapshot.chain != nil, snapshot.history != nil
        else { return entry }
        guard let link = snapshot.link(at: seq), entry.chainDigest?.link == link else { return nil }
        return entry
    }
}
