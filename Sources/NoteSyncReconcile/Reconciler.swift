import Foundation
import NoteSyncDiff
import NoteSyncModel
import NoteSyncSupport

/// The local side of one record, as the reconciler sees it.
public enum LocalSide: Hashable, Sendable {
    case absent
    case present(digest: ContentDigest, size: Int64, modified: Int64)
    /// Exists but cannot be read: the record is left alone, never taken as deleted.
    case unreadable

    package var digest: ContentDigest? {
        if case .present(let digest, _, _) = self { return digest }
        return nil
    }
}

/// What to do with one record. Produced by ``Reconciler/decide(local:base:server:)``, a pure function.
public enum Decision: Hashable, Sendable {
    /// L = B = S: nothing to do.
    case nothing
    /// Only the local side changed: save (or delete, when `digest` is nil) on the server, based on `base`.
    case push(digest: ContentDigest?, base: Int64)
    /// Only the server changed: write its text locally (or delete the local note, when the head is a tombstone).
    case pull(RecordHead)
    /// Both sides changed to the same result: adopt the server head as the new base, nothing moves.
    case adopt(RecordHead?)
    /// Both sides edited (or both created): three-way merge with the base text as ancestor (nil: empty ancestor).
    /// Boxed: inline, its digest and head would make every decision (and every step of a first sync's plan) 40 bytes
    /// longer.
    indirect case merge(ancestor: ContentDigest?, server: RecordHead)
    /// The local note was edited, the server deleted it: the edit wins, saved on top of the tombstone.
    case resurrectLocal(base: Int64)
    /// The local note was deleted, the server edited it: the edit wins, written back locally.
    case restoreServer(RecordHead)
    /// The server record has a newer schema version than this build: left alone, reported.
    case newerVersion(RecordHead)
    /// The local note cannot be read: left alone, reported.
    case unreadable
}

/// The three-way reconciliation table of docs/reconciliation.md, as a pure function of (local, base, server).
public enum Reconciler {
    public static func decide(local: LocalSide, base: BaseRecord?, server: RecordHead?) -> Decision {
        if let server, server.version > RecordChange.currentVersion { return .newerVersion(server) }
        if case .unreadable = local { return .unreadable }

        let serverLive = server.flatMap { $0.deleted ? nil : $0 }
        let localDigest = local.digest
        // A head whose line has an unchecked link above our base (a change based on a lost slot, or on another
        // history) may not descend from our version: no common ancestor is known, so our version is never
        // overwritten as if the head held it. At worst a conflict copy of a text the head already has.
        var base = base
        if let known = base, let server, server.tag != known.tag, known.tag < server.unverifiedSince { base = nil }

        guard let base else {
            // No common ancestor: never synced, or deleted on both sides.
            switch (localDigest, serverLive) {
            case (nil, nil):
                return server.map { _ in .adopt(server) } ?? .nothing
            case (let digest?, nil):
                return .push(digest: digest, base: server?.tag ?? 0)
            case (nil, let head?):
                return .pull(head)
            case (let digest?, let head?):
                return head.text?.sha256 == digest ? .adopt(head) : .merge(ancestor: nil, server: head)
            }
        }

        let localChanged = localDigest != base.digest
        // A server with no head for a synced record lost it (a different or restored server): treat as changed.
        let serverChanged = server?.tag != base.tag

        switch (localChanged, serverChanged) {
        case (false, false):
            return .nothing
        case (true, false):
            return .push(digest: localDigest, base: base.tag)
        case (false, true):
            guard let server else { return localDigest.map { .push(digest: $0, base: 0) } ?? .nothing }
            return .pull(server)
        case (true, true):
            guard let server else {
                return localDigest.map { .push(digest: $0, base: 0) } ?? .adopt(nil)
            }
            switch (localDigest, serverLive) {
            case (nil, nil):
                return .adopt(server)
            case (let digest?, nil):
                _ = digest
                return .resurrectLocal(base: server.tag)
            case (nil, let head?):
                return .restoreServer(head)
            case (let digest?, let head?):
                return head.text?.sha256 == digest ? .adopt(head) : .merge(ancestor: base.digest, server: head)
            }
        }
    }
}
