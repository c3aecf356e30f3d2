import Foundation
import Logging

/// Finishing what a killed process left half done: temp files.
extension SyncEngine {
    /// A temp file an interrupted apply left in the notes folder (a process killed between writing a new version
    /// and swapping it in, or between the swap and the check of the old version), with its content's digest.
    struct LeftoverTemp {
        var path: String
        var digest: ContentDigest
        var size: Int64
    }

    /// At the start of a sync, before local changes are queued: removes each leftover temp whose content the engine
    /// already holds, a base or a change it had queued (the version an apply swapped out after checking it, or
    /// never swapped in). Returns the others for ``settleLeftoverTemps(_:bases:zone:store:report:)``.
    func sweepLeftoverTemps(_ paths: [String], bases: [RecordName: BaseRecord]) throws -> [LeftoverTemp] {
        guard !paths.isEmpty else { return [] }
        var known = Set(bases.values.map(\.digest))
        known.formUnion(try state.outbox().values.compactMap(\.digest))
        var unknown: [LeftoverTemp] = []
        for path in paths {
            guard let (digest, size) = try FileDigest.of(path: folder.root + "/" + path) else { continue }
            if known.contains(digest) {
                unlink(folder.root + "/" + path)
            } else {
                unknown.append(LeftoverTemp(path: path, digest: digest, size: size))
            }
        }
        return unknown
    }

    /// At the end of a sync that reached the server: a leftover whose content is now a base or on the server is
    /// removed (a merge not yet swapped in, redone by this sync); any other is a version no one else has (an edit
    /// the user made while an apply that then crashed was swapping it out): it becomes a conflict copy of its note,
    /// which the next sync uploads. Never deleted unseen.
    func settleLeftoverTemps(_ leftovers: [LeftoverTemp], bases: [RecordName: BaseRecord], zone: ZoneState,
                             store: ServerStore, report: inout SyncReport) throws {
        guard !leftovers.isEmpty else { return }
        let known = Set(bases.values.map(\.digest))
        let applier = NoteApplier(root: folder.root, trash: folder.trash, deviceName: config.deviceName)
        for leftover in leftovers {
            let path = folder.root + "/" + leftover.path
            if known.contains(leftover.digest) || store.hasAsset(leftover.digest) {
                unlink(path)
                continue
            }
            guard let note = AgentTempName.note(ofTemp: leftover.path).flatMap({ try? RecordName(validating: RecordName.nfc($0)) }),
                  let info = FileIO.lstatInfo(path) else {
                report.warnings.append("\(DisplayName.escape(leftover.path)): left by an interrupted sync; check it and delete it")
                continue
            }
            let date = Date(timeIntervalSince1970: Double(StatFingerprint(info).mtime) / 1e9)
            let copy = try applier.keepAsConflictCopy(note, from: path, date: date) { self.isConflictNameTaken($0, zone: zone, bases: bases) }
            try state.update { try $0.addConflict(ConflictRecord(copy: copy, original: note, device: config.deviceName,
                                                                 time: Clock.nowNanoseconds())) }
            report.changes.append(PlannedChange(kind: .conflict, name: note.description, detail: copy.description))
            report.conflictCopies.append(copy.description)
            logger.warning("sync.leftover.kept", metadata: ["note.path": "\(copy)"])
        }
    }
}
