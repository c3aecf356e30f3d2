import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// Records whose names fold to one file on a notes folder that folds case (vfat, exFAT, CIFS, a casefold ext4
/// folder): `Todo.md` and `todo.md` are two notes on a device that tells them apart, and one file here.
///
/// Each group of such names has one owner, the record the file is: the last sync's owner (an editor that saves by
/// writing the file anew gives it the spelling the user typed, maybe the waiting twin's: the file stays the owner's),
/// else the name spelled exactly so in the folder's listing, else one this device has a base of, else the lowest
/// record in bytes; in a group with no record, the spelling the folder lists. Names the listing shows in two spellings are two files (the folder tells those apart: exFAT keeps `ß` and
/// `SS` apart, ext4's casefold is per folder): each keeps its own. The others wait: the scan drops them and the sync
/// treats them as ignored (``FolderScanner/waiting``), so nothing is written over the owner's file under their name and no
/// delete is read from their absence; each is said with a warning and listed by `notesync status` until the user
/// renames one of the pair on a device whose folder tells them apart. A file whose spelling is no record's but
/// folds to one (`Notes/b.md` on disk for the record `notes/b.md`: the folder was made as `Notes/` by another
/// record) is that record's file: taken under the record's name, it is neither a new note nor a rename.
public enum CasePairs {
    /// What ``settle(_:bases:heads:)`` decided.
    public struct Outcome: Sendable, Equatable {
        /// The records that wait, each with the owner of its group.
        public var waiting: [RecordName: RecordName] = [:]
        public var warnings: [SyncWarning] = []
    }

    /// The name as a case-folding folder compares it, as ``IgnoreRules`` folds notesync's own names: full Unicode
    /// case folding (`ß` and `SS` are one, as exFAT, vfat and ext4's casefold take them) of the NFC name.
    public static func fold(_ name: RecordName) -> String {
        let text = name.string
        return UTF8Bytes.isASCII(text) ? text.lowercased() : text.folding(options: [.caseInsensitive], locale: nil)
    }

    /// Finds the groups among the records (`bases` and the heads of notes not deleted) and the scanned files,
    /// takes a file spelled as no record into the record it folds to, and drops the waiting names from `scan`.
    /// `owners` are the owners of the last sync's groups: they keep the group's file, a full scan giving them the one
    /// file it lists under another record's spelling.
    /// `spelledOnDisk` says whether the folder lists a name spelled exactly so (nil: its folder could not be
    /// listed); a partial scan asks it, since a lookup finds the file through any spelling.
    public static func settle(
        _ scan: inout ScanResult, bases: RecordTable<BaseRecord>, heads: RecordTable<RecordHead>,
        owners: Set<RecordName> = [], spelledOnDisk: (RecordName) -> Bool? = { _ in nil }
    ) -> Outcome {
        var groups: [String: [RecordName]] = [:]
        func add(_ name: RecordName) {
            let key = fold(name)
            if groups[key]?.contains(name) == true { return }
            groups[key, default: []].append(name)
        }
        for name in bases.keys { add(name) }
        for (name, head) in heads where !head.deleted { add(name) }
        for name in scan.files.keys { add(name) }
        var outcome = Outcome()
        for (_, names) in groups where names.count > 1 {
            let records = names.filter { bases[$0] != nil || heads[$0].map { !$0.deleted } == true }
            let onDisk = names.filter { scan.files[$0] != nil }
            // The spellings the folder lists: a full scan's files; a partial scan finds a file under each spelling
            // it is given (`lstat("Todo.md")` finds `todo.md`), so only the listing tells the real one.
            let listed = scan.scope == nil ? onDisk : onDisk.filter { spelledOnDisk($0) == true }
            // Two spellings listed are two files: this folder tells them apart (exFAT keeps `ß` and `SS` apart,
            // ext4's casefold is per folder). Each keeps its file; only the names with no file of their own wait.
            let apart = listed.count > 1 ? Set(listed) : []
            let exact = lowest(listed.filter(records.contains))
            let kept = lowest(records.filter(owners.contains))
            // With no spelling listed, a record with a base is the file's: a name just fetched is not. With no record,
            // the spelling listed (a partial scan's lookup of `NOTE.MD` finds the file `note.md` too).
            let owner =
                (apart.isEmpty ? nil : exact ?? lowest(listed))
                ?? kept ?? exact ?? lowest(records.filter { bases[$0] != nil })
                ?? lowest(records) ?? lowest(listed) ?? lowest(onDisk) ?? names[0]
            // A file spelled as no record is the owner's file under another spelling (one file per group here).
            // In a full scan, with the folder telling no two apart, the group's one file is the owner's under any
            // spelling listed, another record's too (an editor's save wrote the owner's file anew under the twin's).
            if scan.files[owner] == nil,
                let spelled = lowest(onDisk.filter { !records.contains($0) })
                    ?? (apart.isEmpty && scan.scope == nil ? lowest(onDisk) : nil),
                var file = scan.files.removeValue(forKey: spelled)
            {
                if bases[spelled] != nil { scan.baseMatches -= 1 }
                file.name = owner
                scan.files[owner] = file
                if bases[owner] != nil { scan.baseMatches += 1 }
                scan.changed.removeAll { $0 == spelled }
                scan.changed.append(owner)
                scan.scope?.insert(owner)
            }
            for name in names where name != owner && !apart.contains(name) {
                if scan.files.removeValue(forKey: name) != nil, bases[name] != nil { scan.baseMatches -= 1 }
                scan.changed.removeAll { $0 == name }
                guard records.contains(name) else {
                    scan.scope?.remove(name)
                    continue
                }
                outcome.waiting[name] = owner
                outcome.warnings.append(warning(name, owner: owner))
            }
        }
        return outcome
    }

    /// The folds of every record (`bases`, `heads` not deleted) and of the names in `also`.
    public static func folds<Names: Sequence<RecordName>>(
        bases: RecordTable<BaseRecord>, heads: RecordTable<RecordHead>, also names: Names
    ) -> Set<String> {
        var folds = Set(bases.keys.map(fold))
        for (name, head) in heads where !head.deleted { folds.insert(fold(name)) }
        for name in names { folds.insert(fold(name)) }
        return folds
    }

    /// What a sync says of a record that waits.
    package static func warning(_ name: RecordName, owner: RecordName) -> SyncWarning {
        SyncWarning(
            .casePair, path: name.description,
            "\(name) and \(owner) are one file in this notes folder (it does not tell case apart): \(owner) syncs "
                + "here, \(name) waits (nothing of either is written over or deleted)\n"
                + "  fix: rename one of them on a device whose folder tells them apart")
    }

    private static func lowest(_ names: [RecordName]) -> RecordName? {
        names.min { UTF8Bytes.precedes($0.string, $1.string) }
    }
}
