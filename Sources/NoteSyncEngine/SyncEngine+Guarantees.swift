import Foundation
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

extension SyncEngine {
    /// Probes what the notes folder's filesystem offers (``FolderGuarantees``) when it is new or another mount (a USB
    /// stick mounted again, the folder moved to another disk), and records it for `notesync status`. Returns the
    /// warning that the folder lacks a guarantee, only when it was probed anew: the first sync on it says so once.
    func probeFolderGuarantees() throws -> SyncWarning? {
        guard let info = FileIO.lstatInfo(folder.stateDirectory) else { return nil }
        let kind = (try? FilesystemKind(path: folder.stateDirectory).name) ?? "unknown"
        let mount = "\(info.st_dev) \(kind)"
        let stored = try state.meta(.folderGuarantees)
        if stored?.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) == mount {
            return nil
        }
        let probed = try FolderGuarantees.probe(in: folder.staging)
        try state.setMeta([.folderGuarantees: mount + "\n" + probed.stored])
        return probed.warning.map { SyncWarning(.folder, path: nil, $0) }
    }

    /// What ``probeFolderGuarantees()`` stored for the notes folder (this sync's mount: it probes a new one first);
    /// nil before any probe. The applier takes it, so that a pulled update does not probe again.
    func storedFolderGuarantees() throws -> FolderGuarantees? {
        guard let stored = try state.meta(.folderGuarantees), let mountEnd = stored.firstIndex(of: "\n") else { return nil }
        return FolderGuarantees(stored: String(stored[stored.index(after: mountEnd)...]))
    }

    /// The steps the notes folder lacks and its filesystem, as the last sync probed them; nil before any sync.
    public static func folderLacks(_ state: LocalState) throws -> (filesystem: String, missing: [String])? {
        let lines = (try state.meta(.folderGuarantees) ?? "").split(separator: "\n").map(String.init)
        guard lines.count >= 2 else { return nil }
        return (lines[1], Array(lines.dropFirst(2)))
    }
}
