import Foundation

extension ServerStore {
    /// Publishes a note's text as a content-addressed asset; an asset already there is not rewritten.
    @discardableResult
    public func putAsset(_ data: Data) throws -> AssetRef {
        let ref = AssetRef(of: data)
        let path = layout.assetPath(ref.sha256)
        if let info = FileIO.lstatInfo(path), (info.st_mode & S_IFMT) == S_IFREG, Int64(info.st_size) == ref.size {
            return ref
        }
        try FileIO.makeDirectory(layout.assetShard(ref.sha256))
        if try publish(data, as: path, suffix: "asset") == .published {
            try FileIO.syncDirectory(layout.assetShard(ref.sha256))
        }
        return ref
    }

    /// Reads an asset and verifies its digest and size: damaged or substituted content is never returned.
    public func readAsset(_ ref: AssetRef) throws -> Data {
        let path = layout.assetPath(ref.sha256)
        guard let data = try FileIO.read(path, limit: Int(clamping: max(ref.size, 0)) + 1) else {
            throw NoteSyncError(.corrupt, path: path, "asset is missing from the server",
                                fix: "run `notesync server fsck`; the device that wrote it can sync again to restore it")
        }
        guard Int64(data.count) == ref.size, ContentDigest(of: data) == ref.sha256 else {
            throw NoteSyncError(.corrupt, path: path, "asset content does not match its digest",
                                fix: "run `notesync server fsck --repair` to quarantine it")
        }
        return data
    }

    /// True when the asset file exists (not verified).
    public func hasAsset(_ digest: ContentDigest) -> Bool {
        FileIO.lstatInfo(layout.assetPath(digest)) != nil
    }
}
