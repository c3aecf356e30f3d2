import Foundation
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport

/// What a running agent tells `notesync status`, in `.notesync/status.json` (rewritten atomically on change).
public struct AgentStatus: Codable, Sendable, Hashable {
    public var pid: Int32
    public var started: Int64
    public var online: Bool
    public var pending: Int
    public var token: Int64
    public var lastSync: Int64?
    public var lastError: String?
    /// The kind (``NoteSyncError/Kind``) of the error the last sync ended with: syncing is stopped (a gap, another
    /// server) or failing until a sync finishes. Nil after a sync that finished or found the server away.
    public var lastErrorKind: String?
    /// How server changes arrive.
    public var serverWatch: ServerWatchMode
    /// How local changes arrive: inotify, or periodic scans when it ran out of watches or failed.
    public var localWatch: LocalWatchMode
    /// Local deletes the mass-delete guard holds (nil: none).
    public var heldDeletes: Int?

    public init(
        pid: Int32, started: Int64, online: Bool, pending: Int, token: Int64, lastSync: Int64?,
        lastError: String?, serverWatch: ServerWatchMode, localWatch: LocalWatchMode
    ) {
        self.pid = pid
        self.started = started
        self.online = online
        self.pending = pending
        self.token = token
        self.lastSync = lastSync
        self.lastError = lastError
        self.serverWatch = serverWatch
        self.localWatch = localWatch
    }

    public func write(to folder: NotesFolder) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let temp = folder.stateDirectory + "/" + ReservedNames.agentTempPrefix + "status-" + FileIO.randomToken()
        try FileIO.createAndSync(temp, try encoder.encode(self), sync: false)
        if rename(temp, folder.statusFile) != 0 {
            unlink(temp)
            throw NoteSyncError.posix("rename", path: folder.statusFile, errno: errno)
        }
    }

    /// The status of the agent running on `folder`, or `nil` when none runs (a stale file is ignored).
    public static func read(_ folder: NotesFolder) -> AgentStatus? {
        guard let data = try? FileIO.read(folder.statusFile, limit: 1 << 20),
            let status = try? JSONDecoder().decode(AgentStatus.self, from: data)
        else { return nil }
        guard kill(status.pid, 0) == 0 || errno == EPERM else { return nil }
        guard (try? FolderLock(folder)) == nil else { return nil }
        return status
    }
}
