import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport
import Synchronization

/// Every pack index a store has read, merged into one table sorted by name: 52 bytes a packed text (its name, offset
/// and length as the pack's index holds them, and the number of its pack), found by binary search whatever the
/// number of packs. Immutable: a refresh makes a new one, merging the indexes read since.
final class PackTable: Sendable {
    struct Pack: Sendable {
        /// The pack's name: the file name without `.pack`.
        package let name: String
        package let count: Int
        /// The bytes after the pack's index.
        let blobBytes: Int64
    }

    static let recordSize = 52
    package let packs: [Pack]
    /// The records, sorted by name (a name in two packs comes twice).
    package let records: Data
    package var count: Int { records.count / Self.recordSize }

    package init(packs: [Pack] = [], records: Data = Data()) {
        self.packs = packs
        self.records = records
    }

    /// The entry of record `position` and its pack's number.
    package func record(_ position: Int) -> (entry: AssetPack.Entry, pack: Int) {
        records.withUnsafeBytes { bytes in
            let base = position * Self.recordSize
            let name = ContentDigest(rawBytes: UnsafeRawBufferPointer(rebasing: bytes[base..<base + 32]))
            let pack = bytes[base + 48..<base + 52].reduce(0) { $0 << 8 | Int($1) }
            return (
                AssetPack.Entry(
                    name: name, offset: AssetPack.Index.word(bytes, base + 32), length: AssetPack.Index.word(bytes, base + 40)),
                pack
            )
        }
    }

    /// Where `name` is packed (the first pack found when it is in several).
    package func find(_ name: ContentDigest) -> (entry: AssetPack.Entry, pack: Pack)? {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            let found = record(middle)
            if found.entry.name < name {
                low = middle + 1
            } else if found.entry.name == name {
                return (found.entry, packs[found.pack])
            } else {
                high = middle
            }
        }
        return nil
    }

    /// The entries of each pack, in the order of ``packs``.
    func entriesByPack() -> [[AssetPack.Entry]] {
        var byPack = [[AssetPack.Entry]](repeating: [], count: packs.count)
        for position in 0..<count {
            let (entry, pack) = record(position)
            byPack[pack].append(entry)
        }
        return byPack
    }

    /// This table without the packs not in `kept`, with the indexes `added`: one merge of sorted runs each.
    func updated(keeping kept: Set<String>, adding added: [AssetPack.Index]) -> PackTable {
        var packs: [Pack] = []
        var renumbered = [Int](repeating: -1, count: self.packs.count)
        for (number, pack) in self.packs.enumerated() where kept.contains(pack.name) {
            renumbered[number] = packs.count
            packs.append(pack)
        }
        var merged = Data()
        if packs.count == self.packs.count {
            merged = records
        } else {
            merged.reserveCapacity(records.count)
            records.withUnsafeBytes { bytes in
                for position in 0..<count {
                    let base = position * Self.recordSize
                    let old = bytes[base + 48..<base + 52].reduce(0) { $0 << 8 | Int($1) }
                    guard renumbered[old] >= 0 else { continue }
                    merged.append(contentsOf: bytes[base..<base + 48])
                    Self.appendNumber(&merged, renumbered[old])
                }
            }
        }
        for index in added {
            var run = Data(capacity: index.count * Self.recordSize)
            index.raw.withUnsafeBytes { bytes in
                for position in 0..<index.count {
                    let base = position * AssetPack.entrySize
                    run.append(contentsOf: bytes[base..<base + AssetPack.entrySize])
                    Self.appendNumber(&run, packs.count)
                }
            }
            packs.append(Pack(name: index.name, count: index.count, blobBytes: index.blobBytes))
            merged = Self.merge(merged, run)
        }
        return PackTable(packs: packs, records: merged)
    }

    private static func appendNumber(_ data: inout Data, _ number: Int) {
        withUnsafeBytes(of: UInt32(number).bigEndian) { data.append(contentsOf: $0) }
    }

    /// Two runs of records sorted by name, merged.
    package static func merge(_ a: Data, _ b: Data) -> Data {
        if a.isEmpty { return b }
        if b.isEmpty { return a }
        // Made at its size: `Data(count:)` makes room for a quarter more (the table of 100,000 packed texts is 5 MB).
        var out = FileIO.zeroedData(count: a.count + b.count)
        out.withUnsafeMutableBytes { target in
            a.withUnsafeBytes { left in
                b.withUnsafeBytes { right in
                    var i = 0
                    var j = 0
                    var k = 0
                    let size = recordSize
                    while i < left.count || j < right.count {
                        let takeLeft: Bool
                        if i >= left.count {
                            takeLeft = false
                        } else if j >= right.count {
                            takeLeft = true
                        } else {
                            takeLeft = memcmp(left.baseAddress! + i, right.baseAddress! + j, 32) <= 0
                        }
                        if takeLeft {
                            (target.baseAddress! + k).copyMemory(from: left.baseAddress! + i, byteCount: size)
                            i += size
                        } else {
                            (target.baseAddress! + k).copyMemory(from: right.baseAddress! + j, byteCount: size)
                            j += size
                        }
                        k += size
                    }
                }
            }
        }
        return out
    }
}

/// The table of the packs' indexes a store has read (formats 5 and 6): read on the first text not found loose, and
/// again (the new packs only) on each later one not found.
final class PackCatalog: Sendable {
    private let table = Mutex<PackTable?>(nil)
    /// The packs this store published: what is in them is known to be there, so a batch looking for the texts the
    /// server already has does not read their indexes (a first sync would hold an index of every text it wrote).
    private let own = Mutex<Set<String>>([])

    package var loaded: PackTable? { table.withLock { $0 } }

    package func set(_ value: PackTable?) { table.withLock { $0 = value } }

    var ownPacks: Set<String> { own.withLock { $0 } }

    package func published(_ name: String) { _ = own.withLock { $0.insert(name) } }
}

/// Where one packed asset is: its pack's path and the entry.
struct PackedAsset: Sendable {
    var pack: String
    package var entry: AssetPack.Entry
}

extension ServerStore {
    /// Formats 5 and 6: a batch of texts may be stored as packs (``AssetPack``).
    public var hasPacks: Bool { marker.format >= 5 }

    /// The packs' indexes as the server holds them now: `packs/` listed, the indexes of packs not read before read
    /// and merged (a damaged one is left out and logged: fsck reports it), those of packs gone dropped. With
    /// `skippingOwn`, the packs this store published are not read (a batch looking for texts already there). With
    /// `until`, the packs not read yet are read newest first, a few at a time, until one holds that text: a device
    /// pulling the texts of another's last batch reads the index of that batch's pack, not of every pack.
    @discardableResult
    func refreshPacks(skippingOwn: Bool = false, until wanted: ContentDigest? = nil) -> PackTable {
        guard hasPacks else { return PackTable() }
        var table = packCatalog.loaded ?? PackTable()
        // A listing that fails (a share gone, a bucket not answering) leaves the table as it was: it never empties it.
        let entries: [(name: String, info: StorageInfo?)]
        do { entries = try storage.listWithInfo(layout.packsDirectory) ?? [] } catch { return table }
        let packs = entries.filter { AssetPack.isPackName($0.name) }
        let listed = Set(packs.map { String($0.name.dropLast(5)) })
        let had = Set(table.packs.map(\.name))
        let skipped = skippingOwn ? packCatalog.ownPacks : []
        let unread =
            packs
            .filter { !had.contains(String($0.name.dropLast(5))) && !skipped.contains(String($0.name.dropLast(5))) }
            .sorted { ($0.info?.mtime ?? 0, $0.name) > ($1.info?.mtime ?? 0, $1.name) }
            .map { String($0.name.dropLast(5)) }
        if had != listed { table = table.updated(keeping: listed, adding: []) }
        let step = wanted == nil ? max(unread.count, 1) : 4
        for start in stride(from: 0, to: unread.count, by: step) {
            let group = Array(unread[start..<min(start + step, unread.count)])
            let read = storage.map(group.count) { slot in Result { try self.readPackIndex(group[slot] + ".pack") } }
            var added: [AssetPack.Index] = []
            for (slot, outcome) in read.enumerated() {
                switch outcome {
                case .success(let index?): added.append(index)
                case .failure(let error):
                    logger.error(
                        "server.pack.damaged",
                        metadata: ["server.path": "\(layout.packPath(group[slot]))", "error": "\(error)"])
                default: break
                }
            }
            if !added.isEmpty { table = table.updated(keeping: listed, adding: added) }
            if let wanted, table.find(wanted) != nil { break }
        }
        packCatalog.set(table)
        return table
    }

    /// The index of the pack file `name` in `packs/`; nil when it is gone. A damaged pack throws.
    func readPackIndex(_ name: String) throws -> AssetPack.Index? {
        let path = layout.packsDirectory + "/" + name
        guard let info = storage.info(path) else { return nil }
        guard info.isFile else { throw NoteSyncError(.corrupt, path: path, "is not a regular file") }
        guard let prefix = try storage.readRange(path, offset: 0, length: AssetPack.headerSize) else { return nil }
        do {
            let header = try AssetPack.parseHeader(prefix)
            guard header.indexOffset + Int64(header.indexLength) <= info.size else {
                throw AssetPack.Damage(reason: "is shorter than its index")
            }
            guard let index = try storage.readRange(path, offset: header.indexOffset, length: header.indexLength) else {
                return nil
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
    func packed(_ name: ContentDigest, refresh: Bool, skippingOwn: Bool = false) -> PackedAsset? {
        guard hasPacks else { return nil }
        func find(_ table: PackTable) -> PackedAsset? {
            table.find(name).map { PackedAsset(pack: layout.packPath($0.pack.name), entry: $0.entry) }
        }
        if let table = packCatalog.loaded, let found = find(table) { return found }
        return refresh ? find(refreshPacks(skippingOwn: skippingOwn, until: name)) : nil
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
