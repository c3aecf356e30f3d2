import Foundation
import Synchronization

/// Notes folders a test gives another filesystem's personality, whatever thread or task works in them (the engine's
/// parallel work does not see ``FolderRename/without(_:_:)``, which is task-local): the steps that filesystem lacks
/// (``FolderRename/Lacking``), and a mode every file made there gets whatever was asked (`chmod` accepted and
/// ignored, as on exFAT, vfat and CIFS mounts with a fixed file mode).
///
/// Production never registers a folder: ``personality(at:)`` is then one relaxed atomic load.
public enum SimulatedFolders {
    public struct Personality: Sendable, Hashable {
        public var lacking: FolderRename.Lacking
        /// The mode of every file and folder made there; nil: modes are kept.
        public var fixedMode: mode_t?

        public init(lacking: FolderRename.Lacking = [], fixedMode: mode_t? = nil) {
            self.lacking = lacking
            self.fixedMode = fixedMode
        }
    }

    /// How many folders are registered in the whole process: zero in production, so nothing else is looked up.
    private static let registered = Atomic<Int>(0)
    private static let folders = Mutex<[String: Personality]>([:])

    /// From now on, every path in the folder `root` (itself included) is on a filesystem of `personality`; nil (or a
    /// personality that changes nothing) takes the folder out again.
    public static func set(_ personality: Personality?, forFolder root: String) {
        folders.withLock { folders in
            let had = folders[root] != nil
            folders[root] = personality == Personality() ? nil : personality
            let has = folders[root] != nil
            if had != has { registered.add(has ? 1 : -1, ordering: .relaxed) }
        }
    }

    /// The personality a test gave the folder holding `path`; nil for every path of an unregistered folder.
    @inline(__always)
    package static func personality(at path: String) -> Personality? {
        guard registered.load(ordering: .relaxed) != 0 else { return nil }
        return folders.withLock { folders in
            folders.first { path == $0.key || path.hasPrefix($0.key + "/") }?.value
        }
    }
}
