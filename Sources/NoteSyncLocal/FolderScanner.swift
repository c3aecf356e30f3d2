import Dispatch
import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport
import Synchronization

/// A file a walk found, not yet compared with the bases.
package typealias Candidate = (name: RecordName, path: String, fingerprint: StatFingerprint)

/// The files a walk found, in walk order: one array per subfolder walked on a thread of its own (and one for the
/// rest), never copied into one. At 100,000 notes the one array, 64 bytes a file, held 6.4 MB more at the peak of a
/// sync, beside the subfolders' arrays it was copied from.
package struct Candidates: RandomAccessCollection, Sendable {
    package private(set) var chunks: [[Candidate]] = []
    /// The index of each chunk's first file.
    private var starts: [Int] = []
    package private(set) var endIndex = 0

    package init() {}

    package init(_ files: [Candidate]) { append(files) }

    package var startIndex: Int { 0 }

    package subscript(index: Int) -> Candidate {
        precondition(index >= 0 && index < endIndex, "candidate index out of range")
        var low = 0
        var high = starts.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if starts[middle] <= index { low = middle } else { high = middle - 1 }
        }
        return chunks[low][index - starts[low]]
    }

    package mutating func append(_ files: [Candidate]) {
        guard !files.isEmpty else { return }
        starts.append(endIndex)
        chunks.append(files)
        endIndex += files.count
    }

    /// Removes the files `drop` is true for, in walk order, keeping the order of the rest (in place: a copy would
    /// hold every file twice).
    package mutating func removeAll(where drop: (Candidate) -> Bool) {
        for index in chunks.indices { chunks[index].removeAll(where: drop) }
        chunks.removeAll { $0.isEmpty }
        starts = []
        endIndex = 0
        for chunk in chunks {
            starts.append(endIndex)
            endIndex += chunk.count
        }
    }
}

/// Walks the notes folder: stat fingerprints for every note, SHA-256 only for what changed since the base.
///
/// Never follows a symlink; skips FIFOs, sockets and devices with a warning; ignores what ``IgnoreRules`` says.
public struct FolderScanner: Sendable {
    public let root: String
    public let rules: IgnoreRules
    /// Counts the notes a full scan hashes (``SyncOptions/progress``).
    public var progress: SyncProgress?
    /// A file bigger than this, changed since its base (or new), is left out: not hashed, counted unreadable (so
    /// never taken as deleted, nor written over by a pull), and warned about (``SyncWarning/Kind/tooBig``).
    public var maxFileSize = FileSizeLimit(bytes: nil)
    /// Records that wait on a notes folder that folds case (``CasePairs``): another record's name is their file here.
    /// Taken as ignored, so that a sync neither writes nor deletes anything under their names.
    public var waiting: Set<RecordName> = []

    public init(root: String, rules: IgnoreRules) {
        self.root = root
        self.rules = rules
    }

    /// Whether the rules take the note `name` out of the sync (its file, or a folder it is in), or it waits: the scan passes it
    /// over, and a sync decides nothing for it (``SyncEngine/plan(scan:bases:zone:deviceID:similarity:isIgnored:historyBase:)``).
    public func isIgnored(_ name: RecordName) -> Bool {
        waiting.contains(name) || rules.isIgnoredPath(name.string, isDirectory: false)
    }

    /// Scans the whole notes folder, or with `only`, just those paths (relative; files or folders): the agent's
    /// incremental scan of what inotify reported. A partial scan speaks for every name under the paths given,
    /// including notes that are gone.
    ///
    /// `namesUnder` finds the bases' names under a folder prefix (`a/b/`) without going over every base: the state
    /// database's index (``LocalState/baseNames(under:)``). Only names `bases` holds are taken from it; nil from it
    /// (or no `namesUnder`) falls back to a pass over the bases, or a binary search of them sorted for many paths.
    public func scan(
        bases: RecordTable<BaseRecord>, only paths: [String]? = nil, namesUnder: ((String) -> [RecordName]?)? = nil
    ) throws -> ScanResult {
        guard let paths else { return try complete(walkAll(), bases: bases) }
        try requireRoot()
        var result = ScanResult()
        var candidates: [Candidate] = []
        do {
            var scope = Set<RecordName>()
            // By bytes: `Set<String>` and `<` compare canonical equivalence, and would keep one of two twins given.
            var seen = Set<[UInt8]>()
            let unique = paths.filter { seen.insert(Array($0.utf8)).inserted }.sorted(by: UTF8Bytes.precedes)
            // The notes under each path (a folder may be gone): from the database's index when given; else a pass
            // over the bases for a few paths (the agent's usual batch), a binary search of the sorted names for many.
            var sortedBases: [RecordName]?
            var listings = FolderListings(root: root)
            for path in unique where !path.isEmpty {
                if let name = try? RecordName(validating: RecordName.nfc(path)) { scope.insert(name) }
                let prefix = RecordName.nfc(path) + "/"
                if let found = namesUnder?(prefix) {
                    for name in found where bases[name] != nil { scope.insert(name) }
                } else if unique.count > 8 {
                    if sortedBases == nil { sortedBases = bases.keys.sorted() }
                    let sortedBases = sortedBases!
                    var low = Self.lowerBound(sortedBases, prefix)
                    while low < sortedBases.count, sortedBases[low].string.utf8.starts(with: prefix.utf8) {
                        scope.insert(sortedBases[low])
                        low += 1
                    }
                } else {
                    for name in bases.keys where name.string.utf8.starts(with: prefix.utf8) { scope.insert(name) }
                }
                // Not NSString.deletingLastPathComponent: Foundation (Swift 6.3.1) traps on a one-character relative path.
                let parent = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
                if rules.isIgnoredPath(path, isDirectory: false) && rules.isIgnoredPath(path, isDirectory: true) { continue }
                if !parent.isEmpty, rules.isIgnoredPath(parent, isDirectory: true) { continue }
                // Every file of this name in any Unicode form, as a full walk meets them: the path given may be one
                // twin (or a record's NFC name for a file in NFD), and the scan must see all to keep one per record.
                for onDisk in twins(of: path, listings: &listings) {
                    guard let info = FileIO.lstatInfo(root + "/" + onDisk) else { continue }
                    try visit(
                        FileIO.DirectoryEntry(name: (onDisk as NSString).lastPathComponent, isValidUTF8: true),
                        path: onDisk, info: info, into: &result, candidates: &candidates)
                }
            }
            var found = Candidates(candidates)
            Self.dropUnicodeTwins(&found, in: &result)
            scope.formUnion(found.map(\.name))
            scope.formUnion(result.unreadable)
            result.scope = scope
            return try complete(Walked(result: result, candidates: found), bases: bases)
        }
    }

    /// The paths on disk whose names are `path`'s in some Unicode form (`path` itself among them when it exists), in
    /// byte order; `[path]` when no other form can exist. A component that could have a twin (see
    /// ``RecordName/mayHaveUnicodeTwin(_:)``) is looked up in its folder's listing (`listings`: each folder listed
    /// once per scan); the rest are taken as they are.
    func twins(of path: String, listings: inout FolderListings) -> [String] {
        let components = RecordName.components(of: path)
        guard components.contains(where: { RecordName.mayHaveUnicodeTwin(String($0)) }) else { return [path] }
        var prefixes = [""]
        for component in components {
            let part = String(component)
            guard RecordName.mayHaveUnicodeTwin(part) else {
                prefixes = prefixes.map { $0.isEmpty ? part : $0 + "/" + part }
                continue
            }
            let form = RecordName.nfc(part)
            var next: [String] = []
            for prefix in prefixes {
                guard let entries = listings.entries(in: prefix, named: form) else {
                    next.append(prefix.isEmpty ? part : prefix + "/" + part)
                    continue
                }
                for entry in entries { next.append(prefix.isEmpty ? entry : prefix + "/" + entry) }
            }
            prefixes = next
            if prefixes.isEmpty { return [path] }
        }
        return prefixes.sorted(by: UTF8Bytes.precedes)
    }

    /// What a walk of the whole folder found: every note's path and fingerprint, not yet compared with the bases.
    /// A one-shot sync walks while it loads the bases from the state database (``complete(_:bases:)`` then
    /// compares): the walk is system calls, the load is CPU, and they overlap.
    public struct Walked: Sendable {
        package var result: ScanResult
        package var candidates: Candidates
    }

    /// Walks the whole notes folder, without the bases: the first half of a full ``scan(bases:only:)``.
    public func walkAll() throws -> Walked {
        try requireRoot()
        var result = ScanResult()
        var candidates = Candidates()
        try walkRoot(into: &result, candidates: &candidates)
        Self.dropUnicodeTwins(&candidates, in: &result)
        return Walked(result: result, candidates: candidates)
    }

    private func requireRoot() throws {
        guard let rootInfo = FileIO.lstatInfo(root), (rootInfo.st_mode & S_IFMT) == S_IFDIR else {
            throw NoteSyncError(
                .io, path: root, "the notes folder is missing or not a directory",
                fix: "mount or restore it; notesync never reads a missing folder as \"all notes deleted\"")
        }
    }

    /// The second half of a scan: reuses the base's digest for every file whose fingerprint matches it, hashes
    /// the rest, and finds the synced notes that are gone or hidden.
    ///
    /// The walk's files are taken a subfolder at a time and each subfolder's array is freed as soon as its files are
    /// in the table, so the two are never held whole together (at 100,000 notes the walk's arrays are 9 MB). A file
    /// whose base matches holds the base's name string, not the walk's: the walk's strings die with their arrays,
    /// and a full scan hands their pages back to the system as it goes, between subfolders, and when it is done
    /// (``MemoryPolicy``).
    public func complete(_ walked: consuming Walked, bases: RecordTable<BaseRecord>) throws -> ScanResult {
        var result = walked.result
        let unchanged = Self.unchangedSinceBase(walked.candidates, bases: bases)
        var chunks = walked.candidates.chunks
        walked = Walked(result: ScanResult(), candidates: Candidates())
        result.files.reserveCapacity(result.files.count + unchanged.count)
        let (toHash, tooBigInodes) = addWalked(&chunks, into: &result, unchanged: unchanged, bases: bases)
        hashChanged(toHash, into: &result, bases: bases)
        findMissing(&result, bases: bases, tooBigInodes: tooBigInodes)
        // What the walk allocated is freed by now; its pages go back to the system before the sync goes on to plan.
        // A scoped scan (the agent's round of a few paths) is never large.
        if result.scope == nil { MemoryPolicy.phaseEnded(items: result.files.count) }
        return result
    }

    /// Puts the walk's files in the table, a subfolder at a time (``complete(_:bases:)``): each with its base's
    /// digest where `unchanged` found its base, else under a stand-in digest. Returns the files to hash, by name
    /// (each in the table already, under a stand-in digest ``hashChanged(_:into:bases:)`` replaces, or the file is
    /// taken out again when it is gone or cannot be read), and the inodes of the files left out for their size: a
    /// synced note gone from its name to one of them is that file renamed.
    private func addWalked(
        _ chunks: inout [[Candidate]], into result: inout ScanResult, unchanged: [BaseMatch], bases: RecordTable<BaseRecord>
    ) -> (toHash: [(name: RecordName, path: String)], tooBigInodes: Set<UInt64>) {
        var toHash: [(name: RecordName, path: String)] = []
        let baseRows = bases.values
        let baseNames = bases.keys
        var index = -1
        var pacer = MemoryPolicy.Pacer()
        var tooBigInodes: Set<UInt64> = []
        for chunkIndex in chunks.indices {
            // The pages of the arrays (and strings) freed so far go back as the table grows, not only at the end
            // (between subfolders: a folder walked as one array is taken whole).
            if result.scope == nil { pacer.handled(index + 1) }
            var chunk: [Candidate] = []
            swap(&chunk, &chunks[chunkIndex])
            for candidate in chunk {
                index += 1
                let file: LocalFile
                let match = unchanged[index]
                if match.row >= 0 {
                    let row = Int(match.row)
                    let base = baseRows[row]
                    let name = baseNames[row]
                    // Byte for byte: `==` holds for a name in another Unicode form (an NFD file whose base is NFC),
                    // whose path on disk is not the base's name.
                    let path = UTF8Bytes.equal(candidate.path, name.string) ? name.string : candidate.path
                    file = LocalFile(name: name, path: path, fingerprint: candidate.fingerprint, digest: base.digest, size: base.size)
                } else {
                    file = LocalFile(
                        name: candidate.name, path: candidate.path, fingerprint: candidate.fingerprint, digest: .empty, size: 0)
                }
                // A partial scan may meet a file twice (given itself and its folder): the first stands.
                if let first = result.files.updateValue(file, forKey: file.name, hash: match.hash) {
                    result.files[file.name] = first
                    continue
                }
                if match.row >= 0 {
                    result.baseMatches += 1
                } else if !maxFileSize.allows(candidate.fingerprint.size) {
                    result.files[file.name] = nil
                    result.unreadable.insert(file.name)
                    tooBigInodes.insert(candidate.fingerprint.inode)
                    result.warnings.append(Self.tooBigWarning(file.name, size: candidate.fingerprint.size, limit: maxFileSize, notes: root))
                } else {
                    toHash.append((file.name, file.path))
                }
            }
        }
        return (toHash, tooBigInodes)
    }

    /// Hashes the files `toHash` names (``addWalked(_:into:unchanged:bases:)``) and puts each in the table with its
    /// digest, or takes it out (gone, or unreadable: said).
    private func hashChanged(
        _ toHash: [(name: RecordName, path: String)], into result: inout ScanResult, bases: RecordTable<BaseRecord>
    ) {
        let rootPath = root
        // Only a full scan's hashing is counted (the partial scans of a sync's later rounds are short).
        let progress = result.scope == nil && !toHash.isEmpty ? progress : nil
        progress?.expect(toHash.count)
        // A batch at a time (on every core, unless it is small), each batch's outcomes put in the table in walk order
        // before the next: the outcomes of a first sync's 100,000 hashes, held at once, were 9 MB.
        for batchStart in stride(from: 0, to: toHash.count, by: Self.hashBatch) {
            let batch = Array(toHash[batchStart..<min(batchStart + Self.hashBatch, toHash.count)])
            let outcomes = Parallel.values(batch.count) { slot -> Result<(ContentDigest, Int64, StatFingerprint)?, NoteSyncError> in
                let path = batch[slot].path
                let outcome: Result<(ContentDigest, Int64, StatFingerprint)?, NoteSyncError>
                do {
                    outcome = .success(try FileDigest.stable(path: rootPath + "/" + path).map { ($0.digest, $0.size, $0.fingerprint) })
                } catch let error as NoteSyncError {
                    outcome = .failure(error)
                } catch {
                    outcome = .failure(NoteSyncError(.io, path: path, "\(error)"))
                }
                if case .success(let value?) = outcome { progress?.add(1, bytes: value.1) }
                return outcome
            }
            for (slot, outcome) in outcomes.enumerated() {
                let (name, path) = batch[slot]
                switch outcome {
                case .success(let value?):
                    result.files[name] = LocalFile(name: name, path: path, fingerprint: value.2, digest: value.0, size: value.1)
                    result.hashed += 1
                    result.changed.append(name)
                    if bases[name] != nil { result.baseMatches += 1 }
                case .success(nil):
                    result.files[name] = nil
                case .failure(let error):
                    result.files[name] = nil
                    result.unreadable.insert(name)
                    let reason = error.message + (error.errno.map { " (\(String(cString: strerror($0))))" } ?? "")
                    result.warnings.append(
                        SyncWarning(
                            .unreadable, path: error.path ?? path,
                            "\(error.path ?? path): cannot be read, left alone (not taken as deleted): \(reason)\n"
                                + "  fix: " + (error.fix ?? "let notesync's user read it (chmod, chown), then sync again")))
                }
            }
        }
    }

    /// Finds the synced notes the scan did not find: gone, or hidden (a note left out for its size renamed, a
    /// folder or a link at its name), which are taken as unreadable, never as deleted.
    private func findMissing(_ result: inout ScanResult, bases: RecordTable<BaseRecord>, tooBigInodes: Set<UInt64>) {
        // A synced note whose name now holds a folder or a link is not deleted: a safety filter skips, it never
        // turns what it skips into a delete. It stays unreadable until the user renames one of them.
        let missing: [RecordName]
        if let scope = result.scope {
            missing = scope.filter { bases[$0] != nil && result.files[$0] == nil }
        } else {
            missing = result.baseMatches < bases.count ? bases.keys.filter { result.files[$0] == nil } : []
        }
        for name in missing where !result.unreadable.contains(name) {
            // A synced note renamed where it is left out for its size (`mv big.pdf docs/`, or its folder renamed) is
            // left alone at its old name too: the rename waits whole, never a delete, until the limit allows the
            // note (its new name is in the too-big warning). The same inode alone may be a deleted note's, given to
            // a new file: that delete waits as long, and nothing is lost.
            if let inode = bases[name]?.fingerprint?.inode, tooBigInodes.contains(inode) {
                result.unreadable.insert(name)
                continue
            }
            guard let info = FileIO.lstatInfo(root + "/" + name.string), (info.st_mode & S_IFMT) != S_IFREG else { continue }
            result.unreadable.insert(name)
            if (info.st_mode & S_IFMT) == S_IFDIR {
                result.warnings.append(
                    SyncWarning(
                        .folderOverNote, path: name.description,
                        "\(name): a folder now has the name of this synced note; the note is left alone, not deleted\n"
                            + "  fix: rename the folder (or delete the note on another device)"))
            }
        }
    }

    /// The warning for a note left out of the sync for its size, here or on the server (`server`); its fix names
    /// the notes folder at `notes`, so that it works from wherever it is run.
    package static func tooBigWarning(
        _ name: RecordName, size: Int64, limit: FileSizeLimit, notes: String, server: Bool = false
    ) -> SyncWarning {
        SyncWarning(
            .tooBig, path: name.description,
            "\(name): \(FileSizeLimit.format(size)), over max-file-size (\(limit)): "
                + (server
                    ? "not downloaded (the server keeps it; nothing of it here is changed)"
                    : "not uploaded (left as it is, never taken as deleted)")
                + "; every other note syncs\n  fix: `notesync config --notes \(DisplayName.shellWord(notes)) --max-file-size "
                + FileSizeLimit.suggestion(for: size) + "` to sync it, or add it to .notesyncignore")
    }

    /// How many files a scan hashes between putting outcomes in the table.
    static let hashBatch = 4096

    /// For each candidate, the row of its base (``RecordTable/rowIndex(of:)``) if its fingerprint still matches that
    /// base's, else -1, and its name's hash, which puts it in the scan's table without hashing it again. Looked up on
    /// every core (the bases are only read): at 100,000 notes this is a tenth of a no-op sync. Eight bytes a file:
    /// the base's digest and size, as optionals through `Parallel.map`, took two arrays of 48 bytes a file (9.6 MB
    /// at 100,000 notes, at the peak of a no-op sync).
    static func unchangedSinceBase(
        _ candidates: Candidates,
        bases: RecordTable<BaseRecord>
    ) -> [BaseMatch] {
        let rows = bases.values
        return Parallel.values(candidates.count, serialBelow: 4096) { index in
            let candidate = candidates[index]
            let hash = NameHash(candidate.name)
            guard let row = bases.rowIndex(of: candidate.name, hash: hash), rows[row].matches(candidate.fingerprint) else {
                return BaseMatch(row: -1, hash: hash)
            }
            return BaseMatch(row: Int32(row), hash: hash)
        }
    }

    /// One candidate's outcome in ``unchangedSinceBase(_:bases:)``.
    struct BaseMatch: Sendable {
        /// The base's row, or -1: no base, or one whose fingerprint differs.
        package let row: Int32
        package let hash: NameHash
    }

    /// What one walk of a subtree found, before it is merged into the scan's result.
    private struct Walk {
        var result = ScanResult()
        var candidates: [Candidate] = []
    }

    /// Walks the whole folder: the root's entries here, its subfolders in parallel (stat and listing cost
    /// as much as the rest of a no-op sync), merged back in name order so the outcome does not depend on timing.
    private func walkRoot(into result: inout ScanResult, candidates: inout Candidates) throws {
        var components: [[Unicode.Scalar]] = []
        var deferred: [String]? = []
        var rootFiles: [Candidate] = []
        try walk("", components: &components, into: &result, candidates: &rootFiles, deferring: &deferred)
        candidates.append(rootFiles)
        guard let subfolders = deferred, !subfolders.isEmpty else { return }
        let walks = Mutex<[Int: Result<Walk, any Error>]>([:])
        let folders = subfolders
        DispatchQueue.concurrentPerform(iterations: folders.count) { index in
            var walk = Walk()
            var components = IgnoreRules.components(of: folders[index])
            let outcome = Result<Walk, any Error> {
                var none: [String]? = nil
                try self.walk(
                    folders[index], components: &components, into: &walk.result, candidates: &walk.candidates,
                    deferring: &none)
                return walk
            }
            walks.withLock { $0[index] = outcome }
        }
        let finished = walks.withLock { $0 }
        for index in folders.indices {
            guard let outcome = finished[index] else { continue }
            let walk = try outcome.get()
            result.merge(walk.result)
            candidates.append(walk.candidates)
        }
    }

    private func walk(
        _ relative: String, components: inout [[Unicode.Scalar]], into result: inout ScanResult,
        candidates: inout [Candidate]
    ) throws {
        var none: [String]? = nil
        try walk(relative, components: &components, into: &result, candidates: &candidates, deferring: &none)
    }

    /// Lists one folder and visits its entries (`fstatat` on the open folder, no path lookups); subfolders are
    /// walked in turn, or, with `deferring`, collected there for the caller to walk.
    private func walk(
        _ relative: String, components: inout [[Unicode.Scalar]], into result: inout ScanResult,
        candidates: inout [Candidate],
        deferring subfolders: inout [String]?
    ) throws {
        let directory = relative.isEmpty ? root : root + "/" + relative
        let listed: (entries: [FileIO.DirectoryEntry], infos: [stat?])
        do {
            guard let found = try FileIO.listEntriesWithInfo(directory) else { return }
            listed = found
        } catch let error as NoteSyncError {
            result.unreadableDirectories.append(relative)
            let reason = error.message + (error.errno.map { " (\(String(cString: strerror($0))))" } ?? "")
            result.warnings.append(
                SyncWarning(
                    .unreadable, path: DisplayName.escape(relative.isEmpty ? "." : relative),
                    "\(DisplayName.escape(relative.isEmpty ? "." : relative)): cannot be listed, its notes are left alone "
                        + "(not taken as deleted): \(reason)\n  fix: let notesync's user read the folder (chmod, chown), then sync again"))
            return
        }
        let order = listed.entries.indices.sorted { UTF8Bytes.precedes(listed.entries[$0].name, listed.entries[$1].name) }
        for index in order {
            let item = listed.entries[index]
            var path = item.name
            if !relative.isEmpty {
                path = relative
                path.reserveCapacity(relative.utf8.count + 1 + item.name.utf8.count)
                path += "/"
                path += item.name
            }
            if !item.isValidUTF8 {
                result.warnings.append(
                    SyncWarning(
                        .skippedName, path: DisplayName.escape(path),
                        "\(DisplayName.escape(path)): name is not valid UTF-8, skipped; rename it"))
                continue
            }
            guard let info = listed.infos[index] else { continue }
            let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
            let scalars = IgnoreRules.componentScalars(item.name)
            if rules.isIgnored(entry: scalars, in: &components, isDirectory: isDirectory) {
                if item.name.hasPrefix(ReservedNames.agentTempPrefix) && !item.name.hasPrefix(ReservedNames.cookiePrefix)
                    && (info.st_mode & S_IFMT) == S_IFREG
                {
                    result.leftoverTemps.append(path)
                }
                continue
            }
            if isDirectory {
                if subfolders != nil {
                    subfolders?.append(path)
                } else {
                    components.append(scalars)
                    var none: [String]? = nil
                    try walk(path, components: &components, into: &result, candidates: &candidates, deferring: &none)
                    components.removeLast()
                }
                continue
            }
            try visit(item, path: path, info: info, into: &result, candidates: &candidates)
        }
    }

    private func visit(
        _ item: FileIO.DirectoryEntry, path: String, info: stat, into result: inout ScanResult,
        candidates: inout [Candidate]
    ) throws {
        let entry = item.name
        let type = info.st_mode & S_IFMT
        if type == S_IFDIR {
            var components = IgnoreRules.components(of: path)
            try walk(path, components: &components, into: &result, candidates: &candidates)
            return
        }
        let isASCII = UTF8Bytes.isASCII(path)
        let nfc = isASCII ? path : RecordName.nfc(path)
        let name: RecordName
        do { name = try RecordName(validating: nfc) } catch {
            result.warnings.append(
                SyncWarning(
                    .skippedName, path: DisplayName.escape(path), "\(DisplayName.escape(path)): skipped: \(error.reason); rename it"))
            return
        }
        switch type {
        case S_IFREG:
            if ForeignConflictCopy.detect(entry) != nil {
                result.foreignConflicts.append(name)
            }
            // A name not in NFC as found may be the twin of another note's: ``dropUnicodeTwins(_:in:)`` decides.
            if !isASCII && !UTF8Bytes.equal(nfc, path) { result.denormalized = true }
            candidates.append((name, path, StatFingerprint(info)))
        case S_IFLNK:
            result.warnings.append(
                SyncWarning(
                    .notANote, path: DisplayName.escape(path),
                    "\(DisplayName.escape(path)): symbolic link, skipped (notesync never follows links)"))
        default:
            result.warnings.append(
                SyncWarning(
                    .notANote, path: DisplayName.escape(path),
                    "\(DisplayName.escape(path)): not a regular file (FIFO, socket or device), skipped"))
            result.unreadable.insert(name)
        }
    }

    /// Keeps one file per record name: where two files' names differ only in Unicode normalisation (NFC and NFD
    /// on a filesystem that keeps both), the first in walk order syncs and the other is skipped with a warning.
    /// Only a file whose name is not in NFC as found can have a twin, so a walk that found none skips this pass.
    ///
    /// Walk order between twins is byte order of their paths (their components differ first in a name, and a full
    /// walk takes a folder's entries in byte order), so a partial scan, which meets files in the order it is given
    /// them, keeps the same twin as a full one: the one of lowest bytes.
    static func dropUnicodeTwins(
        _ candidates: inout Candidates,
        in result: inout ScanResult
    ) {
        guard result.denormalized else { return }
        let suspects = Set(candidates.lazy.filter { !$0.name.string.utf8.elementsEqual($0.path.utf8) }.map(\.name))
        var first: [RecordName: String] = [:]
        for candidate in candidates where suspects.contains(candidate.name) {
            if let other = first[candidate.name], !UTF8Bytes.precedes(candidate.path, other) { continue }
            first[candidate.name] = candidate.path
        }
        var dropped = false
        // A partial scan may meet a file twice (given itself and its folder): it is one twin, said once.
        var left = Set<[UInt8]>()
        candidates.removeAll { candidate in
            guard suspects.contains(candidate.name), let other = first[candidate.name] else { return false }
            if other.utf8.elementsEqual(candidate.path.utf8) { return false }
            guard left.insert(Array(candidate.path.utf8)).inserted else { return true }
            result.warnings.append(
                SyncWarning(
                    .unicodeTwin, path: DisplayName.escape(candidate.path),
                    "\(codePoints(candidate.path)) and \(codePoints(other)) are the same name in different "
                        + "Unicode forms (as written here); the first is left out of this sync; a sync renames it "
                        + "to a conflict copy so that both texts sync"))
            result.unicodeTwins.append(candidate.path)
            dropped = true
            return true
        }
        if dropped {
            var listed = Set<RecordName>()
            result.foreignConflicts.removeAll { !listed.insert($0).inserted }
        }
    }

    /// A path with every non-ASCII character written as its code points (`cafe\u{301}.md`): two names that differ
    /// only in Unicode form look identical on screen, and different here.
    package static func codePoints(_ path: String) -> String {
        var text = ""
        for scalar in path.unicodeScalars {
            if scalar.isASCII && scalar.value >= 0x20 && scalar.value != 0x7F {
                text.unicodeScalars.append(scalar)
            } else {
                text += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            }
        }
        return "\"" + text + "\""
    }

    /// The index of the first name not below `prefix` in sorted `names`.
    package static func lowerBound(_ names: [RecordName], _ prefix: String) -> Int {
        var low = 0
        var high = names.count
        while low < high {
            let middle = (low + high) / 2
            if names[middle].string.utf8.lexicographicallyPrecedes(prefix.utf8) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
