import Foundation
import Logging

/// A save or delete that lost the race for its slot: another device changed the record first.
///
/// Carries what the engine needs to resolve it, as CloudKit's `serverRecordChanged` does: the ancestor (base),
/// the client's change, and the server head.
public struct ServerChangedConflict: Sendable, Hashable {
    public var name: RecordName
    public var base: Int64
    public var ours: RecordChange
    public var server: RecordHead?
}

/// The result of a commit attempt.
public enum CommitOutcome: Sendable, Hashable {
    /// The entry holds slot `seq`; the state has it folded in.
    case committed(LogEntry)
    /// Nothing was committed; the state has the newer entries folded in and these records changed under us.
    case conflicts([ServerChangedConflict])
}

/// What reading one log slot found.
public enum SlotContent: Sendable, Hashable {
    case missing
    case entry(LogEntry)
    case damaged(DamagedEntry)
}

extension ServerStore {
    /// Reads the entry in slot `seq`. A missing slot is `.missing`; a torn, damaged, misplaced or symlinked
    /// file is `.damaged` (the slot is claimed, so it is skipped, never re-claimed and never applied).
    public func readSlot(_ seq: Int64) throws -> SlotContent {
        let path = layout.entryPath(seq)
        let data: Data
        do {
            guard let read = try FileIO.read(path, limit: Self.maxEntryBytes) else { return .missing }
            data = read
        } catch let error as NoteSyncError where error.kind == .corrupt {
            return .damaged(DamagedEntry(seq: seq, path: path, reason: error.message))
        }
        do {
            let entry = try SealedFile.open(data, kind: "entry", as: LogEntry.self)
            guard entry.seq == seq else {
                return .damaged(DamagedEntry(seq: seq, path: path, reason: "holds entry \(entry.seq): misplaced"))
            }
            return .entry(entry)
        } catch {
            var damage = DamagedEntry(seq: seq, path: path, reason: error.description)
            if case .newerFormat = error { damage.isNewerFormat = true }
            return .damaged(damage)
        }
    }

    /// Reads every entry after `state.token` (opening t+1, t+2 … until the first missing one) and folds it in.
    /// Returns the entries applied and the damaged slots skipped, in order. An idle poll costs one failed open.
    @discardableResult
    public func fetch(into state: inout ZoneState, limit: Int = .max) throws -> [SlotContent] {
        var read: [SlotContent] = []
        while read.count < limit {
            let slot = try readSlot(state.token + 1)
            switch slot {
            case .missing:
                return read
            case .entry(let entry):
                state.apply(entry)
            case .damaged(let damage):
                if damage.isNewerFormat && isReadOnly {
                    // The server says it is newer: this entry is likely valid, only not for this build. Skipping it
                    // would pass over it for good (the token moves on), so stop here instead.
                    throw NoteSyncError(.serverNewerFormat, path: damage.path,
                                        "\(damage.reason); this build reads the log only up to the entry before it",
                                        fix: "update notesync on this device; local changes stay queued meanwhile")
                }
                logger.notice("server.entry.damaged", metadata: ["server.seq": "\(damage.seq)",
                                                                  "server.path": "\(damage.path)",
                                                                  "reason": "\(damage.reason)"])
                state.skip(seq: damage.seq)
                state.damaged.append(damage)
            }
            read.append(slot)
        }
        return read
    }

    /// Commits `changes` as one atomic entry, claiming slot `state.token + 1` by an atomic no-replace publish.
    ///
    /// The assets the changes reference must already be published (``putAsset(_:)``). When the slot is taken
    /// the winner is folded in; if it touched one of our records the commit stops with `.conflicts`, otherwise it
    /// claims the next slot. After an error other than "taken" the slot is read back: NFS and sshfs can report a
    /// failure for a link or rename that happened.
    public func commit(_ changes: [RecordChange], into state: inout ZoneState, time: Int64 = Clock.nowNanoseconds())
        throws -> CommitOutcome
    {
        try requireWritable()
        precondition(!changes.isEmpty, "commit needs at least one change")
        var names = Set<RecordName>()
        for change in changes {
            let name: RecordName
            do { name = try RecordName(validating: change.name) } catch {
                throw NoteSyncError(.invalidName, path: change.name, error.reason, fix: "rename the note")
            }
            guard names.insert(name).inserted else {
                throw NoteSyncError(.usage, path: change.name, "appears twice in one commit")
            }
        }
        if let stale = staleConflicts(changes, state) { return .conflicts(stale) }
        let commitID = UUID().uuidString.lowercased()
        let primitive = try primitive()
        while true {
            let seq = state.token + 1
            let entry = LogEntry(seq: seq, commit: commitID, device: device, time: time, changes: changes)
            let data = try SealedFile.seal(entry, kind: "entry")
            let destination = layout.entryPath(seq)
            try FileIO.makeDirectory(layout.shardDirectory(of: seq))
            let temp = layout.tempPath(device: device, suffix: "entry")
            try FileIO.createAndSync(temp, data)
            try FaultPoint.hit("commit.entryWritten")
            let outcome: AtomicPublish.Outcome
            do {
                outcome = try AtomicPublish.publish(temp, as: destination, using: primitive)
            } catch let error as NoteSyncError {
                unlink(temp)
                switch try readSlot(seq) {
                case .missing:
                    throw error
                case .entry(let found) where found.commit == commitID:
                    logger.notice("server.commit.confirmed", metadata: ["server.seq": "\(seq)"])
                    outcome = .published
                case .entry, .damaged:
                    outcome = .exists
                }
            }
            unlink(temp)
            if outcome == .published {
                try FaultPoint.hit("commit.claimed")
                try FileIO.syncDirectory(layout.shardDirectory(of: seq))
                state.apply(entry)
                return .committed(entry)
            }
            // The slot is taken: fold in the winner, then decide whether it touched our records.
            try fetch(into: &state, limit: 1)
            if let conflicts = staleConflicts(changes, state) { return .conflicts(conflicts) }
        }
    }

    private func staleConflicts(_ changes: [RecordChange], _ state: ZoneState) -> [ServerChangedConflict]? {
        var conflicts: [ServerChangedConflict] = []
        for change in changes {
            guard let name = try? RecordName(validating: change.name) else { continue }
            if change.base != state.tag(of: name) {
                conflicts.append(ServerChangedConflict(name: name, base: change.base, ours: change,
                                                       server: state.heads[name]))
            }
        }
        return conflicts.isEmpty ? nil : conflicts
    }
}
