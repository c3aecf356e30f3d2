import Foundation

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
        try requireWritable()
        let vault = try requireVault()
        // Each text's digest and the name its asset is stored under (keyed on an encrypted server), once each.
        let named = try Parallel.map(items.count) { index in
            Result { () -> (AssetRef, ContentDigest) in
                let ref = AssetRef(of: items[index])
                return (ref, vault?.assetName(ref.sha256) ?? ref.sha256)
            }
        }.map { try $0!.get() }
        let refs = named.map(\.0)
        let names = named.map(\.1)
        var unique: [Int] = []
        var seen = Set<ContentDigest>()
        for (index, ref) in refs.enumerated() where seen.insert(ref.sha256).inserted { unique.append(index) }
        let device = device
        let storage = storage
        let layout = layout
        // On an object store a text goes straight to its conditional PUT, which answers 412 when the asset is there
        // (and is then touched, ``publish(_:)``): a HEAD first would be one more request per text. Only a text
        // too big to send for nothing is looked for first.
        let looked = unique.filter { !storage.isObjectStore || items[$0].count > Self.sentUnseenBelow }
        let found = storage.infos(looked.map { layout.assetPath(names[$0]) })
        var present = Set<Int>()
        for (index, info) in zip(looked, found) {
            if let info, isStored(info, refs[index]) { present.insert(index) }
        }
        let missing = unique.filter { !present.contains($0) }
        // Assets reused are touched (format 3): gc never sweeps an asset touched after its mark (docs/retention.md).
        // Best effort: a failure only leaves the protection to the grace period.
        if hasRetention { for index in unique where present.contains(index) { storage.touch(layout.assetPath(names[index])) } }
        // syncfs flushes the whole filesystem: worth it for a batch, not for the agent's single edit.
        let batched = !isNetwork && !storage.isObjectStore && items.count >= 16
        let compressors = AssetCodec.CompressorPool()
        let written = Parallel.map(missing.count) { slot in
            Result { () throws -> StagedFile in
                let index = missing[slot]
                let data = self.encodeAsset(items[index], name: names[index], vault: vault, compressors: compressors)
                let staged = try storage.stage(data, device: device, suffix: "asset", sync: !batched)
                try FaultPoint.hit("assets.tempWritten")
                return staged
            }
        }
        let staged = StagedAssets(
            storage: storage, refs: refs, names: names, missing: missing, files: written.map { try? $0?.get() },
            batched: batched)
        if let failure = written.lazy.compactMap({ $0 }).first(where: { if case .failure = $0 { true } else { false } }) {
            _ = try failure.get()
        }
        return staged
    }

    /// The second half of ``putAssets(_:)``: flushes the staged temps, publishes each, flushes the shard folders.
    public func publish(_ staged: StagedAssets) throws -> [AssetRef] {
        let refs = staged.refs
        let names = staged.names
        let missing = staged.missing
        let layout = layout
        let storage = storage
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

    /// Reads an asset and verifies its digest and size: damaged or substituted content is never returned. A
    /// compressed asset (format 3) is inflated, never past the size the entry states.
    public func readAsset(_ ref: AssetRef) throws -> Data {
        let name = storedName(ref.sha256)
        let path = layout.assetPath(name)
        guard let stored = try storage.read(path, limit: Int(clamping: maxStoredAssetSize(max(ref.size, 0))) + 1) else {
            throw NoteSyncError(
                .corrupt, path: path, "asset is missing from the server; the note is left as it is here",
                fix: "edit and save the note on a device that has it, so that its text is uploaded again; "
                    + "`notesync server fsck` lists every missing asset")
        }
        guard let data = decodeAsset(stored, ref, name: name) else {
            throw NoteSyncError(
                .corrupt, path: path, "asset content does not match its digest; the note is left as it is here",
                fix: "run `notesync server fsck --repair` to quarantine it, then edit and save the note on a "
                    + "device that has it, so that its text is uploaded again")
        }
        return data
    }

    /// The assets of `refs` that are not on the server (format 3: checked by a writer after its commit, in case gc
    /// swept one meanwhile; the writer puts it back).
    public func missingAssets(_ refs: [AssetRef]) -> [AssetRef] {
        guard hasRetention else { return [] }
        let found = storage.infos(refs.map { self.assetPath($0.sha256) })
        return refs.indices.filter { found[$0] == nil }.map { refs[$0] }
    }

    /// True when the asset file exists (not verified).
    public func hasAsset(_ digest: ContentDigest) -> Bool {
        storage.info(self.assetPath(digest)) != nil
    }
}

/// Texts staged for the server and not published yet (``ServerStore/stageAssets(_:)``): temp files on a folder.
/// What is never published is removed when this goes.
public final class StagedAssets: @unchecked Sendable {
    let storage: any ServerStorage
    /// Every text's asset, in the order given.
    public let refs: [AssetRef]
    /// The name each text's asset is stored under (``ServerStore/storedName(_:)``), in the same order.
    let names: [ContentDigest]
    /// The indices of the texts the server lacked, once each.
    let missing: [Int]
    /// The staged file of each missing text, nil once published.
    var files: [StagedFile?]
    let batched: Bool

    init(
        storage: any ServerStorage, refs: [AssetRef], names: [ContentDigest], missing: [Int], files: [StagedFile?],
        batched: Bool
    ) {
        self.storage = storage
        self.refs = refs
        self.names = names
        self.missing = missing
        self.files = files
        self.batched = batched
    }

    deinit { for file in files { if let file { storage.discard(file) } } }
}
