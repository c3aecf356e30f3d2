import Foundation
import NoteSyncDiff
import NoteSyncModel
import NoteSyncSupport

/// A rename in a step: how the step's record came to its name, here, on the server, or on both.
///
/// A move step joins two names into one record: the name this device last synced the note under (``source``, whose
/// base is the step's base) and the name it ends at (the step's name). The step's decision is the reconciler's for
/// (the note wherever it is now, the base it had under its old name, the server's head of the same record): an edit
/// made on one side and a rename on the other meet in the note at its new name.
public struct MovePlan: Sendable, Hashable {
    /// The name this device last synced the note under: its base is forgotten once the step is done.
    public var source: RecordName
    /// Where the note's file is now, when that is not the step's name: renamed to it first (never over a file).
    public var renameFrom: RecordName?
    /// The commit moves the server's record from this name (the delete based on ``pushFromBase``) to the step's name
    /// (the save based on ``toBase``). Nil when the server holds the record at the step's name already.
    public var pushFrom: RecordName?
    public var pushFromBase: Int64 = 0
    public var toBase: Int64 = 0
    /// Both sides renamed the note, to different names: the name that did not keep it.
    public var lostName: RecordName?
    /// The device that renamed it on the server (its id), when the server renamed it.
    public var serverDevice: String?
    /// When it was renamed here (``RenameTimes``), for a rename this device commits: the move's time on the server,
    /// which decides between two devices' renames of the note.
    public var time: Int64?

    /// The rename the user sees: from the name the note had to the name it ends at.
    public var shownFrom: RecordName { renameFrom ?? source }
}

extension Planner {
    /// The moves of a plan: local renames (a synced note gone from its name, a new note with its text or a similar
    /// one: ``MoveMatcher``), renames the server made (a tombstone that names where its record went), and both. Each
    /// becomes one step for the record at its new name; `covered` gets every name those steps speak for, which the
    /// planner does not decide again one by one.
    ///
    /// A pair is made only where the record's line is known on both sides; elsewhere the names go through the
    /// reconciler one by one, as a delete and a new note (nothing lost: at worst a note in the trash and its text at
    /// the new name).
    ///
    /// `names` are in order, each once; so are the lists made from them.
    static func planMoves(
        names: [RecordName], scan: ScanResult, bases: RecordTable<BaseRecord>, zone: ZoneState, deviceID: String,
        similarity: ((BaseRecord, LocalFile) -> Double?)?,
        renameTime: (_ from: RecordName, _ to: RecordName, LocalFile) -> Int64 = { _, _, file in file.fingerprint.ctime },
        waiting: Set<RecordName> = [], covered: inout CoveredNames
    ) -> [Step] {
        // Cheap test first: nothing is gone here and nothing moved on the server (nearly every sync).
        let gone = names.filter { bases[$0] != nil && scan.files[$0] == nil && !scan.isUnreadable($0) }
        let movedThere = names.filter { name in
            guard let base = bases[name], let head = zone.heads[name] else { return false }
            return head.movedTo != nil && head.tag != base.tag && scan.files[name] != nil && !scan.isUnreadable(name)
        }
        guard !gone.isEmpty || !movedThere.isEmpty else { return [] }

        /// Whether this sync knows that no note is at `name` here (it is in the scan's view, and absent).
        func knownAbsent(_ name: RecordName) -> Bool {
            scan.files[name] == nil && !scan.isUnreadable(name) && (scan.scope?.contains(name) ?? true)
        }
        func isFree(_ name: RecordName) -> Bool { !covered.contains(name) && bases[name] == nil }
        // At most a step for each name gone here or moved on the server, made at once: grown by doubling, the array
        // would hold its old and new storage at once, and a step is hundreds of bytes.
        var steps: [Step] = []
        steps.reserveCapacity(gone.count + movedThere.count)
        func add(_ step: Step, covering: [RecordName]) {
            steps.append(step)
            covered.formUnion(covering)
        }
        func decide(_ file: LocalFile, _ base: BaseRecord, _ head: RecordHead?) -> Decision {
            Reconciler.decide(
                local: .present(digest: file.digest, size: file.size, modified: file.modified), base: base, server: head)
        }

        /// Where the server moved a gone note's record (a move not seen here yet). Found when asked, not kept in a table,
        /// which would be held at the planning's peak.
        func destination(_ name: RecordName) -> RecordName? {
            guard let base = bases[name], let head = zone.heads[name], head.tag != base.tag, head.movedTo != nil else {
                return nil
            }
            return zone.destination(of: name)
        }

        /// Whether `file` is the note whose base is `base`, renamed (and maybe edited): the same file, the same text, or
        /// a similar one. A note made anew at that name is not.
        func isRenamed(_ base: BaseRecord, _ file: LocalFile) -> Bool {
            if base.fingerprint?.inode == file.fingerprint.inode || base.digest == file.digest { return true }
            guard MoveMatcher.comparableSizes(base.size, file.size), let score = similarity?(base, file) else { return false }
            return score >= MoveMatcher.minimumSimilarity
        }

        // Renamed on both sides to the same name: the record is at that name on both; decided there. Only where the
        // note there is the one renamed: a note made there anew (while the server's rename was on its way) is not the
        // old one's successor; it is reconciled as a new note, beside the renamed one.
        for source in gone {
            guard let destination = destination(source), let file = scan.files[destination], isFree(destination),
                !scan.isUnreadable(destination), let base = bases[source], isRenamed(base, file)
            else { continue }
            add(
                Step(
                    name: destination, local: file, base: base, decision: decide(file, base, zone.heads[destination]),
                    move: MovePlan(source: source, serverDevice: zone.heads[source]?.device)),
                covering: [source, destination])
        }

        // Renamed here: the pairs found, the matcher's lists let go before the steps are made (held to the end of the
        // planning, they would add to its peak).
        func renamedHere() -> [MoveMatcher.Pair] {
            var sources: [MoveMatcher.Source] = []
            for name in gone where !covered.contains(name) {
                guard let base = bases[name], let head = zone.heads[name] else { continue }
                // Deleted on the server (not moved): the note's new name is a new note, the delete is adopted.
                if head.deleted && destination(name) == nil { continue }
                sources.append(
                    MoveMatcher.Source(name: name, digest: base.digest, size: base.size, inode: base.fingerprint?.inode))
            }
            guard !sources.isEmpty else { return [] }
            var targets: [MoveMatcher.Target] = []
            // A conflict copy is never a renamed note: a sync killed after moving a note aside as its conflict copy
            // leaves the note gone and the copy new, with a text like the base's.
            for (index, name) in names.enumerated()
            where !covered.contains(at: index) && bases[name] == nil && !scan.isUnreadable(name)
                && !ConflictCopyName.isNotesyncConflictCopy(name.string)
            {
                guard let file = scan.files[name], zone.heads[name]?.deleted ?? true else { continue }
                targets.append(
                    MoveMatcher.Target(name: name, digest: file.digest, size: file.size, inode: file.fingerprint.inode))
            }
            let measure = similarity.map { similarity in
                { (source: MoveMatcher.Source, target: MoveMatcher.Target) -> Double? in
                    guard let base = bases[source.name], let file = scan.files[target.name] else { return nil }
                    return similarity(base, file)
                }
            }
            return MoveMatcher.match(sources: sources, targets: targets, similarity: measure)
        }
        for pair in renamedHere() {
            guard let base = bases[pair.from], let file = scan.files[pair.to], let head = zone.heads[pair.from] else {
                continue
            }
            let toBase = zone.heads[pair.to]?.tag ?? 0
            let time = renameTime(pair.from, pair.to, file)
            guard let destination = destination(pair.from) else {
                // The server still has the record at the old name (edited there or not): the move is committed, the
                // server's edit merged into the note at its new name.
                add(
                    Step(
                        name: pair.to, local: file, base: base, decision: decide(file, base, head),
                        move: MovePlan(
                            source: pair.from, pushFrom: pair.from, pushFromBase: head.tag, toBase: toBase, time: time)),
                    covering: [pair.from, pair.to])
                continue
            }
            // Renamed here and on the server, to different names: the later rename keeps the note (its time here is
            // `renameTime`'s; on the server the time of the move's delete), ties to the larger device id, as
            // conflicts go.
            guard isFree(destination), knownAbsent(destination), let moved = zone.heads[destination] else { continue }
            let localWins = (time, deviceID) > (head.modified, head.device)
            if localWins {
                add(
                    Step(
                        name: pair.to, local: file, base: base, decision: decide(file, base, moved),
                        move: MovePlan(
                            source: pair.from, pushFrom: destination, pushFromBase: moved.tag, toBase: toBase,
                            lostName: destination, serverDevice: head.device, time: time)),
                    covering: [pair.from, pair.to, destination])
            } else {
                add(
                    Step(
                        name: destination, local: file, base: base, decision: decide(file, base, moved),
                        move: MovePlan(
                            source: pair.from, renameFrom: pair.to, lostName: pair.to, serverDevice: head.device)),
                    covering: [pair.from, pair.to, destination])
            }
        }

        // A note renamed over a synced note (`mv todo.txt deep.txt`): the file at deep.txt is not the file its base
        // recorded but the one todo.txt's base did. Its text may equal deep.txt's base text (the note moved away and
        // back), yet it is not that record's version: decided without a base, so a text the server holds at that
        // name meanwhile is merged with it or kept beside it, never taken for its successor.
        let goneFiles = GoneFiles(
            gone.lazy.compactMap { name in
                bases[name].flatMap { base in base.fingerprint.map { (name: name, inode: $0.inode, digest: base.digest) } }
            })
        if !goneFiles.isEmpty {
            for (index, name) in names.enumerated() where !covered.contains(at: index) && !scan.isUnreadable(name) {
                // Only where the text is the base's (it looks unchanged): a note moved over another with a new text
                // (`mv a b` meaning to replace b) is a change of b, pushed over it as any edit.
                guard let file = scan.files[name], goneFiles.digest(ofInode: file.fingerprint.inode) == file.digest
                else { continue }
                if let base = bases[name] {
                    guard let recorded = base.fingerprint, file.digest == base.digest, recorded.inode != file.fingerprint.inode
                    else { continue }
                } else if zone.heads[name].map({ $0.deleted }) ?? true {
                    continue
                }
                // A synced note renamed onto a name the server holds and this device has no base for (`mv` of a
                // conflict copy over the name another device made again): its text may be one the server once had
                // there, but it is not an old version of that record (no history base): the rules for a new note
                // at a taken name apply, and both texts are kept.
                let decision = Reconciler.decide(
                    local: .present(digest: file.digest, size: file.size, modified: file.modified), base: nil,
                    server: zone.heads[name])
                covered.insert(name)
                if decision != .nothing { steps.append(Step(name: name, local: file, base: nil, decision: decision)) }
            }
        }

        // Renamed on the server: the note is renamed here to follow it. Not to a name that waits for its group's
        // file (``CasePairs``): there the owner's file has that name; the old name is decided alone (the server's
        // delete of it followed) and the record waits at the new one.
        for source in movedThere where !covered.contains(source) {
            guard let destination = destination(source), isFree(destination), knownAbsent(destination),
                !waiting.contains(destination),
                let file = scan.files[source], let base = bases[source]
            else { continue }
            add(
                Step(
                    name: destination, local: file, base: base, decision: decide(file, base, zone.heads[destination]),
                    move: MovePlan(source: source, renameFrom: source, serverDevice: zone.heads[source]?.device)),
                covering: [source, destination])
        }
        return steps
    }

    /// The names the moves' steps speak for, which the planner does not decide again one by one. Most are among the
    /// plan's names (sorted, each once), and each of those is a flag beside its place in them; the others go in a set.
    /// A flag is a byte a name, where a set of them all would take a hash bucket of its own for each, and more while
    /// it grows.
    struct CoveredNames {
        private let names: [RecordName]
        /// A flag for each of `names`, made at the first name covered.
        private var flags: [Bool] = []
        private var others: Set<RecordName> = []
        package private(set) var count = 0

        /// `names` must be in order, each once.
        package init(names: [RecordName]) { self.names = names }

        package var isEmpty: Bool { count == 0 }

        package func contains(_ name: RecordName) -> Bool {
            if let index = index(of: name) { contains(at: index) } else { others.contains(name) }
        }

        /// Whether the name at `index` of the plan's names is covered.
        package func contains(at index: Int) -> Bool { !flags.isEmpty && flags[index] }

        package mutating func insert(_ name: RecordName) {
            guard let index = index(of: name) else {
                if others.insert(name).inserted { count += 1 }
                return
            }
            if flags.isEmpty { flags = [Bool](repeating: false, count: names.count) }
            if !flags[index] {
                flags[index] = true
                count += 1
            }
        }

        package mutating func formUnion(_ names: [RecordName]) {
            for name in names { insert(name) }
        }

        /// Where `name` is in the plan's names, found by halves.
        private func index(of name: RecordName) -> Int? {
            let low = BinarySearch.lowerBound(names.count) { names[$0] < name }
            return low < names.count && names[low] == name ? low : nil
        }
    }

    /// The text each inode had when this device synced it, for the notes gone from their names: where the first of
    /// them in name order recorded it, for an inode two of them recorded. A sorted array searched by halves, not a
    /// dictionary, whose buckets take more than the array and grow by doubling; the sorted list and its names are
    /// held only while the array is made.
    struct GoneFiles {
        private let files: [(inode: UInt64, digest: ContentDigest)]

        package init(_ gone: some Sequence<(name: RecordName, inode: UInt64, digest: ContentDigest)>) {
            let sorted = gone.sorted { ($0.inode, $0.name) < ($1.inode, $1.name) }
            var files: [(inode: UInt64, digest: ContentDigest)] = []
            files.reserveCapacity(sorted.count)
            for file in sorted where files.last?.inode != file.inode { files.append((file.inode, file.digest)) }
            self.files = files
        }

        package var isEmpty: Bool { files.isEmpty }

        package func digest(ofInode inode: UInt64) -> ContentDigest? {
            var low = 0
            var high = files.count
            while low < high {
                let middle = (low + high) / 2
                if files[middle].inode < inode { low = middle + 1 } else { high = middle }
            }
            return low < files.count && files[low].inode == inode ? files[low].digest : nil
        }
    }
}
