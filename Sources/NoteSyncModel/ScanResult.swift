import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// A note as found in the notes folder.
public struct LocalFile: Hashable, Sendable {
    public var name: RecordName
    /// The path relative to the notes folder as it is on disk (differs from `name` only in normalisation).
    public var path: String
    public var fingerprint: StatFingerprint
    public var digest: ContentDigest
    public var size: Int64
    /// The file's mtime in nanoseconds: the record's `modified`.
    public var modified: Int64 { fingerprint.mtime }

    package init(name: RecordName, path: String, fingerprint: StatFingerprint, digest: ContentDigest, size: Int64) {
        self.name = name
        self.path = path
        self.fingerprint = fingerprint
        self.digest = digest
        self.size = size
    }
}

/// What a scan of the notes folder found.
public struct ScanResult: Sendable {
    /// The notes found, by name: a record table, as the bases are (a dictionary would hold about twice the memory,
    /// half of it empty buckets).
    public var files: RecordTable<LocalFile> = [:]
    /// Names that exist but could not be read (permissions, a directory in a note's place …): never deletes.
    public var unreadable: Set<RecordName> = []
    /// Directories that could not be listed: every known note under them counts as unreadable, not deleted.
    public var unreadableDirectories: [String] = []
    /// Conflict copies that other sync tools made in the notes folder.
    public var foreignConflicts: [RecordName] = []
    public var warnings: [SyncWarning] = []
    /// Files hashed because their fingerprint changed (the rest reused their base digest).
    public var hashed = 0
    /// The notes whose digest was computed by this scan (new, or fingerprint changed): every other file holds
    /// its base's digest, as the unchanged fingerprint proves.
    public var changed: [RecordName] = []
    /// How many files found have a base: fewer than the bases means some synced note is gone or unreadable.
    public var baseMatches = 0
    /// Temp files an interrupted apply left in the notes folder (full scans only), relative paths.
    public var leftoverTemps: [String] = []
    /// For a partial scan: every record name it speaks for (present or absent). `nil` for a full scan.
    public var scope: Set<RecordName>?
    /// Whether the walk found a file whose name is not in NFC as it is on disk (it may have a twin in NFC).
    package var denormalized = false
    /// Files left out because another file's name differs from theirs only in Unicode normalisation (relative
    /// paths as on disk): a sync renames each to a conflict-copy name of its own, so that both texts sync.
    public var unicodeTwins: [String] = []

    /// The base of `name` changed from `old` to `new` (a commit of this device's recovered, a lost entry's base
    /// taken back): the count of found notes with a base follows, as the planner trusts it to find notes that are
    /// gone.
    package mutating func rebase(_ name: RecordName, from old: BaseRecord?, to new: BaseRecord?) {
        guard files[name] != nil else { return }
        baseMatches += (new == nil ? 0 : 1) - (old == nil ? 0 : 1)
    }

    /// Adds a partial scan's findings to this one.
    public mutating func merge(_ other: ScanResult) {
        for (name, file) in other.files { files[name] = file }
        unreadable.formUnion(other.unreadable)
        unreadableDirectories += other.unreadableDirectories
        foreignConflicts += other.foreignConflicts
        warnings += other.warnings
        hashed += other.hashed
        changed += other.changed
        baseMatches += other.baseMatches
        leftoverTemps += other.leftoverTemps
        denormalized = denormalized || other.denormalized
        unicodeTwins += other.unicodeTwins
        if let otherScope = other.scope { scope = scope.map { $0.union(otherScope) } }
    }

    /// True when `name` could not be examined (itself or a folder above it), so its absence means nothing.
    public func isUnreadable(_ name: RecordName) -> Bool {
        if unreadable.contains(name) { return true }
        return unreadableDirectories.contains { name.string.hasPrefix($0 + "/") || $0.isEmpty }
    }

    package init(
        files: RecordTable<LocalFile> = [:], unreadable: Set<RecordName> = [], unreadableDirectories: [String] = [],
        foreignConflicts: [RecordName] = [], warnings: [SyncWarning] = [], hashed: Int = 0, changed: [RecordName] = [],
        baseMatches: Int = 0, leftoverTemps: [String] = [], scope: Set<RecordName>? = nil, denormalized: Bool = false,
        unicodeTwins: [String] = []
    ) {
        self.files = files
        self.unreadable = unreadable
        self.unreadableDirectories = unreadableDirectories
        self.foreignConflicts = foreignConflicts
        self.warnings = warnings
        self.hashed = hashed
        self.changed = changed
        self.baseMatches = baseMatches
        self.leftoverTemps = leftoverTemps
        self.scope = scope
        self.denormalized = denormalized
        self.unicodeTwins = unicodeTwins
    }
}
