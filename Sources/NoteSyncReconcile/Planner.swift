import Foundation
import NoteSyncDiff
import NoteSyncModel
import NoteSyncSupport

/// The planner: which records a sync must decide, and the reconciler's decision for each. Pure: it reads the scan,
/// the bases and the server's heads it is given, and the closures that answer what only the engine can know.
public enum Planner {
    /// Decides every record: the union of local notes, bases and server heads. Pure.
    ///
    /// A note whose file still has its base's digest, and whose server head is still the base's tag, is decided
    /// `.nothing` by the reconciler: such notes (nearly all of them, on most syncs) are passed over without
    /// building the union, sorting it or asking the reconciler.
    ///
    /// `historyBase` gives the base a note found exactly as a version of the record's history has, where a killed
    /// process left it without its base (``SyncEngine/historyBase(_:local:head:base:knownBefore:store:)``): each record is
    /// decided once, against the base it really has.
    ///
    /// Renames are found first (``planMoves(names:scan:bases:zone:deviceID:similarity:covered:)``): each is one step
    /// for the record at its new name, and the names it speaks for are not decided again. `deviceID` breaks the tie
    /// when both sides renamed a note at the same time; `similarity` measures a gone note's text against a new one
    /// for a rename with an edit (nil: renames are found by identical text only). `renameTime` gives when a note was
    /// renamed here (``RenameTimes``; the file's ctime by default), which decides between two devices' renames.
    ///
    /// A name `isIgnored` matches (the device's ignore rules, its `.notesyncignore` among them) is not decided: the
    /// scan passes its file over, so its base would read as a delete, and a change the server has for it would be
    /// written into a file the user took out of the sync. It is left as it is on both sides, its base kept, until
    /// the rule goes (then the note is decided against that base).
    ///
    /// `waiting` are the records that wait on a case-folding folder for their group's file (``CasePairs``): a note
    /// renamed on the server to one of them is not renamed here (its file would take the owner's), it follows the
    /// server's delete of its old name, and the record waits at its new name with its text on the server.
    public static func plan(
        scan: ScanResult, bases: RecordTable<BaseRecord>, zone: ZoneState, deviceID: String = "",
        similarity: ((BaseRecord, LocalFile) -> Double?)? = nil,
        isIgnored: (RecordName) -> Bool = { _ in false }, waiting: Set<RecordName> = [],
        renameTime: (_ from: RecordName, _ to: RecordName, LocalFile) -> Int64 = { _, _, file in file.fingerprint.ctime },
        historyBase: (RecordName, LocalFile, RecordHead, BaseRecord?) -> BaseRecord? = { _, _, _, _ in nil }
    ) -> [Step] {
        // The names to decide, in order, each once: an array sorted once, not a set (a set takes a hash bucket for
        // each name, and each loop over it in order would sort it again).
        var names: [RecordName]
        if let scope = scan.scope {
            names = scope.sorted()
        } else {
            names = []
            // Files the scan did not hash hold their base's digest: only the hashed ones can differ.
            for name in scan.changed {
                guard let file = scan.files[name] else { continue }
                if let base = bases[name], base.digest == file.digest, let head = zone.heads[name], head.tag == base.tag,
                    head.version <= RecordChange.currentVersion
                {
                    continue
                }
                names.append(name)
            }
            var basesWithHeads = 0
            for (name, head) in zone.heads {
                if let base = bases[name] {
                    basesWithHeads += 1
                    if head.tag != base.tag || head.version > RecordChange.currentVersion { names.append(name) }
                } else if !head.deleted {
                    names.append(name)
                }
            }
            // A synced note that is gone or unreadable here, or whose record the server lost. The scan's count
            // of notes with a base is kept up to date when a recovered commit changes the bases (``SyncEngine``).
            if scan.baseMatches < bases.count || basesWithHeads < bases.count {
                for name in bases.keys where scan.files[name] == nil || zone.heads[name] == nil { names.append(name) }
            }
            Self.sortUnique(&names)
        }
        names.removeAll { scan.files[$0] == nil && isIgnored($0) }
        var covered = CoveredNames(names: names)
        var steps = planMoves(
            names: names, scan: scan, bases: bases, zone: zone, deviceID: deviceID, similarity: similarity,
            renameTime: renameTime, waiting: waiting, covered: &covered)
        // Room for a step per name at once: a first sync plans one per note, and an array grown by doubling holds up
        // to twice that for a moment (a step is hundreds of bytes).
        steps.reserveCapacity(steps.count + max(0, names.count - covered.count))
        for (index, name) in names.enumerated() where !covered.contains(at: index) {
            let file = scan.files[name]
            let local: LocalSide
            if scan.isUnreadable(name) {
                local = .unreadable
            } else if let file {
                local = .present(digest: file.digest, size: file.size, modified: file.modified)
            } else {
                local = .absent
            }
            var base = bases[name]
            if let file, case .present = local, let head = zone.heads[name], let found = historyBase(name, file, head, base) {
                base = found
            }
            let decision = Reconciler.decide(local: local, base: base, server: zone.heads[name])
            if decision != .nothing { steps.append(Step(name: name, local: file, base: base, decision: decision)) }
        }
        guard !covered.isEmpty else { return steps }
        // The moves' steps among the others, in name order, put in order in place by sorting their indices, not the
        // steps: a stable sort takes a buffer of half of what it sorts.
        names = []
        covered = CoveredNames(names: [])
        Self.sortByName(&steps)
        return steps
    }

    /// Sorts `names` and drops the repeated ones, in place.
    static func sortUnique(_ names: inout [RecordName]) {
        names.sort()
        guard names.count > 1 else { return }
        var kept = 1
        for index in 1..<names.count where names[index] != names[kept - 1] {
            names.swapAt(kept, index)
            kept += 1
        }
        names.removeLast(names.count - kept)
    }

    /// Puts `steps` in name order (each name has one step), moving them in place: the order is found on their indices,
    /// then each cycle of the permutation is followed with one step held aside.
    static func sortByName(_ steps: inout [Step]) {
        var order = [Int32](unsafeUninitializedCapacity: steps.count) { buffer, count in
            for index in 0..<steps.count { buffer[index] = Int32(index) }
            count = steps.count
        }
        order.sort { steps[Int($0)].name < steps[Int($1)].name }
        var placed = [Bool](repeating: false, count: steps.count)
        for start in steps.indices where !placed[start] {
            // The step at `start` goes aside; each place then takes the step the order names for it, to the cycle's end.
            let first = steps[start]
            var current = start
            while true {
                placed[current] = true
                let next = Int(order[current])
                if next == start {
                    steps[current] = first
                    break
                }
                steps[current] = steps[next]
                current = next
            }
        }
    }
}
