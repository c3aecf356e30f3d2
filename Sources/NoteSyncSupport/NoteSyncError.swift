import Foundation

/// The one user-facing error type: every message names the file involved and the fix.
///
/// Names that came from the server are escaped before they are put into a message, so a hostile
/// record name cannot drive the terminal.
public struct NoteSyncError: Error, Sendable, CustomStringConvertible, Equatable {
    /// What kind of failure this is; the CLI maps kinds to exit codes.
    public enum Kind: String, Sendable, Equatable {
        case usage
        case notAServer
        case serverNewerFormat
        case serverUnreachable
        case corrupt
        case io
        case unsupportedFilesystem
        case invalidName
        case notInitialized
        case locked
        case conflict
        case safetyStop
        /// The server at the path is not the one this notes folder syncs with: another server id, or a log that
        /// does not continue the one this device read (replaced, forked, restored from an older copy).
        case serverMismatch
        /// A slot of the log is empty while later ones are written: every device stops before it.
        case logGap
        /// An encrypted server's key: this device has none, or a passphrase does not open it (exit 1).
        case key
    }

    public let kind: Kind
    /// The file the error is about, already escaped for display.
    public let path: String?
    public let message: String
    public let fix: String?
    /// The errno behind the failure, when there was one.
    public let errno: Int32?

    public init(_ kind: Kind, path: String? = nil, _ message: String, fix: String? = nil, errno: Int32? = nil) {
        self.kind = kind
        self.path = path.map(DisplayName.escape)
        self.message = message
        self.fix = fix
        self.errno = errno
    }

    public var description: String {
        var text = ""
        if let path { text += "\(path): " }
        text += message
        if let errno { text += " (\(String(cString: strerror(errno))))" }
        if let fix { text += "\n  fix: \(fix)" }
        return text
    }

    /// An error for a failed system call on `path`, classifying errno.
    ///
    /// Only a path on a server (``ServerRoots``) can make the server unreachable: the same errno on a note or on
    /// the local state (a read-only or unmounted notes folder, a permission) is a local failure, not an offline
    /// server whose changes wait.
    package static func posix(_ call: String, path: String, errno code: Int32, fix: String? = nil) -> NoteSyncError {
        let kind: Kind = Errno.isUnreachable(code) && ServerRoots.contains(path) ? .serverUnreachable : .io
        return NoteSyncError(kind, path: path, "\(call) failed", fix: fix ?? defaultFix(code), errno: code)
    }

    /// The fix for errors that say the same whatever the call: a full or read-only filesystem.
    private static func defaultFix(_ code: Int32) -> String? {
        switch code {
        case ENOSPC, EDQUOT:
            return "free space on that filesystem (or raise the quota), then sync again; nothing is lost, changes wait until then"
        case EROFS:
            return "the filesystem is mounted read-only: remount it read-write; changes wait until then"
        default:
            return nil
        }
    }
}

/// Escapes a name for display: control characters, DEL, C1 controls and the line and paragraph separators become
/// `\u{XX}`, and a backslash is doubled (so an escape in the output is never a name's own text).
public enum DisplayName {
    /// A path as a POSIX shell reads it in a printed fix: quoted only when it has to be, escaped for display.
    public static func shellWord(_ word: String) -> String {
        let plain = word.unicodeScalars.allSatisfy {
            ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || "/._-+:@%=,".unicodeScalars.contains($0)
        }
        if plain && !word.isEmpty { return word }
        return "'" + escape(word).replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    public static func escape(_ text: String) -> String {
        // Nearly every name has nothing to escape: it is returned as it is, sharing its storage (a first sync's report
        // names every note, and a copy of each name would double what the names take).
        guard text.unicodeScalars.contains(where: { $0 == "\\" || isControl($0) }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                out += "\\\\"
            } else if isControl(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The scalars a name shows as `\u{XX}`: C0 and C1 controls, DEL, U+2028 and U+2029.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029: true
        default: false
        }
    }
}
