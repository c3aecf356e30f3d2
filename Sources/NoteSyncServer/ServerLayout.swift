import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// Paths inside a server directory (format 1). Server file names are digests and numbers only, never note names.
public struct ServerLayout: Sendable, Hashable {
    public let root: String
    public let zone: String

    /// Log entries per shard directory: keeps directories small on NFS and SMB.
    public static let shardSize: Int64 = 4096
    public static let markerName = "notesync-server.json"
    public static let defaultZone = "notes"

    public init(root: String, zone: String = ServerLayout.defaultZone) {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        self.zone = zone
    }

    public var marker: String { root + "/" + Self.markerName }
    public var zonesDirectory: String { root + "/zones" }
    public var zoneDirectory: String { zonesDirectory + "/" + zone }
    public var logDirectory: String { zoneDirectory + "/log" }
    public var assetsDirectory: String { zoneDirectory + "/assets" }
    public var snapshotsDirectory: String { zoneDirectory + "/snapshots" }
    /// Formats 5 and 6: packs, each holding many assets (``AssetPack``).
    public var packsDirectory: String { zoneDirectory + "/packs" }
    public func packPath(_ name: String) -> String { packsDirectory + "/" + name + ".pack" }
    public var tmpDirectory: String { zoneDirectory + "/tmp" }
    /// One empty file per slot that fsck sealed with a void entry (``ServerStore/sealGap(_:after:next:)``): how the
    /// device whose entry was lost there finds out, without reading the log again.
    public var voidsDirectory: String { zoneDirectory + "/voids" }
    public func voidPath(_ seq: Int64) -> String { voidsDirectory + "/" + Self.pad(seq, 12) }
    public var devicesDirectory: String { root + "/devices" }
    /// An encrypted server's wrapped vault keys, one file per generation (docs/encryption.md).
    public var keysDirectory: String { root + "/keys" }
    public func keysPath(_ generation: Int64) -> String { keysDirectory + "/" + Self.pad(generation, 12) }
    /// Format 3: the retention policy in force is the highest-numbered file here (docs/retention.md).
    public var retentionDirectory: String { zoneDirectory + "/retention" }
    public func retentionPath(_ number: Int64) -> String { retentionDirectory + "/" + Self.pad(number, 12) }
    /// Format 3: gc's marks (what one run marked for removal) and its advisory lease.
    public var gcDirectory: String { zoneDirectory + "/gc" }
    public var marksDirectory: String { gcDirectory + "/marks" }
    public var gcLease: String { gcDirectory + "/lease" }

    public static func shardName(of seq: Int64) -> String { pad(seq / shardSize, 6) }
    public static func entryName(of seq: Int64) -> String { pad(seq, 12) }

    public func shardDirectory(of seq: Int64) -> String { logDirectory + "/" + Self.shardName(of: seq) }
    public func entryPath(_ seq: Int64) -> String { shardDirectory(of: seq) + "/" + Self.entryName(of: seq) }
    public func assetShard(_ digest: ContentDigest) -> String { assetsDirectory + "/" + digest.hex.prefix(2) }
    public func assetPath(_ digest: ContentDigest) -> String { assetShard(digest) + "/" + digest.hex }
    public func snapshotPath(_ seq: Int64) -> String { snapshotsDirectory + "/" + Self.pad(seq, 12) }

    package static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    /// Parses a log entry or snapshot file name back into its sequence.
    static func sequence(ofFileName name: String, width: Int = 12) -> Int64? {
        guard name.utf8.count == width, name.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
        return Int64(name)
    }
}
