import Foundation
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

extension SyncEngine {
    /// What ``restore(_:version:)`` did: the sync that followed, and where the text it replaced was kept when that
    /// text could not reach the server's history first.
    public struct RestoreResult: Codable, Sendable {
        public var report: SyncReport
        public var keptAs: String?

        public init(report: SyncReport, keptAs: String?) {
            self.report = report
            self.keptAs = keptAs
        }
    }

    /// Brings back version `version` (a log slot) of the note `name`, or the note itself if it was deleted, then
    /// syncs it. The text it replaces is never lost: a sync first pushes it to the server's history; a text that
    /// could not be pushed (the note changed on both sides) is displaced by the applier and kept as a conflict copy.
    public func restore(_ name: RecordName, version: Int64, options: SyncOptions = SyncOptions()) throws -> RestoreResult {
        let store = try openStore()
        // A version of the note under a name it had before a rename is one of its versions too; so is any version
        // of this name, of whichever note had it then.
        var change = try store.history(of: name).first(where: { $0.seq == version })?.change
        if change == nil, case .entry(let entry) = try store.readSlot(version) {
            change = entry.changes.first { $0.name == name.string }
        }
        guard let change else {
            throw NoteSyncError(
                .usage, path: name.string, "has no version \(version)",
                fix: "pick one from `notesync history \(name.string)`")
        }
        guard change.op == .save, let text = change.text else {
            throw NoteSyncError(.usage, path: name.string, "version \(version) is a delete", fix: "pick a saved version")
        }
        // A big text (``BigText``) is streamed into the note when it is written, never held.
        let contents = try store.contents(of: text)
        let before = try sync(options)
        if before.offline {
            throw NoteSyncError(
                .serverUnreachable, path: config.server,
                "the server went away before the current text of \(name) could be pushed; nothing was restored",
                fix: "sync again once the server is back, then restore")
        }
        // A note that already holds that text is left as it is (its mtime too: other devices have the record's).
        if let current = try FileDigest.of(path: folder.root + "/" + name.string), current.digest == text.sha256 {
            return RestoreResult(report: before, keptAs: nil)
        }
        // Only a note that holds its synced text is replaced as it is; any other text is displaced and kept.
        let applier = NoteApplier(folder: folder, deviceName: config.deviceName)
        let base = try state.bases()[name]
        // The synced version brought back (a note deleted here, the delete not synced): the note is as synced, its
        // mtime the record's, and nothing is pushed. Any other version is a new save, made now.
        let modified = base?.digest == text.sha256 ? base?.modified ?? Clock.nowNanoseconds() : Clock.nowNanoseconds()
        // A note that is gone (another device deleted it, and a sync moved it to the trash) comes back with the mode
        // it had there: a private note is restored private.
        let present = FileIO.lstatInfo(folder.root + "/" + name.string) != nil
        let outcome = try applier.write(
            name, path: name.string, contents: contents, modified: modified, expected: base?.digest,
            keepingMode: present ? nil : trashedMode(of: name))
        var keptAs: String?
        if case .writtenKeepingLocalEdit(_, let copy) = outcome {
            try state.update {
                try $0.addConflict(
                    ConflictRecord(
                        copy: copy, original: name, device: config.deviceName,
                        time: Clock.nowNanoseconds()))
            }
            keptAs = copy.description
        }
        var report = try sync(options)
        // The second sync says what is held now (the restored note may have ended a mass delete).
        let earlier = before.warnings.filter { $0.kind != .deletesHeld }
        report.warnings = earlier + report.warnings.filter { !earlier.contains($0) }
        return RestoreResult(report: report, keptAs: keptAs)
    }

    /// The permission bits of the copy of `name` most recently moved to the trash (`trash/<stamp>/<name>`: the newest
    /// change time, which the move into the trash set); nil when the trash holds none.
    func trashedMode(of name: RecordName) -> mode_t? {
        let stamps = (try? FileIO.list(folder.trash)) ?? []
        let copies = stamps.compactMap { stamp -> stat? in
            guard let info = FileIO.lstatInfo(folder.trash + "/" + stamp + "/" + name.string),
                (info.st_mode & S_IFMT) == S_IFREG
            else { return nil }
            return info
        }
        let newest = copies.max { ($0.st_ctim.tv_sec, $0.st_ctim.tv_nsec) < ($1.st_ctim.tv_sec, $1.st_ctim.tv_nsec) }
        return newest.map { $0.st_mode & 0o777 }
    }
}
