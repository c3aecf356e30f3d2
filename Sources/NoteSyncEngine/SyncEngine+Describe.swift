import Foundation
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

extension SyncEngine {
    /// Describes one resolved step for a dry run: a move is said as `renamed a → b`, followed by the change of its
    /// text where the text changes too.
    func describeAll(_ step: Step, store: ServerStore, options: SyncOptions) throws -> [PlannedChange] {
        guard let move = step.move, step.action != nil else {
            return try describe(step, store: store, options: options).map { [$0] } ?? []
        }
        var changes = [
            PlannedChange(
                kind: .move, name: step.name.description, detail: moveDetail(move, to: step.name, store: store),
                from: move.shownFrom.description)
        ]
        let renameOnly: Bool
        switch step.action {
        case .adopt: renameOnly = true
        case .save: renameOnly = step.local?.digest == step.base?.digest
        default: renameOnly = false
        }
        if !renameOnly, let change = try describe(step, store: store, options: options) { changes.append(change) }
        return changes
    }

    /// What a move is, in words: where it was made, and which name kept the note when both sides renamed it.
    func moveDetail(_ move: MovePlan, to name: RecordName, store: ServerStore) -> String {
        let device = move.serverDevice.map { deviceName($0, store: store) } ?? "the server"
        switch (move.pushFrom, move.renameFrom, move.lostName) {
        case (_?, _, let lost?):
            return "renamed here, and to \(lost) on \(device): the later rename, this one, keeps the note"
        case (_?, _, nil):
            return "renamed here"
        case (nil, _?, let lost?):
            return "renamed here to \(lost), and to \(name) on \(device): the later rename, \(device)'s, keeps the note"
        case (nil, _?, nil):
            return "renamed on \(device)"
        case (nil, nil, _):
            return "renamed here and on \(device) alike"
        }
    }

    /// Describes one resolved step for a dry run, reading (never writing) what it needs for the diff.
    func describe(_ step: Step, store: ServerStore, options: SyncOptions) throws -> PlannedChange? {
        guard let action = step.action else { return nil }
        let name = step.name
        let local = "local/" + name.string
        let server = "server/" + name.string

        // A big text (``BigText``) is not read for a diff: its size and digest stand for it.
        func localData() throws -> Data {
            guard let file = step.local else { return Data() }
            if BigText.streams(file.size) { return Self.bigTextLine(file.size, file.digest) }
            return try FileIO.read(folder.root + "/" + file.path) ?? Data()
        }
        func baseData() -> Data {
            guard let base = step.base else { return Data() }
            if BigText.streams(base.size) { return Self.bigTextLine(base.size, base.digest) }
            return (try? store.readAsset(AssetRef(sha256: base.digest, size: base.size))) ?? Data()
        }
        func serverData(_ head: RecordHead) throws -> Data {
            guard let text = head.text else { return Data() }
            if BigText.streams(text.size) { return Self.bigTextLine(text.size, text.sha256) }
            return try store.readAsset(text)
        }
        func diff(
            _ old: @autoclosure () throws -> Data, _ new: @autoclosure () throws -> Data,
            _ oldLabel: String, _ newLabel: String
        ) rethrows -> String? {
            guard options.withDiffs else { return nil }
            return UnifiedDiff.render(
                old: try old(), new: try new(), oldLabel: oldLabel, newLabel: newLabel, color: options.colorDiffs)
        }
        func change(_ kind: PlannedChange.Kind, _ detail: String?, _ diff: String?) -> PlannedChange {
            PlannedChange(kind: kind, name: name.description, detail: detail, diff: diff)
        }
        let merged = "edited on both sides; the edits merge cleanly"

        switch action {
        case .save(.merge, _):
            return change(.merge, merged, try diff(try localData(), try localData(), local, "merged/" + name.string))
        case .save(let kind, _):
            var detail = kind == .resurrect ? "edited here, deleted on the server: the edit wins" : nil
            if step.move != nil { detail = "renamed and edited here" }
            let old = step.move.map { "server/" + $0.source.string } ?? server
            let diff = try diff(step.base == nil ? Data() : baseData(), try localData(), step.base == nil ? "/dev/null" : old, local)
            return change(kind == .move ? .upload : kind, detail, diff)
        case .delete:
            return change(.uploadDelete, "deleted here: delete on the server", diff(baseData(), Data(), server, "/dev/null"))
        case .trash(let head):
            return change(
                .downloadDelete, "deleted on the server by \(deviceName(head.device, store: store)): moved to .notesync/trash",
                try diff(try localData(), Data(), local, "/dev/null"))
        case .write(let head, .merge):
            return change(.merge, merged, try diff(try localData(), try serverData(head), local, "merged/" + name.string))
        case .write(let head, let kind):
            let detail = kind == .restore ? "deleted here, edited on the server: the edit wins" : nil
            let diff = try diff(try localData(), try serverData(head), step.local == nil ? "/dev/null" : local, server)
            return change(kind, detail, diff)
        case .adopt:
            return change(.adopt, "both sides already agree", nil)
        case .writeMerged(let text, _):
            return change(.merge, merged, try diff(try localData(), text, local, "merged/" + name.string))
        case .conflict(let conflict):
            var detail: String
            if conflict.madeBefore {
                detail =
                    "the local version keeps the name; the server's is already kept in \(conflict.copy.description), "
                    + "made by an interrupted sync"
            } else {
                detail =
                    (conflict.localWins
                        ? "the local version keeps the name; the server's becomes "
                        : "the server's version keeps the name; the local one becomes ") + conflict.copy.description
                if conflict.tooBigToMerge {
                    detail += " (notes over \(FileSizeLimit.format(FileSizeLimit.mergeBytes)) are never merged)"
                } else if conflict.binary {
                    detail += " (binary content is never merged)"
                }
            }
            return change(.conflict, detail, try diff(try localData(), try serverData(conflict.server), local, server))
        case .leave(let kind, let detail):
            return change(kind, detail, nil)
        }
    }

    /// What a diff shows for a big text (``BigText``), never read for it: its size and digest.
    static func bigTextLine(_ size: Int64, _ digest: ContentDigest) -> Data {
        Data("(big text not shown: \(size) bytes, sha256 \(digest.hex))\n".utf8)
    }
}
