import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// Finishing what a killed process left half done: commits that landed but were never recorded, temp files.
extension SyncEngine {
    /// The bases our own commits among freshly fetched entries should have left: a process that won a slot and
    /// was killed (or lost the server) before recording them. A commit we recorded is never fetched again (the
    /// token moved past it), so an entry of ours found here is unrecorded. The note held the committed text when
    /// it was committed, so that version is its base whatever the user did since: a later delete or edit is then
    /// seen as one and pushed, where without the base a delete made after the crash was undone (the record pulled
    /// back as new: our own change echoed) and an edit merged against nothing.
    func ownUnrecordedCommits(
        _ fetched: [SlotContent], scan: ScanResult,
        bases: RecordTable<BaseRecord>
    ) -> [RecordName: BaseRecord?] {
        var recovered: [RecordName: BaseRecord?] = [:]
        for slot in fetched {
            guard case .entry(let entry) = slot, entry.device == config.deviceID else { continue }
            for change in entry.changes {
                guard let name = try? RecordName(validating: change.name),
                    (recovered[name]??.tag ?? bases[name]?.tag ?? 0) < entry.seq
                else { continue }
                recovered[name] = Self.committedBase(
                    name, tag: entry.seq, text: change.op == .save ? change.text : nil, modified: change.modified, scan: scan)
            }
        }
        return recovered
    }

    /// ``ownUnrecordedCommits(_:scan:bases:)`` for the entries a jump passed over: gc compacted them into the
    /// snapshot, so they are never fetched. A version of this device's after `token` (the one it jumped from) in the
    /// snapshot (a head, or a version its history keeps) is a commit that landed and was never recorded: a recorded
    /// commit moves the token to its entry. Without this, a note deleted here after such a commit came back.
    func ownUnrecordedCommits(
        jumpedFrom token: Int64, zone: ZoneState, scan: ScanResult, bases: RecordTable<BaseRecord>, store: ServerStore
    ) -> [RecordName: BaseRecord?] {
        let seq = zone.compactedAt
        guard seq > token, let snapshot = try? store.readSnapshot(seq) else { return [:] }
        var newest: [RecordName: RecordVersion] = [:]
        let versions =
            (snapshot.history ?? [])
            + snapshot.heads.map { RecordVersion(name: $0.name, seq: $0.head.tag, time: $0.time ?? 0, head: $0.head) }
        for version in versions where version.device == config.deviceID && version.seq > token {
            if version.seq > (newest[version.name]?.seq ?? 0) { newest[version.name] = version }
        }
        var recovered: [RecordName: BaseRecord?] = [:]
        for (name, version) in newest where (bases[name]?.tag ?? 0) < version.seq {
            recovered[name] = Self.committedBase(
                name, tag: version.seq, text: version.deleted ? nil : version.text, modified: version.modified, scan: scan)
        }
        return recovered
    }

    /// The base one of this device's commits left: its text (`nil` for a delete: no base), with the note's
    /// fingerprint when the note still holds that text.
    private static func committedBase(
        _ name: RecordName, tag: Int64, text: AssetRef?, modified: Int64, scan: ScanResult
    ) -> BaseRecord? {
        guard let text else { return nil }
        let file = scan.files[name]
        return BaseRecord(
            tag: tag, digest: text.sha256, size: text.size, modified: modified,
            fingerprint: file?.digest == text.sha256 ? file?.fingerprint : nil)
    }

    /// A note found holding the text of one of this device's own commits, but saved again since (a restore of that
    /// version, the same text saved, a recovery that found the commit on the server): it takes the commit's time, as
    /// every other device has it, and that is its base's fingerprint. Only the time changes; the text is the record's.
    func adoptCommittedTimes(_ recovered: inout [RecordName: BaseRecord?], scan: ScanResult) {
        let applier = NoteApplier(folder: folder, deviceName: config.deviceName)
        for (name, base) in recovered {
            guard let base, let file = scan.files[name], let adopted = Self.adoptingTime(base, of: file, applier) else { continue }
            recovered[name] = adopted
        }
    }

    /// `base` as the base of `file` when the note holds exactly its text: the note takes the base's time (as a pull
    /// gives it), and the base the note's fingerprint. Nil when the note holds another text.
    static func adoptingTime(_ base: BaseRecord, of file: LocalFile, _ applier: NoteApplier) -> BaseRecord? {
        guard file.digest == base.digest else { return nil }
        var base = base
        base.fingerprint =
            applier.adoptModified(path: file.path, modified: base.modified, expected: file.fingerprint) ?? file.fingerprint
        return base
    }

    /// The base of a note that looks changed on both sides although it is exactly a version the record had since
    /// its recorded base (or ever, with no base): `nil` when it is not, or when its decision does not hang on it.
    ///
    /// That is what a process killed between writing and recording leaves: a note it pulled, or committed, without
    /// the new base. Taken as edited, such a note undid a delete made meanwhile by another device (pushed again
    /// on top of the tombstone), or merged against the wrong ancestor (conflict copies of versions everyone has).
    /// The note holds no edit beyond that version, so that version is its base. Reads log entries only for these
    /// few records (a note changed here under a changed head, whose text is not the head's), walking back through
    /// each change's base.
    ///
    /// Only for heads newer than `knownBefore`, the token the last finished sync planned and applied up to: a
    /// head it planned left the note with the right base, and a note without a base under it is one the user
    /// made: a note restored from the trash or moved back keeps its text and mtime, and must not be deleted again.
    /// Heads fetched since (by this sync, or by one killed or cut off before it applied them) may sit above a
    /// note a killed pull left.
    package func historyBase(
        _ name: RecordName, local: LocalFile, head: RecordHead, base: BaseRecord?, knownBefore: Int64, store: ServerStore
    ) -> BaseRecord? {
        // The reconciler takes no base under a head whose line it cannot check: the note counts as changed then.
        let changedHere = local.digest != base?.digest || (base.map { $0.tag < head.unverifiedSince } ?? false)
        guard head.tag != base?.tag, head.tag > knownBefore, changedHere, head.text?.sha256 != local.digest,
            head.version <= RecordChange.currentVersion
        else { return nil }
        return historyBase(name, holding: local, head: head, floor: base?.tag ?? 0, store: store)
    }

    /// The latest version of `name` older than `head` and newer than `floor` that the note is, as a base: the same
    /// text and the same mtime (a pull gives the note the record's `modified`, a commit records the note's mtime).
    /// The same text alone is not enough: a note the user wrote anew with a deleted version's text is a new note.
    private func historyBase(
        _ name: RecordName, holding local: LocalFile, head: RecordHead, floor: Int64,
        store: ServerStore
    ) -> BaseRecord? {
        var seq = head.tag
        for _ in 0..<64 {
            guard seq > floor else { return nil }
            guard let entry = store.logEntry(seq) else {
                // Compacted by gc (or holding an entry of another history, delivered late): the versions its snapshot
                // keeps (this one and those before it) tell the rest.
                return compactedBase(name, holding: local, through: seq == head.tag ? seq - 1 : seq, floor: floor, store: store)
            }
            guard let change = entry.changes.first(where: { $0.name == name.string }) else { return nil }
            // This device deleted the record after that version, and knew it: a note of that name now is one the
            // user made again (moved back, restored from a backup), not one a killed sync left. An unrecorded
            // delete of ours was recovered as such before planning.
            if change.op == .delete && entry.device == config.deviceID { return nil }
            if seq != head.tag, change.op == .save, let text = change.text, text.sha256 == local.digest,
                change.modified == local.modified
            {
                return BaseRecord(
                    tag: seq, digest: text.sha256, size: text.size, modified: change.modified,
                    fingerprint: local.fingerprint)
            }
            seq = change.base
        }
        return nil
    }

    /// `historyBase` below a compaction point: the newest version of `name` up to `seq` that the newest snapshot
    /// keeps, among its history and its heads (the policy always keeps the version at every registered device's
    /// token, so the one a killed pull of this device left is there; a version that was still the head when gc ran
    /// is one of the snapshot's heads, not of its history), and that the note is, with the same rules: a delete by
    /// this device in between means the user made the note again.
    private func compactedBase(
        _ name: RecordName, holding local: LocalFile, through seq: Int64, floor: Int64, store: ServerStore
    ) -> BaseRecord? {
        guard let snapshot = store.newestAnchoredSnapshot(after: seq - 1), let history = snapshot.history else { return nil }
        let heads = snapshot.heads.lazy.filter { $0.name == name }.map {
            RecordVersion(name: $0.name, seq: $0.head.tag, time: $0.time ?? snapshot.time, head: $0.head)
        }
        let candidates = (history.filter { $0.name == name } + heads).filter { $0.seq <= seq && $0.seq > floor }
        for version in candidates.sorted(by: { $0.seq > $1.seq }) {
            if version.deleted && version.device == config.deviceID { return nil }
            if !version.deleted, let text = version.text, text.sha256 == local.digest, version.modified == local.modified {
                return BaseRecord(
                    tag: version.seq, digest: text.sha256, size: text.size, modified: version.modified,
                    fingerprint: local.fingerprint)
            }
        }
        return nil
    }

    /// Finishes the remote deletes a killed process moved to the trash and never checked against their base (at
    /// the start of a full sync that reaches the server, like temp files): an edit made during that sync goes back
    /// to its name and is scanned now, so that the edit wins over the delete as it would have.
    package func recoverUncheckedDeletes(_ scan: inout ScanResult, scanner: FolderScanner, bases: RecordTable<BaseRecord>) throws {
        let applier = NoteApplier(folder: folder, deviceName: config.deviceName)
        let restored = try applier.recoverUncheckedDeletes(bases: bases)
        guard !restored.isEmpty else { return }
        for name in restored { logger.warning("sync.delete.restored", metadata: ["note.path": "\(name)"]) }
        scan.merge(try scanner.scan(bases: bases, only: restored.map(\.string), namesUnder: namesUnder))
    }

    /// Deals with the temp files an interrupted apply left in the staging folder (or, where a note's folder is on
    /// another filesystem, next to the note): a process killed between writing a new version and swapping it in,
    /// or between the swap and the check of the old version. At the start of a sync that reaches the server, before
    /// local changes are queued:
    /// - a temp holding a base, a queued change, a server head known here or a text the server holds (the version
    ///   a pull wrote and never swapped in, or the version an apply swapped out after, or before, checking it) is
    ///   removed: the engine has it;
    /// - so is a temp whose note is still the very file its base recorded (its fingerprint: inode, size, times):
    ///   nothing was swapped in (a swap puts another file in place), and the sync that follows pulls again. The
    ///   base's text alone is no proof: a pull that only changes a note's time swaps in that same text;
    /// - any other is kept as a conflict copy of its note (in the note's folder, made again if the user removed
    ///   it meanwhile), scanned now so that this sync uploads it: an edit the user saved while the killed apply was
    ///   swapping the note, which no one else has, or (rarely) a merged text that was never swapped in, which the
    ///   sync merges again. Never deleted unseen: the outbox is no evidence that a temp was never swapped in,
    ///   because an offline sync after the crash queues the swapped-in version.
    func recoverLeftoverTemps(
        _ scan: inout ScanResult, scanner: FolderScanner, bases: RecordTable<BaseRecord>, zone: ZoneState,
        store: ServerStore, report: inout SyncReport
    ) throws {
        let applier = NoteApplier(folder: folder, deviceName: config.deviceName)
        var leftovers = try applier.stagedLeftovers()
        for temp in scan.leftoverTemps {
            let directory = temp.lastIndex(of: "/").map { String(temp[...$0]) } ?? ""
            leftovers.append(
                NoteApplier.StagedLeftover(
                    path: folder.root + "/" + temp,
                    note: AgentTempName.note(ofTemp: FolderRename.withoutProbeSuffix(temp)) ?? directory + "recovered"))
        }
        // A big text's version cut short by the kill (``PieceWriter``): no one's edit, and the engine pulls it again.
        leftovers.removeAll { leftover in
            guard leftover.path.hasSuffix(PieceWriter.partialSuffix) else { return false }
            unlink(leftover.path)
            return true
        }
        guard !leftovers.isEmpty else { return }
        defer { applier.removeEmptyStagingFolders() }
        let outbox = try state.outbox()
        let known = Set(bases.values.map(\.digest)).union(outbox.values.compactMap(\.digest))
            .union(zone.heads.values.compactMap(\.text?.sha256))
        /// Read back and verified: a missing or damaged asset file of that name does not count as holding the text.
        func serverHolds(_ digest: ContentDigest, size: Int64) -> Bool {
            let ref = AssetRef(sha256: digest, size: size)
            // A big text is read through a piece at a time (``BigText``), never held.
            if BigText.streams(size) { return (try? store.verifyAsset(ref)) != nil }
            return (try? store.readAsset(ref)) != nil
        }
        var copies: [String] = []
        for leftover in leftovers {
            let path = leftover.path
            guard let info = FileIO.lstatInfo(path), let (digest, size) = try FileDigest.of(path: path) else { continue }
            let note = leftover.note.flatMap { try? RecordName(validating: RecordName.nfc($0)) }
            // Never swapped in: the note is still the very file its base recorded (same inode, size and times). The
            // same text alone proves nothing: a pull that only gives the note a new time swaps in the same text, and
            // what it displaced is the user's save.
            let neverSwappedIn =
                note.flatMap { scan.files[$0] }.map { file in
                    bases[file.name].map { $0.digest == file.digest && $0.matches(file.fingerprint) } ?? false
                } ?? false
            if known.contains(digest) || neverSwappedIn || serverHolds(digest, size: size) {
                unlink(path)
                continue
            }
            let original = try note ?? RecordName(validating: "recovered")
            let date = Date(timeIntervalSince1970: Double(StatFingerprint(info).mtime) / 1e9)
            let copy = try applier.keepAsConflictCopy(original, from: path, date: date) { scan.files[$0] != nil || bases[$0] != nil }
            try recordKeptCopy(copy, of: original, report: &report)
            logger.warning("sync.leftover.kept", metadata: ["note.path": "\(copy)"])
            copies.append(copy.string)
        }
        if !copies.isEmpty { scan.merge(try scanner.scan(bases: bases, only: copies, namesUnder: namesUnder)) }
    }
}

extension SyncEngine {

    /// The slots fsck sealed with a void entry (their entry lost from the server: deleted, or never delivered by a
    /// replicating tool) that this device had read as real entries before: its heads and bases still hold what
    /// those entries changed. Whoever holds such a change pushes it again (``requeueLostCommits``): the device that
    /// wrote it, and every device that pulled it. Voids this device reads in the log itself need nothing.
    ///
    /// The voids looked at are recorded with the bases that requeue their changes, in one transaction (or at once
    /// when nothing is to be queued): a process killed in between finds them again, by the bases still tagged
    /// with the lost slot.
    func lostEntriesRead(_ store: ServerStore, zone: ZoneState, bases: RecordTable<BaseRecord>) throws -> LostEntries {
        let voids = try store.voidedSlots()
        guard !voids.isEmpty else { return LostEntries() }
        let seen = Set((try state.meta(.voidsSeen) ?? "").split(separator: ",").compactMap { Int64($0) })
        let fresh = voids.filter { !seen.contains($0) }
        guard !fresh.isEmpty else { return LostEntries() }
        let tags = Set(zone.heads.values.map(\.tag)).union(bases.values.map(\.tag))
        let found = LostEntries(
            slots: fresh.filter { tags.contains($0) },
            seen: seen.union(fresh).sorted().map(String.init).joined(separator: ","))
        if found.slots.isEmpty { try state.setMeta([.voidsSeen: found.seen]) }
        return found
    }

    /// What ``lostEntriesRead(_:zone:bases:)`` found: the slots, and the list of voids looked at once they are dealt with.
    struct LostEntries {
        package var slots: [Int64] = []
        package var seen = ""
        package var isEmpty: Bool { slots.isEmpty }
    }

    /// Queues again what the lost entries this device had read changed (``lostEntriesRead(_:zone:bases:)``), with
    /// `zone` read afresh:
    /// each note whose base is a lost entry gets, as its base, the version the server held before it, so the plan
    /// sees the note changed since and pushes it (merged if another device changed the note meanwhile). Returns
    /// the names to scan again. A lost delete is not made again: the note comes back from the server (nothing is
    /// deleted for a recovery). A note that holds exactly the prior version's text (the lost entry only saved the same
    /// text again, as a restore of an earlier version can) takes that version's time, as a pull would have given it:
    /// there is nothing to push, and every device ends with the same bytes and time.
    func requeueLostCommits(
        _ lost: LostEntries, zone: ZoneState, bases: inout RecordTable<BaseRecord>, scan: inout ScanResult,
        store: ServerStore
    ) throws -> [RecordName] {
        var requeued: [RecordName] = []
        let applier = NoteApplier(folder: folder, deviceName: config.deviceName)
        try state.update { batch in
            for seq in lost.slots {
                logger.warning("sync.entry.lost", metadata: ["server.seq": "\(seq)"])
                let names = bases.filter { $0.value.tag == seq }.map(\.key)
                for name in names {
                    var prior = priorVersion(name, before: seq, zone: zone, store: store)
                    if let version = prior, let file = scan.files[name], let adopted = Self.adoptingTime(version, of: file, applier) {
                        prior = adopted
                    }
                    // Scanned again by the caller against its prior base.
                    scan.rebase(name, from: bases[name], to: nil)
                    bases[name] = prior
                    if let prior { try batch.setBase(name, prior) } else { try batch.removeBase(name) }
                }
                requeued += names
            }
            try batch.setMeta(.voidsSeen, lost.seen)
        }
        return requeued
    }

    /// The version of `name` the server held just before slot `seq`, as a base: found by walking back from the
    /// head through each change's base. `nil` when the record did not exist or was deleted then.
    private func priorVersion(_ name: RecordName, before seq: Int64, zone: ZoneState, store: ServerStore) -> BaseRecord? {
        var tag = zone.heads[name]?.tag ?? 0
        for _ in 0..<256 {
            guard tag > 0, let entry = store.logEntry(tag),
                let change = entry.changes.first(where: { $0.name == name.string })
            else { return nil }
            if tag < seq {
                guard change.op == .save, let text = change.text else { return nil }
                return BaseRecord(
                    tag: tag, digest: text.sha256, size: text.size, modified: change.modified,
                    fingerprint: nil)
            }
            tag = change.base
        }
        return nil
    }
}

extension SyncEngine {
    /// Renames each file the scan left out as the Unicode twin of another (``ScanResult/unicodeTwins``) to a
    /// conflict-copy name of its own (in NFC), and scans it: no text stays on one device only. Reported as a
    /// conflict copy.
    func keepUnicodeTwins(
        _ scan: inout ScanResult, scanner: FolderScanner, bases: RecordTable<BaseRecord>,
        report: inout SyncReport
    ) throws {
        let applier = NoteApplier(folder: folder, deviceName: config.deviceName)
        var copies: [String] = []
        for path in scan.unicodeTwins {
            guard let original = try? RecordName(validating: RecordName.nfc(path)) else { continue }
            let copy = try applier.keepAsConflictCopy(original, from: folder.root + "/" + path) {
                scan.files[$0] != nil || bases[$0] != nil
            }
            try recordKeptCopy(copy, of: original, report: &report)
            report.warnings.append(
                SyncWarning(
                    .unicodeTwin, path: copy.description,
                    "\(FolderScanner.codePoints(path)) was renamed to \(copy): its name was the same as "
                        + "\(original)'s in another Unicode form; both texts sync now"))
            copies.append(copy.string)
        }
        scan.unicodeTwins = []
        if !copies.isEmpty { scan.merge(try scanner.scan(bases: bases, only: copies, namesUnder: namesUnder)) }
    }

    /// A copy this device kept of a note (a leftover temp, a Unicode twin): recorded for `notesync conflicts` and
    /// reported as a conflict.
    private func recordKeptCopy(_ copy: RecordName, of original: RecordName, report: inout SyncReport) throws {
        try state.update {
            try $0.addConflict(ConflictRecord(copy: copy, original: original, device: config.deviceName, time: Clock.nowNanoseconds()))
        }
        report.changes.append(PlannedChange(kind: .conflict, name: original.description, detail: copy.description))
        report.conflictCopies.append(copy.description)
    }
}
