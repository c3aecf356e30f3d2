import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// One problem `notesync server fsck` found, with the path it is about.
public struct FsckFinding: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case tempFile = "temp file"
        case foreignFile = "foreign file"
        case symlink = "symlink"
        case damagedEntry = "damaged entry"
        case missingEntry = "missing entry"
        case brokenChain = "broken chain"
        case quarantinedChange = "quarantined change"
        case casViolation = "compare-and-swap violation"
        case missingAsset = "missing asset"
        case corruptAsset = "corrupt asset"
        case damagedSnapshot = "damaged snapshot"
        case snapshotMismatch = "snapshot mismatch"
    }

    public var kind: Kind
    public var path: String
    public var detail: String
    /// What `--repair` did about it, if anything.
    public var repaired: String?

    public var description: String {
        var text = "\(kind.rawValue): \(DisplayName.escape(path)): \(detail)"
        if let repaired { text += " [\(repaired)]" }
        return text
    }
}

/// The outcome of a check.
public struct FsckReport: Sendable {
    public var findings: [FsckFinding] = []
    public var entries = 0
    public var assets = 0
    /// Pack files (formats 5 and 6); their texts are counted in `assets`.
    public var packs = 0
    public var snapshots = 0
    public var token: Int64 = 0
    /// An encrypted server checked without its key: each file's header, length and digest, the log's slots and
    /// gaps; not what the files say (the chain, the texts the log refers to).
    public var withoutKey = false

    /// Clean: nothing found that was not repaired.
    public var isClean: Bool { findings.allSatisfy { $0.repaired != nil } }
}

/// Validates a whole server: every entry, snapshot and asset; reports torn or corrupt files, gaps, missing assets,
/// foreign files and stray temp files with their paths, and entries that do not continue the hash chain. Changes
/// nothing unless asked to repair, and repair only sweeps old temp files, moves foreign or corrupt files into
/// `quarantine/` (never deletes a user's data), and seals gaps older than a grace period with void entries.
public struct ServerFsck {
    public let store: ServerStore
    private var layout: ServerLayout { store.layout }

    /// Names other tools keep in a folder they replicate; harmless in a server folder.
    static let toleratedNames: Set<String> = [
        ".stfolder", ".stignore", ".stversions", ".dropbox", ".dropbox.cache",
        ".sync", "lost+found", "quarantine"
    ]

    public init(store: ServerStore) { self.store = store }

    /// `tempGraceSeconds`: the age from which a temp file is swept. `gapGraceSeconds`: the age (of the first entry
    /// after it) from which a gap is sealed: a replicating tool may still deliver a younger one.
    public func run(repair: Bool, tempGraceSeconds: Double = 3600, gapGraceSeconds: Double = 3600) throws -> FsckReport {
        if store.isReadOnly {
            // Its files may be valid in a format this build cannot read: judging (or quarantining) them would be wrong.
            throw NoteSyncError(
                .serverNewerFormat, path: layout.marker,
                "uses server format \(store.marker.format); this build checks format \(ServerMarker.currentFormat) only",
                fix: "run `notesync server fsck` from an updated notesync")
        }
        let pass = Pass(store: store, repair: repair)
        try pass.checkFolders()
        if store.marker.isEncrypted && store.vault == nil {
            pass.report.withoutKey = true
            try pass.checkSealedOnly()
            try pass.checkTemps(graceSeconds: tempGraceSeconds)
            return pass.report
        }
        let snapshots = try pass.readSnapshots(gapGraceSeconds: gapGraceSeconds)
        try pass.foldLog(try pass.listLog(), snapshots: snapshots, gapGraceSeconds: gapGraceSeconds)
        try pass.checkAssets()
        try pass.checkTemps(graceSeconds: tempGraceSeconds)
        return pass.report
    }

    /// Conflict copies that Dropbox, Syncthing or Nextcloud made inside the server where they matter: next to
    /// the marker, in the zone and log folders, and in the log shard holding entry `seq` (the newest a sync has
    /// read). Cheap enough for every sync, unlike a full check; each comes with its path and the fix.
    public static func conflictCopies(in store: ServerStore, near seq: Int64) -> [String] {
        let layout = store.layout
        var directories = [layout.root, layout.zoneDirectory, layout.logDirectory, layout.snapshotsDirectory]
        directories.append(layout.shardDirectory(of: max(seq, 1)))
        directories.append(layout.shardDirectory(of: seq + 1))
        var seen = Set<String>()
        var found: [String] = []
        for directory in directories where seen.insert(directory).inserted {
            for name in ((try? store.storage.list(directory)) ?? []).sorted() {
                guard let tool = ForeignConflictCopy.detect(name) else { continue }
                let lost =
                    directory.hasPrefix(layout.logDirectory + "/")
                    ? "; the commit in the copy is not applied: the device that made it stops syncing (the log does not "
                        + "continue the one it read) until `notesync recover` there pushes its notes again"
                    : ""
                found.append(
                    "\(DisplayName.escape(directory + "/" + name)): a \(tool) conflict copy inside the server: "
                        + "two devices wrote this file at once through \(tool)\(lost)\n"
                        + "  fix: `notesync server fsck --repair \(DisplayName.escape(layout.root))` moves it to quarantine/; "
                        + "a real share (NFS, SMB, sshfs) avoids this for devices writing at once")
            }
        }
        return found
    }

    /// One run of fsck: what it found so far, the texts the log refers to, and where repair moves files.
    private final class Pass {
        let store: ServerStore
        let repair: Bool
        var layout: ServerLayout { store.layout }
        var report = FsckReport()
        /// Every text a save in the log refers to, with the first entry referring to it.
        var referenced: [ContentDigest: String] = [:]
        /// The newest snapshot's position on a compacted server (0 when none): saves before it are history.
        var compactedTo: Int64 = 0
        let quarantine: String

        init(store: ServerStore, repair: Bool) {
            self.store = store
            self.repair = repair
            quarantine = store.layout.root + "/quarantine/" + String(Clock.nowNanoseconds())
        }

        func add(_ kind: FsckFinding.Kind, _ path: String, _ detail: String, repaired: String? = nil) {
            report.findings.append(FsckFinding(kind: kind, path: path, detail: detail, repaired: repaired))
        }
        func moveAside(_ path: String) -> String? {
            guard repair else { return nil }
            do {
                let target = quarantine + "/" + path.dropFirst(layout.root.count + 1).replacingOccurrences(of: "/", with: "%")
                guard try store.storage.move(path, to: target) else { return nil }
                return "moved to \(target)"
            } catch { return nil }
        }
        func checkListing(_ directory: String, expected: (String) -> Bool) throws -> [String] {
            var kept: [String] = []
            for name in (try store.storage.list(directory) ?? []).sorted() {
                let path = directory + "/" + name
                if let info = store.storage.info(path), info.kind == .link {
                    add(.symlink, path, "symbolic links are never followed in a server", repaired: moveAside(path))
                } else if expected(name) {
                    kept.append(name)
                } else if !ServerFsck.toleratedNames.contains(name) || directory != layout.root {
                    add(.foreignFile, path, ServerFsck.describeForeign(name), repaired: moveAside(path))
                }
            }
            return kept
        }

        /// The folders of the layout hold only what the format puts there.
        func checkFolders() throws {
            let probe = store.storage.probeNamePrefix
            _ = try checkListing(layout.root) { name in
                [ServerLayout.markerName, "zones", "devices"].contains(name) || (store.marker.isEncrypted && name == "keys")
                    || probe.map { name.hasPrefix($0) } == true
            }
            _ = try checkListing(layout.zonesDirectory) { store.marker.zones.contains($0) }
            let format3 = store.hasRetention
            _ = try checkListing(layout.zoneDirectory) {
                ["log", "assets", "snapshots", "tmp", "voids"].contains($0) || (format3 && ["retention", "gc"].contains($0))
                    || (store.hasPacks && $0 == "packs")
            }
            if format3 && store.storage.hasEntry(layout.retentionDirectory) {
                _ = try checkListing(layout.retentionDirectory) { ServerLayout.sequence(ofFileName: $0) != nil }
            }
            if format3 && store.storage.hasEntry(layout.gcDirectory) {
                _ = try checkListing(layout.gcDirectory) { ["marks", "lease"].contains($0) }
                if store.storage.hasEntry(layout.marksDirectory) {
                    _ = try checkListing(layout.marksDirectory) { name in
                        let parts = name.split(separator: "-")
                        return parts.count == 2 && parts[0].utf8.count == 19 && parts[0].allSatisfy(\.isNumber)
                    }
                }
            }
            if store.storage.hasEntry(layout.voidsDirectory) {
                _ = try checkListing(layout.voidsDirectory) { ServerLayout.sequence(ofFileName: $0) != nil }
            }
            _ = try checkListing(layout.devicesDirectory) { $0.hasSuffix(".json") && !$0.hasPrefix(".") }
            if store.marker.isEncrypted {
                for name in try checkListing(layout.keysDirectory, expected: { ServerLayout.sequence(ofFileName: $0) != nil }) {
                    let path = layout.keysDirectory + "/" + name
                    let keys = (try? store.storage.read(path, limit: 1 << 16)).flatMap { $0 }.flatMap {
                        try? SealedFile.open($0, kind: "keys", as: VaultKeys.self)
                    }
                    if keys == nil || keys?.generation != ServerLayout.sequence(ofFileName: name) {
                        add(.damagedEntry, path, "the key file does not read (damaged, or not in its place)", repaired: nil)
                    }
                }
            }
        }

        /// An encrypted server without its key: every sealed file's header, length and digest (they cover the
        /// ciphertext), and the log's slots from its first file to its last. What the files say needs the key.
        func checkSealedOnly() throws {
            let sequences = try listLog()
            var expected = sequences.first
            for seq in sequences {
                while let gap = expected, gap < seq {
                    add(.missingEntry, layout.entryPath(gap), "empty slot before entry \(seq) (a gap)")
                    expected = gap + 1
                }
                expected = seq + 1
                report.entries += 1
                report.token = seq
                // A damaged entry stays: its slot is claimed, and every device skips it.
                checkHeader(layout.entryPath(seq), kind: "entry", as: .damagedEntry, quarantines: false)
            }
            for name in try checkListing(layout.snapshotsDirectory, expected: { ServerLayout.sequence(ofFileName: $0) != nil }) {
                report.snapshots += 1
                checkHeader(layout.snapshotsDirectory + "/" + name, kind: "snapshot", as: .damagedSnapshot)
            }
            for file in ((try? store.storage.list(layout.devicesDirectory)) ?? []).sorted() where file.hasSuffix(".json") {
                checkHeader(layout.devicesDirectory + "/" + file, kind: "device", as: .foreignFile)
            }
            for (directory, kind) in [(layout.marksDirectory, "mark"), (layout.retentionDirectory, "policy")]
            where store.storage.hasEntry(directory) {
                for name in ((try? store.storage.list(directory)) ?? []).sorted() {
                    checkHeader(directory + "/" + name, kind: kind, as: .damagedEntry)
                }
            }
            try checkAssets()
        }

        /// Reports the file at `path` unless it is a sealed file of `kind` in the encrypted format, whole; with
        /// `quarantines`, repair moves a bad one into quarantine/.
        func checkHeader(_ path: String, kind: String, as finding: FsckFinding.Kind, quarantines: Bool = true) {
            guard let data = try? store.storage.read(path, limit: 1 << 30) else {
                add(finding, path, "cannot be read")
                return
            }
            do throws(SealedFile.Failure) {
                let (format, _) = try SealedFile.verifyFormat(data, kind: kind)
                if format != SealedFile.encryptedFormat { throw .notEncrypted }
            } catch {
                add(finding, path, error.description, repaired: quarantines ? moveAside(path) : nil)
            }
        }

        /// The snapshots, read first: the log is checked against them as it is folded.
        func readSnapshots(gapGraceSeconds: Double) throws -> [Int64: Snapshot] {
            var snapshots: [Int64: Snapshot] = [:]
            for name in try checkListing(layout.snapshotsDirectory, expected: { ServerLayout.sequence(ofFileName: $0) != nil }) {
                guard let seq = ServerLayout.sequence(ofFileName: name) else { continue }
                report.snapshots += 1
                do {
                    let snapshot = try store.readSnapshot(seq)
                    if snapshot.chain != nil && store.anchoredSnapshot(seq) == nil {
                        if case .missing? = try? store.readSlot(seq), case .missing? = try? store.readSlot(seq + 1) {
                            // Its entry not there, nor any after it: a replicating tool may still deliver it (devices
                            // wait, as at a gap); once older than --gap-age it is taken as lost.
                            let age =
                                store.storage.info(layout.snapshotPath(seq)).map {
                                    Double(Clock.nowNanoseconds() - $0.mtime) / 1e9
                                } ?? 0
                            let lost = age >= gapGraceSeconds
                            add(
                                .damagedSnapshot, layout.snapshotPath(seq),
                                "its entry \(seq) is missing (gc compacted the log up to it): "
                                    + (lost
                                        ? "taken as lost; devices that read past it recover (`notesync recover`)"
                                        : "younger than --gap-age: left for a replicating tool to deliver"),
                                repaired: repair && lost ? moveAside(layout.snapshotPath(seq)) : nil)
                            continue
                        }
                        // A gc snapshot whose entry is another now: of the server's earlier life (restored, replaced).
                        add(
                            .damagedSnapshot, layout.snapshotPath(seq),
                            "does not name the entry at its position: a snapshot of another history; devices ignore it",
                            repaired: moveAside(layout.snapshotPath(seq)))
                        continue
                    }
                    snapshots[seq] = snapshot
                } catch let error as NoteSyncError {
                    add(.damagedSnapshot, layout.snapshotPath(seq), error.message, repaired: moveAside(layout.snapshotPath(seq)))
                }
            }
            return snapshots
        }

        /// The slots of the log's entry files, in order (a file in the wrong shard is foreign).
        func listLog() throws -> [Int64] {
            var sequences: [Int64] = []
            for shard in try checkListing(layout.logDirectory, expected: { ServerLayout.sequence(ofFileName: $0, width: 6) != nil }) {
                let directory = layout.logDirectory + "/" + shard
                for name in try checkListing(
                    directory,
                    expected: { name in
                        guard let seq = ServerLayout.sequence(ofFileName: name) else { return false }
                        return ServerLayout.shardName(of: seq) == shard
                    })
                {
                    if let seq = ServerLayout.sequence(ofFileName: name) { sequences.append(seq) }
                }
            }
            sequences.sort()
            return sequences
        }

        /// Folds the log from its first entry (or the snapshot before it) to its end, as a device reads it, reporting
        /// gaps, damaged entries, broken chains and what folding finds; with `repair`, seals old gaps and moves a log's
        /// foreign tail to quarantine/.
        func foldLog(_ sequences: [Int64], snapshots: [Int64: Snapshot], gapGraceSeconds: Double) throws {
            var fold = Fold(state: startState(sequences, snapshots: snapshots))
            // gc keeps the entry at its snapshot's position: the fold starts after it (checked against the snapshot).
            while fold.state.token > 0, fold.index < sequences.count, sequences[fold.index] < fold.state.token { fold.index += 1 }
            if fold.state.token > 0, fold.index < sequences.count, sequences[fold.index] == fold.state.token {
                if case .entry(let entry) = try store.readSlot(fold.state.token), entry.chainDigest == fold.state.chain {
                    report.entries += 1
                } else if fold.state.chain != nil {
                    add(.snapshotMismatch, layout.snapshotPath(fold.state.token), "does not name the entry at its position")
                }
                fold.index += 1
            }
            // On a compacted server the versions before the newest snapshot are what it keeps (retention thinned
            // them): the texts the log refers to are those, and the saves after it.
            if store.hasRetention, let newest = snapshots.keys.max(), let snapshot = snapshots[newest], snapshot.history != nil {
                compactedTo = newest
                for text in ServerStore.texts(of: snapshot) {
                    referenced[text] = referenced[text] ?? layout.snapshotPath(newest)
                }
            }
            while fold.index < sequences.count {
                let seq = fold.state.token + 1
                let next = sequences[fold.index]
                let goesOn =
                    next > seq
                    ? try foldGap(before: next, &fold, sequences, gapGraceSeconds: gapGraceSeconds)
                    : try foldEntry(seq, &fold, sequences, snapshots: snapshots)
                if !goesOn { break }
            }
            report.token = fold.state.token
        }

        /// Where the fold stands: the state folded so far, the next listed entry, and the gap already judged.
        struct Fold {
            var state: ZoneState
            var index = 0
            var checkedGap: Int64?
        }

        /// The state the fold starts from: empty, or the snapshot covering the slots before the first entry (without
        /// one, those slots are a gap like any other).
        private func startState(_ sequences: [Int64], snapshots: [Int64: Snapshot]) -> ZoneState {
            guard let first = sequences.first, first > 1 else { return ZoneState() }
            // A compacted log (format 3): the newest snapshot whose entry is there (gc keeps it) covers every slot
            // before it, and the entries gc has not removed yet below it are not checked (a gc stopped halfway
            // leaves some). Otherwise a snapshot just before the first entry, else nothing: those slots are a gap.
            if store.hasRetention, let snapshot = store.newestAnchoredSnapshot(), snapshot.chain != nil,
                snapshots[snapshot.seq] != nil
            {
                return snapshot.state
            }
            guard let base = snapshots.keys.filter({ $0 >= first - 1 && $0 <= first }).max(), let snapshot = snapshots[base]
            else { return ZoneState() }
            return snapshot.state
        }

        /// The slot the fold expects is empty while entry `next` is there. A gap is sealed only under an entry that
        /// continues the log before it: one that names the last entry before the gap (``LogEntry/earlier``). Any
        /// other (an entry of a server's earlier life, or of a fork, delivered late; or a gap too long to bridge) is
        /// moved to quarantine/ with the entries after it, like a broken chain: applied, it would replace heads it
        /// never saw. Returns false when the log ends here (its tail moved aside).
        private func foldGap(before next: Int64, _ fold: inout Fold, _ sequences: [Int64], gapGraceSeconds: Double) throws -> Bool {
            let seq = fold.state.token + 1
            let age =
                store.storage.info(layout.entryPath(next)).map { Double(Clock.nowNanoseconds() - $0.mtime) / 1e9 } ?? 0
            var foreign = false
            if fold.checkedGap != next, seq > 1, let known = fold.state.chain, case .entry(let after)? = try? store.readSlot(next),
                after.link(to: seq - 1) != known
            {
                let detail =
                    after.link(to: seq - 1) == nil
                    ? "entry \(next) follows a gap of \(next - seq) slots and names no entry before it that this log holds"
                    : "entry \(next) follows a gap but does not continue entry \(seq - 1): it belongs to another history"
                        + " (a server's earlier life or a fork, delivered late)"
                var moved: String?
                if repair && age >= gapGraceSeconds {
                    let outcomes = sequences[fold.index...].map { moveAside(layout.entryPath($0)) }
                    if outcomes.allSatisfy({ $0 != nil }) {
                        moved =
                            "entries \(next)–\(sequences.last ?? next) moved to quarantine/: the log ends at \(seq - 1);"
                            + " the devices that wrote them push their notes again after `notesync recover`"
                    }
                }
                add(.brokenChain, layout.entryPath(next), detail, repaired: moved)
                if moved != nil { return false }
                foreign = true
            }
            fold.checkedGap = foreign ? nil : next
            let sealed = repair && !foreign && age >= gapGraceSeconds ? try store.sealGap(seq, after: fold.state, next: next) : nil
            let repaired = sealed.map { _ in "sealed with a void entry; the devices that had read the lost entry push its changes again" }
            add(
                .missingEntry, layout.entryPath(seq),
                "gap in the log before entry \(next) (\(Int(age)) s old"
                    + (repair && age < gapGraceSeconds ? ", younger than --gap-age: left for a replicating tool to deliver)" : ")"),
                repaired: repaired)
            if let sealed {
                report.entries += 1
                fold.state.apply(sealed)
            } else {
                fold.state.skip(seq: seq)
            }
            return true
        }

        /// Folds the entry in slot `seq`: damaged or vanished slots are skipped as devices skip them; an entry that
        /// breaks the chain ends the log (with `repair`, it and the entries after it go to quarantine/); what folding
        /// an entry quarantines or finds in conflict is reported, and a snapshot at `seq` is compared. Returns false
        /// when the log ends here.
        private func foldEntry(_ seq: Int64, _ fold: inout Fold, _ sequences: [Int64], snapshots: [Int64: Snapshot]) throws -> Bool {
            fold.index += 1
            let quarantinedBefore = fold.state.quarantined.count
            let violationsBefore = fold.state.casViolations.count
            switch try store.readSlot(seq) {
            case .missing:
                add(.missingEntry, layout.entryPath(seq), "vanished while checking")
                fold.state.skip(seq: seq)
            case .damaged(let damage):
                add(.damagedEntry, damage.path, damage.reason + "; every device skips this slot; " + damage.fix)
                fold.state.skip(seq: seq)
            case .entry(let entry):
                report.entries += 1
                if try !chainHolds(entry, fold, sequences) {
                    report.entries -= 1
                    return false
                }
                // A void entry's notice tells the devices that had read the lost entry: a seal cut off before it
                // wrote the notice is finished here.
                if entry.void != nil, store.storage.info(layout.voidPath(seq)) == nil {
                    var repaired: String?
                    if repair, (try? store.writeVoidNotice(seq)) != nil { repaired = "notice written" }
                    add(.missingEntry, layout.voidPath(seq), "the notice of the void entry \(seq) is missing", repaired: repaired)
                }
                fold.state.apply(entry)
                for change in entry.changes where change.op == .save && seq > compactedTo {
                    if let text = change.text { referenced[text.sha256] = referenced[text.sha256] ?? layout.entryPath(seq) }
                }
            }
            for item in fold.state.quarantined[quarantinedBefore...] {
                add(.quarantinedChange, layout.entryPath(seq), "\(item.name): \(item.reason)")
            }
            for item in fold.state.casViolations[violationsBefore...] {
                add(.casViolation, layout.entryPath(seq), "\(item.name): \(item.reason)")
            }
            // A gc snapshot leaves out the tombstones its policy forgot; every head it has must be the log's.
            // Its heads made once (`Snapshot.state` builds a table each time it is asked).
            if let snapshot = snapshots[seq], case let heads = snapshot.state.heads,
                snapshot.history == nil
                    ? heads != fold.state.heads
                    : !heads.allSatisfy({ fold.state.heads[$0.key] == $0.value })
                        || !fold.state.heads.allSatisfy({ heads[$0.key] != nil || $0.value.deleted })
            {
                // The log folded from before it is what devices read: the snapshot (of entries since lost and sealed,
                // say) would give a device that jumps to it other heads. With --repair it moves to quarantine/.
                add(
                    .snapshotMismatch, layout.snapshotPath(seq), "does not match the log folded to entry \(seq)",
                    repaired: moveAside(layout.snapshotPath(seq)))
            }
            return true
        }

        /// Whether `entry` continues the chain the fold holds. One that does not starts another history (an entry
        /// of a server's earlier life delivered late, a fork): the log is its longest chained prefix. It is reported;
        /// with `repair` it and the entries after it move to quarantine/ (nothing is deleted), and the fold ends
        /// (false): the devices that wrote them stop with a mismatch, and `notesync recover` there pushes their notes
        /// again.
        private func chainHolds(_ entry: LogEntry, _ fold: Fold, _ sequences: [Int64]) throws -> Bool {
            do {
                try store.verifyLink(entry, fold.state)
                return true
            } catch let error as NoteSyncError {
                var moved: String?
                if repair {
                    let outcomes = sequences[(fold.index - 1)...].map { moveAside(layout.entryPath($0)) }
                    if outcomes.allSatisfy({ $0 != nil }) {
                        moved = "entries \(entry.seq)–\(sequences.last ?? entry.seq) moved to quarantine/: the log ends at \(entry.seq - 1)"
                    }
                }
                add(.brokenChain, layout.entryPath(entry.seq), error.message, repaired: moved)
                return moved == nil
            }
        }

        /// Every asset matches its digest, and every text the log refers to is there.
        func checkAssets() throws {
            var present = Set<ContentDigest>()
            for shard in try checkListing(
                layout.assetsDirectory,
                expected: { $0.utf8.count == 2 && ContentDigest(hex: $0 + String(repeating: "0", count: 62)) != nil })
            {
                let directory = layout.assetsDirectory + "/" + shard
                for name in try checkListing(directory, expected: { $0.hasPrefix(shard) && ContentDigest(hex: $0) != nil }) {
                    guard let digest = ContentDigest(hex: name) else { continue }
                    let path = directory + "/" + name
                    report.assets += 1
                    if store.marker.isEncrypted
                        ? try ServerFsck.holdsSealed(path, digest, in: store) : try ServerFsck.holds(path, digest, in: store.storage)
                    {
                        present.insert(digest)
                    } else {
                        add(.corruptAsset, path, "content does not match its digest", repaired: moveAside(path))
                    }
                }
            }
            present.formUnion(try checkPacks())
            for (digest, entryPath) in referenced.sorted(by: { $0.key < $1.key }) where !present.contains(store.storedName(digest)) {
                add(.missingAsset, store.assetPath(digest), "referenced by \(entryPath) but missing or corrupt")
            }
        }

        /// Every pack's index matches its header and name, and each text in it its digest (formats 5 and 6). A damaged
        /// pack moves to quarantine/ with --repair; a whole pack with a damaged text in it too, once its other texts
        /// are published loose (nothing readable is lost). Returns the names of the texts found whole.
        func checkPacks() throws -> Set<ContentDigest> {
            guard store.hasPacks, store.storage.hasEntry(layout.packsDirectory) else { return [] }
            var present = Set<ContentDigest>()
            for name in try checkListing(layout.packsDirectory, expected: AssetPack.isPackName) {
                let path = layout.packsDirectory + "/" + name
                // A pack that cannot be read now (an I/O error, a bucket not answering) stops the check: only what
                // is read and found damaged is ever moved aside.
                guard let data = try store.storage.read(path, limit: 1 << 30) else { continue }
                report.packs += 1
                let index: AssetPack.Index
                do { index = try AssetPack.index(of: data, fileName: name) } catch {
                    add(.corruptAsset, path, "the pack \(error.reason); its texts are not read", repaired: moveAside(path))
                    continue
                }
                var whole: [(AssetPack.Entry, Data)] = []
                var damaged: [AssetPack.Entry] = []
                for entry in index.entries {
                    report.assets += 1
                    let start = data.startIndex + Int(entry.offset)
                    let blob = data[start..<start + Int(entry.length)]
                    if ServerFsck.blobHolds(Data(blob), entry.name, in: store) {
                        whole.append((entry, Data(blob)))
                        present.insert(entry.name)
                    } else {
                        damaged.append(entry)
                    }
                }
                guard !damaged.isEmpty else { continue }
                var repaired: String?
                if repair {
                    // Its whole texts loose first (each fsynced, then its shard), then the pack aside.
                    let published = whole.allSatisfy { entry, blob in
                        let loose = layout.assetPath(entry.name)
                        if store.storage.info(loose) != nil { return true }
                        do {
                            try store.storage.makeDirectory(layout.assetShard(entry.name))
                            _ = try store.storage.create(blob, as: loose, device: store.device, suffix: "asset")
                            try store.storage.syncDirectory(layout.assetShard(entry.name))
                            return true
                        } catch { return false }
                    }
                    if published, let moved = moveAside(path) {
                        repaired = "its \(whole.count) whole texts published loose; the pack " + moved
                    }
                }
                for entry in damaged {
                    add(
                        .corruptAsset, path, "holds text \(entry.name.hex), whose content does not match its digest",
                        repaired: repaired)
                }
            }
            return present
        }

        /// Temp files interrupted writers left: swept once older than `graceSeconds` when repairing.
        func checkTemps(graceSeconds tempGraceSeconds: Double) throws {
            let now = Clock.nowNanoseconds()
            for name in (try store.storage.list(layout.tmpDirectory) ?? []).sorted() {
                let path = layout.tmpDirectory + "/" + name
                guard let info = store.storage.info(path) else { continue }
                let age = Double(now - info.mtime) / 1e9
                var repaired: String?
                if repair && age >= tempGraceSeconds && (try? store.storage.remove(path)) == true { repaired = "swept" }
                add(.tempFile, path, "left by an interrupted writer, \(Int(age)) s old", repaired: repaired)
            }
        }
    }

    /// Whether the asset file at `path` holds the text named `digest`: as it is, or (format 3) compressed. A file at a
    /// local path (``ServerStorage/hasLocalPaths``) is digested as it is by ``FileDigest``, whatever its size; any
    /// other is read, and its bytes digested before they are inflated.
    package static func holds(_ path: String, _ digest: ContentDigest, in storage: any ServerStorage) throws -> Bool {
        let local = storage.hasLocalPaths
        if local, let actual = try FileDigest.of(path: path), actual.digest == digest { return true }
        guard let info = storage.info(path) else { return false }
        // Read a piece at a time: a big text (``BigText``), never read whole.
        if info.size > BigText.threshold {
            return try holdsStreamed(path, digest, size: info.size, in: storage, vault: nil, encrypted: false)
        }
        guard info.size < (local ? ServerStore.maxEntryBytes : 1 << 30), let data = try storage.read(path, limit: 1 << 30)
        else { return false }
        if !local && ContentDigest(of: data) == digest { return true }
        guard info.size < ServerStore.maxEntryBytes, data.starts(with: AssetCodec.magic),
            let text = AssetCodec.inflate(data.dropFirst(AssetCodec.magic.count), limit: 1 << 30)
        else { return false }
        return ContentDigest(of: text) == digest
    }

    /// Whether a pack's blob holds the text stored as `name`: checked as a loose asset file's bytes would be.
    static func blobHolds(_ blob: Data, _ name: ContentDigest, in store: ServerStore) -> Bool {
        if store.marker.isEncrypted { return sealedHolds(blob, name, in: store) }
        if ContentDigest(of: blob) == name { return true }
        guard blob.starts(with: AssetCodec.magic),
            let text = AssetCodec.inflate(blob.dropFirst(AssetCodec.magic.count), limit: 1 << 30)
        else { return false }
        return ContentDigest(of: text) == name
    }

    /// Whether the asset file at `path` of an encrypted server is whole (its header checks the ciphertext) and, with
    /// the key, opens under its name and holds a text whose name it is.
    static func holdsSealed(_ path: String, _ name: ContentDigest, in store: ServerStore) throws -> Bool {
        if let info = store.storage.info(path), info.size > BigText.threshold {
            return try holdsStreamed(path, name, size: info.size, in: store.storage, vault: store.vault, encrypted: true)
        }
        guard let data = try store.storage.read(path, limit: 1 << 30) else { return false }
        return sealedHolds(data, name, in: store)
    }

    /// ``holdsSealed(_:_:in:)`` for bytes read.
    static func sealedHolds(_ data: Data, _ name: ContentDigest, in store: ServerStore) -> Bool {
        guard let (format, body) = try? SealedFile.verifyFormat(data, kind: "asset"), format == SealedFile.encryptedFormat
        else { return false }
        guard let vault = store.vault else { return true }
        guard let stored = try? vault.openAsset(body, name: name) else { return false }
        if stored.starts(with: AssetCodec.magic), let text = AssetCodec.inflate(stored.dropFirst(AssetCodec.magic.count), limit: 1 << 30),
            vault.assetName(ContentDigest(of: text)) == name
        {
            return true
        }
        return vault.assetName(ContentDigest(of: stored)) == name
    }

    static func describeForeign(_ name: String) -> String {
        if let tool = ForeignConflictCopy.detect(name) { return "a \(tool) conflict copy inside the server" }
        if name.hasPrefix(".syncthing.") || name.hasSuffix(".tmp") { return "another tool's temp file" }
        return "not a file notesync writes here"
    }
}
