import Foundation
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport

/// Paced commits for a note saved again and again (an editor's autosave): docs/retention.md, "Paced commits".
///
/// The first save of a note after a quiet spell goes at once, as every other change does. While the same note keeps
/// being saved, it is committed at most once every ``pace``: a save within the pace of the note's last commit waits
/// until the pace has passed, and is then committed with whatever the note holds by then. So the last save is always
/// committed, at most ``pace`` late, and an hour of saves every half second makes 720 versions instead of 7,200.
/// Deletes and renames are never paced (the agent only asks about notes that are there). Pure logic over the
/// caller's clock readings.
struct CommitPacer {
    package typealias Instant = ContinuousClock.Instant

    /// Zero: every save is committed as it settles.
    package let pace: Duration
    /// When each note was last committed, for as long as it matters (a pace).
    private var lastCommit: [String: Instant] = [:]
    /// Saves waiting for their pace, with the time they are due.
    package private(set) var deferred: [String: Instant] = [:]

    package init(pace: Duration) { self.pace = pace }

    /// The settled paths to sync now; each save within the pace of its note's last commit waits instead.
    mutating func admit(_ paths: [String], at now: Instant, isSave: (String) -> Bool) -> [String] {
        guard pace > .zero else { return paths }
        var ready: [String] = []
        for path in paths {
            if let due = deferred[path] {
                // Already waiting: the save joins it (its text is read when it goes).
                if due <= now { ready.append(path) }
                continue
            }
            if isSave(path), let last = lastCommit[path], now - last < pace {
                deferred[path] = last + pace
            } else {
                ready.append(path)
            }
        }
        for path in ready { deferred[path] = nil }
        return ready
    }

    /// The waiting saves whose time has come (or every one, `flushing`: the agent is stopping).
    package mutating func due(at now: Instant, flushing: Bool = false) -> [String] {
        let ready = deferred.filter { flushing || $0.value <= now }.map(\.key).sorted()
        for path in ready { deferred[path] = nil }
        return ready
    }

    /// The next time a waiting save is due.
    var nextDeadline: Instant? { deferred.values.min() }

    /// `paths` were committed at `now` (a full sync commits every waiting save too: pass them and they stop waiting).
    package mutating func committed(_ paths: [String], at now: Instant) {
        guard pace > .zero else { return }
        for path in paths {
            lastCommit[path] = now
            deferred[path] = nil
        }
        // What is older than a pace no longer paces anything.
        if lastCommit.count > 1024 { lastCommit = lastCommit.filter { now - $0.value < pace } }
    }

    /// Every waiting save, now (a full sync covers them).
    mutating func takeAll() -> [String] {
        let all = deferred.keys.sorted()
        deferred.removeAll()
        return all
    }
}
