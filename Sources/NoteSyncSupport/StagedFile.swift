import Foundation

/// A file written for publishing but not published yet (``ServerStorage/stage(_:device:suffix:sync:)``): a temp
/// file in the zone's `tmp/` on a folder, the bytes themselves on an object store.
public struct StagedFile: Sendable {
    public var temp: String?
    public var data: Data?

    public init(temp: String? = nil, data: Data? = nil) {
        self.temp = temp
        self.data = data
    }
}

/// Where bytes written for publishing go while they are made: a pack's (``AssetPack``), a large log entry's. A
/// temp file written as they come (a folder server), or a buffer (an object store, which takes them in one
/// request).
public protocol StagingSink: AnyObject {
    /// Writes `bytes` at `offset` (a pack: the blobs in order from ``AssetPack/headerSize``, then the index, then
    /// the header at 0; an entry: its JSON after room for its header, then the header at 0).
    func write(_ bytes: Data, at offset: Int64) throws
    /// Makes what was written durable and staged for publishing.
    func finish() throws -> StagedFile
    /// Removes what was written, when the pack is not finished.
    func discard()
}
