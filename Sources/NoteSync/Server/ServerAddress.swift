import Foundation
import Logging

/// How the user names a server: a folder's path, or an object store location (`s3://BUCKET/PREFIX`).
public enum ServerAddress {
    /// Whether `server` names an object store location rather than a folder.
    public static func isObjectStore(_ server: String) -> Bool { server.hasPrefix("s3://") }

    /// The server as it is stored and shown: a folder's absolute path (relative to the current directory), or the
    /// object store location without trailing slashes.
    public static func normalized(_ server: String) -> String {
        guard isObjectStore(server) else { return NotesFolder(root: server).root }
        var location = server
        while location.hasSuffix("/") && location.count > 5 { location.removeLast() }
        return location
    }

    static func openObjectStore(_ root: String, endpoint: String?, logger: Logger) throws -> any ServerStorage {
        try S3Storage.open(root: root, endpoint: endpoint, logger: logger)
    }

    static func createObjectStore(
        _ root: String, endpoint: String?, logger: Logger, encryption: ServerStore.NewVault? = nil
    ) throws -> ServerMarker {
        try ServerStore.createInObjectStore(root: root, endpoint: endpoint, logger: logger, encryption: encryption)
    }
}
