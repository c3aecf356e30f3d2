import Foundation

/// The versions a sync writes into notes, recorded before it writes them (the state database's `pendingWrite` table).
///
/// A process killed between writing a note and recording its base leaves a note that holds a server version with no
/// base (or an older one). Taken as the user's, such a note undid a delete made meanwhile by another device, or was
/// merged against the wrong ancestor. ``SyncEngine/historyBase(_:local:head:base:knownBefore:store:)`` finds the
/// version in the log; once gc has compacted the log past it (and the policy thinned it from the snapshot's history)
/// only this device can know. So the versions are recorded locally first, and the next sync adopts each as the base
/// of a note that holds exactly it: the same text and the same mtime (a pull gives the note the record's).
struct PendingWrite: Codable, Hashable, Sendable {
    var name: RecordName
    var tag: Int64
    var text: AssetRef
    var modified: Int64

    init?(_ name: RecordName, _ head: RecordHead) {
        guard !head.deleted, let text = head.text else { return nil }
        self.init(name: name, tag: head.tag, text: text, modified: head.modified)
    }

    init(name: RecordName, tag: Int64, text: AssetRef, modified: Int64) {
        self.name = name
        self.tag = tag
        self.text = text
        self.modified = modified
    }

    /// The base of `file` when it holds exactly this version. Without the note's fingerprint: the write may have
    /// displaced a save of the user's into a temp file, which is then kept as a conflict copy; with the fingerprint
    /// the note would pass for the very file its base recorded, never swapped in, and the temp for a stale one.
    func base(of file: LocalFile) -> BaseRecord? {
        guard file.digest == text.sha256, file.modified == modified else { return nil }
        return BaseRecord(tag: tag, digest: text.sha256, size: text.size, modified: modified, fingerprint: nil)
    }
}

extension SyncEngine {
    /// The server version `step` writes into its note under its own name: a pull, or the server's side of a
    /// conflict (a conflict copy of a server version is a note new here, found again by
    /// ``unsyncedNotes(scan:bases:zone:renamed:)``).
    static func pendingWrite(_ step: Step) -> PendingWrite? {
        switch step.action {
        case .write(let head, _): PendingWrite(step.name, head)
        case .conflict(let conflict) where !conflict.madeBefore && !conflict.localWins:
            PendingWrite(step.name, conflict.server)
        default: nil
        }
    }

    /// Records the versions `plan` writes into notes before any is written, one row each in the same transaction
    /// (after those of a killed sync still unread: none, normally, as the next sync adopts them first). Whether it
    /// recorded any. No fault point of its own: a crash right after it is one before the first write.
    func recordPendingWrites(_ plan: [Step]) throws -> Bool {
        guard plan.contains(where: { Self.pendingWrite($0) != nil }) else { return false }
        try state.updateQuietly { batch in
            for step in plan {
                if let write = Self.pendingWrite(step) { try batch.addPendingWrite(write) }
            }
        }
        return true
    }

    /// The record a state database older than schema v4 keeps in `meta` (a JSON array of the writes). An unreadable
    /// record only loses this
    /// recovery (the log's history is the other one): never the sync.
    static func decodePendingWrites(_ stored: String) -> [PendingWrite] {
        (try? JSONDecoder().decode([PendingWrite].self, from: Data(stored.utf8))) ?? []
    }

    /// Once the server can be read and the temp files a killed write left are settled (a save it displaced is kept
    /// as a conflict copy, judged against the old base): a note holding exactly a version a killed sync wrote takes
    /// it as its base (the newest such version, if newer than the base it has), and the record is cleared. Offline,
    /// the record waits with the temps. A dry run adopts them in memory only.
    func adoptPendingWrites(_ scan: inout ScanResult, bases: inout RecordTable<BaseRecord>, dryRun: Bool) throws {
        let writes = try state.pendingWrites()
        guard !writes.isEmpty else { return }
        var adopted: RecordTable<BaseRecord> = [:]
        for write in writes {
            guard let file = scan.files[write.name], let base = write.base(of: file),
                base.tag > (adopted[write.name]?.tag ?? bases[write.name]?.tag ?? 0)
            else { continue }
            adopted[write.name] = base
        }
        for (name, base) in adopted {
            scan.rebase(name, from: bases[name], to: base)
            bases[name] = base
        }
        guard !dryRun else { return }
        try state.updateQuietly { batch in
            for (name, base) in adopted { try batch.setBase(name, base) }
            try batch.clearPendingWrites()
        }
    }
}
