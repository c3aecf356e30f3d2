import Foundation

extension SyncEngine {
    /// Describes one planned step for a dry run, reading (never writing) what it needs for the diff.
    func describe(
        _ step: Step, scan: ScanResult, bases: [RecordName: BaseRecord], zone: ZoneState, store: ServerStore,
        options: SyncOptions
    ) throws -> PlannedChange {
        let name = step.name
        var change = PlannedChange(kind: .adopt, name: name.description)

        func localData() throws -> Data {
            guard let local = step.local else { return Data() }
            return try FileIO.read(folder.root + "/" + local.path) ?? Data()
        }
        func baseData() -> Data {
            guard let base = step.base else { return Data() }
            return (try? store.readAsset(AssetRef(sha256: base.digest, size: base.size))) ?? Data()
        }
        func serverData(_ head: RecordHead) throws -> Data {
            guard let text = head.text else { return Data() }
            return try store.readAsset(text)
        }
        func diff(
            _ old: @autoclosure () throws -> Data, _ new: @autoclosure () throws -> Data,
            _ oldLabel: String, _ newLabel: String
        ) rethrows -> String? {
            guard options.withDiffs else { return nil }
            return UnifiedDiff.render(
                old: try old(), new: try new(), oldLabel: oldLabel, newLabel: newLabel,
                color: options.colorDiffs)
        }
        let local = "local/" + name.string
        let server = "server/" + name.string

        switch step.decision {
        case .nothing:
            break
        case .push(nil, _):
            change.kind = .uploadDelete
            change.detail = "deleted here: delete on the server"
            change.diff = diff(baseData(), Data(), server, "/dev/null")
        case .push, .resurrectLocal:
            change.kind = .upload
            if case .resurrectLocal = step.decision {
                change.kind = .resurrect
                change.detail = "edited here, deleted on the server: the edit wins"
            }
            change.diff = try diff(
                step.base == nil ? Data() : baseData(), try localData(),
                step.base == nil ? "/dev/null" : server, local)
        case .pull(let head) where head.deleted:
            change.kind = .downloadDelete
            change.detail = "deleted on the server by \(deviceName(head.device, store: store)): moved to .notesync/trash"
            change.diff = try diff(try localData(), Data(), local, "/dev/null")
        case .pull(let head), .restoreServer(let head):
            change.kind = step.local == nil && step.base != nil ? .restore : .download
            if change.kind == .restore { change.detail = "deleted here, edited on the server: the edit wins" }
            change.diff = try diff(try localData(), try serverData(head), step.local == nil ? "/dev/null" : local, server)
        case .adopt:
            change.kind = .adopt
            change.detail = "both sides already agree"
        case .merge(let ancestor, let head):
            guard let file = step.local else { break }
            let (resolution, localBytes, serverBytes, result) = try resolveMerge(
                name, local: file, ancestor: ancestor, ancestorSize: step.base?.size, server: head, store: store)
            switch resolution {
            case .takeServer, .pushLocal, .writeAndPush:
                change.kind = .merge
                change.detail = "edited on both sides; the edits merge cleanly"
                if case .clean(let merged) = result {
                    change.diff = diff(localBytes, merged, local, "merged/" + name.string)
                }
            case .conflict(let localWins):
                change.kind = .conflict
                if localWins, let made = Self.unsyncedNotes(scan: scan, bases: bases, zone: zone)[CopyKey(head)], made != name {
                    change.detail =
                        "the local version keeps the name; the server's is already kept in \(made.description), "
                        + "made by an interrupted sync"
                    change.diff = diff(localBytes, serverBytes, local, server)
                    break
                }
                let loserDevice = localWins ? deviceName(head.device, store: store) : config.deviceName
                let loserDate = Date(timeIntervalSince1970: Double(localWins ? head.modified : file.modified) / 1e9)
                let copy = try conflictName(name, device: loserDevice, date: loserDate) {
                    isConflictNameTaken($0, zone: zone, bases: bases)
                }
                var detail =
                    (localWins
                        ? "the local version keeps the name; the server's becomes "
                        : "the server's version keeps the name; the local one becomes ") + copy.description
                if case .binary = result { detail += " (binary content is never merged)" }
                change.detail = detail
                change.diff = diff(localBytes, serverBytes, local, server)
            }
        case .newerVersion:
            change.kind = .newerVersion
            change.detail = "written by a newer notesync; left alone"
        case .unreadable:
            change.kind = .unreadable
            change.detail = "cannot be read; left alone"
        }
        return change
    }
}
