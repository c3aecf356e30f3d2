import Foundation
import Synchronization

/// Classification of errno values the sync engine treats specially.
enum Errno {
    /// Errors that mean the server cannot be reached now (network share gone, unmounted, stale, denied),
    /// as opposed to a bad file: the engine queues and retries instead of failing the note.
    static func isUnreachable(_ code: Int32) -> Bool {
        switch code {
        case ENOENT, EIO, ESTALE, EACCES, ETIMEDOUT, ENOTCONN, EHOSTDOWN, EHOSTUNREACH, ENETDOWN, ENETUNREACH,
            ECONNABORTED, ECONNRESET, ECONNREFUSED, ENODEV, ENXIO, EPERM, EROFS:
            return true
        default:
            return false
        }
    }
}

/// The server folders this process opened: an error on a path under one of them is the server's, any other is
/// local (``NoteSyncError/posix(_:path:errno:fix:)``).
package enum ServerRoots {
    private static let roots = Mutex<Set<String>>([])

    package static func register(_ root: String) {
        roots.withLock { _ = $0.insert(root.hasSuffix("/") ? root : root + "/") }
    }

    package static func contains(_ path: String) -> Bool {
        roots.withLock { roots in roots.contains { path.hasPrefix($0) || path + "/" == $0 } }
    }
}
