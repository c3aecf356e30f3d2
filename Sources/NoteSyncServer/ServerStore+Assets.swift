import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

extension ServerStore {
    /// Publishes a note's text as a content-addressed asset; an asset already there is not rewritten.
    @discardableResult
    public func putAsset(_ data: Data) throws -> AssetRef {
        let ref = AssetRef(of: data)
        let name = storedName(ref.sha256)
        let path = layout.assetPath(name)
        if let info = storage.info(path), isStored(info, ref) {
            if hasRetention { storage.touch(path) }
            return ref
        }
        if hasPacks, packCatalog.loaded != nil, let pack = findPacked([name], refs: [ref], refresh: false)[0] {
            storage.touch(pack)
            return ref
        }
        try storage.makeDirectory(layout.assetShard(name))
        if try publish(encodeAsset(data, name: name, vault: try requireVault()), as: path, suffix: "asset") == .published {
            try storage.syncDirectory(layout.assetShard(name))
        }
        return ref
    }

    /// Publishes many assets with one flush instead of one per file, for the first sync of a big folder.
    ///
    /// Temp files are written without fsync, then made durable together — `syncfs(2)` on a local filesystem,
    /// fsync per file on a network one (where syncfs may not reach the server) — and only then published; the
    /// shard directories are flushed the same way. Durability is the same as ``putAsset(_:)``: no entry can
    /// reference an asset before it is on disk, because the entry is committed after this returns. Hashing,
    /// writing and publishing a big batch run on every core.
    public func putAssets(_ items: [Data]) throws -> [AssetRef] {
        try publish(stageAssets(items))
    }

    /// The first half of ``putAssets(_:)``: hashes the texts and writes those the server lacks to temp files,
    /// unflushed. A first sync stages its next batch while the current one is published and committed.
    public func stageAssets(_ items: [Data]) throws -> StagedAssets {
        let preparer = try AssetPreparer(self)
        let prepared = Parallel.values(items.count) { preparer.named(items[$0]) }
        return try stage(prepared)
    }

    /// ``stageAssets(_:)`` of texts hashed already, and stored already where ``PreparedText/isEncoded`` (made by an
    /// ``AssetPreparer`` of this store). `lookUpPacks`: the texts are looked for in the packs whatever their number
    /// (moved notes' texts, which the server likely has: a part of a rename's moves).
    package func stage(_ items: [PreparedText], lookUpPacks: Bool = false) throws -> StagedAssets {
        try requireWritable()
        let vault = try requireVault()
        let refs = items.map(\.ref)
        let names = items.map(\.name)
        var unique: [Int] = []
        // Each text given twice, with the first of its kind: it is in the pack the first is in.
        var duplicates: [(index: Int, first: Int)] = []
        var firsts: [ContentDigest: Int] = [:]
        firsts.reserveCapacity(refs.count)
        for (index, ref) in refs.enumerated() {
            if let first = firsts[ref.sha256] {
                duplicates.append((index, first))
            } else {
                firsts[ref.sha256] = index
                unique.append(index)
            }
        }
        firsts = [:]
        let device = device
        let storage = storage
        let layout = layout
        // A batch big enough for packs (formats 5 and 6) is looked for whole, so that no text already there goes
        // into a pack again; a listing answers it on an object store.
        let mayPack = hasPacks && unique.count >= AssetPack.minimumBatch
        // Where requests are billed (an object store), a text goes straight to its conditional PUT, which answers 412
        // when the asset is there (and is then touched, ``publish(_:)``): a HEAD first would be one more request per
        // text. Only a text too big to send for nothing is looked for first.
        let looked = unique.filter { mayPack || !storage.billsRequests || items[$0].ref.size > Self.sentUnseenBelow }
        let found = storage.infos(looked.map { layout.assetPath(names[$0]) })
        var present = Set<Int>()
        for (index, info) in zip(looked, found) {
            if let info, isStored(info, refs[index]) { present.insert(index) }
        }
        let presentLoose = present
        // Texts already in a pack (formats 5 and 6): the index of each, with its pack's path.
        var foundPacked: [(index: Int, pack: String)] = []
        // Looked for in the packs when the indexes are read already, or for a batch big enough to pay for reading
        // them (48 bytes a packed text): a first sync of a folder another device uploaded. A smaller batch of texts
        // not found loose is written: a text packed already is then on the server twice, which costs only room.
        let notLoose = unique.filter { !present.contains($0) }
        if hasPacks && !notLoose.isEmpty
            && (lookUpPacks || notLoose.count >= AssetPack.lookupBatch || packCatalog.loaded != nil)
        {
            let found = findPacked(notLoose.map { names[$0] }, refs: notLoose.map { refs[$0] })
            for (position, index) in notLoose.enumerated() {
                guard let pack = found[position] else { continue }
                present.insert(index)
                foundPacked.append((index, pack))
            }
        }
        let missing = unique.filter { !present.contains($0) }
        // Assets reused are touched (format 3): gc never sweeps an asset touched after its mark (docs/retention.md).
        // Best effort: a failure only leaves the protection to the grace period.
        if hasRetention {
            for index in unique where presentLoose.contains(index) { storage.touch(layout.assetPath(names[index])) }
            for pack in Set(foundPacked.map(\.pack)) { storage.touch(pack) }
        }
        let compressors = AssetCodec.CompressorPool()
        if hasPacks && missing.count >= AssetPack.minimumBatch {
            let staged = try stagePacked(
                items, refs: refs, names: names, missing: missing, vault: vault, compressors: compressors)
            staged.setPacks(found: foundPacked, duplicates: duplicates)
            return staged
        }
        // syncfs flushes the whole filesystem the temps are on: worth it for a batch, not for the agent's single edit.
        let batched = !isNetwork && storage.stagesTempFiles && items.count >= 16
        let written = Parallel.map(missing.count) { slot in
            Result { () throws -> StagedFile in
                let index = missing[slot]
                let data = self.stored(items[index], vault: vault, compressors: compressors)
                let staged = try storage.stage(data, device: device, suffix: "asset", sync: !batched)
                try FaultPoint.hit("assets.tempWritten")
                return staged
            }
        }
        let staged = StagedAssets(
            storage: storage, refs: refs, names: names, missing: missing, files: written.map { try? $0?.get() },
            batched: batched)
        staged.setPacks(found: foundPacked, duplicates: duplicates)
        if let failure = written.lazy.compactMap({ $0 }).first(where: { if case .failure = $0 { true } else { false } }) {
            _ = try failure.get()
        }
        return staged
    }

    /// The pack (its path) each of `names` (stored names of `refs`) is in, nil for one in none: looked up in the packs'
    /// indexes read so far, then (with `refresh`) once more after reading those of the packs other writers published
    /// since. A pack
    /// found is checked to be still there (gc may have removed it since its index was read): a text is never taken
    /// as on the server on the word of an index whose pack is gone.
    func findPacked(_ names: [ContentDigest], refs: [AssetRef], refresh: Bool = true) -> [String?] {
        var found = [String?](repeating: nil, count: names.count)
        var table = packCatalog.loaded ?? PackTable()
        var refreshed = !refresh
        var paths: [String: String] = [:]
        for attempt in 0..<2 {
            for position in names.indices where found[position] == nil {
                var hit = table.find(names[position])
                if hit == nil && !refreshed {
                    refreshed = true
                    table = refreshPacks(skippingOwn: true)
                    hit = table.find(names[position])
                }
                if let hit, isStored(length: hit.entry.length, refs[position]) {
                    // One string for each pack: a path each was 8 MB for the 50,794 texts of a rename.
                    let path = paths[hit.pack.name] ?? layout.packPath(hit.pack.name)
                    paths[hit.pack.name] = path
                    found[position] = path
                }
            }
            let gone = Set(found.compactMap { $0 }).filter { storage.info($0)?.isFile != true }
            guard !gone.isEmpty else { break }
            for position in names.indices where found[position].map(gone.contains) == true { found[position] = nil }
            guard attempt == 0 else { break }
            table = refreshPacks(skippingOwn: true)
            refreshed = true
        }
        return found
    }

    /// ``stageAssets(_:)`` of a batch big enough for packs (formats 5 and 6): the texts are compressed a chunk at a
    /// time on every core and written to packs of about ``ServerStorage/packSize`` bytes as they come (a temp file on
    /// a folder, so a batch holds no more than a chunk of texts at once), each fsynced when full. A text stored
    /// bigger than ``AssetPack/largestBlob`` is staged loose, fsynced.
    private func stagePacked(
        _ items: [PreparedText], refs: [AssetRef], names: [ContentDigest], missing: [Int], vault: Vault?,
        compressors: AssetCodec.CompressorPool
    ) throws -> StagedAssets {
        let staged = StagedAssets(storage: storage, refs: refs, names: names, missing: [], files: [], batched: false)
        var loose: [Int] = []
        var group: AssetPack.Builder?
        var groupIndices: [Int] = []
        defer { group?.sink.discard() }
        func stageGroup() throws {
            guard let builder = group, !builder.isEmpty else { return }
            group = nil
            let pack = try builder.finish()
            staged.packs.append((pack.name, pack.file))
            staged.setPack(layout.packPath(pack.name), of: groupIndices)
            groupIndices = []
            try FaultPoint.hit("assets.tempWritten")
        }
        // A chunk of texts is compressed on every core, then written to the pack in order and let go.
        let chunk = 64
        for start in stride(from: 0, to: missing.count, by: chunk) {
            let slots = start..<min(start + chunk, missing.count)
            let encoded = Parallel.values(slots.count, serialBelow: 16) { offset in
                self.stored(items[missing[slots.lowerBound + offset]], vault: vault, compressors: compressors)
            }
            for (offset, blob) in encoded.enumerated() {
                let index = missing[slots.lowerBound + offset]
                if blob.count > AssetPack.largestBlob {
                    staged.files.append(try storage.stage(blob, device: device, suffix: "asset", sync: true))
                    loose.append(index)
                    try FaultPoint.hit("assets.tempWritten")
                    continue
                }
                if group == nil { group = AssetPack.Builder(sink: try storage.packSink(device: device)) }
                try group!.add(names[index], blob)
                groupIndices.append(index)
                if group!.size >= storage.packSize { try stageGroup() }
            }
        }
        try stageGroup()
        staged.missing = loose
        return staged
    }

    /// The second half of ``putAssets(_:)``: flushes the staged temps, publishes each, flushes the shard folders.
    public func publish(_ staged: StagedAssets) throws -> [AssetRef] {
        let refs = staged.refs
        let names = staged.names
        let missing = staged.missing
        let layout = layout
        let storage = storage
        // Packs first: each fsynced when staged, published if its name is free, then its folder flushed.
        if !staged.packs.isEmpty {
            let made = storage.hasDirectories && storage.info(layout.packsDirectory) == nil
            try storage.makeDirectory(layout.packsDirectory)
            if made { try storage.syncDirectory(layout.zoneDirectory) }
            var published = false
            for slot in staged.packs.indices {
                guard let file = staged.packs[slot].file else { continue }
                let path = layout.packPath(staged.packs[slot].name)
                let outcome = try storage.publish(file, as: path)
                // The same name is the same index: the same texts, there already, so reused and touched.
                if outcome == .exists { storage.touch(path) } else { published = true }
                packCatalog.published(staged.packs[slot].name)
                staged.packs[slot].file = nil
                storage.discard(file)
                try FaultPoint.hit("assets.published")
            }
            if published { try storage.syncDirectory(layout.packsDirectory) }
        }
        guard !missing.isEmpty else { return refs }
        if staged.batched { try storage.syncStaged() }
        // Each shard folder once, not once per asset (256 at most).
        var made = Set<String>()
        for index in missing where made.insert(layout.assetShard(names[index])).inserted {
            try storage.makeDirectory(layout.assetShard(names[index]))
        }
        let files = staged.files
        let retained = hasRetention
        let outcomes = storage.map(missing.count) { slot in
            Result { () throws -> String? in
                let name = names[missing[slot]]
                let outcome = try storage.publish(files[slot]!, as: layout.assetPath(name))
                // There already (a writer in between, or a text not looked for first): reused, so touched.
                if outcome == .exists && retained { storage.touch(layout.assetPath(name)) }
                try FaultPoint.hit("assets.published")
                return outcome == .published ? layout.assetShard(name) : nil
            }
        }
        var shards = Set<String>()
        for (slot, outcome) in outcomes.enumerated() {
            // A published temp is gone (renamed, or linked and removed); any other is removed with `staged`.
            if case .success(let shard?) = outcome {
                staged.files[slot] = nil
                shards.insert(shard)
            }
        }
        if let failure = outcomes.lazy.compactMap({ $0 }).first(where: { if case .failure = $0 { true } else { false } }) {
            _ = try failure.get()
        }
        if !staged.batched || shards.count < 4 {
            for shard in shards { try storage.syncDirectory(shard) }
        } else {
            try storage.syncStaged()
        }
        return refs
    }

    /// On an object store, texts up to this size are sent without looking for their asset first.
    static let sentUnseenBelow = 64 << 10

    /// Whether the file found at an asset's path stands for `ref` without reading it: a regular file of the text's
    /// size, or (format 3, where texts may be stored compressed) any regular file no bigger than the text could
    /// compress to. What it holds is verified when it is read.
    func isStored(_ info: StorageInfo, _ ref: AssetRef) -> Bool {
        guard !marker.isEncrypted else { return info.isFile && info.size <= maxStoredAssetSize(ref.size) }
        return Self.isStored(info, ref, compressed: hasRetention)
    }

    static func isStored(_ info: StorageInfo, _ ref: AssetRef, compressed: Bool) -> Bool {
        guard info.isFile else { return false }
        return info.size == ref.size || (compressed && info.size < ref.size)
    }

    /// ``isStored(_:_:)`` for a packed asset of `length` bytes.
    func isStored(length: Int64, _ ref: AssetRef) -> Bool {
        isStored(
            StorageInfo(kind: .file, size: length, mtime: 0, fingerprint: StatFingerprint(size: length, mtime: 0, ctime: 0, inode: 0)), ref)
    }

    /// Reads an asset and verifies its digest and size: damaged or substituted content is never returned. A
    /// compressed asset (format 3) is inflated, never past the size the entry states.
    public func readAsset(_ ref: AssetRef) throws -> Data {
        let name = storedName(ref.sha256)
        let path = layout.assetPath(name)
        let limit = Int(clamping: maxStoredAssetSize(max(ref.size, 0))) + 1
        var source = path
        var stored = try storage.read(path, limit: limit)
        // Not loose: in a pack (formats 5 and 6). A pack that went meanwhile (gc rewrote it, its live texts loose
        // first) sends the search back to the loose file.
        if stored == nil && hasPacks {
            for _ in 0..<2 where stored == nil {
                if let packed = packed(name, refresh: true) {
                    source = packed.pack
                    stored = try readPacked(packed, limit: limit)
                    if stored != nil { break }
                    refreshPacks()
                }
                if let loose = try storage.read(path, limit: limit) {
                    source = path
                    stored = loose
                }
            }
        }
        guard let stored else {
            throw NoteSyncError(
                .corrupt, path: path, "asset is missing from the server; the note is left as it is here",
                fix: "edit and save the note on a device that has it, so that its text is uploaded again; "
                    + "`notesync server fsck` lists every missing asset")
        }
        guard let data = decodeAsset(stored, ref, name: name) else {
            throw NoteSyncError(
                .corrupt, path: source,
                source == path
                    ? "asset content does not match its digest; the note is left as it is here"
                    : "holds asset \(name.hex), whose content does not match its digest; the note is left as it is here",
                fix: "run `notesync server fsck --repair` to quarantine it, then edit and save the note on a "
                    + "device that has it, so that its text is uploaded again")
        }
        return data
    }

    /// The assets of `refs` that are not on the server (format 3: checked by a writer after its commit, in case gc
    /// swept one meanwhile; the writer puts it back). A packed text counts when its pack is still listed: the pack
    /// `staged` put it in or found it in, else the one the packs' indexes name.
    public func missingAssets(_ refs: [AssetRef], staged: StagedAssets? = nil) -> [AssetRef] {
        guard hasRetention else { return [] }
        // The texts the batch packed or found packed, in a pack still listed (gc may have removed it since it was
        // read): there. Only the others are looked for loose, so a first sync's batch of 2,000 packed texts costs
        // one listing, not 2,000 `stat`s of files that do not exist.
        var inPacks = Set<Int>()
        if hasPacks, let staged, !staged.packPaths.isEmpty {
            let listed = Set(((try? storage.list(layout.packsDirectory)) ?? nil) ?? [])
            let stillListed = staged.packPaths.map { listed.contains(String($0.dropFirst(layout.packsDirectory.count + 1))) }
            // `refs` are the staged texts, in their order (those `publish` returned); any other is looked for below.
            let aligned = refs.count == staged.refs.count
            for index in refs.indices where aligned && refs[index].sha256 == staged.refs[index].sha256 {
                let pack = staged.packOf[index]
                if pack >= 0 && stillListed[Int(pack)] { inPacks.insert(index) }
            }
        }
        let others = refs.indices.filter { !inPacks.contains($0) }
        let found = storage.infos(others.map { self.assetPath(refs[$0].sha256) })
        let notLoose = others.indices.filter { found[$0] == nil }.map { others[$0] }
        guard hasPacks && !notLoose.isEmpty else { return notLoose.map { refs[$0] } }
        // Not loose and not in the batch's packs: in the packs' indexes, read again.
        let table = refreshPacks()
        return notLoose.filter { table.find(storedName(refs[$0].sha256)) == nil }.map { refs[$0] }
    }

    /// True when the asset file exists (not verified).
    public func hasAsset(_ digest: ContentDigest) -> Bool {
        storage.info(self.assetPath(digest)) != nil || packed(storedName(digest), refresh: true) != nil
    }
}

/// Texts staged for the server and not published yet (``ServerStore/stageAssets(_:)``): temp files on a folder.
/// What is never published is removed when this goes.
public final class StagedAssets: @unchecked Sendable {
    package let storage: any ServerStorage
    /// Every text's asset, in the order given.
    public let refs: [AssetRef]
    /// The name each text's asset is stored under (``ServerStore/storedName(_:)``), in the same order.
    package let names: [ContentDigest]
    /// The indices of the texts the server lacked that are staged loose, once each.
    package var missing: [Int]
    /// The staged file of each missing text stored loose, nil once published.
    package var files: [StagedFile?]
    /// The packs holding the other missing texts (formats 5 and 6), by name; the file nil once published.
    package var packs: [(name: String, file: StagedFile?)]
    /// The paths of the packs the texts are in (put in one by this batch, or found in one), each once: what the check
    /// after the commit looks for (``ServerStore/missingAssets(_:staged:)``).
    private(set) var packPaths: [String] = []
    /// For each text, in the order of `refs`, the index in `packPaths` of its pack; -1 for a text in none. Not a table
    /// by name: for the 50,794 texts of a rename, found packed, that was 8 MB held through the commit.
    private(set) var packOf: [Int32]
    private var packSlots: [String: Int32] = [:]
    let batched: Bool

    package init(
        storage: any ServerStorage, refs: [AssetRef], names: [ContentDigest], missing: [Int], files: [StagedFile?],
        batched: Bool
    ) {
        self.storage = storage
        self.refs = refs
        self.names = names
        self.missing = missing
        self.files = files
        self.packs = []
        self.batched = batched
        self.packOf = Array(repeating: -1, count: refs.count)
    }

    /// Records that the texts at `indices` are in the pack at `path`.
    func setPack(_ path: String, of indices: some Sequence<Int>) {
        let slot: Int32
        if let known = packSlots[path] {
            slot = known
        } else {
            slot = Int32(packPaths.count)
            packPaths.append(path)
            packSlots[path] = slot
        }
        for index in indices { packOf[index] = slot }
    }

    /// Records the texts found in packs already, then gives each text given twice the pack of its first.
    func setPacks(found: [(index: Int, pack: String)], duplicates: [(index: Int, first: Int)]) {
        for (index, pack) in found { setPack(pack, of: CollectionOfOne(index)) }
        for (index, first) in duplicates where packOf[index] < 0 { packOf[index] = packOf[first] }
    }

    deinit {
        for file in files { if let file { storage.discard(file) } }
        for pack in packs { if let file = pack.file { storage.discard(file) } }
    }
}

/// A text for ``ServerStore/stage(_:)``: its asset, the name it is stored under, and either the text itself or, once
/// encoded, the bytes stored for it.
package struct PreparedText: Sendable {
    package let ref: AssetRef
    package let name: ContentDigest
    /// The text, or what is stored for it when ``isEncoded``.
    package let bytes: Data
    let isEncoded: Bool
}

/// Hashes texts for a store and, on every core at once (its state is only read), encodes them as the store keeps
/// them. A first sync encodes each note's text as soon as it is read: a batch's texts then wait for their pack
/// compressed, not whole (4 MB of a 10,000-note first sync's peak was the raw texts of a batch of 2,000).
package struct AssetPreparer: Sendable {
    package let store: ServerStore
    package let vault: Vault?
    let compressors = AssetCodec.CompressorPool()

    /// Throws when the store is read-only, or encrypted and locked.
    package init(_ store: ServerStore) throws {
        try store.requireWritable()
        self.store = store
        self.vault = try store.requireVault()
    }

    /// `text` hashed and named, to be encoded when it is staged (a text the server likely has: a moved note's).
    package func named(_ text: Data) -> PreparedText {
        let ref = AssetRef(of: text)
        return PreparedText(ref: ref, name: vault?.assetName(ref.sha256) ?? ref.sha256, bytes: text, isEncoded: false)
    }

    /// `text` hashed, named and encoded at its size; the text itself can go.
    package func encoded(_ text: Data) -> PreparedText {
        let ref = AssetRef(of: text)
        let name = vault?.assetName(ref.sha256) ?? ref.sha256
        let stored = store.encodeAsset(text, name: name, vault: vault, compressors: compressors, compact: true)
        return PreparedText(ref: ref, name: name, bytes: stored, isEncoded: true)
    }
}

extension ServerStore {
    /// What is stored for a text given to ``stage(_:)``.
    package func stored(_ item: PreparedText, vault: Vault?, compressors: AssetCodec.CompressorPool) -> Data {
        item.isEncoded ? item.bytes : encodeAsset(item.bytes, name: item.name, vault: vault, compressors: compressors)
    }
}
