import Foundation
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

extension SyncEngine {
    /// The server version `step` writes into its note under its own name: a pull, or the server's side of a
    /// conflict (a conflict copy of a server version is a note new here, found again by
    /// ``unsyncedNotes(scan:bases:zone:renamed:)``).
    package static func pendingWrite(_ step: Step) -> PendingWrite? {
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
