import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// The modes of the files and folders a device writes into a server folder, decided by the server folder's own
/// mode (docs/server-format.md, "Modes").
///
/// Every device of a server writes into folders another device made, so the modes cannot come from each writer's
/// umask alone: a group-shared server (a setgid, group-writable root, as `chmod 2775` makes it) needs every folder
/// group-writable and setgid, or a second user of the group can never add a log entry, an asset or a temp to a
/// folder the first one made. A private server (`notesync server init --private`: a root that grants nothing to
/// group or others) keeps what is written in it to its owner. Any other root gets the process's umask, as files
/// and folders anywhere do.
public struct ServerModes: Sendable, Hashable {
    /// The mode a server file is created with.
    public let file: mode_t
    /// The mode a server folder is created with.
    public let folder: mode_t
    /// Whether the modes are set with `fchmod` after creating (the umask ignored): a group member's umask of 022
    /// would otherwise take the group's write bit away.
    public let exact: Bool

    /// The process's umask applies, as to any file: 0644 files, 0755 folders with a umask of 022.
    public static let byUmask = ServerModes(file: 0o644, folder: 0o755, exact: false)
    /// A group-shared server: folders 2775 (group-writable, setgid so that their files keep the root's group),
    /// files 0664 (group members may mark an asset as used, which takes write access to it).
    public static let group = ServerModes(file: 0o664, folder: 0o2775, exact: true)
    /// A private server: only its owner can read it. The umask can only take bits away, so no `fchmod` is needed.
    public static let ownerOnly = ServerModes(file: 0o600, folder: 0o700, exact: false)

    package init(file: mode_t, folder: mode_t, exact: Bool) {
        self.file = file
        self.folder = folder
        self.exact = exact
    }

    /// The modes a server root of mode `rootMode` (`st_mode`) calls for.
    public init(rootMode: mode_t) {
        if rootMode & S_ISGID != 0 && rootMode & S_IWGRP != 0 {
            self = .group
        } else if rootMode & 0o077 == 0 {
            self = .ownerOnly
        } else {
            self = .byUmask
        }
    }

    /// The modes the server folder at `root` calls for (``byUmask`` when it cannot be examined).
    public init(root: String) {
        guard let info = FileIO.lstatInfo(root) else {
            self = .byUmask
            return
        }
        self.init(rootMode: info.st_mode)
    }
}
