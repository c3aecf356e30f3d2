import Foundation
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport

/// The settling of the watch's events, as a pure state machine: which changed paths are quiet enough to sync.
///
/// A path is acted on once it has been quiet for ``AgentOptions/settle`` (an editor's save is a burst of events),
/// missing ones only once no path has gone missing for ``AgentOptions/deleteSettle`` (vim and emacs move a note aside
/// for a moment while saving; an `rm -r` is one change, seen whole by the mass-delete guard),
/// and a file still growing is held back until it stops, at most ``AgentOptions/maxSettle`` after its first event.
/// A file named like a temp written next to a note (``looksLikeSiblingTemp(_:)``: `.note.md.new`) waits
/// ``AgentOptions/deleteSettle`` too: a tool that saves by writing it and renaming it over the note does so within
/// that time, and the note then settles as one edit, with no record made for the temp on the way.
/// The time is passed in, so the machine runs on any clock (the agent's `ContinuousClock`, a test's fake one), as
/// Syncthing's watch aggregator does.
struct EventSettler<Instant: InstantProtocol> where Instant.Duration == Duration {
    /// What the settler needs to know of a path when it looks again: its kind and size, or nil when it is gone.
    package struct Probe: Equatable {
        var isRegularFile: Bool
        package var size: Int64
    }

    private struct Item {
        var first: Instant
        var last: Instant
        /// The size when last looked at (nil: gone or not a file).
        var size: Int64?
    }

    package let settle: Duration
    package let deleteSettle: Duration
    let maxSettle: Duration
    /// The longest deletes wait for one another: a path that keeps vanishing and coming back (an application's
    /// lock file, say) never holds the others back for longer.
    let maxDeleteHold: Duration
    private var items: [String: Item] = [:]
    /// Renames the watch saw: the old name → the new one. A missing old name is no vanished note: it does not wait
    /// for the deletes, and settles with its new name, so that one sync sees both and commits a move.
    private var links: [String: String] = [:]

    package init(settle: Duration, deleteSettle: Duration, maxSettle: Duration, maxDeleteHold: Duration = .seconds(60)) {
        self.settle = settle
        self.deleteSettle = deleteSettle
        self.maxSettle = maxSettle
        self.maxDeleteHold = maxDeleteHold
    }

    package init(_ options: AgentOptions) {
        self.init(settle: options.settle, deleteSettle: options.deleteSettle, maxSettle: options.maxSettle)
    }

    /// The paths waiting to settle.
    package var paths: [String] { Array(items.keys) }
    package var isEmpty: Bool { items.isEmpty }

    /// An event for `path` at `now`; `size` is the file's size then (nil when it is gone or not a file).
    mutating func noted(_ path: String, at now: Instant, size: Int64?) {
        if var item = items[path] {
            item.last = now
            item.size = size
            items[path] = item
        } else {
            items[path] = Item(first: now, last: now, size: size)
        }
    }

    /// `from` was renamed to `to` (both already noted).
    mutating func linked(_ from: String, to: String) {
        guard from != to else { return }
        links[from] = to
    }

    /// The watch saw `from` renamed to `to` at `now`; the sizes are the two paths' now (nil: gone or not a file).
    /// Both names are noted with the link, whichever of their own events came or come in another batch: the new
    /// name never settles without the old one, and the old one never goes alone for want of a new name noted
    /// yet. A folder renamed is one such pair, whose scan covers every note below either name: one sync sees
    /// every note gone from the old name and at the new one, and commits moves.
    package mutating func renamed(_ from: String, to: String, at now: Instant, fromSize: Int64?, toSize: Int64?) {
        guard from != to else { return }
        noted(from, at: now, size: fromSize)
        noted(to, at: now, size: toSize)
        linked(from, to: to)
    }

    /// Whether the file name of `path` reads as a temp a tool writes next to a note before renaming it over the
    /// note: hidden, and the rest a name with an extension and a suffix of its own (`.note.md.new`, `.note.md.tmp`,
    /// rsync's `.note.md.Xy12Ab`). A hidden note of one extension (`.todo.md`) is not one.
    static func looksLikeSiblingTemp(_ path: String) -> Bool {
        let name = path.utf8.lastIndex(of: UInt8(ascii: "/")).map { path.utf8[path.utf8.index(after: $0)...] } ?? path.utf8[...]
        guard name.first == UInt8(ascii: "."), name.count > 1 else { return false }
        let rest = name.dropFirst()
        guard let last = rest.lastIndex(of: UInt8(ascii: ".")), last != rest.startIndex, rest.index(after: last) != rest.endIndex
        else { return false }
        // The part before the suffix has an extension of its own, not at its start.
        let stem = rest[..<last]
        guard let dot = stem.lastIndex(of: UInt8(ascii: ".")) else { return false }
        return dot != stem.startIndex && stem.index(after: dot) != stem.endIndex
    }

    /// How long `path` must be quiet to settle: ``settle``, or ``deleteSettle`` for a name that reads as a temp.
    private func quietPeriod(_ path: String) -> Duration {
        Self.looksLikeSiblingTemp(path) ? max(settle, deleteSettle) : settle
    }

    /// Whether `path` is the old name of a rename still waiting, missing when last looked at.
    private func isRenamedAway(_ path: String, _ item: Item) -> Bool { item.size == nil && links[path] != nil }

    /// Whether `path`, missing, lies in a folder whose rename still waits (`mv a a2` after an edit of `a/b.md`): it is
    /// gone from there because it moved with the folder, and goes with the rename, whose scan covers it. Taken alone
    /// it would be a delete of a note nobody deleted, pushed before the move is seen.
    private func movesWithAFolder(_ path: String) -> Bool {
        links.keys.contains { path.hasPrefix($0 + "/") }
    }

    /// The paths that have settled at `now`, taken out of the machine. `probe` looks at a path as it is now.
    /// With `flushing` (the agent is stopping) every path is taken, settled or not.
    mutating func takeSettled(at now: Instant, flushing: Bool = false, probe: (String) -> Probe?) -> [String] {
        if flushing {
            defer {
                items.removeAll()
                links.removeAll()
            }
            return items.keys.sorted()
        }
        var ready: [String] = []
        let found = items.keys.reduce(into: [String: Probe]()) { found, path in found[path] = probe(path) }
        // Missing paths settle together, once none has had an event for `deleteSettle`: the deletes of one
        // `rm -r` reach a sync, and its mass-delete guard, whole, never as they trickle in.
        let missing = missingPaths(found).map { items[$0]! }
        let deletesWait =
            missing.map(\.last).max().map { $0.duration(to: now) < deleteSettle } == true
            && missing.map(\.first).min().map { $0.duration(to: now) < maxDeleteHold } == true
        for (path, item) in items {
            let found = found[path]
            // The old name of a rename goes with its new name (below).
            if found == nil && (links[path] != nil || movesWithAFolder(path)) { continue }
            if found == nil && deletesWait { continue }
            if item.last.duration(to: now) < quietPeriod(path) { continue }
            if let found, found.isRegularFile, item.size != found.size, item.first.duration(to: now) < maxSettle {
                // Still growing since it was last looked at: another quiet period.
                items[path]?.size = found.size
                items[path]?.last = now
                continue
            }
            ready.append(path)
        }
        // The old names of renames whose new name settled now, or left earlier (its sync took it), once quiet; a chain
        // of renames (a → b → c) goes whole.
        var taken = Set(ready)
        var grew = true
        while grew {
            grew = false
            for (from, to) in links where !taken.contains(from) && found[from] == nil {
                guard let item = items[from], taken.contains(to) || (items[to] == nil && item.last.duration(to: now) >= settle)
                else { continue }
                taken.insert(from)
                ready.append(from)
                grew = true
            }
        }
        closeOverRenames(&taken, &ready, found: found)
        if deletesWait { holdForVanished(&taken, &ready, missing: missingPaths(found)) }
        for path in ready {
            items[path] = nil
            links[path] = nil
        }
        return ready.sorted()
    }

    /// The paths gone when looked at (`found` has no probe of them) that vanished: neither the old name of a rename
    /// nor moved with a folder renamed. They wait for the deletes as a whole.
    private func missingPaths(_ found: [String: Probe]) -> [String] {
        items.keys.filter { found[$0] == nil && links[$0] == nil && !movesWithAFolder($0) }
    }

    /// Whether `path` or a folder above it is in `taken`.
    private static func covered(_ path: String, by taken: Set<String>) -> Bool {
        if taken.contains(path) { return true }
        var end = path.endIndex
        while let slash = path[..<end].lastIndex(of: "/") {
            if taken.contains(String(path[..<slash])) { return true }
            end = slash
        }
        return false
    }

    /// Closes a settled batch under the renames still waiting: what moved with a folder taken (`a/b.md` under `a`,
    /// renamed `a2`) goes with it, and so does a rename into or out of a path taken (`a2/b.md` renamed `todo.md` just
    /// after `mv a a2`), both its names. A partial sync that saw a note gone from one name and not at the other would
    /// push a delete nobody made.
    private func closeOverRenames(_ taken: inout Set<String>, _ ready: inout [String], found: [String: Probe]) {
        var grew = !links.isEmpty
        while grew {
            grew = false
            for (from, to) in links where Self.covered(from, by: taken) || Self.covered(to, by: taken) {
                for path in [from, to] where !taken.contains(path) && items[path] != nil {
                    taken.insert(path)
                    ready.append(path)
                    grew = true
                }
            }
            for path in items.keys
            where !taken.contains(path) && found[path] == nil && movesWithAFolder(path) && Self.covered(path, by: taken) {
                taken.insert(path)
                ready.append(path)
                grew = true
            }
        }
    }

    /// While the deletes wait, a batch whose scan would cover a vanished note (a folder renamed, `mv a a2`, and a
    /// note of it gone since, `a2/b.md`, whose new name the watch did not pair with it) waits too: its partial sync
    /// would read the note's absence as a delete before the deletes settled. The folders above such a note, with what
    /// they link to and what lies below them, stay for a later batch.
    private func holdForVanished(_ taken: inout Set<String>, _ ready: inout [String], missing: [String]) {
        let held = Self.held(among: taken, by: missing, links: links)
        taken.subtract(held)
        ready.removeAll { held.contains($0) }
    }

    /// The paths of `paths` that wait for the deletes of `missing` (``holdForVanished``): those above a missing
    /// path, closed under `links` and what lies below them.
    private static func held(among paths: Set<String>, by missing: [String], links: [String: String]) -> Set<String> {
        var above = Set<String>()
        for path in missing {
            var end = path.endIndex
            while let slash = path[..<end].lastIndex(of: "/") {
                above.insert(String(path[..<slash]))
                end = slash
            }
        }
        var held = paths.intersection(above)
        guard !held.isEmpty else { return held }
        var grew = true
        while grew {
            grew = false
            for (from, to) in links where held.contains(from) != held.contains(to) {
                for path in [from, to] where paths.contains(path) && held.insert(path).inserted { grew = true }
            }
            for path in paths where !held.contains(path) && covered(path, by: held) {
                held.insert(path)
                grew = true
            }
        }
        return held
    }

    /// Takes `paths` out (a command's sync took them, settled or not).
    package mutating func remove(_ paths: some Sequence<String>) {
        for path in paths {
            items[path] = nil
            links[path] = nil
        }
    }

    package mutating func removeAll() {
        items.removeAll()
        links.removeAll()
    }

    /// When the earliest waiting path may settle: the time to look again (nil when nothing waits). A path missing
    /// at its last event waits for the deletes as a whole (``takeSettled(at:flushing:probe:)``), so the agent sleeps
    /// through an `rm -r` instead of looking again at every turn.
    var nextDeadline: Instant? {
        let missing = items.filter { $0.value.size == nil && !isRenamedAway($0.key, $0.value) && !movesWithAFolder($0.key) }
            .map(\.value)
        let deletesSettle = missing.map(\.last).max().map { $0.advanced(by: deleteSettle) }
        let deletesHeldUntil = missing.map(\.first).min().map { $0.advanced(by: maxDeleteHold) }
        let deletes = [deletesSettle, deletesHeldUntil].compactMap { $0 }.min()
        // The folders above a vanished note, and what goes with them, wait for the deletes (``holdForVanished``).
        let vanished = items.filter { $0.value.size == nil && !isRenamedAway($0.key, $0.value) && !movesWithAFolder($0.key) }
        let held = Self.held(among: Set(items.keys), by: Array(vanished.keys), links: links)
        return items.compactMap { path, item in
            // Waits for its folder's rename, which has a deadline of its own.
            if movesWithAFolder(path) { return nil }
            let quiet = item.last.advanced(by: quietPeriod(path))
            guard let deletes, (item.size == nil && !isRenamedAway(path, item)) || held.contains(path) else {
                return quiet
            }
            return max(quiet, deletes)
        }.min()
    }
}

/// The agent's retry delay while syncs fail or the server is away: doubles from `minimum` up to `maximum`, back
/// to `minimum` after a success.
struct Backoff: Equatable {
    package let minimum: Duration
    let maximum: Duration
    package private(set) var next: Duration

    package init(minimum: Duration, maximum: Duration) {
        self.minimum = minimum
        self.maximum = maximum
        next = minimum
    }

    /// The delay before the next try after a failure; the one after it is twice as long, up to `maximum`.
    package mutating func failed() -> Duration {
        defer { next = min(next * 2, maximum) }
        return next
    }

    mutating func succeeded() { next = minimum }
}

/// How the agent learns of local changes.
public enum LocalWatchMode: Codable, Sendable, Hashable, CustomStringConvertible {
    case inotify
    /// inotify cannot be used (its watch limit was reached, or it failed): full scans every 30 s.
    case periodicScans(reason: String)

    public var description: String {
        switch self {
        case .inotify: "inotify"
        case .periodicScans(let reason): "periodic scans (\(reason))"
        }
    }
}

/// How the agent learns of the server's changes.
public enum ServerWatchMode: Codable, Sendable, Hashable, CustomStringConvertible {
    /// inotify on the log folder (a server on a local filesystem), with a slow safety poll.
    case inotify
    /// Polling (a network filesystem, whose remote changes raise no inotify event).
    case polling(every: Duration)

    public var description: String {
        switch self {
        case .inotify: "inotify"
        case .polling(let interval): "polling every \(interval.seconds) s"
        }
    }
}
