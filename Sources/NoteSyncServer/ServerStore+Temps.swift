import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

extension ServerStore {
    /// Removes this device's temp files from the zone's `tmp/` (`<device>-…`): what a writer of this device that
    /// was killed or cut off mid-commit left. Only this device writes under its id, one process at a time (the
    /// folder lock), and a sync calls this between commits, so none of them is in flight. Best effort: fsck sweeps
    /// what stays. Nothing to do where staging leaves no temp file (``ServerStorage/stagesTempFiles``).
    public func removeOwnTemps() {
        guard !isReadOnly, storage.stagesTempFiles, let names = try? storage.list(layout.tmpDirectory) else { return }
        for name in names where name.hasPrefix(device + "-") {
            _ = try? storage.remove(layout.tmpDirectory + "/" + name)
        }
    }
}
