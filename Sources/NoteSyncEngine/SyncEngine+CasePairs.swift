import Foundation
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

extension SyncEngine {
    /// Whether the notes folder takes two names that differ only in case for one file. ``foldsCase`` when set (tests
    /// inject it); else the state folder looked up in upper case (`.NOTESYNC`, one `lstat`, nothing written: a dry
    /// run asks too) is the same folder (its inode, or no such spelling in the listing), and without a state folder
    /// the probe of ``NotesFolder/foldsCase()``. A probe that cannot answer says so in `warning` and takes the
    /// folder as folding: there a case pair only waits (nothing written over or deleted), where taking a folding
    /// folder for one that tells case apart reads one of the pair's absence as a delete and pushes it.
    func notesFolderFoldsCase() -> (folds: Bool, warning: SyncWarning?) {
        if let foldsCase { return (foldsCase, nil) }
        let state = folder.stateDirectory
        func unknown(_ why: String) -> (folds: Bool, warning: SyncWarning?) {
            (
                true,
                SyncWarning(
                    .folder, path: folder.root,
                    "could not tell whether this notes folder tells case apart (\(why)): it is taken as one that does "
                        + "not, so notes whose names differ only in case wait (nothing is written over or deleted)\n"
                        + "  fix: check that this user can list the notes folder and \(state), then sync again")
            )
        }
        guard let own = FileIO.lstatInfo(state) else {
            return folder.foldsCase().map { ($0, nil) } ?? unknown("no state folder to probe in")
        }
        let name = (state as NSString).lastPathComponent
        let other = (state as NSString).deletingLastPathComponent + "/" + name.uppercased()
        var found = stat()
        if lstat(other, &found) != 0 {
            // No such spelling: the folder told the two apart. Any other failure answers nothing.
            return errno == ENOENT || errno == ENOTDIR ? (false, nil) : unknown("lstat \(other): \(String(cString: strerror(errno)))")
        }
        if found.st_ino == own.st_ino && found.st_dev == own.st_dev { return (true, nil) }
        // exfat-fuse numbers each name looked up anew: a folder of that spelling, or the state folder found again.
        do {
            guard let listed = try FileIO.listEntries(folder.root) else { return unknown("the notes folder is gone") }
            return (!listed.contains { $0.name == name.uppercased() }, nil)
        } catch {
            return unknown("\(error)")
        }
    }

    /// For a partial scan: whether the folder lists `name` spelled exactly so, every folder of its path included
    /// (nil: a folder on the way cannot be listed). A lookup finds `a/x/README` through the folder `A`, so each
    /// component is checked in its parent's listing, not only the last. Each folder is listed once per returned
    /// function.
    package func spelledOnDisk() -> (RecordName) -> Bool? {
        var listings: [String: Set<String>?] = [:]
        let root = folder.root
        return { name in
            var parent = ""
            for component in name.components {
                let names: Set<String>?
                if let known = listings[parent] {
                    names = known
                } else {
                    let entries = (try? FileIO.listEntries(parent.isEmpty ? root : root + "/" + parent)) ?? nil
                    names = entries.map { Set($0.map { RecordName.nfc($0.name) }) }
                    listings[parent] = names
                }
                guard let names else { return nil }
                guard names.contains(String(component)) else { return false }
                parent = parent.isEmpty ? String(component) : parent + "/" + component
            }
            return true
        }
    }

    /// On a notes folder that folds case: settles the records whose names are one file here (``CasePairs``) against
    /// the bases and `heads`, sets them waiting in `scanner`, and says each once in `report`. The owner a group had
    /// at the last sync keeps the file (a partial scan sees only some spellings). Returns the names that waited at
    /// the last sync and no longer do: a partial sync scans and plans them (no event names them). With `keep`
    /// (a real sync, right before it plans), the waiting records are stored for the next sync and `status`.
    @discardableResult
    func settleCasePairs(
        _ scan: inout ScanResult, scanner: inout FolderScanner, bases: RecordTable<BaseRecord>, heads: RecordTable<RecordHead>,
        keep: Bool, report: inout SyncReport
    ) throws -> [RecordName] {
        let previous = try storedCaseWaiting()
        let scanned = Set(scan.files.keys)
        let outcome = CasePairs.settle(
            &scan, bases: bases, heads: heads, owners: Set(previous.values),
            spelledOnDisk: scan.scope == nil ? { _ in nil } : spelledOnDisk())
        scanner.waiting = Set(outcome.waiting.keys)
        // Every group is settled again (the bases and heads hold all records): a pair an earlier round of this sync
        // said waits and that this round settled (a pulled rename of one of it executed) is not said.
        let said = Set(outcome.warnings.map(\.path))
        report.warnings.removeAll { $0.kind == .casePair && !said.contains($0.path) }
        for warning in outcome.warnings where !report.warnings.contains(warning) { report.warnings.append(warning) }
        if keep {
            let lines = outcome.waiting.sorted { $0.key < $1.key }.map { $0.key.string + "\t" + $0.value.string }
            try state.setMeta([.caseWaiting: lines.isEmpty ? nil : lines.joined(separator: "\n")])
            // A file queued under its own spelling before the heads were fetched (a note made here while the server
            // had one of another case) is now that record's file: the spelling is no note to push.
            let taken = scanned.subtracting(scan.files.keys).filter { bases[$0] == nil && outcome.waiting[$0] == nil }
            let outbox = taken.isEmpty ? [:] : try state.outbox()
            let stale = taken.filter { outbox[$0] != nil }
            if !stale.isEmpty { try state.update { batch in for name in stale { try batch.dequeue(name) } } }
        }
        return previous.keys.filter { outcome.waiting[$0] == nil }.sorted()
    }

    /// The waiting records that one record of their group is left for by the bases and `heads` alone, or whose
    /// owner is no record any more (renamed or deleted by the sync that just executed: its file went with it, and
    /// one of the others takes the name's place): the sync plans them in one more round.
    func releasedCasePairs(bases: RecordTable<BaseRecord>, heads: RecordTable<RecordHead>, waiting: Set<RecordName>)
        throws -> [RecordName]
    {
        guard !waiting.isEmpty else { return [] }
        let owners = try storedCaseWaiting()
        func isRecord(_ name: RecordName) -> Bool { bases[name] != nil || heads[name].map { !$0.deleted } == true }
        let folds = Set(waiting.map(CasePairs.fold))
        var records: [String: Int] = [:]
        func count(_ name: RecordName) {
            let key = CasePairs.fold(name)
            if folds.contains(key) { records[key, default: 0] += 1 }
        }
        for name in bases.keys { count(name) }
        for (name, head) in heads where !head.deleted && bases[name] == nil { count(name) }
        return waiting.filter { (records[CasePairs.fold($0)] ?? 0) <= 1 || owners[$0].map(isRecord) == false }.sorted()
    }

    /// The records that waited at the last sync, each with the owner of its group (``MetaKey/caseWaiting``).
    func storedCaseWaiting() throws -> [RecordName: RecordName] {
        try Self.caseWaiting(state)
    }

    /// The records that wait on this notes folder, each with the record whose file it is, as the last sync found
    /// them (`notesync status`).
    public static func caseWaiting(_ state: LocalState) throws -> [RecordName: RecordName] {
        var pairs: [RecordName: RecordName] = [:]
        for line in (try state.meta(.caseWaiting) ?? "").split(separator: "\n") {
            let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
            guard parts.count == 2, let name = try? RecordName(validating: parts[0]),
                let owner = try? RecordName(validating: parts[1])
            else { continue }
            pairs[name] = owner
        }
        return pairs
    }
}
