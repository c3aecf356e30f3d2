import Foundation

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
