import Foundation

extension ServerStore {
    /// Publishes a note's text as a content-addressed asset; an asset already there is not rewritten.
    @discardableResult
    public func putAsset(_ data: Data) throws -> AssetRef {
        let ref = AssetRef(of: data)
        let path = layout.assetPath(ref.sha256)
        if let info = FileIO.lstatInfo(path), isStored(info, ref) {
            if hasRetention { touch([ref.sha256]) }
            return ref
        }
        try FileIO.makeDirectory(layout.assetShard(ref.sha256))
        if try publish(hasRetention ? AssetCodec.encode(data) : data, as: path, suffix: "asset") == .published {
            try FileIO.syncDirectory(layout.assetShard(ref.sha256))
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
        let refs = try Parallel.map(items.count) { index in Result { AssetRef(of: items[index]) } }.map { try $0!.get() }
        var unique: [Int] = []
        var seen = Set<ContentDigest>()
        for (index, ref) in refs.enumerated() where seen.insert(ref.sha256).inserted { unique.append(index) }
        let layout = layout
        let device = device
        let compress = hasRetention
        let present = Parallel.map(unique.count) { slot in
            Result { () -> Bool in
                let ref = refs[unique[slot]]
                guard let info = FileIO.lstatInfo(layout.assetPath(ref.sha256)) else { return false }
                return Self.isStored(info, ref, compressed: compress)
            }
        }
        let missing = unique.indices.filter { (try? present[$0]?.get()) != true }.map { unique[$0] }
        if hasRetention { touch(unique.indices.filter { (try? present[$0]?.get()) == true }.map { refs[unique[$0]].sha256 }) }
        // syncfs flushes the whole filesystem: worth it for a batch, not for the agent's single edit.
        let batched = !isNetwork && items.count >= 16
        let written = Parallel.map(missing.count) { slot in
            Result { () throws -> String in
                let temp = layout.tempPath(device: device, suffix: "asset")
                try FileIO.createAndSync(temp, compress ? AssetCodec.encode(items[missing[slot]]) : items[missing[slot]], sync: !batched)
                try FaultPoint.hit("assets.tempWritten")
                return temp
            }
        }
        let staged = StagedAssets(refs: refs, missing: missing, temps: written.map { try? $0?.get() }, batched: batched)
        if let failure = written.lazy.compactMap({ $0 }).first(where: { if case .failure = $0 { true } else { false } }) {
            _ = try failure.get()
        }
        return staged
    }

    /// The second half of ``putAssets(_:)``: flushes the staged temps, publishes each, flushes the shard folders.
    public func publish(_ staged: StagedAssets) throws -> [AssetRef] {
        let refs = staged.refs
        let missing = staged.missing
        let layout = layout
        guard !missing.isEmpty else { return refs }
        if staged.batched { try FileIO.syncFilesystem(layout.tmpDirectory) }
        let primitive = try primitive()
        // Each shard folder once, not once per asset (256 at most).
        var made = Set<String>()
        for index in missing where made.insert(layout.assetShard(refs[index].sha256)).inserted {
            try FileIO.makeDirectory(layout.assetShard(refs[index].sha256))
        }
        let temps = staged.temps
        let outcomes = Parallel.map(missing.count) { slot in
            Result { () throws -> String? in
                let digest = refs[missing[slot]].sha256
                let outcome = try AtomicPublish.publish(temps[slot]!, as: layout.assetPath(digest), using: primitive)
                try FaultPoint.hit("assets.published")
                return outcome == .published ? layout.assetShard(digest) : nil
            }
        }
        var shards = Set<String>()
        for (slot, outcome) in outcomes.enumerated() {
            // A published temp is gone (renamed, or linked and removed); any other is removed with `staged`.
            if case .success(let shard?) = outcome {
                staged.temps[slot] = nil
                shards.insert(shard)
            }
        }
        if let failure = outcomes.lazy.compactMap({ $0 }).first(where: { if case .failure = $0 { true } else { false } }) {
            _ = try failure.get()
        }
        if !staged.batched || shards.count < 4 {
            for shard in shards { try FileIO.syncDirectory(shard) }
        } else {
            try FileIO.syncFilesystem(layout.assetsDirectory)
        }
        return refs
    }

    /// Whether the file found at an asset's path stands for `ref` without reading it: a regular file of the text's
    /// size, or (format 3, where texts may be stored compressed) any regular file no bigger than the text could
    /// compress to. What it holds is verified when it is read.
    func isStored(_ info: stat, _ ref: AssetRef) -> Bool { Self.isStored(info, ref, compressed: hasRetention) }

    static func isStored(_ info: stat, _ ref: AssetRef, compressed: Bool) -> Bool {
        guard (info.st_mode & S_IFMT) == S_IFREG else { return false }
        return Int64(info.st_size) == ref.size || (compressed && Int64(info.st_size) < ref.size)
    }

    /// Reads an asset and verifies its digest and size: damaged or substituted content is never returned. A
    /// compressed asset (format 3) is inflated, never past the size the entry states.
    public func readAsset(_ ref: AssetRef) throws -> Data {
        let path = layout.assetPath(ref.sha256)
        guard let stored = try FileIO.read(path, limit: Int(clamping: max(ref.size, 0)) + 1) else {
            throw NoteSyncError(
                .corrupt, path: path, "asset is missing from the server; the note is left as it is here",
                fix: "edit and save the note on a device that has it, so that its text is uploaded again; "
                    + "`notesync server fsck` lists every missing asset")
        }
        guard let data = AssetCodec.decode(stored, digest: ref.sha256, size: ref.size) else {
            throw NoteSyncError(
                .corrupt, path: path, "asset content does not match its digest; the note is left as it is here",
                fix: "run `notesync server fsck --repair` to quarantine it, then edit and save the note on a "
                    + "device that has it, so that its text is uploaded again")
        }
        return data
    }

    /// Touches assets a writer reuses (format 3): gc never sweeps an asset touched after its mark
    /// (docs/retention.md). Best effort: a failure only leaves the protection to the grace period.
    func touch(_ digests: [ContentDigest]) {
        for digest in digests { _ = utimensat(AT_FDCWD, layout.assetPath(digest), nil, AT_SYMLINK_NOFOLLOW) }
    }

    /// The assets of `refs` that are not on the server (format 3: checked by a writer after its commit, in case gc
    /// swept one meanwhile; the writer puts it back).
    public func missingAssets(_ refs: [AssetRef]) -> [AssetRef] {
        guard hasRetention else { return [] }
        let layout = layout
        let found = Parallel.map(refs.count) { index in
            Result<Bool, any Error>.success(FileIO.lstatInfo(layout.assetPath(refs[index].sha256)) != nil)
        }
        return refs.indices.filter { (try? found[$0]?.get()) != true }.map { refs[$0] }
    }

    /// True when the asset file exists (not verified).
    public func hasAsset(_ digest: ContentDigest) -> Bool {
        FileIO.lstatInfo(layout.assetPath(digest)) != nil
    }
}

/// Texts written to temp files on the server and not published yet (``ServerStore/stageAssets(_:)``). Temps
/// that are never published are removed when this goes.
public final class StagedAssets: @unchecked Sendable {
    /// Every text's asset, in the order given.
    public let refs: [AssetRef]
    /// The indices of the texts the server lacked, once each.
    let missing: [Int]
    /// The temp file of each missing text, nil once published.
    var temps: [String?]
    let batched: Bool

    init(refs: [AssetRef], missing: [Int], temps: [String?], batched: Bool) {
        self.refs = refs
        self.missing = missing
        self.temps = temps
        self.batched = batched
    }

    deinit { for temp in temps { if let temp { unlink(temp) } } }
}
