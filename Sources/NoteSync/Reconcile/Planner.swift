import Foundation

/// The planner: which records a sync must decide, and the reconciler's decision for each.
extension SyncEngine {
    /// One record's decision, with what the reconciler saw, and what the sync does for it.
    public struct Step: Sendable {
        public var name: RecordName
        public var local: LocalFile?
        public var base: BaseRecord?
        public var decision: Decision
        /// Worked out from the decision once, by ``SyncEngine/resolve(_:scan:bases:zone:store:report:)``; the dry
        /// run and the sync both consume it.
        var action: Action?
    }

    /// Decides every record: the union of local notes, bases and server heads. Pure.
    ///
    /// A note whose file still has its base's digest, and whose server head is still the base's tag, is decided
    /// `.nothing` by the reconciler: such notes (nearly all of them, on most syncs) are passed over without
    /// building the union, sorting it or asking the reconciler.
    ///
    /// `historyBase` gives the base a note found exactly as a version of the record's history has, where a killed
    /// process left it without its base (``SyncEngine/historyBase(_:local:head:base:knownBefore:store:)``): each record is
    /// decided once, against the base it really has.
    public static func plan(
        scan: ScanResult, bases: [RecordName: BaseRecord], zone: ZoneState,
        historyBase: (RecordName, LocalFile, RecordHead, BaseRecord?) -> BaseRecord? = { _, _, _, _ in nil }
    ) -> [Step] {
        var names: Set<RecordName>
        if let scope = scan.scope {
            names = scope
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
                names.insert(name)
            }
            var basesWithHeads = 0
            for (name, head) in zone.heads {
                if let base = bases[name] {
                    basesWithHeads += 1
                    if head.tag != base.tag || head.version > RecordChange.currentVersion { names.insert(name) }
                } else if !head.deleted {
                    names.insert(name)
                }
            }
            // A synced note that is gone or unreadable here, or whose record the server lost. The scan's count
            // of notes with a base is kept up to date when a recovered commit changes the bases (``SyncEngine``).
            if scan.baseMatches < bases.count || basesWithHeads < bases.count {
                for name in bases.keys where scan.files[name] == nil || zone.heads[name] == nil { names.insert(name) }
            }
        }
        var steps: [Step] = []
        for name in names.sorted() {
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
        return steps
    }
}
