import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// One change a sync made, or in a dry run would make.
public struct PlannedChange: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable {
        /// A local save goes to the server.
        case upload
        /// A local delete goes to the server.
        case uploadDelete = "upload-delete"
        /// A server save is written locally.
        case download
        /// A server delete moves the local note to the trash.
        case downloadDelete = "download-delete"
        /// Both sides edited; the three-way merge was clean.
        case merge
        /// Both sides edited the same lines: one version keeps the name, the other becomes a conflict copy.
        case conflict
        /// Edited here, deleted there: the edit wins and is saved again.
        case resurrect
        /// Deleted here, edited there: the edit wins and comes back.
        case restore
        /// Both sides already agree; only the base moves.
        case adopt
        /// The note was renamed (here: the rename goes to the server; there: the note is renamed here). `from` is
        /// its old name; a change of its text is a change of its own at the new name.
        case move
        /// The server record is newer than this build understands: left alone.
        case newerVersion = "newer-version"
        /// The local note cannot be read: left alone.
        case unreadable
    }

    public var kind: Kind
    /// The note, escaped for display.
    public var name: String
    /// What few changes have besides a name: held apart, so that a change without them (nearly every one) is 32
    /// bytes, not 72. A first sync reports each of its notes, so this size is paid once a note, at its peak.
    private var extra: Box<Extra>?

    private struct Extra: Hashable {
        var detail: String?
        var diff: String?
        var from: String?
    }

    public var detail: String? {
        get { extra?.value.detail }
        set { update { $0.detail = newValue } }
    }
    /// The unified diff of the change (dry runs and `diff`).
    public var diff: String? {
        get { extra?.value.diff }
        set { update { $0.diff = newValue } }
    }
    /// A move's old name, escaped for display.
    public var from: String? {
        get { extra?.value.from }
        set { update { $0.from = newValue } }
    }

    public init(kind: Kind, name: String, detail: String? = nil, diff: String? = nil, from: String? = nil) {
        self.kind = kind
        self.name = name
        if detail != nil || diff != nil || from != nil { extra = Box(Extra(detail: detail, diff: diff, from: from)) }
    }

    private mutating func update(_ change: (inout Extra) -> Void) {
        var value = extra?.value ?? Extra()
        change(&value)
        extra = value == Extra() ? nil : Box(value)
    }

    package enum CodingKeys: String, CodingKey {
        case kind, name, detail, diff, from
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            kind: try container.decode(Kind.self, forKey: .kind), name: try container.decode(String.self, forKey: .name),
            detail: try container.decodeIfPresent(String.self, forKey: .detail),
            diff: try container.decodeIfPresent(String.self, forKey: .diff),
            from: try container.decodeIfPresent(String.self, forKey: .from))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(kind, forKey: .kind)
        try container.encode(name, forKey: .name)
        try container.encodeIfPresent(detail, forKey: .detail)
        try container.encodeIfPresent(diff, forKey: .diff)
        try container.encodeIfPresent(from, forKey: .from)
    }

    public static func == (a: PlannedChange, b: PlannedChange) -> Bool {
        a.kind == b.kind && a.name == b.name && a.extra?.value == b.extra?.value
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(name)
        hasher.combine(extra?.value)
    }
}

/// What a sync did (or, in a dry run, would do).
public struct SyncReport: Codable, Sendable {
    public var dryRun: Bool
    public var changes: [PlannedChange] = []
    /// Conflict copies made (or that would be made).
    public var conflictCopies: [String] = []
    public var warnings: [SyncWarning] = []
    public var offline = false
    public var offlineReason: String?
    /// Local changes still waiting for the server.
    public var pending = 0
    /// Offline, in a dry run: the local changes a sync would queue for the server, as `save NAME` or `delete NAME`,
    /// in name order (nil otherwise: `status` lists the queue).
    public var queued: [String]?
    public var token: Int64 = 0
    public var rounds = 0
    /// Notes whose content was read and hashed by the first scan (the rest were proven unchanged by their stat).
    public var hashed = 0
    /// Local deletes held back whole by the mass-delete guard (nothing of them committed), waiting for
    /// `--allow-mass-delete`; 0 when none.
    public var heldDeletes = 0

    public init(dryRun: Bool) { self.dryRun = dryRun }

    /// The sync did not do all it should: deletes are held, or a note's change could not be made (exit 1).
    public var stoppedShort: Bool {
        !dryRun && (heldDeletes > 0 || warnings.contains { $0.kind == .failed })
    }

    public func count(_ kind: PlannedChange.Kind) -> Int { changes.filter { $0.kind == kind }.count }
}

/// One line of a report as the command line prints it: a change, or the moves of a folder renamed, as one.
public enum ReportLine: Hashable, Sendable {
    case change(PlannedChange)
    /// Two or more notes moved from under `from` to under `to`, each keeping its path below the folder.
    case folderMove(from: String, to: String, count: Int, detail: String?)

    /// The lines of `changes`, one at a time, in order: the moves of each folder renamed (same old and new folder,
    /// same detail) said once, where the first of them was. `changes` is read twice (a lazy filter of the report's
    /// changes copies none), not collected: a first sync has a line a note, and an array of them beside a filtered
    /// copy of the changes would be the peak of its memory.
    public static func forEachLine<Changes: Collection<PlannedChange>>(of changes: Changes, _ body: (ReportLine) -> Void) {
        func folders(_ change: PlannedChange) -> (from: String, to: String)? {
            guard change.kind == .move, let from = change.from else { return nil }
            let old = from.split(separator: "/", omittingEmptySubsequences: false)
            let new = change.name.split(separator: "/", omittingEmptySubsequences: false)
            let common = zip(old.reversed(), new.reversed()).prefix { $0 == $1 }.count
            guard common >= 1, common < old.count, common < new.count else { return nil }
            return (old.dropLast(common).joined(separator: "/"), new.dropLast(common).joined(separator: "/"))
        }
        var counts: [FolderMoveKey: Int] = [:]
        for change in changes {
            if let (from, to) = folders(change) { counts[FolderMoveKey(from: from, to: to, detail: change.detail), default: 0] += 1 }
        }
        var said = Set<FolderMoveKey>()
        for change in changes {
            if let (from, to) = folders(change) {
                let key = FolderMoveKey(from: from, to: to, detail: change.detail)
                if let count = counts[key], count >= 2 {
                    if said.insert(key).inserted { body(.folderMove(from: from, to: to, count: count, detail: change.detail)) }
                    continue
                }
            }
            body(.change(change))
        }
    }

    /// The moves of one folder renamed: its old and new path and the detail they share.
    private struct FolderMoveKey: Hashable {
        var from: String
        var to: String
        var detail: String?
    }
}
