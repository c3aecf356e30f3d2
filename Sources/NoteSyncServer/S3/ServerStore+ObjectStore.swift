import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

extension ServerStore {
    /// Creates a new server at an object store location (`s3://BUCKET/PREFIX`): the marker, published with
    /// create-if-absent. Refuses a location that already holds a server, or any other object (a prefix is not
    /// shared with other data). There are no folders to make: keys are made by the objects put under them.
    @discardableResult
    static func createInObjectStore(
        root: String, endpoint: String?, logger: Logger, encryption: NewVault? = nil
    ) throws -> ServerMarker {
        let storage = try S3Storage.open(root: root, endpoint: endpoint, logger: logger)
        let layout = ServerLayout(root: storage.root)
        if storage.info(layout.marker) != nil {
            throw NoteSyncError(
                .usage, path: layout.root, "is already a notesync server",
                fix: "use it as it is: `notesync init --server \(layout.root)`")
        }
        if let names = try storage.list(layout.root), names.contains(where: { !$0.hasPrefix(S3Client.probePrefix) }) {
            throw NoteSyncError(
                .usage, path: layout.root,
                "holds other objects and no notesync server; refusing to mix a server into them",
                fix: "choose an empty prefix: s3://BUCKET/NEW-PREFIX")
        }
        let marker = newMarker(layout, encrypted: encryption != nil)
        // The key file before the marker: a marker never names keys that are not there.
        if let encryption,
            try storage.create(try firstKeys(encryption, serverID: marker.id), as: layout.keysPath(1), device: "init", suffix: "keys")
                != .published
        {
            throw NoteSyncError(
                .usage, path: layout.root, "another process created a server here at the same time",
                fix: "use the server it created")
        }
        guard try storage.create(try encoded(marker), as: layout.marker, device: "init", suffix: "marker") == .published else {
            throw NoteSyncError(
                .usage, path: layout.root, "another process created a server here at the same time",
                fix: "use the server it created")
        }
        logger.info("server.created", metadata: ["server.root": "\(layout.root)"])
        return marker
    }
}
