import Foundation

/// A notes folder and the places notesync keeps its own files in it (`.notesync/`, never synced).
public struct NotesFolder: Sendable, Hashable {
    public let root: String

    public init(root: String) {
        let absolute = root.hasPrefix("/") ? root : FileManager.default.currentDirectoryPath + "/" + root
        self.root = (absolute as NSString).standardizingPath
    }

    public var stateDirectory: String { root + "/" + IgnoreRules.stateDirectoryName }
    public var database: String { stateDirectory + "/state.sqlite" }
    public var lockFile: String { stateDirectory + "/lock" }
    public var trash: String { stateDirectory + "/trash" }
    /// Where versions wait on their way into and out of notes (``NoteApplier``): on the notes folder's filesystem,
    /// out of reach of what the user does to their notes.
    public var staging: String { stateDirectory + "/staging" }
    public var statusFile: String { stateDirectory + "/status.json" }
    public var ignoreFile: String { root + "/" + IgnoreRules.fileName }

    public var isInitialized: Bool { FileIO.lstatInfo(database) != nil }

    /// The notes folder enclosing `directory` (as git finds its repository), or `nil`.
    public static func enclosing(_ directory: String) -> NotesFolder? {
        var current = NotesFolder(root: directory).root
        while true {
            let candidate = NotesFolder(root: current)
            if candidate.isInitialized { return candidate }
            if current == "/" || current.isEmpty { return nil }
            current = FileIO.parent(of: current)
        }
    }

    /// Reads `.notesyncignore` (if any) on top of the built-in rules.
    public func ignoreRules() throws -> IgnoreRules {
        guard let data = try FileIO.read(ignoreFile, limit: 1 << 20) else { return try IgnoreRules(userRules: nil) }
        guard let text = String(data: data, encoding: .utf8) else {
            throw NoteSyncError(.usage, path: ignoreFile, "is not valid UTF-8", fix: "save it as UTF-8 text")
        }
        do { return try IgnoreRules(userRules: text, source: ignoreFile) } catch let error as IgnoreRules.InvalidPattern {
            throw NoteSyncError(.usage, path: ignoreFile, "line \(error.line): invalid pattern: \(error.problem)", fix: error.fix)
        }
    }
}

/// One sync or agent per notes folder: an exclusive `flock` on `.notesync/lock`, released when the process ends.
public final class FolderLock: Sendable {
    private let fd: Int32

    public init(_ folder: NotesFolder, waitSeconds: Double = 0) throws {
        fd = open(folder.lockFile, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw NoteSyncError.posix("open", path: folder.lockFile, errno: errno) }
        let deadline = Date().addingTimeInterval(waitSeconds)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, Date() < deadline else {
                close(fd)
                throw NoteSyncError(.locked, path: folder.root, "another notesync (sync or agent) is working on this folder",
                                    fix: "wait for it to finish, or stop the agent (`systemctl --user stop notesync`)")
            }
            usleep(50_000)
        }
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
