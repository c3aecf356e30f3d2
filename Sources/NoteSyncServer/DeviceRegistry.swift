import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// A device's status file on the server (`devices/<id>.json`): its name, when it was last seen, its token.
///
/// Only the device itself writes its file (temp + rename over), so no two writers ever race on it. Other
/// devices read it to name conflict copies after the device that made the losing edit.
public struct DeviceInfo: Codable, Sendable, Hashable {
    public var id: String
    public var name: String
    public var lastSeen: Int64
    public var token: Int64

    public init(id: String, name: String, lastSeen: Int64, token: Int64) {
        self.id = id
        self.name = name
        self.lastSeen = lastSeen
        self.token = token
    }
}

extension ServerStore {
    public func writeDeviceInfo(_ info: DeviceInfo) throws {
        try requireWritable()
        let data: Data
        if marker.isEncrypted {
            // Sealed like an entry, bound to the device's id: the name is hidden, the id (random) is not.
            data = try seal(info, kind: "device", place: info.id)
        } else {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            data = try encoder.encode(info)
        }
        try storage.replace(layout.devicesDirectory + "/" + info.id + ".json", with: data, device: device)
    }

    /// The name to show for device `id`: its status file's name, else the id. Both come from the server, so
    /// control characters are escaped: a name never drives the terminal (conflict copy names clean it further).
    public func deviceName(_ id: String) -> String {
        DisplayName.escape(deviceInfo(id)?.name ?? id)
    }

    /// The device's status file, or `nil` when it has none or it cannot be read.
    public func deviceInfo(_ id: String) -> DeviceInfo? {
        guard (try? Self.validateDevice(id)) != nil,
            let data = try? storage.read(layout.devicesDirectory + "/" + id + ".json", limit: 1 << 16)
        else { return nil }
        let info =
            marker.isEncrypted
            ? try? open(data, kind: "device", place: id, as: DeviceInfo.self)
            : try? JSONDecoder().decode(DeviceInfo.self, from: data)
        // A file moved to another device's name does not open (encrypted), or names another id.
        guard let info, info.id == id else { return nil }
        return info
    }
}
