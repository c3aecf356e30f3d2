import Foundation
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport

/// Timing of the agent. Defaults aim at an edit reaching other devices well under a second.
public struct AgentOptions: Sendable, Hashable {
    /// A path is acted on once it has been quiet this long (watchman's default settle): an editor's save is a burst
    /// of events a few milliseconds long; a file still growing waits again, and a vanished note ``deleteSettle``.
    public var settle: Duration = .milliseconds(20)
    /// A note that is missing must stay missing this long before the delete is committed: vim and emacs move
    /// a note aside for a few milliseconds while saving.
    public var deleteSettle: Duration = .milliseconds(400)
    /// The longest a path that keeps changing (a file still growing) is held back.
    public var maxSettle: Duration = .seconds(3)
    /// How often the server is polled; `nil` picks by filesystem: inotify plus a slow safety poll on local
    /// filesystems, a fast poll on network ones (their remote changes raise no inotify events).
    public var pollInterval: Duration?
    /// A full rescan of the notes folder this often, even with inotify (Syncthing does hourly).
    public var fullScanInterval: Duration = .seconds(3600)
    /// Retry backoff while the server is unreachable.
    public var minBackoff: Duration = .milliseconds(500)
    public var maxBackoff: Duration = .seconds(30)
    /// How long a gap in the server's log is waited for (a replicating tool may deliver the missing entry late)
    /// before the agent reports it as an error; meanwhile it pushes nothing, as if offline.
    public var gapGrace: Duration = .seconds(600)
    /// How often the agent runs gc on a format 3 server by itself (``SyncEngine/autoGC(every:)``), when no device
    /// did within that time; zero never.
    public var gcEvery: Duration = .seconds(86_400)
    /// A note saved again within this long of its last commit waits until it has passed (``CommitPacer``); zero
    /// commits every save.
    public var pace: Duration = .seconds(5)

    public init() {}

    static let localSafetyPoll: Duration = .seconds(15)
    static let networkPoll: Duration = .seconds(1)
}

extension Duration {
    package var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
