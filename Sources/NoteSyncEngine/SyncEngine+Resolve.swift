import Foundation
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

extension SyncEngine {
    /// Works out every step's action, once, in plan order. A step whose action cannot be worked out (a note or a
    /// server text that cannot be read for a merge) is reported and left out of this sync, as is one with nothing
    /// to do.
    func resolve(
        _ plan: inout [Step], scan: ScanResult, bases: RecordTable<BaseRecord>, zone: ZoneState, store: ServerStore,
        report: inout SyncReport
    ) throws {
        let merges = plan.contains { if case .merge = $0.decision { true } else { false } }
        var renamed: Set<RecordName> = []
        for step in plan {
            guard let move = step.move else { continue }
            renamed.insert(step.name)
            if let from = move.renameFrom { renamed.insert(from) }
        }
        let madeBefore = merges ? Self.unsyncedNotes(scan: scan, bases: bases, zone: zone, renamed: renamed) : [:]
        var copies: Set<RecordName> = []
        // A copy's name never folds onto another record's either (``CasePairs``): on a folder that folds case,
        // anywhere, the two would be one file. Found only when a copy is named.
        var folds: Set<String>?
        for index in plan.indices {
            // A server text over the limit is not read: the note is left as it is here, and `status` lists it as
            // waiting. A local text over it never gets here (the scan left it out).
            if let text = Self.serverTextRead(by: plan[index]), !maxFileSize.allows(text.size) {
                report.warnings.append(
                    FolderScanner.tooBigWarning(
                        plan[index].name, size: text.size, limit: maxFileSize, notes: folder.root, server: true))
                continue
            }
            do {
                // Nil: nothing to do (the planner leaves such records out; a merge needs the note it merges).
                plan[index].action = try action(plan[index], madeBefore: madeBefore, store: store) { copy in
                    if copies.contains(copy) || isConflictNameTaken(copy, zone: zone, bases: bases) { return true }
                    let known = folds ?? CasePairs.folds(bases: bases, heads: zone.heads, also: scan.files.keys)
                    folds = known
                    return known.contains(CasePairs.fold(copy)) || copies.contains { CasePairs.fold($0) == CasePairs.fold(copy) }
                }
                if case .conflict(let conflict) = plan[index].action, !conflict.madeBefore { copies.insert(conflict.copy) }
            } catch let error as NoteSyncError where error.kind != .serverUnreachable {
                report.warnings.append(SyncWarning.note(plan[index].name, error))
            }
        }
        plan.removeAll { $0.action == nil }
    }

    /// The server text a step's action reads (to write it here, or to merge it), if any.
    static func serverTextRead(by step: Step) -> AssetRef? {
        switch step.decision {
        case .pull(let head) where !head.deleted && !(step.move != nil && head.text?.sha256 == step.local?.digest):
            return head.text
        case .restoreServer(let head), .merge(_, let head):
            return head.text
        default:
            return nil
        }
    }

    /// One step's action.
    private func action(
        _ step: Step, madeBefore: [CopyKey: RecordName], store: ServerStore, isTaken: (RecordName) -> Bool
    ) throws -> Action? {
        guard let decision = step.decision else { return step.action }
        switch decision {
        case .nothing:
            // A note renamed here and unchanged on both sides: only the rename is committed.
            return step.move?.pushFrom != nil ? .save(.move, base: 0) : nil
        case .pull(let head) where step.move != nil && head.text?.sha256 == step.local?.digest:
            // Renamed on the server, the same text on both sides: the rename is all there is.
            return .adopt(head)
        case .push(nil, let base):
            return .delete(base: base)
        case .push(_, let base):
            return .save(.upload, base: base)
        case .resurrectLocal(let base):
            return .save(.resurrect, base: base)
        case .pull(let head) where head.deleted:
            return .trash(head)
        case .pull(let head):
            // A head on a line this device cannot check is pulled without its base: deleted here, so it comes back.
            return .write(head, step.local == nil && step.base != nil ? .restore : .download)
        case .restoreServer(let head):
            return .write(head, .restore)
        case .adopt(let head):
            return .adopt(head)
        case .merge(let ancestor, let server):
            guard let local = step.local else { return nil }
            let merged = try resolveMerge(
                step.name, local: local, ancestor: ancestor, ancestorSize: step.base?.size, server: server, store: store)
            switch merged.resolution {
            case .takeServer:
                return .write(server, .merge)
            case .pushLocal:
                return .save(.merge, base: server.tag)
            case .writeAndPush(let text):
                return .writeMerged(text, base: server.tag)
            case .conflict(let localWins):
                var binary = false
                if case .binary = merged.result { binary = true }
                if localWins, let made = madeBefore[CopyKey(server)], made != step.name {
                    return .conflict(
                        Conflict(
                            server: server, localWins: true, copy: made, copyDevice: deviceName(server.device, store: store),
                            madeBefore: true, binary: binary, tooBigToMerge: merged.tooBig))
                }
                let device = localWins ? deviceName(server.device, store: store) : config.deviceName
                let modified = localWins ? server.modified : local.modified
                let copy = try conflictName(
                    step.name, device: device, date: Date(timeIntervalSince1970: Double(modified) / 1e9), isTaken: isTaken)
                return .conflict(
                    Conflict(
                        server: server, localWins: localWins, copy: copy, copyDevice: device, madeBefore: false,
                        binary: binary, tooBigToMerge: merged.tooBig))
            }
        case .newerVersion:
            return .leave(.newerVersion, "written by a newer notesync; left alone")
        case .unreadable:
            return .leave(.unreadable, "cannot be read; left alone")
        }
    }
}
