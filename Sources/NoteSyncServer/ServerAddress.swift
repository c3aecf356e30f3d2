import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// How the user names a server: a folder's path, or an object store location (`s3://BUCKET/PREFIX`).
public enum ServerAddress {
    /// The address schemes notesync speaks, as the refusal of any other names them.
    public static let schemes = ["s3://"]

    /// Whether `server` names an object store location rather than a folder: which storage opens it.
    package static func isObjectStore(_ server: String) -> Bool { server.hasPrefix("s3://") }

    /// Whether `server` names a folder of this machine's filesystem (a local disk, or a share mounted there): what is
    /// at the path can be examined before a server is made in it, and a missing one can be made. False for a
    /// location a service answers for, where an unreachable server cannot be told from a missing one.
    public static func isLocalPath(_ server: String) -> Bool { !isObjectStore(server) }

    /// Whether `server` is reached through the service `--endpoint` names (an S3-compatible one): a notes folder keeps
    /// the endpoint it was set up with for such a server only.
    public static func takesEndpoint(_ server: String) -> Bool { isObjectStore(server) }

    /// The server as it is stored and shown: a folder's absolute path (relative to the current directory), or the
    /// object store location without trailing slashes. An address with a scheme notesync does not speak is
    /// refused (``check(_:)``): taken as a path, `https://host/dav` would become a local folder named `https:`.
    public static func normalized(_ server: String) throws -> String {
        try check(server)
        guard !isLocalPath(server) else { return FileIO.absolutePath(server) }
        var location = server
        while location.hasSuffix("/") && location.count > 5 { location.removeLast() }
        return location
    }

    /// Refuses a server given as `scheme:…` (a URL such as `https://…` or `webdav://…`, or `host:path` as scp writes
    /// it) unless the scheme is one of ``schemes``: such a server would otherwise be taken for a relative folder
    /// path, made beside the notes, and the notes would go nowhere the user meant. A folder really named so is
    /// given as `./NAME`.
    public static func check(_ server: String) throws {
        guard let scheme = scheme(of: server), !isObjectStore(server) else { return }
        throw NoteSyncError(
            .usage, path: server,
            "is an address with the scheme \"\(DisplayName.escape(scheme)):\", which notesync does not speak: a server is "
                + "a folder (a local path, or the mount point of an NFS, SMB or sshfs share) or an S3 location, "
                + schemes.map { $0 + "BUCKET/PREFIX" }.joined(separator: ", "),
            fix: "for WebDAV (Nextcloud, ownCloud) or SSH, mount the share (rclone mount, davfs2, sshfs) and give its "
                + "folder; for a folder really named so, write ./\(DisplayName.escape(server))")
    }

    /// The scheme `server` starts with (`https` of `https://…`, `nas` of `nas:notes`): letters, digits, `+`, `-`
    /// and `.` after a letter, up to the first `:`, which must come before any `/` (RFC 3986, section 3.1).
    package static func scheme(of server: String) -> String? {
        guard let colon = server.firstIndex(of: ":"), colon != server.startIndex else { return nil }
        let candidate = server[..<colon]
        guard let first = candidate.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic,
            candidate.unicodeScalars.allSatisfy({
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "+-.".unicodeScalars.contains($0))
            })
        else { return nil }
        return String(candidate)
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
