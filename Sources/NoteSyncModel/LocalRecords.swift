import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// The last synced state of one record, which both sides agreed on: the ancestor of the three-way comparison.
///
/// Held once per note by every sync and by the agent for its whole life, so it is kept small (88 bytes): the
/// table it sits in keys it by name, and the fingerprint is stored without an optional's padding.
public struct BaseRecord: Hashable, Sendable {
    /// The server change tag the local note was synced at.
    public var tag: Int64
    public var digest: ContentDigest
    public var size: Int64
    public var modified: Int64
    /// ``fingerprint``, with ``none`` for `nil`.
    private var storedFingerprint: StatFingerprint

    /// What ``storedFingerprint`` holds for no fingerprint: a size no file has, and not ``StatFingerprint/unknown``,
    /// which is a fingerprint of its own (an inode no file has: the move planner tells it from none).
    private static let none = StatFingerprint(size: -2, mtime: 0, ctime: 0, inode: 0)

    /// The stat fingerprint of the local file when it was last hashed; `nil` (and ``StatFingerprint/unknown``)
    /// forces a hash.
    public var fingerprint: StatFingerprint? {
        get { storedFingerprint == Self.none ? nil : storedFingerprint }
        set { storedFingerprint = newValue ?? Self.none }
    }

    public init(tag: Int64, digest: ContentDigest, size: Int64, modified: Int64, fingerprint: StatFingerprint?) {
        self.tag = tag
        self.digest = digest
        self.size = size
        self.modified = modified
        self.storedFingerprint = fingerprint ?? Self.none
    }

    /// Whether the local file was last hashed with exactly this fingerprint (so its digest is still ``digest``);
    /// never for a fingerprint no file has (``StatFingerprint/unknown``, none).
    public func matches(_ fingerprint: StatFingerprint) -> Bool {
        storedFingerprint == fingerprint && fingerprint.size >= 0
    }
}

/// A local change that is not on the server yet: survives crashes and offline periods.
public struct OutboxItem: Codable, Hashable, Sendable {
    public var name: RecordName
    public var op: RecordOp
    public var digest: ContentDigest?
    public var size: Int64
    public var queued: Int64

    package init(name: RecordName, op: RecordOp, digest: ContentDigest? = nil, size: Int64, queued: Int64) {
        self.name = name
        self.op = op
        self.digest = digest
        self.size = size
        self.queued = queued
    }
}

/// A conflict copy notesync made, kept until the user deals with it (`notesync conflicts`).
public struct ConflictRecord: Codable, Hashable, Sendable {
    public var copy: RecordName
    public var original: RecordName
    public var device: String
    public var time: Int64

    public init(copy: RecordName, original: RecordName, device: String, time: Int64) {
        self.copy = copy
        self.original = original
        self.device = device
        self.time = time
    }
}
