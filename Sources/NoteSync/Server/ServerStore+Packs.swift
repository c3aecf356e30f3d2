import Foundation
import Logging
import Synchronization

/// The indexes of a server's packs that a store has read (formats 5 and 6): read on the first text not found loose,
/// and again (new packs only) on each later one not found. 48 bytes an asset.
final class PackCatalog: Sendable {
    private let indexes = Mutex<[String: AssetPack.Index]?>(nil)

    var loaded: [String: AssetPack.Index]? { indexes.withLock { $0 } }

    func set(_ value: [String: AssetPack.Index]?) { indexes.withLock { $0 = value } }
}

/// Where one packed asset is: its pack's path and the entry.
struct PackedAsset: Sendable {
    var pack: String
    var entry: AssetPack.Entry
}

extension ServerStore {
    /// Formats 5 and 6: a batch of texts may be stored as packs (``AssetPack``).
    public var hasPacks: Bool { marker.format >= 5 }

    /// The packs' indexes as the server holds them now: `packs/` listed, the indexes of packs not read before read
    /// (a damaged one is left out and logged: fsck reports it), those of packs gone dropped.
    @discardableResult
    func refreshPacks() -> [String: AssetPack.Index] {
        guard hasPacks else { return [:] }
        let known = packCatalog.loaded ?? [:]
        var fresh: [String: AssetPack.Index] = [:]
        let names = ((try? storage.list(layout.packsDirectory)) ?? nil) ?? []
        let wanted = names.filter(AssetPack.isPackName)
        let unread = wanted.filter { known[String($0.dropLast(5))] == nil }
        let read = storage.map(unread.count) { slot in Result { try self.readPackIndex(unread[slot]) } }
        for name in wanted {
            let stem = String(name.dropLast(5))
            if let index = known[stem] { fresh[stem] = index }
        }
        for (slot, outcome) in read.enumerated() {
            switch outcome {
            case .success(let index?): fresh[index.name] = index
            case .failure(let error):
                logger.error(
                    "server.pack.damaged", metadata: ["server.path": "\(layout.packsDirectory)/\(unread[slot])", "error": "\(error)"])
            default: break
            }
        }
        packCatalog.set(fresh)
        return fresh
    }

    /// The index of the pack file `name` in `packs/`; nil when it is gone. A damaged pack throws.
    func readPackIndex(_ name: String) throws -> AssetPack.Index? {
        let path = layout.packsDirectory + "/" + name
        guard let info = storage.info(path) else { return nil }
        guard info.isFile else { throw NoteSyncError(.corrupt, path: path, "is not a regular file") }
        let first = Int(min(info.size, 4096))
        guard let prefix = try storage.readRange(path, offset: 0, length: first) else { return nil }
        do {
            let header = try AssetPack.parseHeader(prefix)
            let end = header.length + header.indexLength
            guard Int64(end) <= info.size else { throw AssetPack.Damage(reason: "is shorter than its index") }
            let index: Data
            if end <= prefix.count {
                index = prefix[prefix.startIndex + header.length..<prefix.startIndex + end]
            } else {
                guard let rest = try storage.readRange(path, offset: Int64(header.length), length: header.indexLength) else {
                    return nil
                }
                index = rest
            }
            return try AssetPack.index(index, fileName: name, header: header, fileSize: info.size)
        } catch let damage as AssetPack.Damage {
            throw NoteSyncError(
                .corrupt, path: path, damage.reason,
                fix: "run `notesync server fsck --repair`: it moves the pack to quarantine/ and lists the texts lost")
        }
    }

    /// Where `name` (a stored name) is packed, from the indexes read; with `refresh`, `packs/` is read again first
    /// when it is not found.
    func packed(_ name: ContentDigest, refresh: Bool) -> PackedAsset? {
        guard hasPacks else { return nil }
        func find(_ indexes: [String: AssetPack.Index]) -> PackedAsset? {
            for index in indexes.values {
                if let entry = index.find(name) { return PackedAsset(pack: layout.packPath(index.name), entry: entry) }
            }
            return nil
        }
        if let indexes = packCatalog.loaded, let found = find(indexes) { return found }
        return refresh ? find(refreshPacks()) : nil
    }

    /// The bytes of a packed asset (nil when its pack is gone); longer than `limit` is `corrupt`.
    func readPacked(_ packed: PackedAsset, limit: Int) throws -> Data? {
        guard packed.entry.length < limit else {
            throw NoteSyncError(
                .corrupt, path: packed.pack, "lists \(packed.entry.name.hex) as \(packed.entry.length) bytes, more than its text can be",
                fix: "run `notesync server fsck --repair`")
        }
        let data = try storage.readRange(packed.pack, offset: packed.entry.offset, length: Int(packed.entry.length))
        guard let data else { return nil }
        guard data.count == Int(packed.entry.length) else {
            throw NoteSyncError(
                .corrupt, path: packed.pack, "is shorter than its index says", fix: "run `notesync server fsck --repair`")
        }
        return data
    }

    /// Forgets the packs' indexes (an idle agent): they are read again on the next text not found loose.
    public func releasePackIndexes() { packCatalog.set(nil) }
}
