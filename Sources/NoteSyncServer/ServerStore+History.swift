import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

extension ServerStore {
    /// One version of a note in the log: the entry and the change, whose name is the one the note had then.
    public struct NoteVersion: Sendable {
        public var seq: Int64
        public var entry: LogEntry
        public var change: RecordChange
    }

    /// Every save and delete of the note `name` still in the log, oldest first, following its renames back: before
    /// a move to a name, the note's versions are those of the name it moved from. The delete half of a move is not
    /// a version of its own (the save half says where the note came from). Two reads of the log: the moves first,
    /// then the versions.
    public func history(of name: RecordName) throws -> [NoteVersion] {
        var moves: [(seq: Int64, from: String, to: String)] = []
        try eachEntry { seq, entry in
            for change in entry.changes where change.op == .save {
                if let from = change.movedFrom { moves.append((seq, from, change.name)) }
            }
        }
        // The name the note had in each stretch of the log, newest first: (from this slot on, the name).
        var names: [(since: Int64, name: String)] = []
        var current = name.string
        var upper = Int64.max
        var seen: Set<String> = []
        while let move = moves.last(where: { $0.to == current && $0.seq < upper }), seen.insert("\(move.seq)").inserted {
            names.append((move.seq, current))
            current = move.from
            upper = move.seq
        }
        names.append((0, current))
        func nameAt(_ seq: Int64) -> String { names.first { seq >= $0.since }?.name ?? current }
        var versions: [NoteVersion] = []
        try eachEntry { seq, entry in
            let expected = nameAt(seq)
            for change in entry.changes where change.name == expected {
                // The old name's delete in the move that took the note away from it.
                if change.movedTo != nil, nameAt(seq + 1) != expected { continue }
                versions.append(NoteVersion(seq: seq, entry: entry, change: change))
            }
        }
        return versions
    }

    /// Each readable entry of the log in order, from slot 1 to the first missing slot (damaged ones are passed over).
    /// On a compacted server (format 3), the versions the newest readable snapshot keeps come first, each group of
    /// one slot as an entry of its own (commit `snapshot-N`), then the entries after the snapshot.
    private func eachEntry(_ body: (Int64, LogEntry) throws -> Void) throws {
        var seq: Int64 = 1
        if hasRetention, let snapshot = newestAnchoredSnapshot(), snapshot.history != nil {
            var versions = snapshot.history ?? []
            versions += snapshot.heads.map {
                RecordVersion(name: $0.name, seq: $0.head.tag, time: $0.time ?? snapshot.time, head: $0.head)
            }
            versions.sort { ($0.seq, $0.name) < ($1.seq, $1.name) }
            var index = 0
            while index < versions.count {
                let first = versions[index]
                var changes: [RecordChange] = []
                while index < versions.count && versions[index].seq == first.seq {
                    let version = versions[index]
                    var change =
                        version.deleted || version.text == nil
                        ? RecordChange.delete(version.name, base: 0, modified: version.modified)
                        : RecordChange.save(version.name, base: 0, text: version.text!, modified: version.modified)
                    if let moved = version.moved {
                        if version.deleted { change.movedTo = moved.string } else { change.movedFrom = moved.string }
                    }
                    changes.append(change)
                    index += 1
                }
                try body(
                    first.seq,
                    LogEntry(
                        seq: first.seq, commit: "snapshot-\(snapshot.seq)", device: first.device, time: first.time,
                        changes: changes))
            }
            seq = snapshot.seq + 1
        }
        while true {
            switch try readSlot(seq) {
            case .missing: return
            case .damaged: break
            case .entry(let entry): try body(seq, entry)
            }
            seq += 1
        }
    }

}
