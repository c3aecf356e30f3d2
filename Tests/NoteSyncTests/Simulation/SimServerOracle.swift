import Foundation

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// The rule *no device silently stops syncing* (issue 12): while a server fault is in effect, which devices it
/// affects and what each must report, worked out from the server's files and what the device persisted, as
/// docs/server-format.md (Format 2: verification points, gaps, rollback and replacement) says a device checks them.
///
/// It reads the server the way the documentation describes a reader, not through the engine: the marker's id
/// against the id the folder is bound to; from the device's token on, each entry's `prev` against the chain digest
/// of the entry before it; at the first empty slot, the tip (entry `t` there and the one read) and an entry after
/// the empty slot (anywhere later for a full fetch, in the next slot only for a partial sync's quick check).
enum SimServerOracle {
    /// What an affected device must do: fail with one of `kinds`.
    struct Expected: CustomStringConvertible {
        var kinds: Set<NoteSyncError.Kind>
        /// What the device finds, for the finding.
        var condition: String

        var description: String { condition }

        /// The kinds, for the finding.
        var named: String { kinds.map(\.rawValue).sorted().joined(separator: " or ") }
    }

    /// What a device that knows `token` and `chain` and is bound to `boundID` finds when it fetches from the server
    /// at `serverRoot` now; nil when it may sync on. `quickEnd`: a partial sync, whose fetch looks for an entry after
    /// an empty slot in the next slot only (`checkEnd(.quick)`). The walk stops at the first failure, as a fetch does.
    static func expected(
        serverRoot: String, boundID: String?, token: Int64, chain: ContentDigest?, quickEnd: Bool
    ) throws -> Expected? {
        let layout = ServerLayout(root: serverRoot)
        guard let markerData = try FileIO.read(layout.marker),
            let marker = try? JSONDecoder().decode(ServerMarker.self, from: markerData)
        else { return nil }
        if let boundID, marker.id != boundID {
            return Expected(
                kinds: [.serverMismatch],
                condition: "the server at its path has id \(marker.id), and the device is bound to server \(boundID)")
        }
        var present: Set<Int64> = []
        for shard in try FileIO.list(layout.logDirectory) ?? [] {
            for name in try FileIO.list(layout.logDirectory + "/" + shard) ?? [] {
                if let seq = ServerLayout.sequence(ofFileName: name) { present.insert(seq) }
            }
        }
        var token = token
        var chain = chain
        while true {
            let next = token + 1
            switch try slot(layout, next) {
            case .entry(let entry, let digest):
                if let known = chain {
                    if let prev = entry.prev, prev != known {
                        return Expected(
                            kinds: [.serverMismatch],
                            condition: "entry \(next) does not follow the entry \(next - 1) the device holds (another log)")
                    }
                    if entry.prev == nil && marker.format >= 2 && entry.void == nil {
                        return Expected(kinds: [.serverMismatch], condition: "entry \(next) names no entry before it")
                    }
                }
                chain = entry.void.map { $0.lost ?? digest } ?? digest
                token = next
            case .damaged:
                // The chain is not bound to a damaged file's bytes: the entry after it is taken as it comes.
                chain = nil
                token = next
            case .missing:
                // Format 3: gc compacted the log past the device's token; the newest snapshot after it whose entry
                // proves it (or, that entry lost, the entry after it names it) holds what came before.
                if marker.format >= 3, let (seq, known) = try compactionPoint(layout, after: token) {
                    token = seq
                    chain = known
                    continue
                }
                if token > 0 {
                    switch try slot(layout, token) {
                    case .missing:
                        return Expected(
                            kinds: [.serverMismatch],
                            condition: "entry \(token), the last the device read, is missing (the server is behind it)")
                    case .entry(let entry, let digest):
                        let found = entry.void.map { $0.lost ?? digest } ?? digest
                        if let known = chain, found != known {
                            return Expected(
                                kinds: [.serverMismatch],
                                condition: "entry \(token) is not the entry \(token) the device read (another log)")
                        }
                    case .damaged(let digest):
                        if let known = chain, digest != known {
                            return Expected(
                                kinds: [.serverMismatch],
                                condition: "entry \(token) is not the entry \(token) the device read (damaged)")
                        }
                    }
                }
                let later = quickEnd ? (present.contains(next + 1) ? next + 1 : nil) : present.filter { $0 > next }.min()
                if let later {
                    return Expected(kinds: [.logGap], condition: "entry \(next) is missing while entry \(later) is there (a gap)")
                }
                return nil
            }
        }
    }

    /// The same for `device` as it persisted its view of the server. That is what its engine starts from in the
    /// simulation: a sync stores each view it fetched (`saveZone`) before it goes on, a failed one leaves the engine
    /// nothing in memory, and a dry run changes neither.
    static func expected(serverRoot: String, device: SimDevice, quickEnd: Bool) throws -> Expected? {
        let zone = try device.state.zoneState()
        return try expected(
            serverRoot: serverRoot, boundID: try device.state.meta(.serverID), token: zone.token, chain: zone.chain,
            quickEnd: quickEnd)
    }

    /// Whether fsck sealed a slot: a device that had read the lost entry then reads the log again from its start,
    /// where it may meet another condition first.
    static func hasVoids(serverRoot: String) throws -> Bool {
        !(try FileIO.list(ServerLayout(root: serverRoot).voidsDirectory) ?? []).isEmpty
    }

    private static func compactionPoint(_ layout: ServerLayout, after token: Int64) throws -> (Int64, ContentDigest)? {
        let names = (try FileIO.list(layout.snapshotsDirectory) ?? []).compactMap { ServerLayout.sequence(ofFileName: $0) }
        for seq in names.sorted(by: >) where seq > token {
            guard let data = try FileIO.read(layout.snapshotPath(seq)),
                let snapshot = try? SealedFile.open(data, kind: "snapshot", as: Snapshot.self), let known = snapshot.chain
            else { continue }
            switch try slot(layout, seq) {
            case .entry(let entry, let digest) where (entry.void.map { $0.lost ?? digest } ?? digest) == known: return (seq, known)
            case .missing:
                if case .entry(let next, _) = try slot(layout, seq + 1), next.prev == known { return (seq, known) }
            default: break
            }
        }
        return nil
    }

    private enum Slot {
        case missing
        case entry(LogEntry, digest: ContentDigest)
        case damaged(digest: ContentDigest)
    }

    /// One slot as a reader finds it: the file's digest, and its entry if it opens as the entry of that slot.
    private static func slot(_ layout: ServerLayout, _ seq: Int64) throws -> Slot {
        guard let data = try FileIO.read(layout.entryPath(seq)) else { return .missing }
        let digest = ContentDigest(of: data)
        guard let entry = try? SealedFile.open(data, kind: "entry", as: LogEntry.self), entry.seq == seq else {
            return .damaged(digest: digest)
        }
        return .entry(entry, digest: digest)
    }
}
