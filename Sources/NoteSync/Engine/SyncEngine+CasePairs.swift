import Foundation

extension SyncEngine {
    /// Whether the notes folder takes two names that differ only in case for one file. ``foldsCase`` when set (tests
    /// inject it); else the state folder looked up in upper case (`.NOTESYNC`, one `lstat`, nothing written: a dry
    /// run asks too) is the same folder (its inode, or no such spelling in the listing), and without a state folder
    /// the probe of ``NotesFolder/foldsCase()``.
    func notesFolderFoldsCase() -> Bool {
        if let foldsCase { return foldsCase }
        let state = folder.stateDirectory
        guard let own = FileIO.lstatInfo(state) else { return folder.foldsCase() ?? false }
        let name = (state as NSString).lastPathComponent
        let other = (state as NSString).deletingLastPathComponent + "/" + name.uppercased()
        guard let found = FileIO.lstatInfo(other) else { return false }
        if found.st_ino == own.st_ino && found.st_dev == own.st_dev { return true }
        // exfat-fuse numbers each name looked up anew: a folder of that spelling, or the state folder found again.
        let listed = (try? FileIO.listEntries(folder.root)) ?? nil
        return listed.map { !$0.contains { $0.name == name.uppercased() } } ?? false
    }

    /// On a notes folder that folds case: settles the records whose names are one file here (``CasePairs``) against
    /// the bases and `heads`, sets them waiting in `scanner`, and says each once in `report`. The owner a group had
    /// at the last sync keeps the file (a partial scan sees only some spellings). Returns the names that waited at
    /// the last sync and no longer do: a partial sync scans and plans them (no event names them). With `keep`
    /// (a real sync, right before it plans), the waiting records are stored for the next sync and `status`.
    @discardableResult
    func settleCasePairs(
        _ scan: inout ScanResult, scanner: inout Scanner, bases: RecordTable<BaseRecord>, heads: RecordTable<RecordHead>,
        keep: Bool, report: inout SyncReport
    ) throws -> [RecordName] {
        let previous = try storedCaseWaiting()
        let outcome = CasePairs.settle(&scan, bases: bases, heads: heads, owners: Set(previous.values))
        scanner.waiting = Set(outcome.waiting.keys)
        for warning in outcome.warnings where !report.warnings.contains(warning) { report.warnings.append(warning) }
        if keep {
            let lines = outcome.waiting.sorted { $0.key < $1.key }.map { $0.key.string + "\t" + $0.value.string }
            try state.setMeta([.caseWaiting: lines.isEmpty ? nil : lines.joined(separator: "\n")])
        }
        return previous.keys.filter { outcome.waiting[$0] == nil }.sorted()
    }

    /// The waiting records that one record of their group is left for by the bases and `heads` alone (the owner
    /// renamed or deleted by the sync that just executed): the sync plans them in one more round.
    func releasedCasePairs(bases: RecordTable<BaseRecord>, heads: RecordTable<RecordHead>, waiting: Set<RecordName>)
        -> [RecordName]
    {
        guard !waiting.isEmpty else { return [] }
        let folds = Set(waiting.map(CasePairs.fold))
        var records: [String: Int] = [:]
        func count(_ name: RecordName) {
            let key = CasePairs.fold(name)
            if folds.contains(key) { records[key, default: 0] += 1 }
        }
        for name in bases.keys { count(name) }
        for (name, head) in heads where !head.deleted && bases[name] == nil { count(name) }
        return waiting.filter { (records[CasePairs.fold($0)] ?? 0) <= 1 }.sorted()
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
