import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

extension SyncEngine {
    /// The agent's gc, as git's auto gc: on a format 3 server this device may write to, when the lease in the server
    /// says no device ran gc within `every` seconds, this device takes the lease and runs gc with the default grace
    /// period (24 h). The lease only saves duplicate work; gc is correct without it. Failures are logged, never
    /// thrown: the agent goes on syncing.
    public func autoGC(every seconds: Int64) {
        guard seconds > 0 else { return }
        do {
            let store = try openStore()
            guard store.hasRetention, !store.isReadOnly, store.takeGCLease(seconds: seconds) else { return }
            logger.info("agent.gc.started", metadata: ["server.root": "\(store.layout.root)"])
            let report = try store.collectGarbage(grace: RetentionPolicy.day, dryRun: false)
            logger.notice(
                "agent.gc.finished",
                metadata: [
                    "gc.end": "\(report.end)", "gc.assets.marked": "\(report.assetsMarked)",
                    "gc.assets.removed": "\(report.assetsRemoved)", "gc.entries.removed": "\(report.entriesRemoved)",
                    "gc.seconds": "\(report.seconds)"
                ])
        } catch {
            logger.warning("agent.gc.failed", metadata: ["reason": "\(error)"])
        }
    }
}
