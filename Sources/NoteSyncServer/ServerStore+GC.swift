import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// What one `notesync server gc` run did (or, in a dry run, would do).
public struct GCReport: Codable, Sendable, Hashable {
    public var dryRun: Bool
    public var policy: String
    /// The last entry read.
    public var end: Int64
    /// The snapshot written at `end` (or that would be), nil when nothing changed since the last one.
    public var snapshot: Int64?
    public var versionsKept = 0
    public var versionsDropped = 0
    public var tombstonesDropped = 0
    /// Assets marked by this run (no kept version references them), and their bytes on the server.
    public var assetsMarked = 0
    public var bytesMarked: Int64 = 0
    /// What the sweep removed (a dry run: what a sweep now would remove, counting this run's mark as due when the
    /// grace period is 0).
    public var assetsRemoved = 0
    public var bytesRemoved: Int64 = 0
    public var entriesRemoved = 0
    public var entryBytesRemoved: Int64 = 0
    public var snapshotsRemoved = 0
    /// Packs removed (every text in them unreferenced), and packs rewritten: less than half of their bytes still
    /// needed, those texts published loose, then the pack removed. Their unreferenced texts count in `assetsRemoved`.
    public var packsRemoved = 0
    public var packsRewritten = 0
    /// Marks whose grace period has not passed yet.
    public var marksWaiting = 0
    public var seconds: Double = 0
}

/// A gc mark: what one run found no kept version references, and the snapshot below which entries may go. Sealed
/// as `mark` under `gc/marks/`; swept once older than the grace period.
struct GCMark: Codable, Sendable {
    package var time: Int64
    package var device: String
    package var snapshot: Int64
    package var assets: [ContentDigest]
}

extension ServerStore {
    /// The versions of every record as the server holds them now: the newest readable snapshot's heads and kept
    /// versions, then every change after it, each list in sequence order. A gap or broken chain throws: gc never
    /// judges a log it cannot read whole.
    func readVersions() throws -> (
        base: Snapshot?, state: ZoneState, versions: [RecordName: [RecordVersion]], times: [Int64: Int64], links: ChainLinks
    ) {
        // Asset names and every sealed file need the key: without it, nothing is judged.
        _ = try requireVault()
        let base = newestAnchoredSnapshot()
        var links = ChainLinks(continuing: base)
        var state = base?.state ?? ZoneState()
        var versions: [RecordName: [RecordVersion]] = [:]
        if let base {
            for version in base.history ?? [] { versions[version.name, default: []].append(version) }
            for head in base.heads {
                versions[head.name, default: []].append(
                    RecordVersion(name: head.name, seq: head.head.tag, time: head.time ?? base.time, head: head.head))
            }
            for name in versions.keys { versions[name]!.sort { $0.seq < $1.seq } }
        }
        var times: [Int64: Int64] = [:]
        while true {
            let read = try fetch(into: &state, limit: 4096, check: .full)
            for slot in read {
                if case .damaged(let damage) = slot { links.append(damage.seq, nil) }
                guard case .entry(let entry) = slot else { continue }
                links.append(entry.seq, entry.chainDigest)
                times[entry.seq] = entry.time
                let moves = ZoneState.moves(in: entry)
                for change in entry.changes {
                    guard let name = try? RecordName(validating: change.name) else { continue }
                    if change.op == .save && change.text == nil { continue }
                    let head = RecordHead(
                        tag: entry.seq, deleted: change.op == .delete, text: change.op == .delete ? nil : change.text,
                        modified: change.modified, version: change.version, device: entry.device, moved: moves[name])
                    versions[name, default: []].append(RecordVersion(name: name, seq: entry.seq, time: entry.time, head: head))
                }
            }
            if read.count < 4096 { break }
        }
        return (base, state, versions, times, links)
    }

    /// The links a snapshot keeps of the log's entries (``Snapshot/links``): the last snapshot's, then one for each
    /// slot read after it.
    struct ChainLinks {
        package var from: Int64
        package var bytes: [UInt8]

        package init(continuing base: Snapshot?) {
            guard let base else {
                from = 1
                bytes = []
                return
            }
            if let links = base.links, let start = base.linksFrom, Int64(links.count) == (base.seq - start + 1) * 4 {
                from = start
                bytes = Array(links)
            } else {
                // A snapshot from before links: they start at its entry.
                from = base.seq
                bytes = []
                append(base.seq, base.chain)
            }
        }

        /// The slot after the last one: `seq`'s link (0 when its digest is not known).
        package mutating func append(_ seq: Int64, _ digest: ContentDigest?) {
            guard seq == end + 1 else { return }
            let link = digest?.link ?? 0
            bytes += [UInt8(link >> 24), UInt8(link >> 16 & 0xff), UInt8(link >> 8 & 0xff), UInt8(link & 0xff)]
        }

        /// The last slot linked.
        package var end: Int64 { from + Int64(bytes.count / 4) - 1 }
    }

    /// gc judges only a log it reads whole: it stops when a snapshot is newer than the end it read (the entry a
    /// snapshot is anchored on is missing) or a registered device has read further than that end (entries lost, or
    /// not delivered yet by a replicating tool, or a server restored from an older copy). Removing texts then could
    /// remove what the missing entries reference.
    func requireWholeLog(end: Int64, devices: [(id: String, token: Int64)]) throws {
        if let newest = try snapshotSequences().first, newest > end {
            throw NoteSyncError(
                .logGap, path: layout.entryPath(newest),
                "gc stops: snapshot \(newest) is on the server but the log ends at entry \(end) (entry \(newest) is missing)",
                fix: "run `notesync server fsck \(layout.root)`; if a replicating tool has not delivered the log yet, "
                    + "wait and run gc again; gc removes nothing until the log reads whole")
        }
        if let ahead = devices.filter({ $0.token > end }).max(by: { $0.token < $1.token }) {
            throw NoteSyncError(
                .serverMismatch, path: layout.devicesDirectory + "/" + ahead.id + ".json",
                "gc stops: device \(ahead.id) has read the log up to entry \(ahead.token), but it ends at entry \(end) "
                    + "(entries lost or not delivered yet, or a server restored from an older copy)",
                fix: "if a newer copy of the server exists, put it back; otherwise sync that device (it reports the "
                    + "server behind it and `notesync recover` pushes again what the server lost); gc runs once no "
                    + "device is ahead of the log (a device that will never sync again: remove its file)")
        }
    }

    /// The devices registered in `devices/` with their tokens.
    func deviceTokenList() -> [(id: String, token: Int64)] {
        ((try? storage.list(layout.devicesDirectory)) ?? []).compactMap { file -> (id: String, token: Int64)? in
            guard file.hasSuffix(".json") else { return nil }
            let id = String(file.dropLast(5))
            return deviceInfo(id).map { (id, $0.token) }
        }
    }

    /// The versions of one record that `policy` keeps at `now`, from `versions` (sequence order, the head last).
    /// Empty when the record is forgotten: a tombstone older than the policy's horizon that every registered device
    /// has read.
    ///
    /// `devices` (id and token) keep, besides the version at each token, every version a device made after its
    /// token: a commit that landed while the device was killed before recording it. The device finds it in the
    /// snapshot and takes it as its base (``SyncEngine/ownUnrecordedCommits(jumpedFrom:zone:scan:bases:store:)``);
    /// without it the note it holds looks made here, and a delete another device made since is undone by its push.
    package static func kept(
        _ versions: [RecordVersion], policy: RetentionPolicy, now: Int64, deviceTokens: [Int64],
        devices: [(id: String, token: Int64)] = []
    ) -> [RecordVersion] {
        guard let head = versions.last else { return [] }
        let age = { (version: RecordVersion) in (now - version.time) / 1_000_000_000 }
        if head.deleted && age(head) >= policy.horizon && deviceTokens.allSatisfy({ $0 >= head.seq }) { return [] }
        var keep = Set<Int>([versions.count - 1])
        // Every registered device's base: the version that was the head at its token.
        for token in deviceTokens {
            var low = 0
            var high = versions.count
            while low < high {
                let mid = (low + high) / 2
                if versions[mid].seq <= token { low = mid + 1 } else { high = mid }
            }
            if low > 0 { keep.insert(low - 1) }
        }
        for (index, version) in versions.enumerated()
        where devices.contains(where: { $0.id == version.device && version.seq > $0.token }) {
            keep.insert(index)
        }
        // Newest first, so the head occupies its bucket (the older versions of its hour, day or week go).
        var buckets = Set<[Int64]>()
        for index in versions.indices.reversed() {
            guard let bucket = policy.bucket(age: age(versions[index]), time: versions[index].time) else { continue }
            if bucket.length == .max || buckets.insert([bucket.length, bucket.number]).inserted { keep.insert(index) }
        }
        return keep.sorted().map { versions[$0] }
    }

    /// Runs gc (docs/retention.md): reads the log, keeps what the policy keeps, publishes a snapshot at the log's end
    /// and a mark of every asset nothing kept references, then sweeps the marks older than `grace` seconds. With
    /// `dryRun` nothing is written or removed.
    public func collectGarbage(
        grace: Int64, dryRun: Bool, policy override: RetentionPolicy? = nil, now: Int64 = Clock.nowNanoseconds()
    ) throws -> GCReport {
        let started = ContinuousClock.now
        try requireRetention("run gc")
        if !dryRun { try requireWritable() }
        let policy = try override ?? retentionPolicy().policy
        var report = GCReport(dryRun: dryRun, policy: policy.description, end: 0)
        // The devices' tokens before the log: a device writes its token after it read or committed up to it, so
        // every token read first is at most the end read next, unless the server lost entries.
        let registered = deviceTokenList()
        let tokens = registered.map(\.token)
        let (base, state, versions, times, links) = try readVersions()
        report.end = state.token
        try requireWholeLog(end: state.token, devices: registered)
        // An empty log keeps nothing and has nothing to compact: a first sync's texts are on their way to entry 1,
        // or the log has not arrived yet (a replicated server). Nothing is marked.
        if state.token == 0 {
            report.seconds = 0
            return report
        }
        var heads: [Snapshot.Head] = []
        var history: [RecordVersion] = []
        var live = Set<ContentDigest>()
        for name in versions.keys.sorted() {
            let all = versions[name]!
            let kept = Self.kept(all, policy: policy, now: now, deviceTokens: tokens, devices: registered)
            report.versionsKept += kept.count
            report.versionsDropped += all.count - kept.count
            guard let head = kept.last, head.seq == all.last!.seq else {
                report.tombstonesDropped += 1
                continue
            }
            for version in kept { if let text = version.text { live.insert(storedName(text.sha256)) } }
            history += kept.dropLast()
            if let current = state.heads[name] {
                heads.append(Snapshot.Head(name: name, head: current, time: times[current.tag] ?? head.time))
            }
        }
        // Compaction: a snapshot at the end. When the last one is there already (nothing committed since), it is
        // written again only if the policy now keeps less of it (time has passed, or the policy changed): the same
        // state at the same entry, with a thinner history, replacing the file in one rename.
        var snapshotSeq = base?.seq ?? 0
        let rethin = base != nil && state.token == base!.seq && (report.versionsDropped > 0 || report.tombstonesDropped > 0)
        if state.token > (base?.seq ?? 0) || rethin {
            var snapshot = Snapshot(state: state, device: device, time: now)
            snapshot.heads = heads
            snapshot.history = history
            if links.end == state.token {
                snapshot.linksFrom = links.from
                snapshot.links = Data(links.bytes)
            }
            report.snapshot = state.token
            snapshotSeq = state.token
            if dryRun {
                // Judged against what it keeps (the pending mark below).
            } else {
                let data = try seal(snapshot, kind: "snapshot", place: String(state.token))
                try storage.makeDirectory(layout.snapshotsDirectory)
                if rethin {
                    try requireWritable()
                    try storage.replace(layout.snapshotPath(state.token), with: data, device: device)
                } else if try publish(data, as: layout.snapshotPath(state.token), suffix: "snapshot") == .published {
                    try storage.syncDirectory(layout.snapshotsDirectory)
                }
                try FaultPoint.hit("gc.snapshotWritten")
                // Another gc may have published this slot first: what is marked is judged from the file there.
                let published = try readSnapshot(state.token)
                live = storedNames(Self.texts(of: published))
            }
        } else if let base {
            live = storedNames(Self.texts(of: base))
        }
        // The mark: every asset nothing kept references.
        var marked: [ContentDigest] = []
        var seen = Set<ContentDigest>()
        for (digest, info) in try listAssets() where !live.contains(digest) && seen.insert(digest).inserted {
            marked.append(digest)
            report.bytesMarked += info.size
        }
        report.assetsMarked = marked.count
        // An idle server (nothing new, nothing to thin, nothing left below the snapshot) gets no mark: gc wrote nothing.
        if !dryRun && (!marked.isEmpty || report.snapshot != nil || (snapshotSeq > 0 && hasEntries(below: snapshotSeq))) {
            try writeMark(GCMark(time: now, device: device, snapshot: snapshotSeq, assets: marked))
            try FaultPoint.hit("gc.marked")
        }
        // A dry run cannot read back what it did not write: with no grace, its own mark is judged against what it keeps.
        try sweep(
            grace: grace, now: now, dryRun: dryRun,
            pending: dryRun && grace == 0 ? (marked, snapshotSeq, live) : nil, report: &report)
        let elapsed = ContinuousClock.now - started
        report.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        logger.notice(
            "server.gc",
            metadata: [
                "gc.end": "\(report.end)", "gc.assets.removed": "\(report.assetsRemoved)",
                "gc.entries.removed": "\(report.entriesRemoved)", "gc.dryRun": "\(dryRun)"
            ])
        return report
    }

    package static func texts(of snapshot: Snapshot) -> Set<ContentDigest> {
        var texts = Set<ContentDigest>()
        for head in snapshot.heads { if let text = head.head.text { texts.insert(text.sha256) } }
        for version in snapshot.history ?? [] { if let text = version.text { texts.insert(text.sha256) } }
        return texts
    }

    /// The names `digests` are stored under (``storedName(_:)``): what gc compares with the files it lists.
    func storedNames(_ digests: Set<ContentDigest>) -> Set<ContentDigest> {
        vault == nil ? digests : Set(digests.map(storedName))
    }

    /// Every asset on the server, by the name it is stored under, with what the storage says of it: each loose file,
    /// then each text in a pack (its size the text's bytes in the pack; a text both loose and packed comes twice).
    func listAssets() throws -> [(ContentDigest, StorageInfo)] {
        var found: [(ContentDigest, StorageInfo)] = []
        for shard in try storage.list(layout.assetsDirectory) ?? [] where shard.utf8.count == 2 {
            for (name, info) in try storage.listWithInfo(layout.assetsDirectory + "/" + shard) ?? [] {
                guard let info, info.isFile, let digest = ContentDigest(hex: name) else { continue }
                found.append((digest, info))
            }
        }
        for entries in refreshPacks().entriesByPack() {
            for entry in entries {
                found.append(
                    (
                        entry.name,
                        StorageInfo(
                            kind: .file, size: entry.length, mtime: 0,
                            fingerprint: StatFingerprint(size: entry.length, mtime: 0, ctime: 0, inode: 0))
                    ))
            }
        }
        return found
    }

    private func writeMark(_ mark: GCMark) throws {
        try storage.makeDirectory(layout.gcDirectory)
        try storage.makeDirectory(layout.marksDirectory)
        let name = ServerLayout.pad(mark.time, 19) + "-" + FileIO.randomToken()
        let path = layout.marksDirectory + "/" + name
        _ = try publish(try seal(mark, kind: "mark", place: name), as: path, suffix: "mark")
        try storage.syncDirectory(layout.marksDirectory)
    }

    /// The assets the newest readable snapshot and every entry after it reference: what must stay.
    package func liveAssets() throws -> (texts: Set<ContentDigest>, snapshot: Int64) {
        let (base, state, versions, _, _) = try readVersions()
        // Judged on a log read whole only (see requireWholeLog): otherwise no asset is judged unreferenced.
        try requireWholeLog(end: state.token, devices: [])
        var texts = base.map(Self.texts(of:)) ?? []
        for list in versions.values {
            for version in list where version.seq > (base?.seq ?? 0) { if let text = version.text { texts.insert(text.sha256) } }
        }
        return (storedNames(texts), base?.seq ?? 0)
    }

    /// Removes what every mark older than `grace` seconds marked and is still unneeded: each asset no kept version
    /// references and no writer touched since the mark, the entries below the mark's snapshot (which must read), and
    /// older snapshots. Then the mark.
    package func sweep(
        grace: Int64, now: Int64, dryRun: Bool, pending: (assets: [ContentDigest], snapshot: Int64, live: Set<ContentDigest>)?,
        report: inout GCReport
    ) throws {
        var due: [(path: String, mtime: Int64, mark: GCMark)] = []
        for name in try storage.list(layout.marksDirectory) ?? [] {
            let path = layout.marksDirectory + "/" + name
            guard let info = storage.info(path), info.isFile else { continue }
            let mtime = info.mtime
            guard let data = try? storage.read(path, limit: 1 << 30),
                let mark = try? open(data, kind: "mark", place: name, as: GCMark.self)
            else {
                logger.error("server.gc.markDamaged", metadata: ["server.path": "\(path)"])
                continue
            }
            // Due by the gc's clock; the touch check below compares file times with file times (the server's clock).
            if now - mark.time >= grace * 1_000_000_000 || grace == 0 {
                due.append((path, mtime, mark))
            } else {
                report.marksWaiting += 1
            }
        }
        if let pending {
            due.append(("", now, GCMark(time: now, device: device, snapshot: pending.snapshot, assets: pending.assets)))
        }
        guard !due.isEmpty else { return }
        var (live, newest) = try liveAssets()
        var sweptPacks = Set<String>()
        // What an earlier due mark of this sweep removed is not counted again by a later one: removed, it is not
        // found again, but a dry run removes nothing (it counted an earlier gc's mark and its own twice).
        var sweptAssets = Set<ContentDigest>()
        var sweptSnapshots = Set<Int64>()
        var entriesSweptBelow: Int64 = 0
        if let pending {
            live = pending.live
            newest = max(newest, pending.snapshot)
        }
        for (path, markTime, mark) in due {
            // The versions the snapshot replaces go before the texts only they reference: a gc killed among the
            // texts, and then the snapshot's own entry lost (fsck takes the snapshot as lost), leaves no snapshot or
            // entry that names a text gone. Entries below the mark's snapshot go only while a snapshot at least that
            // new reads. Older snapshots first: a gc killed among the entries leaves no snapshot whose entry is gone.
            if mark.snapshot > 0 && newest >= mark.snapshot {
                for seq in try snapshotSequences() where seq < mark.snapshot && !sweptSnapshots.contains(seq) {
                    if !dryRun { _ = try? storage.remove(layout.snapshotPath(seq)) }
                    report.snapshotsRemoved += 1
                    sweptSnapshots.insert(seq)
                }
                if mark.snapshot > entriesSweptBelow {
                    try removeEntries(below: mark.snapshot, from: entriesSweptBelow, dryRun: dryRun, report: &report)
                    entriesSweptBelow = mark.snapshot
                }
            }
            for digest in mark.assets where !live.contains(digest) && !sweptAssets.contains(digest) {
                let asset = layout.assetPath(digest)
                guard let info = storage.info(asset), info.isFile else { continue }
                // A writer that reused the asset since the mark touched it.
                guard info.mtime < markTime || (dryRun && path.isEmpty) else { continue }
                if !dryRun {
                    try storage.remove(asset)
                    try FaultPoint.hit("gc.assetRemoved")
                }
                report.assetsRemoved += 1
                report.bytesRemoved += info.size
                sweptAssets.insert(digest)
            }
            try sweepPacks(
                dead: Set(mark.assets).subtracting(live), markTime: markTime, dryRun: dryRun, pending: path.isEmpty,
                swept: &sweptPacks, report: &report)
            if !dryRun && !path.isEmpty {
                _ = try? storage.remove(path)
                try FaultPoint.hit("gc.markSwept")
            }
        }
        if !dryRun { try? storage.syncDirectory(layout.marksDirectory) }
    }

    /// The packs a mark made removable (formats 5 and 6), under the loose assets' rule: a pack not touched since the
    /// mark (no writer reused a text in it) whose texts are all in `dead` (marked and still unreferenced) is
    /// removed. One whose dead texts are more than half its bytes is rewritten: its other texts are published loose
    /// (each fsynced, then its folder) before the pack goes, so every text still needed stays readable throughout.
    /// A reader that read the pack's index before finds the pack gone and looks loose again (``readAsset(_:)``).
    func sweepPacks(
        dead: Set<ContentDigest>, markTime: Int64, dryRun: Bool, pending: Bool, swept: inout Set<String>,
        report: inout GCReport
    ) throws {
        guard hasPacks, !dead.isEmpty else { return }
        let table = refreshPacks()
        // Untouched since the mark: checked when the pack is judged, and again just before it goes (a rewrite takes
        // time, and a writer may reuse one of its texts meanwhile). A dry run's own mark is judged as it stands.
        func untouched(_ path: String) -> Bool {
            guard let info = storage.info(path), info.isFile else { return false }
            return info.mtime < markTime || (dryRun && pending)
        }
        for (index, entries) in zip(table.packs, table.entriesByPack()) where !swept.contains(index.name) {
            let path = layout.packPath(index.name)
            guard untouched(path) else { continue }
            let gone = entries.filter { dead.contains($0.name) }
            guard !gone.isEmpty else { continue }
            let goneBytes = gone.reduce(Int64(0)) { $0 + $1.length }
            let kept = entries.filter { !dead.contains($0.name) }
            if !kept.isEmpty {
                guard goneBytes * 2 > index.blobBytes else { continue }
                if !dryRun {
                    guard try publishLoose(kept, of: path) else { continue }
                    try FaultPoint.hit("gc.packRewritten")
                }
            }
            if !dryRun {
                guard untouched(path) else { continue }
                try storage.remove(path)
                try FaultPoint.hit("gc.packRemoved")
            }
            if kept.isEmpty { report.packsRemoved += 1 } else { report.packsRewritten += 1 }
            swept.insert(index.name)
            report.assetsRemoved += gone.count
            report.bytesRemoved += goneBytes
        }
        if !dryRun && !swept.isEmpty { try? storage.syncDirectory(layout.packsDirectory) }
    }

    /// Publishes the texts `entries` of the pack at `path` loose (each verified, fsynced, then its folder), those
    /// not loose already: what a rewrite keeps. False, with nothing removed, when one does not verify (a damaged
    /// text is left in its pack for fsck to report) or the pack changed meanwhile.
    private func publishLoose(_ entries: [AssetPack.Entry], of path: String) throws -> Bool {
        var blobs: [(AssetPack.Entry, Data)] = []
        for entry in entries where storage.info(layout.assetPath(entry.name)) == nil {
            guard let blob = try readPacked(PackedAsset(pack: path, entry: entry), limit: Int.max),
                ServerFsck.blobHolds(blob, entry.name, in: self)
            else {
                logger.error("server.gc.packNotRewritten", metadata: ["server.path": "\(path)", "asset": "\(entry.name)"])
                return false
            }
            blobs.append((entry, blob))
        }
        var shards = Set<String>()
        for (entry, blob) in blobs {
            try storage.makeDirectory(layout.assetShard(entry.name))
            _ = try publish(blob, as: layout.assetPath(entry.name), suffix: "asset")
            shards.insert(layout.assetShard(entry.name))
        }
        for shard in shards { try storage.syncDirectory(shard) }
        return true
    }

    /// Whether any entry file is left in a slot below `seq` (the oldest log folder is enough to tell).
    private func hasEntries(below seq: Int64) -> Bool {
        guard let shard = ((try? storage.list(layout.logDirectory)) ?? []).filter({ $0.utf8.count == 6 }).min(),
            let names = try? storage.list(layout.logDirectory + "/" + shard)
        else { return false }
        return names.contains { name in Int64(name.prefix { $0.isNumber }).map { $0 < seq } ?? false }
    }

    /// Removes every entry file in a slot below `seq`, and the log folders that leaves empty; those below `from` are
    /// taken as removed already (by an earlier mark of the same sweep) and neither removed nor counted again.
    private func removeEntries(below seq: Int64, from: Int64 = 0, dryRun: Bool, report: inout GCReport) throws {
        let lastShard = ServerLayout.shardName(of: seq)
        for shard in (try storage.list(layout.logDirectory) ?? []).sorted()
        where shard <= lastShard && shard.utf8.count == lastShard.utf8.count {
            let folder = layout.logDirectory + "/" + shard
            guard let found = try storage.listWithInfo(folder) else { continue }
            var left = 0
            // Oldest first: a gc killed here leaves the log starting later, never with holes below the snapshot.
            for (name, info) in found.sorted(by: { $0.name < $1.name }) {
                guard let slot = ServerLayout.sequence(ofFileName: name), slot < seq, let info, info.isFile else {
                    left += 1
                    continue
                }
                if slot < from { continue }
                if !dryRun {
                    _ = try? storage.remove(folder + "/" + name)
                    try FaultPoint.hit("gc.entryRemoved")
                }
                report.entriesRemoved += 1
                report.entryBytesRemoved += info.size
            }
            if left == 0 && !dryRun && shard < lastShard { storage.removeEmptyDirectory(folder) }
        }
        if !dryRun { try? storage.syncDirectory(layout.logDirectory) }
    }

    // MARK: The lease (advisory)

    /// Takes gc's lease for `seconds` unless a device (this one included) holds one that has not expired: the device
    /// that takes it runs gc now, and no agent runs it again before the lease expires. Written with a rename over the
    /// old lease: two devices may both take it at once, which only doubles the work. gc is correct without it.
    public func takeGCLease(seconds: Int64, now: Int64 = Clock.nowNanoseconds()) -> Bool {
        struct Lease: Codable {
            var device: String
            var until: Int64
        }
        if let data = try? storage.read(layout.gcLease, limit: 1 << 12), let lease = try? JSONDecoder().decode(Lease.self, from: data),
            lease.until > now
        {
            return false
        }
        do {
            try storage.makeDirectory(layout.gcDirectory)
            let lease = try JSONEncoder().encode(Lease(device: device, until: now + seconds * 1_000_000_000))
            try storage.replace(layout.gcLease, with: lease, device: device)
            return true
        } catch {
            return false
        }
    }
}

/// What a server holds (`notesync server du`).
public struct ServerUsage: Codable, Sendable, Hashable {
    public struct Band: Codable, Sendable, Hashable {
        public var band: String
        public var versions: Int
        public var bytes: Int64
    }
    public struct Device: Codable, Sendable, Hashable {
        public var id: String
        public var name: String
        public var lastSeen: Int64
        public var token: Int64
    }
    public var assets = 0
    public var assetBytes: Int64 = 0
    /// Texts the heads reference (on the server, compressed or not).
    public var liveAssets = 0
    public var liveBytes: Int64 = 0
    /// Texts only older versions reference, by the age of the newest version that references each.
    public var history: [Band] = []
    /// Texts nothing in the log or the newest snapshot references (what gc marks).
    public var unreferencedAssets = 0
    public var unreferencedBytes: Int64 = 0
    public var entries = 0
    public var entryBytes: Int64 = 0
    public var logEnd: Int64 = 0
    public var snapshots = 0
    public var snapshotBytes: Int64 = 0
    public var marks = 0
    public var policy: String = ""
    public var devices: [Device] = []
}

extension ServerStore {
    /// What the server holds, by kind and by age (``ServerUsage``). Reads the log like gc, writes nothing.
    public func usage(now: Int64 = Clock.nowNanoseconds()) throws -> ServerUsage {
        var usage = ServerUsage()
        let (_, state, versions, _, _) = try readVersions()
        usage.logEnd = state.token
        usage.policy =
            (hasRetention ? try retentionPolicy().policy : RetentionPolicy.default).description
            + (hasRetention ? "" : " (not applied: format \(marker.format); `server upgrade` first)")
        var live = Set<ContentDigest>()
        for head in state.heads.values { if let text = head.text { live.insert(storedName(text.sha256)) } }
        // Each older text, by its newest version's age.
        var newest: [ContentDigest: Int64] = [:]
        for list in versions.values {
            for version in list {
                if let text = version.text, case let name = storedName(text.sha256), !live.contains(name) {
                    newest[name] = max(newest[name] ?? 0, version.time)
                }
            }
        }
        let bands: [(String, Int64)] = [
            ("under 1 hour", RetentionPolicy.hour), ("under 1 day", RetentionPolicy.day),
            ("under 30 days", 30 * RetentionPolicy.day), ("under 1 year", 365 * RetentionPolicy.day), ("older", .max)
        ]
        var byBand = bands.map { ServerUsage.Band(band: $0.0, versions: 0, bytes: 0) }
        for (digest, info) in try listAssets() {
            let size = info.size
            usage.assets += 1
            usage.assetBytes += size
            if live.contains(digest) {
                usage.liveAssets += 1
                usage.liveBytes += size
            } else if let time = newest[digest] {
                let age = (now - time) / 1_000_000_000
                let index = bands.firstIndex { age < $0.1 } ?? bands.count - 1
                byBand[index].versions += 1
                byBand[index].bytes += size
            } else {
                usage.unreferencedAssets += 1
                usage.unreferencedBytes += size
            }
        }
        usage.history = byBand
        for shard in try storage.list(layout.logDirectory) ?? [] {
            guard let found = try storage.listWithInfo(layout.logDirectory + "/" + shard) else { continue }
            for (name, info) in found where ServerLayout.sequence(ofFileName: name) != nil {
                usage.entries += 1
                usage.entryBytes += info?.size ?? 0
            }
        }
        for seq in try snapshotSequences() {
            usage.snapshots += 1
            usage.snapshotBytes += storage.info(layout.snapshotPath(seq))?.size ?? 0
        }
        usage.marks = (try storage.list(layout.marksDirectory) ?? []).count
        for file in (try storage.list(layout.devicesDirectory) ?? []).sorted() where file.hasSuffix(".json") {
            guard let info = deviceInfo(String(file.dropLast(5))) else { continue }
            usage.devices.append(.init(id: info.id, name: DisplayName.escape(info.name), lastSeen: info.lastSeen, token: info.token))
        }
        return usage
    }
}
