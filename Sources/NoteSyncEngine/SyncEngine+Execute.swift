import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// How an edit/edit (or create/create) of one record is resolved.
enum MergeResolution: Equatable {
    /// The merge equals the server's version: write it locally.
    case takeServer
    /// The merge equals the local version: push it.
    case pushLocal
    /// A new merged text: write it locally and push it.
    case writeAndPush(Data)
    /// The edits overlap (or the note is binary): the later `modified` keeps the name.
    case conflict(localWins: Bool)
}

extension SyncEngine {
    /// A save or delete waiting to be committed. A first sync holds one per note: a move's parts, which few pushes
    /// have, are kept apart (56 bytes a push, not 88: 4.2 MB less at the peak of a first sync of 100,000 notes).
    struct Push {
        package var name: RecordName
        /// The note's path relative to the notes folder (saves only).
        package var path: String?
        package var base: Int64
        package var kind: PlannedChange.Kind
        private var move: Box<MoveParts>?

        private struct MoveParts {
            var from: RecordName
            var fromBase: Int64
            var forget: RecordName?
            var time: Int64?
        }

        package init(
            name: RecordName, path: String?, base: Int64, kind: PlannedChange.Kind, moveFrom: RecordName? = nil,
            moveFromBase: Int64 = 0, forget: RecordName? = nil, moveTime: Int64? = nil
        ) {
            self.name = name
            self.path = path
            self.base = base
            self.kind = kind
            if let moveFrom {
                move = Box(MoveParts(from: moveFrom, fromBase: moveFromBase, forget: forget, time: moveTime))
            }
            precondition(moveFrom != nil || forget == nil, "only a move forgets an old name")
        }

        /// A move's save: the record moves from this name (its delete, based on ``moveFromBase``, is committed in the
        /// same entry).
        var moveFrom: RecordName? { move?.value.from }
        var moveFromBase: Int64 { move?.value.fromBase ?? 0 }
        /// The name this device last synced the moved note under, whose base goes once the move is committed.
        package var forget: RecordName? { move?.value.forget }
        /// When the note was renamed here (``MovePlan/time``); nil: the ctime of the file committed.
        var moveTime: Int64? { move?.value.time }
    }

    /// Does the plan's resolved steps locally and commits the pushes. Returns false when the commit lost a race and
    /// another round is needed (the state already has the winner folded in).
    /// `made`: gets the names of the notes it made (conflict copies) and pushes as new, when the scan is partial (the
    /// next round's partial scan includes them; a full one finds everything).
    /// The plan and the scan are consumed: a first sync holds a record of each per note. The scan is freed first, the
    /// plan once its steps are done, before the commits.
    package func execute(
        _ plan: consuming [Step], scan: consuming ScanResult, bases: inout RecordTable<BaseRecord>, zone: inout ZoneState,
        store: ServerStore, made: inout Set<RecordName>, report: inout SyncReport
    ) throws -> Bool {
        // The steps carry what they need of the scan (the local file): it goes now, before the bases, heads and
        // pushes grow (a first sync's scan of 100,000 notes is 31 MB). A one-shot process with little to do leaves it
        // to the process exit (freeing 100,000 records one by one costs more than the rest of a no-op sync's planning).
        // Only a partial scan's next round reads `made` (a full round rescans everything): a first sync of 100,000
        // notes would otherwise gather every name (4.2 MB at its peak).
        let partial = scan.scope != nil
        if leavesMemoryToExit && plan.count < 1000 { OneShotProcess.leaveToExit(Box(scan)) } else { _ = consume scan }
        let applier = NoteApplier(folder: folder, deviceName: config.deviceName, guarantees: try storedFolderGuarantees())
        // Room for the bases and heads this sync may add is counted now and made once the plan is freed (neither
        // table changes before): growing a large table copies its rows, and for a moment both copies are in memory;
        // made at the start, it was 23 MB on a first sync's peak at 100,000 notes, beside the plan's steps. Not room
        // for every step: B's first sync has every head already, and as many again is 12 MB at 100,000 notes.
        var batch = SyncBatch(
            plan, bases: bases, heads: zone.heads, applier: applier, store: store, root: folder.root,
            deviceName: config.deviceName, progress: progress)
        if let progress, batch.counts.textWrites > 0 { progress.enter(.downloading, total: batch.counts.textWrites) }
        let pendingWrites = try recordPendingWrites(plan)
        do {
            batch.take(&report)
            defer { batch.handBack(&report) }
            try batch.apply(
                plan, heads: zone.heads, isTaken: { isConflictNameTaken($0, zone: zone, bases: bases) },
                moveDetail: { moveDetail($0, to: $1, store: store) })
            let planned = plan.count
            _ = consume plan
            // The plan's pages, and what resolving its steps freed, go back before the texts are written or pushed (a
            // large plan: the agent's rounds of a few notes free little).
            MemoryPolicy.phaseEnded(items: planned)
            bases.reserveCapacity(bases.count + max(batch.counts.newBases, 0))
            zone.heads.reserveCapacity(zone.heads.count + batch.counts.newHeads)
            try batch.writeNewNotes(heads: zone.heads)
        }
        // The renames are durable before any base records them: after a power cut the note is at one of its names
        // with the base that matches it.
        if !batch.renamedHere.isEmpty { try applier.flushRenames(batch.renamedHere) }
        try record(&batch, bases: &bases, pendingWrites: pendingWrites)
        report.conflictCopies += batch.conflicts.map(\.copy.description)
        // Only the pushes are held through the commits.
        var pushes: [Push] = []
        swap(&pushes, &batch.pushes)
        _ = consume batch
        if partial { made.formUnion(pushes.lazy.filter { $0.base == 0 && $0.path != nil }.map(\.name)) }
        return try commit(&pushes, bases: &bases, zone: &zone, store: store, report: &report)
    }

    /// Records the bases and conflict copies of `batch`'s steps, in the state and in `bases`, and that the versions
    /// recorded as pending writes are written.
    private func record(_ batch: inout SyncBatch, bases: inout RecordTable<BaseRecord>, pendingWrites: Bool) throws {
        try state.update { update in
            for (name, base) in batch.baseUpdates {
                if let base { try update.setBase(name, base) } else { try update.removeBase(name) }
                if base == nil { try update.resolveConflict(copy: name) }
                try update.dequeue(name)
            }
            for conflict in batch.conflicts { try update.addConflict(conflict) }
            if pendingWrites { try update.clearPendingWrites() }
        }
        if batch.baseUpdates.contains(where: { $0.base == nil }) && batch.baseUpdates.contains(where: { $0.base != nil }) {
            Self.applyBaseUpdates(&batch.baseUpdates, to: &bases)
        } else {
            // Only sets, or only removals (B's first sync: every note): in order, each name's last stands, and the
            // table's room was made for them.
            for (name, base) in batch.baseUpdates { bases[name] = base }
        }
    }

    /// Applies `updates` to `bases` as applying them in order does, and leaves in `updates` each name's last update
    /// (in place, the earlier ones dropped; the order of the rest is not kept). The removals go first: the rows
    /// removed names free take the names added, so a batch of renames grows the table only by what it adds net.
    static func applyBaseUpdates(_ updates: inout [(name: RecordName, base: BaseRecord?)], to bases: inout RecordTable<BaseRecord>) {
        applyBaseUpdates(&updates, name: \.name, base: \.base, to: &bases)
    }

    /// ``applyBaseUpdates(_:to:)`` for updates of any form: `name` and `base` read each one's name and base (nil: a
    /// removal).
    static func applyBaseUpdates<Update>(
        _ updates: inout [Update], name: (Update) -> RecordName, base: (Update) -> BaseRecord?,
        to bases: inout RecordTable<BaseRecord>
    ) {
        var seen = Set<RecordName>(minimumCapacity: updates.count)
        var kept = updates.endIndex
        for index in updates.indices.reversed() where seen.insert(name(updates[index])).inserted {
            kept -= 1
            updates.swapAt(index, kept)
        }
        updates.removeFirst(kept)
        for update in updates where base(update) == nil { bases[name(update)] = nil }
        for update in updates { if let value = base(update) { bases[name(update)] = value } }
    }

    /// A base a commit sets or removes: `save` is the index of the batch's save whose text and file make the base, or
    /// -1 for a removal.
    struct CommitBaseUpdate {
        package var name: RecordName
        package var save: Int32
    }

    /// The saves of a committed batch, as their bases need them: each one's file as read and text as committed, and
    /// the entry's slot (the bases' tag).
    struct CommittedSaves: Sendable {
        let fingerprints: [StatFingerprint]
        package let texts: [AssetRef]
        package let seq: Int64

        /// The base `update` sets, nil for a removal.
        package func base(_ update: CommitBaseUpdate) -> BaseRecord? {
            guard update.save >= 0 else { return nil }
            let (fingerprint, text) = (fingerprints[Int(update.save)], texts[Int(update.save)])
            return BaseRecord(tag: seq, digest: text.sha256, size: text.size, modified: fingerprint.mtime, fingerprint: fingerprint)
        }
    }

    /// A note's text and mtime: how a conflict copy of a server version is recognised (it is written with both).
    struct CopyKey: Hashable {
        package var digest: ContentDigest?
        package var modified: Int64

        package init(_ head: RecordHead) {
            digest = head.text?.sha256
            modified = head.modified
        }

        package init(_ file: LocalFile) {
            digest = file.digest
            modified = file.modified
        }
    }

    /// The notes never synced (no base, no record on the server), by text and mtime: where a sync killed after
    /// making a conflict copy of a server version left it. Resolving that conflict again finds the copy here, under
    /// its name or wherever the user moved it, and does not make another. A note this sync decides as renamed
    /// (`renamed`: its new name, or where its file is) is a synced note under a new name, never such a copy, even
    /// when its text and time are a server version's (the record another device renamed elsewhere meanwhile).
    static func unsyncedNotes(
        scan: ScanResult, bases: RecordTable<BaseRecord>, zone: ZoneState, renamed: Set<RecordName> = []
    ) -> [CopyKey: RecordName] {
        var notes: [CopyKey: RecordName] = [:]
        for (name, file) in scan.files where bases[name] == nil && zone.heads[name] == nil && !renamed.contains(name) {
            let key = CopyKey(file)
            if let other = notes[key], other.string.utf8.lexicographicallyPrecedes(name.string.utf8) { continue }
            notes[key] = name
        }
        return notes
    }

    /// From how many new notes a sync downloads them in bulk (``NoteApplier/writeNew(_:)``).
    static let bulkDownloadThreshold = 16

    /// How many pushes one log entry commits at most.
    static let commitBatchSize = 2000
    /// How many moves one log entry may commit (a folder of that many notes renamed is one entry): about 300 bytes
    /// each, well under the 64 MiB an entry may have.
    static let maxMovesPerEntry = 100_000

    /// Uploads the assets and commits the pushes in batches, recording new bases as each batch lands. Returns
    /// false when another round is needed: a commit lost the race, or won a later slot after folding in other
    /// devices' entries (their records are not applied locally yet).
    ///
    /// A batch is prepared (its notes read and its texts written to server temps, on every core) while the one
    /// before it is flushed, published and committed, and its local state is written on another thread (one write
    /// at a time, in order) while the next one is committed (``BatchPipeline``): a first sync's disk flushes overlap
    /// the next batch's work. Not under a simulation's fault hooks (they are task-local): then each batch is
    /// prepared in turn and its state written in order, here. A failure stops the sync as the first one in order
    /// would.
    private func commit(
        _ pushes: inout [Push], bases: inout RecordTable<BaseRecord>, zone: inout ZoneState,
        store: ServerStore, report: inout SyncReport
    ) throws -> Bool {
        var foldedOthers = false
        let root = folder.root
        // Read here, in the sync's task: a batch may be prepared on another thread.
        let bigText = BigText.threshold
        let largest = BigText.largestStored ?? store.storage.largestFile
        // The moves first, all in the first entry (up to ``maxMovesPerEntry``): a folder renamed is one entry, seen
        // whole by every device. A move adds two small changes and no text the server lacks.
        let moves = pushes.lazy.filter { $0.moveFrom != nil }.count
        if moves > 0 && moves < pushes.count { Self.putMovesFirst(&pushes) }
        let pushes = pushes
        let batchSize = max(Self.commitBatchSize, min(moves, Self.maxMovesPerEntry))
        let progress = progress
        if let progress, !pushes.isEmpty { progress.enter(.uploading, total: pushes.count) }
        let finished = try BatchPipeline.run(
            total: pushes.count, batchSize: batchSize,
            overlapped: pushes.count > batchSize && !FaultPoint.isActive,
            prepare: { [pushes, maxFileSize] range in
                try Self.prepareBatch(
                    pushes[range], root: root, store: store, progress: progress, maxFileSize: maxFileSize, bigText: bigText,
                    largest: largest)
            },
            process: { prepared, range, isLast, writer in
                // The packs' indexes a large sync read to find its texts (a rename's 50,000: 5 MB) are not held through
                // its last commit, where it peaks: every batch is staged by now, and the commits before are done. A later
                // sync, or the agent's next text not found loose, reads them again.
                if isLast && MemoryPolicy.isLarge(pushes.count) { store.releasePackIndexes() }
                let outcome = try commitBatch(
                    prepared, pushes[range], isLast: isLast, writer: writer, bases: &bases, zone: &zone, store: store,
                    report: &report)
                guard case .committed(let folded) = outcome else { return false }
                foldedOthers = foldedOthers || folded
                MemoryPolicy.phaseEnded(items: pushes.count)
                return true
            })
        return finished && !foldedOthers
    }

    /// Puts the moves before the other pushes, each in its order, in place: only the others are copied aside (a
    /// rename of 50,000 notes held a second array of its pushes through its commit, 3.7 MB).
    static func putMovesFirst(_ pushes: inout [Push]) {
        let others = pushes.filter { $0.moveFrom == nil }
        var next = 0
        for index in pushes.indices where pushes[index].moveFrom != nil {
            // What is at `next` is not a move (those before `index` are in place already): it is one of `others`.
            if index != next { pushes.swapAt(index, next) }
            next += 1
        }
        for (offset, push) in others.enumerated() { pushes[next + offset] = push }
    }

    /// Reads a batch's notes (on every core) and stages their texts on the server, a part at a time
    /// (``partSize(_:)``): a batch of moves (one log entry for up to ``maxMovesPerEntry``) would otherwise hold every
    /// moved note's text at once (a rename of half of 100,000 notes peaked at 325 MB, the texts 117 MB of it). Only what is staged
    /// is kept until the commit publishes it: on a folder, temp files, or nothing for a text the server has; on an
    /// object store, a text sent without looking for it first is staged in memory (up to 64 KiB each). A text over
    /// `bigText` bytes (``BigText``) is staged a piece at a time, in its place among the others.
    private static func prepareBatch(
        _ pushes: ArraySlice<Push>, root: String, store: ServerStore, progress: SyncProgress?, maxFileSize: FileSizeLimit,
        bigText: Int64, largest: Int64?
    ) throws -> PreparedBatch {
        var prepared = PreparedBatch(saves: [], deletes: [], staged: [])
        let saves = pushes.lazy.filter { $0.path != nil }.count
        prepared.saves.reserveCapacity(saves)
        prepared.deletes.reserveCapacity(pushes.count - saves)
        let preparer = try AssetPreparer(store)
        var start = pushes.startIndex
        while start < pushes.endIndex {
            let size = partSize(pushes[start...])
            let part = pushes[start..<min(start + size, pushes.endIndex)]
            start = part.endIndex
            // Each text is encoded as it is read, on the reading thread: the batch then holds its texts as they will
            // be stored. A moved note's text is likely on the server already: it is only hashed, and encoded if not.
            let reads = Parallel.map(part.count) { offset in
                Result { () -> PreparedRead? in
                    let push = part[part.startIndex + offset]
                    guard let path = push.path else { return nil }
                    // One note's refusal is its own: the others of the part are still read (a failure stops the map).
                    do {
                        // Grown past the limit since the scan: not read whole (the next scan warns about it).
                        if let info = FileIO.lstatInfo(root + "/" + path) {
                            if !maxFileSize.allows(Int64(info.st_size)) { return nil }
                            if let largest, Int64(info.st_size) > largest {
                                throw Self.tooBigForServer(root + "/" + path, size: Int64(info.st_size), largest: largest)
                            }
                            if BigText.streams(Int64(info.st_size), threshold: bigText) { return .big(path) }
                        }
                        guard let (data, fingerprint) = try FileIO.readStable(root + "/" + path) else { return nil }
                        return .text(push.moveFrom == nil ? preparer.encoded(data) : preparer.named(data), fingerprint)
                    } catch let error as NoteSyncError {
                        return .refused(error)
                    }
                }
            }
            var texts: [PreparedText] = []
            var bytes: Int64 = 0
            for (offset, push) in part.enumerated() {
                if push.path != nil {
                    // Only an error that is no note's own fails the map (and comes before the slots it left unread).
                    switch try reads[offset]!.get() {
                    case nil: continue
                    case .refused(let error):
                        // A note that cannot be read or sent now is left queued and said; the others are committed.
                        prepared.warnings.append(SyncWarning.note(push.name, error))
                        continue
                    case .text(let text, let fingerprint):
                        texts.append(text)
                        bytes += text.ref.size
                        prepared.saves.append((part.startIndex + offset, fingerprint))
                    case .big(let path):
                        // Only what the note itself did is the note's (changed while read, unreadable); the server's
                        // failures stop the sync as a batch's do.
                        let big: (staged: StagedAssets, fingerprint: StatFingerprint)?
                        do {
                            big = try store.stageBigText(at: root + "/" + path, scratch: NotesFolder(root: root).uploads)
                        } catch let error as NoteSyncError where error.path == root + "/" + path || error.errno == EFBIG {
                            prepared.warnings.append(SyncWarning.note(push.name, error))
                            continue
                        }
                        guard let big else { continue }
                        // The texts before it first: the parts' texts are the saves', in order.
                        if !texts.isEmpty { prepared.staged.append(try store.stage(texts)) }
                        texts = []
                        prepared.staged.append(big.staged)
                        bytes += big.staged.refs[0].size
                        prepared.saves.append((part.startIndex + offset, big.fingerprint))
                    }
                } else {
                    prepared.deletes.append(part.startIndex + offset)
                }
            }
            // A part of moves is looked for in the packs however few of its texts are distinct.
            prepared.staged.append(try store.stage(texts, lookUpPacks: size == AssetPack.lookupBatch))
            progress?.add(part.count, bytes: bytes)
        }
        return prepared
    }

    /// The refusal of a note bigger than the server takes (``ServerStorage/largestFile``): it stays queued, said, and
    /// the other notes sync.
    static func tooBigForServer(_ path: String, size: Int64, largest: Int64) -> NoteSyncError {
        NoteSyncError(
            .usage, path: path,
            "\(FileSizeLimit.format(size)), bigger than the server takes in one file (\(FileSizeLimit.format(largest))): "
                + "left out of the sync; the other notes sync",
            fix: "keep the file outside the notes folder or add it to .notesyncignore, or sync with a folder server")
    }

    /// How many of `pushes`, from its start, one part of a batch reads and stages: ``AssetPack/lookupBatch`` when
    /// that many moves come next (a commit puts its moves first), else ``commitBatchSize``. A moved note's text is
    /// held as read until its part is staged (it is only hashed: the server likely has it), where a new or edited
    /// note's is held encoded: a rename of 5,208 of 10,000 notes held 2,000 texts at once, 3.8 MB of its 10 MB heap
    /// peak. A part of moves has its texts looked up in the packs whatever their number (`stage(_:lookUpPacks:)`);
    /// a few moves with other pushes stay in one part with them, as before.
    static func partSize(_ pushes: ArraySlice<Push>) -> Int {
        let next = pushes.prefix(AssetPack.lookupBatch)
        let allMoves = next.count == AssetPack.lookupBatch && next.allSatisfy { $0.moveFrom != nil }
        return allMoves ? AssetPack.lookupBatch : commitBatchSize
    }

    /// How a batch's commit ended.
    private enum BatchOutcome {
        /// Committed; `foldedOthers` when other devices' entries were folded in first (another round applies them).
        case committed(foldedOthers: Bool)
        /// Lost the race for the slot: the winners are folded in, another round plans again.
        case raced
    }

    /// Publishes a prepared batch's texts and commits it as one log entry; its bases, the heads and the token are
    /// then written (on the writer's thread unless it is the last batch).
    private func commitBatch(
        _ prepared: PreparedBatch, _ slice: ArraySlice<Push>, isLast: Bool, writer: BatchPipeline.Writer,
        bases: inout RecordTable<BaseRecord>, zone: inout ZoneState, store: ServerStore, report: inout SyncReport
    ) throws -> BatchOutcome {
        // Made at their size: grown by doubling, a batch of 50,000 moves held each table's old and new storage at once.
        let moves = prepared.saves.lazy.filter { slice[$0.index].moveFrom != nil }.count
        var changes: [RecordChange] = []
        changes.reserveCapacity(prepared.deletes.count + prepared.saves.count + moves)
        // In order; a name's last change counts (a note made at a moved note's old name: its save after the delete).
        // Not a dictionary: at 100,000 changes its buckets took 29 MB of the commit's peak, the array 10 MB. Each
        // names the save whose text and file make the base, not the base itself (24 bytes, not 112: the rename of
        // half of 100,000 notes held 152,000 of them at its peak).
        var newBases: [CommitBaseUpdate] = []
        let forgets = prepared.saves.lazy.filter { slice[$0.index].forget != nil }.count
        newBases.reserveCapacity(prepared.deletes.count + prepared.saves.count + moves + forgets)
        var kinds: [RecordName: PlannedChange.Kind] = [:]
        kinds.reserveCapacity(prepared.deletes.count + prepared.saves.count)
        for index in prepared.deletes {
            let push = slice[index]
            changes.append(.delete(push.name, base: push.base, modified: Clock.nowNanoseconds()))
            newBases.append(CommitBaseUpdate(name: push.name, save: -1))
            kinds[push.name] = push.kind
        }
        var texts: [AssetRef] = []
        texts.reserveCapacity(prepared.saves.count)
        for staged in prepared.staged { texts += try store.publish(staged) }
        for (index, (save, text)) in zip(prepared.saves, texts).enumerated() {
            let push = slice[save.index]
            if let from = push.moveFrom {
                changes += RecordChange.move(
                    from: from, fromBase: push.moveFromBase, to: push.name, toBase: push.base, text: text,
                    modified: save.fingerprint.mtime, time: push.moveTime ?? save.fingerprint.ctime)
                newBases.append(CommitBaseUpdate(name: from, save: -1))
                if let forget = push.forget { newBases.append(CommitBaseUpdate(name: forget, save: -1)) }
            } else {
                changes.append(.save(push.name, base: push.base, text: text, modified: save.fingerprint.mtime))
            }
            newBases.append(CommitBaseUpdate(name: push.name, save: Int32(index)))
            kinds[push.name] = push.kind
        }
        guard !changes.isEmpty else {
            report.warnings += prepared.warnings
            progress?.addCommitted(slice.count)
            return .committed(foldedOthers: false)
        }
        // The token saved must never pass heads that are not saved with it (entries folded in by the commit).
        let beforeToken = zone.token
        // The entry's changes are let go once it is committed (their names live on in the heads): held to the end,
        // the 101,588 changes of a rename of half of 100,000 notes were 13 MB of the commit's peak.
        // An entry of more changes than two batches' notes make (a rename's moves, two changes each, all in one entry)
        // is folded in where the commit peaks: the pages its staging freed go back first (the other batches hand
        // theirs back after each commit).
        if changes.count > 2 * Self.commitBatchSize { MemoryPolicy.phaseEnded(items: changes.count) }
        let outcome: CommitResult =
            switch try store.commit(changes, into: &zone) {
            case .committed(let entry): .committed(seq: entry.seq)
            case .conflicts(let conflicts): .raced(conflicts)
            }
        changes = []
        switch outcome {
        case .committed(let seq):
            try recordCommitted(
                prepared, slice, seq: seq, texts: texts, newBases: consume newBases, kinds: kinds, isLast: isLast,
                writer: writer, bases: &bases, zone: &zone, store: store, report: &report)
            return .committed(foldedOthers: seq != beforeToken + 1)
        case .raced(let conflicts):
            try writer.finish()
            let changedHeads = zone.takeUnsaved()
            try state.update { try $0.setZone(token: zone.token, chain: zone.chain, earlier: zone.earlier, changed: changedHeads) }
            logger.info("sync.commit.raced", metadata: ["sync.conflicts": "\(conflicts.count)", "server.seq": "\(zone.token)"])
            return .raced
        }
    }

    /// A batch committed as the entry at `seq`: its bases (`newBases`, the saves' by `texts`), the heads folded in and
    /// the token are written (on the writer's thread unless it is the last batch), and its pushes are reported
    /// (`kinds`: each name's last change).
    private func recordCommitted(
        _ prepared: PreparedBatch, _ slice: ArraySlice<Push>, seq: Int64, texts: [AssetRef],
        newBases: consuming [CommitBaseUpdate], kinds: [RecordName: PlannedChange.Kind], isLast: Bool,
        writer: BatchPipeline.Writer, bases: inout RecordTable<BaseRecord>, zone: inout ZoneState, store: ServerStore,
        report: inout SyncReport
    ) throws {
        // Said once: a batch that loses its slot is prepared (and warns) again.
        report.warnings += prepared.warnings
        try putBackSwept(prepared, slice, texts: texts, store: store)
        // Every head folded in since the last save: ours, and those of entries that won a slot first.
        let changedHeads = zone.takeUnsaved()
        let (token, chain, earlier) = (zone.token, zone.chain, zone.earlier)
        var rows = consume newBases
        let committed = CommittedSaves(fingerprints: prepared.saves.map(\.fingerprint), texts: texts, seq: seq)
        Self.applyBaseUpdates(&rows, name: \.name, base: committed.base, to: &bases)
        let state = state
        let written = rows
        // In order, here, when it is the last batch or a simulation's fault hooks must see it (they are
        // task-local).
        try writer.submit(inBackground: !isLast && !FaultPoint.isActive) {
            try state.update { batch in
                try batch.setZone(token: token, chain: chain, earlier: earlier, changed: changedHeads)
                for update in written {
                    let name = update.name
                    let base = committed.base(update)
                    if let base { try batch.setBase(name, base) } else { try batch.removeBase(name) }
                    if base == nil { try batch.resolveConflict(copy: name) }
                    try batch.dequeue(name)
                }
            }
        }
        for push in slice {
            guard let kind = kinds[push.name] else { continue }
            if kind == .upload || kind == .uploadDelete || kind == .resurrect || kind == .merge {
                report.changes.append(PlannedChange(kind: kind, name: push.name.description, detail: nil))
            } else if kind == .move, let from = push.forget {
                report.changes.append(PlannedChange(kind: .move, name: push.name.description, from: from.description))
            }
        }
        progress?.addCommitted(slice.count)
    }

    /// A text gc swept between its publish (or reuse) and the commit (format 3, a gc with a grace period shorter
    /// than this commit took) is put back: read again from the note, published if it still has that text. Content
    /// addressing makes that safe. A note changed since is pushed again by the next sync anyway; its old text is
    /// reported as missing until then.
    private func putBackSwept(
        _ prepared: PreparedBatch, _ slice: ArraySlice<Push>, texts: [AssetRef], store: ServerStore
    ) throws {
        // Each part's texts against the part that staged them (the packs it made or found them in).
        var missing = Set<ContentDigest>()
        var start = 0
        for staged in prepared.staged {
            let end = min(start + staged.refs.count, texts.count)
            missing.formUnion(store.missingAssets(Array(texts[start..<end]), staged: staged).map(\.sha256))
            start = end
        }
        guard !missing.isEmpty else { return }
        for (save, text) in zip(prepared.saves, texts) where missing.contains(text.sha256) {
            let push = slice[save.index]
            if BigText.streams(text.size), let path = push.path {
                let put = try? store.putBigText(at: folder.root + "/" + path, scratch: folder.uploads)
                if put == text {
                    logger.warning("sync.asset.putBack", metadata: ["note.path": "\(push.name)"])
                } else {
                    logger.error("sync.asset.sweptAndChanged", metadata: ["note.path": "\(push.name)"])
                }
                continue
            }
            guard let path = push.path, let data = try? FileIO.read(folder.root + "/" + path),
                ContentDigest(of: data) == text.sha256
            else {
                logger.error("sync.asset.sweptAndChanged", metadata: ["note.path": "\(push.name)"])
                continue
            }
            try store.putAsset(data)
            logger.warning("sync.asset.putBack", metadata: ["note.path": "\(push.name)"])
        }
    }

    /// A note of a batch as read: its text hashed (and encoded), or a big text's path, staged in its turn.
    enum PreparedRead {
        case text(PreparedText, StatFingerprint)
        case big(String)
        /// The note could not be read or sent (``tooBigForServer(_:size:largest:)``, a read error): left queued.
        case refused(NoteSyncError)
    }

    /// One batch of pushes, its notes read and its texts staged on the server (``ServerStore/stageAssets(_:)``), in
    /// parts: the texts of `saves`, in order, are those of the parts of `staged`, in order.
    struct PreparedBatch: @unchecked Sendable {
        /// Each save's position among the pushes committed (its index in their array), and the fingerprint its note
        /// had when read: not a copy of the push (88 bytes each, 5.8 MB for a rename of 50,000 notes).
        package var saves: [(index: Int, fingerprint: StatFingerprint)]
        /// The deletes' positions among the pushes.
        package var deletes: [Int]
        package var staged: [StagedAssets]
        /// Notes that could not be read for the batch: left queued, the rest committed.
        package var warnings: [SyncWarning] = []
    }

    /// A three-way merge of a local note with the server head: its resolution and the texts involved.
    struct MergeOutcome {
        var resolution: MergeResolution
        package var local: Data
        package var server: Data
        package var result: MergeResult
        /// Not merged for its size (``FileSizeLimit/mergeBytes``): `result` is `.binary`.
        package var tooBig = false
    }

    /// Three-way merges a local note with the server head.
    func resolveMerge(
        _ name: RecordName, local: LocalFile, ancestor: ContentDigest?, ancestorSize: Int64?,
        server: RecordHead, store: ServerStore
    ) throws -> MergeOutcome {
        // A big note is not merged line by line (a merge holds about thirteen times its texts): both versions are
        // kept, as for a binary note, and none is read here.
        if let text = server.text, max(local.size, text.size, ancestorSize ?? 0) > FileSizeLimit.mergeBytes {
            return MergeOutcome(
                resolution: .conflict(localWins: (local.modified, config.deviceID) > (server.modified, server.device)),
                local: Data(), server: Data(), result: .binary, tooBig: true)
        }
        guard let localData = try FileIO.read(folder.root + "/" + local.path), let text = server.text else {
            throw NoteSyncError(.io, path: local.path, "vanished during the sync", fix: "sync again")
        }
        let serverData = try store.readAsset(text)
        var ancestorData = Data()
        if let ancestor, let ancestorSize {
            do { ancestorData = try store.readAsset(AssetRef(sha256: ancestor, size: ancestorSize)) } catch {
                logger.warning("sync.merge.noAncestor", metadata: ["note.path": "\(name)"])
            }
        }
        let result = Diff3Merge.merge(base: ancestorData, ours: localData, theirs: serverData)
        let resolution: MergeResolution
        switch result {
        case .clean(let merged):
            if merged == serverData {
                resolution = .takeServer
            } else if merged == localData {
                resolution = .pushLocal
            } else {
                resolution = .writeAndPush(merged)
            }
        case .conflict, .binary:
            resolution = .conflict(localWins: (local.modified, config.deviceID) > (server.modified, server.device))
        }
        return MergeOutcome(resolution: resolution, local: localData, server: serverData, result: result)
    }

    /// The first conflict copy name of `name` (attempt 1, 2 …) that is not taken; the same choice as
    /// ``NoteApplier/keepAsConflictCopy(_:from:date:avoiding:)`` makes, so a dry run names the copy a sync makes.
    func conflictName(
        _ name: RecordName, device: String, date: Date,
        isTaken: (RecordName) -> Bool
    ) throws -> RecordName {
        try Self.conflictName(name, device: device, date: date, root: folder.root, isTaken: isTaken)
    }

    /// ``conflictName(_:device:date:isTaken:)`` in the notes folder at `root`.
    static func conflictName(
        _ name: RecordName, device: String, date: Date, root: String, isTaken: (RecordName) -> Bool
    ) throws -> RecordName {
        for attempt in 1...100 {
            let copy = try RecordName(
                validating: ConflictCopyName.notesyncConflictName(
                    for: name.string, device: device, date: date, attempt: attempt))
            if !isTaken(copy) && FileIO.lstatInfo(root + "/" + copy.string) == nil { return copy }
        }
        throw NoteSyncError(
            .conflict, path: name.string, "has 100 conflict copies of the same second already",
            fix: "resolve and delete its conflict copies, then sync again")
    }

    /// Whether a conflict copy may not take `copy`: a record of that name exists on the server (even deleted)
    /// or was synced here. Saving a copy as new (based on 0) over a record would lose the race for ever, and
    /// writing it over a note would replace that note.
    func isConflictNameTaken(_ copy: RecordName, zone: ZoneState, bases: RecordTable<BaseRecord>) -> Bool {
        zone.heads[copy] != nil || bases[copy] != nil
    }
}

/// What a commit batch keeps of ``ServerStore/commit(_:into:time:)``'s outcome: the entry's slot, not its changes.
private enum CommitResult {
    case committed(seq: Int64)
    case raced([ServerChangedConflict])
}
