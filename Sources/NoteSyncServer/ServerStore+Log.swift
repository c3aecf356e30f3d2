import Crypto
import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

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
            switch marker.isEncrypted ? .readWhole : try streamEntry(path, seq: seq) {
            case .missing: return .missing
            case .entry(let entry): return .entry(entry)
            case .whole(let whole): data = whole
            case .readWhole:
                guard let read = try storage.read(path, limit: Self.maxEntryBytes) else { return .missing }
                data = read
            }
        } catch let error as NoteSyncError where error.kind == .corrupt {
            return .damaged(DamagedEntry(seq: seq, path: path, reason: error.message))
        }
        let digest = ContentDigest(of: data)
        do {
            var entry = try open(data, kind: "entry", place: String(seq), as: LogEntry.self)
            guard entry.seq == seq else {
                var damage = DamagedEntry(seq: seq, path: path, reason: "holds entry \(entry.seq): misplaced")
                damage.digest = digest
                return .damaged(damage)
            }
            entry.digest = digest
            return .entry(entry)
        } catch {
            // An encrypted server opened without its key: nothing can be judged, and nothing is damaged.
            if case .encrypted = error, marker.isEncrypted { throw keyNeeded }
            var damage = DamagedEntry(seq: seq, path: path, reason: error.description)
            damage.digest = digest
            if case .newerFormat = error { damage.isNewerFormat = true }
            if !marker.isEncrypted {
                if let id = DamagedEntry.writerID(in: data) { damage.writer = "\"\(deviceName(id))\" (\(id))" }
                damage.names = DamagedEntry.noteNames(in: data)
            }
            return .damaged(damage)
        }
    }

    /// What ``streamEntry(_:seq:)`` read.
    enum StreamedEntry {
        case missing
        /// An entry read a piece at a time, checked as a whole read checks it.
        case entry(LogEntry)
        /// The file, read in one piece.
        case whole(Data)
        /// Not one to be read a piece at a time: read it whole, and judge it then.
        case readWhole
    }

    /// Reads the entry file at `path` a piece at a time (``entryPieceBytes``), from one opening of it, and decodes its
    /// changes as they come (``LogEntryStream``): an entry of 50,000 moves (25 MB) was read whole beside the changes
    /// decoded from it, the peak of every device that read it. Only an entry that passes every check of a whole read
    /// (its header, length and digest, the fast decoder, its slot) is taken so; anything else is read whole again
    /// and judged as before. A file of one piece is returned as it is.
    func streamEntry(_ path: String, seq: Int64) throws -> StreamedEntry {
        var first: Data?
        var stream:
            (
                header: (format: Int, length: Int, digest: ContentDigest, size: Int), body: SHA256, file: SHA256,
                bodyBytes: Int, decoder: LogEntryStream
            )?
        // Takes a piece of the body: false once it is longer than the header says, or not one the decoder reads.
        func take(_ piece: Data) -> Bool {
            guard var current = stream else { return false }
            stream = nil
            current.body.update(data: piece)
            current.bodyBytes += piece.count
            let taken = current.bodyBytes <= current.header.length && current.decoder.feed(piece)
            stream = current
            return taken
        }
        let read = try storage.readPieces(path, limit: Self.maxEntryBytes, pieceBytes: Self.entryPieceBytes) { piece in
            guard let whole = first else {
                first = piece
                return true
            }
            if stream == nil {
                // More than one piece: its header (in the first, well within it) says what the body must be.
                // A length no entry file may have is left to the whole read (which finds the file torn).
                guard let header = try? SealedFile.header(whole, kind: "entry"), header.format == SealedFile.format,
                    header.length <= Self.maxEntryBytes - header.size
                else { return false }
                var file = SHA256()
                file.update(data: whole)
                stream = (header, SHA256(), file, 0, LogEntryStream(bodyBytes: header.length))
                first = Data()
                guard take(whole[(whole.startIndex + header.size)...]) else { return false }
            }
            stream?.file.update(data: piece)
            return take(piece)
        }
        guard let read else { return .missing }
        // Taken out, so that the decoder's arrays are not shared with the variable the closures captured: the
        // last changes appended would copy all the others.
        guard var stream = stream.take() else { return read ? .whole(first ?? Data()) : .readWhole }
        guard read, stream.bodyBytes == stream.header.length,
            ContentDigest(stream.body.finalize()) == stream.header.digest,
            var entry = stream.decoder.finish(), entry.seq == seq
        else { return .readWhole }
        entry.digest = ContentDigest(stream.file.finalize())
        return .entry(entry)
    }

    /// How much of the log's end a fetch checks once it has read everything there is. Both check the tip
    /// (``checkTip(_:)``) and look at the slot after the empty one.
    public enum EndCheck: Sendable {
        /// Nothing: the caller checks it (a commit that folds in one winner).
        case none
        /// An entry after a missing one is looked for in the next slot only (one `lstat`): an agent's partial sync.
        case quick
        /// The end is not checked: an idle poll of an object store, where each check is a request of its own. The
        /// tip, a gap and the marker are checked by the next sync that pushes and by every full sync; an entry
        /// fetched is still checked against the chain this device read.
        case nextSlot
        /// An entry after a missing one is looked for in that folder of the log and every later one: what every
        /// full sync does.
        case full
    }

    /// The log does not continue the one this device read: the error a fetch or a commit throws.
    package func chainBroken(at seq: Int64, _ what: String) -> NoteSyncError {
        NoteSyncError(
            .serverMismatch, path: layout.entryPath(seq),
            "\(what): the server's log is not the one this device synced with (the server was replaced, "
                + "restored from an older copy, or its log was changed); nothing is written to it",
            fix: "if the right server is elsewhere (another share, a newer backup), put it back at \(layout.root); "
                + "if this is the server from now on, run `notesync recover --dry-run`, then `notesync recover`: "
                + "it pushes what the server lost and deletes nothing")
    }

    /// The entry this device read last (at `seq`) has been damaged since: not a server replaced or restored, but a
    /// file changed in place (a disk error, a replicating tool, an edit by hand). Every device skips it; this one
    /// stops, as for a server that lost an entry, and its fix is the same.
    func damagedSinceRead(at seq: Int64, _ damage: DamagedEntry) -> NoteSyncError {
        NoteSyncError(
            .serverMismatch, path: layout.entryPath(seq),
            "entry \(seq), the last one this device read, is damaged now (\(damage.reason)): it was changed on the "
                + "server after it was read (a disk error, a replicating tool, an edit by hand); every device skips "
                + "it, and this one writes nothing to the server until it syncs again from the log's start",
            fix: "run `notesync recover --dry-run`, then `notesync recover`: it pushes again what that entry held "
                + "that this device has, and deletes nothing (`notesync server fsck` lists the damaged entry)")
    }

    /// Checks that `entry` continues the log this device read.
    func verifyLink(_ entry: LogEntry, _ state: ZoneState) throws {
        guard let known = state.chain else { return }
        if let prev = entry.prev {
            if prev != known {
                // The entry it follows may be the one read, damaged since (a device that skipped it names none).
                if entry.seq == state.token + 1, case .damaged(let damage)? = try? readSlot(state.token), !damage.isNewerFormat {
                    throw damagedSinceRead(at: state.token, damage)
                }
                throw chainBroken(at: entry.seq, "entry \(entry.seq) does not follow the entry \(entry.seq - 1) this device read")
            }
        } else if marker.format >= 2 && entry.void == nil && entry.seq >= marker.chainFrom ?? 0 {
            if entry.seq == state.token + 1, case .damaged(let damage)? = try? readSlot(state.token), !damage.isNewerFormat {
                throw damagedSinceRead(at: state.token, damage)
            }
            throw chainBroken(at: entry.seq, "entry \(entry.seq) names no entry before it")
        }
    }

    /// Checks that the entry at `state.token` is still there and is the entry this device read (for a token stored
    /// before the chain, it becomes the chain's start). The file is read only when it is not the one last verified
    /// (another inode, size, mtime or ctime: a file put in its place, a server restored or copied); then its bytes'
    /// digest is compared, and only an entry whose chain digest is another (a void entry) is decoded.
    package func checkTip(_ state: inout ZoneState) throws {
        let token = state.token
        guard token > 0 else { return }
        let path = layout.entryPath(token)
        guard let file = storage.info(path)?.fingerprint else {
            // A share unmounted (or a server folder taken away) since it was opened is away, not behind.
            try requireStillThere()
            throw NoteSyncError(
                .serverMismatch, path: path,
                "is missing, and this device has read the log up to it: the server is behind this "
                    + "device (restored from an older copy, or replaced by another server with the same id)",
                fix: "if a newer copy of the server exists, put it back at \(layout.root); otherwise run "
                    + "`notesync recover --dry-run`, then `notesync recover`: it pushes again what the "
                    + "server lost and deletes nothing")
        }
        if file != state.verifiedTail {
            let digest = state.chain == nil ? nil : try? digestOfEntryFile(path)
            // With no chain known yet (a token stored by 0.1.0) the entry's digest is taken, as the chain's start.
            if state.chain == nil || digest.flatMap({ $0 }) != state.chain {
                let found: ContentDigest?
                let slot = try readSlot(token)
                switch slot {
                case .missing: found = nil
                case .entry(let entry): found = entry.chainDigest
                case .damaged(let damage): found = damage.digest
                }
                if let known = state.chain, let found, found != known {
                    if case .damaged(let damage) = slot, !damage.isNewerFormat { throw damagedSinceRead(at: token, damage) }
                    throw chainBroken(at: token, "entry \(token) is not the entry \(token) this device read")
                }
                if state.chain == nil { state.chain = found }
            }
        }
        state.verifiedTail = file
    }

    /// The digest of the bytes of the entry file at `path`, read a piece at a time: a fetch that has just read an
    /// entry checks it again as the log's tip, and whole, the tip of a rename of 50,000 notes (25 MB) would be read
    /// again on top of all the sync holds. Where requests are billed (``ServerStorage/billsRequests``) it is read
    /// whole: a request a piece would multiply the requests, and a service that ignores ranges would send the whole
    /// object for each. Nil when it is missing or longer than an entry may be.
    func digestOfEntryFile(_ path: String) throws -> ContentDigest? {
        if storage.billsRequests {
            return try storage.read(path, limit: Self.maxEntryBytes).map { ContentDigest(of: $0) }
        }
        var hasher = SHA256()
        var offset: Int64 = 0
        while true {
            guard let piece = try storage.readRange(path, offset: offset, length: Self.entryPieceBytes) else { return nil }
            hasher.update(data: piece)
            offset += Int64(piece.count)
            if offset > Self.maxEntryBytes { return nil }
            if piece.count < Self.entryPieceBytes { return ContentDigest(hasher.finalize()) }
        }
    }

    /// The piece ``digestOfEntryFile(_:)`` reads at a time (most entries are one piece: one read, one request).
    static let entryPieceBytes = 1 << 20

    /// Checks the end of the log after a fetch read up to `state.token` and found slot `token + 1` empty: the tip is
    /// the entry read (``checkTip(_:)``), and no entry is there after the empty slot. Returns true when the slot
    /// turns out to be there after all (claimed meanwhile: read it again), unless `retried`.
    func checkEnd(_ state: inout ZoneState, _ check: EndCheck, retried: Bool = false) throws -> Bool {
        if check == .none || check == .nextSlot { return false }
        try requireStillThere()
        let token = state.token
        try checkTip(&state)
        if let later = laterEntry(after: token + 1, thorough: check == .full) {
            // Entries are claimed in order, so the slot may have been claimed between the read and now: read it once
            // more (an open asks the server; a listing of a network mount may come from its cache).
            if !retried { return true }
            throw NoteSyncError(
                .logGap, path: layout.entryPath(token + 1),
                "is missing while entry \(later) is there: a gap in the log; every device stops before it",
                fix: "if a replicating tool (Syncthing, Dropbox…) has not delivered it yet, wait and sync again; "
                    + "if it is lost, run `notesync server fsck --repair \(layout.root)` once the gap is older "
                    + "than its --gap-age: it seals the slot, and the device that wrote the entry pushes its "
                    + "changes again")
        }
        return false
    }

    /// The server's marker is still where it was opened: a slot or entry found missing means what it says, not that
    /// the whole server went away (a share unmounted, its folder renamed) after it was opened, which is
    /// `serverUnreachable`, as when it is opened.
    func requireStillThere() throws {
        guard storage.info(layout.marker) == nil else { return }
        throw NoteSyncError(
            .serverUnreachable, path: layout.root, "the server folder went away during the sync",
            fix: "mount the share (or bring the server folder back at this path); notes are kept and changes wait until then",
            errno: ENOENT)
    }

    /// The sequence of an entry file after the empty slot `missing`, if there is one: the next slot (one `lstat`),
    /// and, when `thorough`, any slot of that folder of the log and any later folder.
    func laterEntry(after missing: Int64, thorough: Bool) -> Int64? {
        if storage.info(layout.entryPath(missing + 1)) != nil { return missing + 1 }
        guard thorough else { return nil }
        let shard = layout.shardDirectory(of: missing)
        if let names = try? storage.list(shard),
            let later = names.compactMap({ ServerLayout.sequence(ofFileName: $0) }).filter({ $0 > missing }).min()
        {
            return later
        }
        let shardName = (shard as NSString).lastPathComponent
        for name in ((try? storage.list(layout.logDirectory)) ?? []).sorted() where name > shardName && name.count == shardName.count {
            if let later = ((try? storage.list(layout.logDirectory + "/" + name)) ?? [])
                .compactMap({ ServerLayout.sequence(ofFileName: $0) }).min()
            {
                return later
            }
        }
        return nil
    }

    /// Reads every entry after `state.token` (opening t+1, t+2 … until the first missing one) and folds it in.
    /// Returns the entries applied and the damaged slots skipped, in order. An idle poll costs one failed open.
    ///
    /// Each entry must continue the chain this device read (``LogEntry/prev``); once nothing more is there, the
    /// end of the log is checked as `check` says: a server behind this device, or an entry after a missing one,
    /// throws (``NoteSyncError/Kind/serverMismatch``, ``NoteSyncError/Kind/logGap``).
    @discardableResult
    public func fetch(into state: inout ZoneState, limit: Int = .max, check: EndCheck = .full) throws -> [SlotContent] {
        var read: [SlotContent] = []
        var retried: Int64 = -1
        while read.count < limit {
            let slot = try readSlot(state.token + 1)
            switch slot {
            case .missing:
                // The slot may have been claimed since it was read (a later entry seen means it was): read it again
                // once before the end is judged.
                let again: Bool
                do {
                    again = try checkEnd(&state, check, retried: retried == state.token + 1)
                } catch let error as NoteSyncError where error.kind == .serverMismatch || error.kind == .logGap {
                    // gc may have compacted the log past this device's token (format 3): a snapshot holds it.
                    if hasRetention, try jump(&state) { continue }
                    throw error
                }
                if again {
                    retried = state.token + 1
                    continue
                }
                if state.token == 0 && hasRetention && check != .none {
                    if try jump(&state) { continue }
                    // An empty log with a snapshot: not an empty server, and slot 1 is not free.
                    if let gap = awaitedSnapshotEntry(after: 0) { throw gap }
                }
                return read
            case .entry(let entry):
                try verifyLink(entry, state)
                state.apply(entry)
            case .damaged(let damage):
                if damage.isNewerFormat && isReadOnly {
                    // The server says it is newer: this entry is likely valid, only not for this build. Skipping it
                    // would pass over it for good (the token moves on), so stop here instead.
                    throw NoteSyncError(
                        .serverNewerFormat, path: damage.path,
                        "\(damage.reason); this build reads the log only up to the entry before it",
                        fix: "update notesync on this device; local changes stay queued meanwhile")
                }
                logger.notice(
                    "server.entry.damaged",
                    metadata: [
                        "server.seq": "\(damage.seq)",
                        "server.path": "\(damage.path)",
                        "reason": "\(damage.reason)"
                    ])
                // The chain is not bound to a damaged file's bytes (a file still arriving, torn, reads differently
                // later): the entry after it is taken as it comes.
                state.skip(seq: damage.seq)
                state.damaged.append(damage)
            }
            read.append(slot)
        }
        return read
    }

    /// A snapshot past `token` whose entry is not there (nor any entry after it): gc compacted the log past this
    /// device's token, and the entry the snapshot stands on has not arrived (a replicating tool delivers files in
    /// any order) or was lost. The log is not at its end there: the slots below the snapshot are not free, and
    /// taking one would fork the log. A gap, waited for as any other.
    func awaitedSnapshotEntry(after token: Int64) -> NoteSyncError? {
        guard let seq = ((try? snapshotSequences()) ?? []).first(where: { $0 > token }),
            case .missing? = try? readSlot(seq), case .missing? = try? readSlot(seq + 1)
        else { return nil }
        return NoteSyncError(
            .logGap, path: layout.entryPath(seq),
            "is missing while snapshot \(seq) (gc compacted the log up to it) is there: a gap in the log; every "
                + "device stops before it",
            fix: "if a replicating tool (Syncthing, Dropbox…) has not delivered it yet, wait and sync again; if it "
                + "is lost, run `notesync server fsck --repair \(layout.root)` once the gap is older than its "
                + "--gap-age")
    }

    /// Jumps `state` to the newest snapshot past its token whose entry is still there and is the one the snapshot
    /// names (gc keeps the entry at a snapshot's position until a newer snapshot replaces it). Returns false when
    /// there is none: the log's end is then judged as usual (a gap, or a server behind this device).
    package func jump(_ state: inout ZoneState) throws -> Bool {
        if let snapshot = newestAnchoredSnapshot(after: state.token), snapshot.chain != nil {
            let seq = snapshot.seq
            // The entry this device read last must be the one the snapshot links there: a log compacted past a
            // server restored from an older copy (or another server's) is not the log this device read.
            if state.token > 0, let known = state.chain, let link = snapshot.link(at: state.token), link != known.link {
                throw chainBroken(
                    at: state.token,
                    "entry \(state.token) this device read is not the entry \(state.token) that snapshot \(seq) compacted")
            }
            logger.notice(
                "server.log.jumped",
                metadata: ["server.seq.from": "\(state.token)", "server.seq": "\(seq)", "reason": "compacted by gc"])
            state.jump(to: snapshot.state)
            state.verifiedTail = storage.info(layout.entryPath(seq))?.fingerprint
            return true
        }
        return false
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
        do {
            var names = Set<RecordName>(minimumCapacity: changes.count)
            for change in changes {
                let name: RecordName
                do { name = try RecordName(validating: change.name) } catch {
                    throw NoteSyncError(.invalidName, path: change.name, error.reason, fix: "rename the note")
                }
                guard names.insert(name).inserted else {
                    throw NoteSyncError(.usage, path: change.name, "appears twice in one commit")
                }
            }
        }
        if let stale = staleConflicts(changes, state) { return .conflicts(stale) }
        let commitID = UUID().uuidString.lowercased()
        while true {
            let seq = state.token + 1
            // Slot t+1 is claimed only with entry t read and verified: a device whose server went behind it (or was
            // swapped) must not write past an end it never read.
            do {
                try checkTip(&state)
            } catch let error as NoteSyncError where error.kind == .serverMismatch && hasRetention {
                // gc compacted the log past entry t since this device read it: the snapshot holds what came after.
                guard try jump(&state) else { throw error }
                if let conflicts = staleConflicts(changes, state) { return .conflicts(conflicts) }
                continue
            }
            var entry = LogEntry(
                seq: seq, commit: commitID, device: device, time: time, changes: changes, prev: state.chain,
                earlier: state.earlier)
            let destination = layout.entryPath(seq)
            let staged: StagedFile
            (staged, entry.digest) = try stageEntry(entry, seq: seq)
            do { try storage.makeDirectory(layout.shardDirectory(of: seq)) } catch {
                storage.discard(staged)
                throw error
            }
            // A crash here leaves the temp for removeOwnTemps and fsck; every other way out removes it.
            try FaultPoint.hit("commit.entryWritten")
            let outcome: AtomicPublish.Outcome
            do {
                outcome = try storage.publish(staged, as: destination)
            } catch let error as NoteSyncError {
                storage.discard(staged)
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
            storage.discard(staged)
            if outcome == .published {
                noteClockSkew(ofPublished: destination, at: Clock.nowNanoseconds())
                try FaultPoint.hit("commit.claimed")
                try storage.syncDirectory(layout.shardDirectory(of: seq))
                state.apply(entry, own: true)
                return .committed(entry)
            }
            // The slot is taken: fold in the winner, then decide whether it touched our records. (gc may have removed
            // it meanwhile: the next turn's tip check finds the snapshot.)
            try fetch(into: &state, limit: 1, check: .none)
            if let conflicts = staleConflicts(changes, state) { return .conflicts(conflicts) }
        }
    }

    /// `entry` sealed for slot `seq` and staged, fsynced, with the digest of its file. On a plain server whose staged
    /// files are temp files (``ServerStorage/stagesTempFiles``), the JSON of an entry of 1 MiB or more is written to
    /// the temp a piece at a time, never held whole (``SealedFile/sealEntry(_:minimumBytes:into:)``: 25 MB for an
    /// entry of 50,000 moves). A smaller one, an encrypted one (sealed whole), or one staged in memory for one request
    /// (an object store's) is sealed in memory and let go once staged, before its heads are folded in.
    private func stageEntry(_ entry: LogEntry, seq: Int64) throws -> (staged: StagedFile, digest: ContentDigest) {
        if try requireVault() == nil, storage.stagesTempFiles,
            let sealed = try SealedFile.sealEntry(entry, into: { try storage.stagingSink(device: device, suffix: "entry") })
        {
            return sealed
        }
        let data = try seal(entry, kind: "entry", place: String(seq))
        return (try storage.stage(data, device: device, suffix: "entry", sync: true), ContentDigest(of: data))
    }

    /// Claims the empty slot `seq` with a void entry (`notesync server fsck --repair`), so that readers stopped at
    /// the gap go on. `state` holds the log folded up to `seq - 1`; `next` is the first entry after the gap. The void
    /// carries the digest the entry after it names (``VoidSeal/lost``), so the chain goes on through it. Returns
    /// the void entry, or nil when the slot was taken meanwhile (the lost entry arrived late, or another fsck).
    public func sealGap(_ seq: Int64, after state: ZoneState, next: Int64) throws -> LogEntry? {
        try requireWritable()
        precondition(state.token == seq - 1, "a gap is sealed in order")
        var lost: ContentDigest?
        if next == seq + 1, case .entry(let after) = try readSlot(next) { lost = after.prev }
        var entry = LogEntry(
            seq: seq, commit: "void-" + UUID().uuidString.lowercased(), device: device,
            time: Clock.nowNanoseconds(), changes: [], prev: state.chain, earlier: state.earlier,
            void: VoidSeal(reason: "slot found empty with entry \(next) present; sealed by fsck", lost: lost))
        let data = try seal(entry, kind: "entry", place: String(seq))
        entry.digest = ContentDigest(of: data)
        try storage.makeDirectory(layout.shardDirectory(of: seq))
        guard try publish(data, as: layout.entryPath(seq), suffix: "entry") == .published else { return nil }
        try storage.syncDirectory(layout.shardDirectory(of: seq))
        try writeVoidNotice(seq)
        logger.notice("server.gap.sealed", metadata: ["server.seq": "\(seq)"])
        return entry
    }

    /// Publishes `voids/<seq>`, the notice that slot `seq` was sealed void (a second seal or a repair finds it there).
    public func writeVoidNotice(_ seq: Int64) throws {
        try storage.makeDirectory(layout.voidsDirectory)
        _ = try publish(Data(), as: layout.voidPath(seq), suffix: "void")
        try storage.syncDirectory(layout.voidsDirectory)
    }

    /// The slots fsck sealed with void entries, in order.
    public func voidedSlots() throws -> [Int64] {
        ((try storage.list(layout.voidsDirectory)) ?? []).compactMap { ServerLayout.sequence(ofFileName: $0) }.sorted()
    }

    private func staleConflicts(_ changes: [RecordChange], _ state: ZoneState) -> [ServerChangedConflict]? {
        var conflicts: [ServerChangedConflict] = []
        for change in changes {
            guard let name = try? RecordName(validating: change.name) else { continue }
            if change.base != state.tag(of: name) {
                conflicts.append(
                    ServerChangedConflict(
                        name: name, base: change.base, ours: change,
                        server: state.heads[name]))
            }
        }
        return conflicts.isEmpty ? nil : conflicts
    }
}
