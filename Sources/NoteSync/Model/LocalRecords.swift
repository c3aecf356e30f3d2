import Foundation

/// The last synced state of one record, which both sides agreed on: the ancestor of the three-way comparison.
public struct BaseRecord: Codable, Hashable, Sendable {
    public var name: RecordName
    /// The server change tag the local note was synced at.
    public var tag: Int64
    public var digest: ContentDigest
    public var size: Int64
    public var modified: Int64
    /// The stat fingerprint of the local file when it was last hashed; `nil` forces a hash.
    public var fingerprint: StatFingerprint?

    public init(
        name: RecordName, tag: Int64, digest: ContentDigest, size: Int64, modified: Int64,
        fingerprint: StatFingerprint?
    ) {
        self.name = name
        self.tag = tag
        self.digest = digest
        self.size = size
        self.modified = modified
        self.fingerprint = fingerprint
    }
}

/// A local change that is not on the server yet: survives crashes and offline periods.
public struct OutboxItem: Codable, Hashable, Sendable {
    public var name: RecordName
    public var op: RecordOp
    public var digest: ContentDigest?
    public var size: Int64
    public var queued: Int64
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
