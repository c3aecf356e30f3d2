import Foundation
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// What doing a plan's resolved steps accumulates, with one method per kind of ``Action``: the pushes to commit,
/// the bases to record, the notes new here to write in bulk, the conflict copies kept, and what the report says.
/// The methods do the steps' work in the notes folder, in plan order; the local state and the server are written
/// by ``SyncEngine/execute(_:scan:bases:zone:store:made:report:)`` once every step is done.
struct SyncBatch {
    typealias Push = SyncEngine.Push

    /// How many of each thing the plan's actions make, counted before any is done: the room to make for them.
    struct Counts: Equatable {
        /// The bases and heads the sync may add (the steps' names each table lacks). A rename frees the base of its
        /// old name as it adds its new one: a sync that renames half of 100,000 notes needs no room for more bases
        /// (``SyncEngine/applyBaseUpdates(_:to:)`` applies the removals first), where room for 50,000 more was
        /// 5 MB and a larger index. (The heads keep the old names, as tombstones.)
        var newBases = 0
        var newHeads = 0
        /// Saves and deletes; base updates; texts written into notes (the progress line's count); notes new here.
        var saves = 0
        var updates = 0
        var textWrites = 0
        var newDownloads = 0

        init(_ plan: borrowing [Step], bases: RecordTable<BaseRecord>, heads: RecordTable<RecordHead>) {
            for index in plan.indices {
                if !bases.contains(plan[index].name) { newBases += 1 }
                if let move = plan[index].move, bases.contains(move.source) { newBases -= 1 }
                if !heads.contains(plan[index].name) { newHeads += 1 }
                switch plan[index].action {
                case .save, .delete: saves += 1
                case .write(_, let kind):
                    updates += 1
                    textWrites += 1
                    if kind == .download && plan[index].local == nil { newDownloads += 1 }
                case .trash, .adopt: updates += 1
                default: break
                }
            }
        }
    }

    /// Where the lists stood before a step's action: what a move's end looks at (``finishMove(_:_:since:detail:)``).
    struct Marks {
        var pushes: Int
        var baseUpdates: Int
        var changes: Int
    }

    var pushes: [Push] = []
    /// In plan order, a later update of a name replacing an earlier one (an array: a first sync makes one per note).
    var baseUpdates: [(name: RecordName, base: BaseRecord?)] = []
    /// By name alone when the head to write is the zone's (as a first sync's are): a copy of each head was 13 MB
    /// at 100,000 notes, on B's first sync's peak beside the plan. Any other head is kept in `otherHeads`.
    var newNotes: [RecordName] = []
    var otherHeads: [RecordName: RecordHead] = [:]
    var conflicts: [ConflictRecord] = []
    /// The old and new paths of the notes renamed here, flushed together before their bases are recorded.
    var renamedHere: [String] = []
    /// The report's changes and warnings, taken for the steps (``take(_:)``) and handed back (``handBack(_:)``):
    /// a move's end looks at what was reported before it, and a first sync reports one change a note.
    var changes: [PlannedChange] = []
    var warnings: [SyncWarning] = []

    let counts: Counts
    /// The copy names the plan chose: a copy made now never takes another step's.
    let plannedCopies: Set<RecordName>
    /// Notes new here, when there are many (a first sync): written together (``writeNewNotes(heads:)``), two
    /// flushes in all.
    let downloadsInBulk: Bool

    let applier: NoteApplier
    let store: ServerStore
    /// The notes folder's root.
    let root: String
    /// This device's name, in the name of a copy of a version the user saved while this sync wrote the note.
    let deviceName: String
    let progress: SyncProgress?

    /// Room for the pushes, base updates and new notes the actions make is made now (a conflict or a merge may
    /// add one more, which grows them).
    init(
        _ plan: borrowing [Step], bases: RecordTable<BaseRecord>, heads: RecordTable<RecordHead>, applier: NoteApplier,
        store: ServerStore, root: String, deviceName: String, progress: SyncProgress?
    ) {
        counts = Counts(plan, bases: bases, heads: heads)
        (self.applier, self.store, self.root, self.deviceName, self.progress) = (applier, store, root, deviceName, progress)
        pushes.reserveCapacity(counts.saves)
        baseUpdates.reserveCapacity(counts.updates)
        plannedCopies = Set(
            plan.lazy.compactMap { step -> RecordName? in
                if case .conflict(let conflict) = step.action, !conflict.madeBefore { conflict.copy } else { nil }
            })
        downloadsInBulk = counts.newDownloads >= SyncEngine.bulkDownloadThreshold
        if downloadsInBulk { newNotes.reserveCapacity(counts.newDownloads) }
    }

    /// Takes the report's changes and warnings (not a copy: a first sync's are one a note).
    mutating func take(_ report: inout SyncReport) {
        swap(&changes, &report.changes)
        swap(&warnings, &report.warnings)
    }

    /// Gives the report back what ``take(_:)`` took, with what the steps added.
    mutating func handBack(_ report: inout SyncReport) {
        swap(&changes, &report.changes)
        swap(&warnings, &report.warnings)
    }

    var marks: Marks { Marks(pushes: pushes.count, baseUpdates: baseUpdates.count, changes: changes.count) }

    // MARK: - Steps

    /// Does each resolved step of `plan` in order. A note's own failure is said and the others go on; a server
    /// gone throws. `heads`: the zone's; `isTaken`: whether a record of that name exists (a copy may not take it);
    /// `moveDetail`: a move in words.
    mutating func apply(
        _ plan: [Step], heads: RecordTable<RecordHead>, isTaken: (RecordName) -> Bool,
        moveDetail: (MovePlan, RecordName) -> String
    ) throws {
        for index in plan.indices {
            var step = plan[index]
            guard let action = step.action else { continue }
            do {
                try renameForMove(&step)
                let before = marks
                switch action {
                case .save(let kind, let base): save(step, kind, base: base)
                case .delete(let base): delete(step, base: base)
                case .trash: try trash(step)
                case .write(let head, let kind): try write(step, head, kind, heads: heads)
                case .adopt(let head): adopt(step, head)
                case .writeMerged(let text, let base): try writeMerged(step, text, base: base)
                case .conflict(let resolved): try conflict(step, resolved, isTaken: isTaken)
                case .leave(let kind, let detail):
                    leave(step, kind, detail)
                    continue
                }
                if let move = step.move { finishMove(step, move, since: before) { moveDetail(move, step.name) } }
            } catch let error as NoteSyncError where error.kind != .serverUnreachable {
                warnings.append(SyncWarning.note(step.name, error))
            }
        }
    }

    /// `.save`: the local note is pushed, based on `base`.
    mutating func save(_ step: Step, _ kind: PlannedChange.Kind, base: Int64) {
        guard let local = step.local else { return }
        pushes.append(Push(name: step.name, path: local.path, base: base, kind: kind))
    }

    /// `.delete`: the note's delete is pushed, based on `base`.
    mutating func delete(_ step: Step, base: Int64) {
        pushes.append(Push(name: step.name, path: nil, base: base, kind: .uploadDelete))
    }

    /// `.trash`: the note goes to the trash unless it was edited since its base (then it syncs next round), and its
    /// base goes.
    mutating func trash(_ step: Step) throws {
        guard let local = step.local, let base = step.base else {
            baseUpdates.append((step.name, nil))
            return
        }
        switch try applier.delete(step.name, path: local.path, expected: base.digest) {
        case .trashed, .alreadyGone:
            baseUpdates.append((step.name, nil))
            note(.downloadDelete, step.name)
        default:
            warnings.append(
                SyncWarning(
                    .note, path: step.name.description, "\(step.name): edited during the sync, not deleted; it syncs next round"))
        }
    }

    /// `.write`: the server's text is written into the note, which takes `head` as its base; a note new here, when
    /// there are many, waits for ``writeNewNotes(heads:)``. `heads`: the zone's.
    mutating func write(
        _ step: Step, _ head: RecordHead, _ kind: PlannedChange.Kind, heads: RecordTable<RecordHead>
    ) throws {
        // A big text is streamed into its note on its own (``BigText``), never held for a bulk batch.
        if kind == .download && step.local == nil && downloadsInBulk && !BigText.streams(head.text?.size ?? 0) {
            newNotes.append(step.name)
            if let zoneHead = heads[step.name], zoneHead == head, zoneHead.unverifiedSince == head.unverifiedSince {
                return
            }
            otherHeads[step.name] = head
            return
        }
        let fingerprint = try writeHead(step.name, head, path: step.local?.path ?? step.name.string, expected: step.local?.digest)
        progress?.add(1, bytes: head.text?.size ?? 0)
        setBase(step.name, head, fingerprint)
        note(kind, step.name, kind == .merge ? "the server's version already holds both edits" : nil)
    }

    /// `.adopt`: both sides agree; the head becomes the base, and the note takes its `modified` (a removal when
    /// both deleted it).
    mutating func adopt(_ step: Step, _ head: RecordHead?) {
        guard let head, !head.deleted else {
            baseUpdates.append((step.name, nil))
            return
        }
        var fingerprint = step.local?.fingerprint
        if let local = step.local,
            let adopted = applier.adoptModified(path: local.path, modified: head.modified, expected: local.fingerprint)
        {
            fingerprint = adopted
        }
        setBase(step.name, head, fingerprint)
    }

    /// `.writeMerged`: the merge is written into the note and pushed, based on `base`.
    mutating func writeMerged(_ step: Step, _ text: Data, base: Int64) throws {
        guard let local = step.local else { return }
        let outcome = try applier.write(
            step.name, path: local.path, data: text, modified: Clock.nowNanoseconds(), expected: local.digest)
        _ = written(outcome, step.name)
        pushes.append(Push(name: step.name, path: local.path, base: base, kind: .merge))
    }

    /// `.conflict`: one version keeps the name, the other is kept as a copy. `isTaken`: whether a record of that
    /// name exists (``SyncEngine/isConflictNameTaken(_:zone:bases:)``).
    mutating func conflict(_ step: Step, _ conflict: Conflict, isTaken: (RecordName) -> Bool) throws {
        guard let local = step.local else { return }
        if conflict.madeBefore {
            pushes.append(Push(name: step.name, path: local.path, base: conflict.server.tag, kind: .conflict))
            keepCopy(conflict.copy, of: step.name, device: conflict.copyDevice, pushed: false)
        } else if conflict.localWins {
            guard let text = conflict.server.text else { return }
            // The planned name, unless a file took it since the plan (then the next free one); a file that
            // takes it while the copy is written is kept as a copy of its own.
            var copy = conflict.copy
            if FileIO.lstatInfo(root + "/" + copy.string) != nil {
                copy = try SyncEngine.conflictName(
                    step.name, device: conflict.copyDevice,
                    date: Date(timeIntervalSince1970: Double(conflict.server.modified) / 1e9), root: root
                ) { plannedCopies.contains($0) || isTaken($0) }
            }
            // The copy has its note's mode: a private note's other version is as private as the note.
            let outcome = try applier.write(
                copy, path: copy.string, contents: try store.contents(of: text), modified: conflict.server.modified,
                expected: nil, modeOf: local.path)
            _ = written(outcome, copy)
            keepCopy(copy, of: step.name, device: conflict.copyDevice)
            pushes.append(Push(name: step.name, path: local.path, base: conflict.server.tag, kind: .conflict))
        } else {
            // The planned name, unless a file took it since the plan (then the next free one).
            let copy = try applier.keepAsConflictCopy(
                step.name, from: root + "/" + local.path,
                date: Date(timeIntervalSince1970: Double(local.modified) / 1e9)
            ) { $0 != conflict.copy && (plannedCopies.contains($0) || isTaken($0)) }
            keepCopy(copy, of: step.name, device: conflict.copyDevice)
            // The note was renamed to the copy: the server's version takes the mode the note had.
            setBase(
                step.name, conflict.server,
                try writeHead(step.name, conflict.server, path: local.path, expected: nil, modeOf: copy.string))
        }
    }

    /// `.leave`: the note is left alone, and said.
    mutating func leave(_ step: Step, _ kind: PlannedChange.Kind, _ detail: String) {
        note(kind, step.name, detail)
    }

    // MARK: - Moves

    /// A move's rename here (the note follows a rename made on the server, or the later of two renames): done
    /// before anything else of the step, never over a file; it throws when the note cannot be renamed.
    mutating func renameForMove(_ step: inout Step) throws {
        guard step.move?.renameFrom != nil, var local = step.local else { return }
        try applier.follow(rename: step.name, from: local.path, to: step.name.string, flush: false)
        renamedHere += [local.path, step.name.string]
        local.path = step.name.string
        // A rename sets the ctime: the note keeps the scanned fingerprint with its new ctime, so it is not hashed
        // again; unless anything else changed since the scan (a save during the sync), then it is hashed.
        if let info = FileIO.lstatInfo(root + "/" + local.path) {
            let now = StatFingerprint(info)
            if now.size == local.fingerprint.size && now.mtime == local.fingerprint.mtime
                && now.inode == local.fingerprint.inode
            {
                local.fingerprint = now
            }
        }
        step.local = local
    }

    /// A move's end. One this device commits: whatever the step's action left at the new name (the note as
    /// renamed here, the server's edit written into it, a merge, the version that kept the name in a conflict) is
    /// committed as the move's save, with the delete of the old name, in one entry; the action's own push or base
    /// of the name gives way to it (its conflict copies stay). One the server made: the old name's base goes.
    /// `before`: where the lists stood before the step's action; `detail`: the move in words.
    mutating func finishMove(_ step: Step, _ move: MovePlan, since before: Marks, detail: () -> String) {
        if let lost = move.lostName {
            warnings.append(
                SyncWarning(
                    .moveConflict, path: step.name.description,
                    "\(move.source) was renamed on two devices: \(detail())"
                        + "; nothing is lost\n  fix: if \(lost) is the name you want, rename \(step.name) to it"))
        }
        guard let from = move.pushFrom else {
            baseUpdates.append((move.source, nil))
            // The name the note was renamed to here, which lost to the server's rename: nothing to push for it.
            if let renamed = move.renameFrom, renamed != move.source { baseUpdates.append((renamed, nil)) }
            changes.append(
                PlannedChange(kind: .move, name: step.name.description, detail: detail(), from: move.shownFrom.description))
            return
        }
        // The server's edit written into the note renamed here is no download of a record: it merges into the move.
        for index in before.changes..<changes.count
        where changes[index].kind == .download && changes[index].name == step.name.description {
            changes[index].kind = .merge
            changes[index].detail = "edited on the server, renamed here: the edit is in the renamed note"
        }
        for index in (before.pushes..<pushes.count).reversed() where pushes[index].name == step.name {
            // A merge of both sides' edits, written here, is committed as the move's save: still a merge, as the
            // dry run says (the commit reports only the move).
            // Once: a round after a lost race merges the note again.
            if pushes[index].kind == .merge && !changes.contains(where: { $0.kind == .merge && $0.name == step.name.description }) {
                changes.append(PlannedChange(kind: .merge, name: step.name.description, detail: nil))
            }
            pushes.remove(at: index)
        }
        for index in (before.baseUpdates..<baseUpdates.count).reversed() where baseUpdates[index].name == step.name {
            baseUpdates.remove(at: index)
        }
        pushes.append(
            Push(
                name: step.name, path: step.name.string, base: move.toBase, kind: .move, moveFrom: from,
                moveFromBase: move.pushFromBase, forget: move.source, moveTime: move.time))
    }

    // MARK: - Notes new here

    /// Writes the notes ``write(_:_:_:heads:)`` kept for a bulk download, in batches of up to 1,000 notes or 32 MB,
    /// each note's base and change taken as its batch lands: not an array of every outcome, which at 100,000 notes
    /// was 38 MB on B's first sync's peak (heaptrack). `heads`: the zone's, which the notes are written from unless
    /// ``otherHeads`` has theirs. Written, the list and the heads kept aside are freed before the bases take the new
    /// notes' rows. A server gone midway throws, and the report then says nothing of the batches written before
    /// (their bases and copies are not recorded; the next sync finds the notes as they are).
    mutating func writeNewNotes(heads: RecordTable<RecordHead>) throws {
        let notes = newNotes
        let kept = otherHeads
        newNotes = []
        otherHeads = [:]
        var bulkWarnings: [SyncWarning] = []
        let reportedBefore = changes.count
        do {
            var start = 0
            while start < notes.count {
                try writeNewBatch(notes, from: &start, head: { kept[$0] ?? heads[$0]! }, warnings: &bulkWarnings)
            }
        } catch {
            changes.removeSubrange(reportedBefore...)
            throw error
        }
        warnings += bulkWarnings
    }

    /// Writes one batch of `notes` from `start` (``writeNewNotes(heads:)``), and moves `start` past it.
    private mutating func writeNewBatch(
        _ notes: [RecordName], from start: inout Int, head: (RecordName) -> RecordHead, warnings: inout [SyncWarning]
    ) throws {
        var batch: [NoteApplier.NewNote] = []
        var heads: [RecordHead] = []
        var bytes: Int64 = 0
        while start < notes.count && batch.count < 1000 && bytes < 32 << 20 {
            let name = notes[start]
            let head = head(name)
            start += 1
            guard let text = head.text else { continue }
            do {
                batch.append(
                    NoteApplier.NewNote(name: name, path: name.string, data: try store.readAsset(text), modified: head.modified))
                heads.append(head)
                bytes += text.size
            } catch let error as NoteSyncError where error.kind != .serverUnreachable {
                warnings.append(SyncWarning.note(name, error))
            }
        }
        let outcomes = applier.writeNew(batch)
        progress?.add(batch.count, bytes: bytes)
        for (index, outcome) in outcomes.enumerated() {
            switch outcome {
            case .success(let outcome):
                // A file that took the name meanwhile is kept as a copy.
                guard let fingerprint = written(outcome, batch[index].name) else { continue }
                setBase(batch[index].name, heads[index], fingerprint)
                note(.download, batch[index].name)
            case .failure(let error):
                warnings.append(SyncWarning.note(batch[index].name, error))
            }
        }
        // The batch's texts are freed: their pages go back rather than stay in the arenas of the threads that read
        // them (as the bases and heads grow beside them).
        batch = []
        MemoryPolicy.phaseEnded(items: notes.count)
    }

    // MARK: - What the actions share

    mutating func note(_ kind: PlannedChange.Kind, _ name: RecordName, _ detail: String? = nil) {
        changes.append(PlannedChange(kind: kind, name: name.description, detail: detail))
    }

    /// `head` becomes the base of `name`, with the note's `fingerprint` (none for a head without a text).
    mutating func setBase(_ name: RecordName, _ head: RecordHead, _ fingerprint: StatFingerprint?) {
        guard let text = head.text else { return }
        baseUpdates.append(
            (
                name,
                BaseRecord(tag: head.tag, digest: text.sha256, size: text.size, modified: head.modified, fingerprint: fingerprint)
            ))
    }

    /// The one place a conflict copy is kept: recorded (`notesync conflicts`), reported, and pushed as the new
    /// note it is (unless it is already one the scan found).
    mutating func keepCopy(_ copy: RecordName, of name: RecordName, device: String, pushed: Bool = true) {
        if pushed { pushes.append(Push(name: copy, path: copy.string, base: 0, kind: .upload)) }
        conflicts.append(ConflictRecord(copy: copy, original: name, device: device, time: Clock.nowNanoseconds()))
        note(.conflict, name, copy.description)
    }

    /// A write's fingerprint; a version the user saved while this sync wrote the note (the applier displaced it)
    /// is kept as a conflict copy, wherever the write was (a pull, a merge, a bulk download).
    mutating func written(_ outcome: NoteApplier.Outcome, _ name: RecordName) -> StatFingerprint? {
        switch outcome {
        case .written(let fingerprint):
            return fingerprint
        case .writtenKeepingLocalEdit(let fingerprint, let copy):
            keepCopy(copy, of: name, device: deviceName)
            return fingerprint
        default:
            return nil
        }
    }

    /// Writes `head`'s text into the note at `path` (``written(_:_:)``).
    mutating func writeHead(
        _ name: RecordName, _ head: RecordHead, path: String, expected: ContentDigest?, modeOf: String? = nil
    ) throws -> StatFingerprint? {
        guard let text = head.text else { return nil }
        let contents = try store.contents(of: text)
        return written(
            try applier.write(name, path: path, contents: contents, modified: head.modified, expected: expected, modeOf: modeOf),
            name)
    }
}
