import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// A notes folder and the places notesync keeps its own files in it (`.notesync/`, never synced).
///
/// Every name notesync makes in a notes folder: `.notesync/` (``stateDirectory``) with the state database
/// (``database``, and beside it `-wal`, `-shm`, `device-id` and a `.replaced` notice: ``LocalState``), the ``lockFile``,
/// ``trash`` (and `trash.unchecked/`: ``NoteApplier``), ``staging``, ``uploads``, ``statusFile``, ``agentSocket``,
/// ``massDeleteApproval`` and ``gitignore``; and, anywhere, temp files named `.notesync-tmp-…`
/// (``ReservedNames/agentTempPrefix``, ``AgentTempName``) and conflict copies (``ConflictCopyName``). The ignore rules
/// always leave `.notesync` and the temp prefix out.
public struct NotesFolder: Sendable, Hashable {
    public let root: String

    public init(root: String) {
        self.root = FileIO.absolutePath(root)
    }

    public var stateDirectory: String { root + "/" + ReservedNames.stateDirectoryName }
    public var database: String { stateDirectory + "/state.sqlite" }
    public var lockFile: String { stateDirectory + "/lock" }
    /// The key of an encrypted server (``VaultKeyFile``), mode 600.
    public var vaultKeyFile: String { stateDirectory + "/vault-key" }
    public var trash: String { stateDirectory + "/trash" }
    /// Where versions wait on their way into and out of notes (``NoteApplier``): on the notes folder's filesystem,
    /// out of reach of what the user does to their notes.
    public var staging: String { stateDirectory + "/staging" }
    /// Where a big text's asset for an object store is staged before it is sent (``BigText``): files of this device
    /// only, removed once sent; one a killed sync left is removed by the next that stages one.
    public var uploads: String { stateDirectory + "/uploads" }
    public var statusFile: String { stateDirectory + "/status.json" }
    /// The running agent's Unix socket: the command line's door to it (``AgentSocket``).
    public var agentSocket: String { stateDirectory + "/agent.sock" }
    /// Left by `notesync sync --allow-mass-delete` for a running agent: its next sync lets the held deletes
    /// through, then removes it.
    public var massDeleteApproval: String { stateDirectory + "/mass-delete.approved" }
    public var ignoreFile: String { root + "/" + IgnoreRules.fileName }

    public var isInitialized: Bool { FileIO.lstatInfo(database) != nil }

    /// `.notesync/.gitignore`: git (or any tool that reads it) in the notes folder leaves notesync's state alone.
    public var gitignore: String { stateDirectory + "/.gitignore" }

    /// Writes ``gitignore`` if it is missing (one `lstat` otherwise).
    public func keepOtherToolsOut() {
        guard FileIO.lstatInfo(gitignore) == nil else { return }
        try? FileIO.createAndSync(gitignore, Data("# notesync's own state: never commit it\n*\n".utf8))
    }

    /// Makes ``stateDirectory`` mode 0700 if it grants anything to group or others (one `lstat` otherwise): it holds
    /// the state database, versions on their way in and out of notes (staging), deleted notes (trash) and an
    /// encrypted server's key, none of them for other users, whatever the notes' own modes. Best effort: a
    /// filesystem without modes keeps what it has.
    public func keepStatePrivate() {
        guard let info = FileIO.lstatInfo(stateDirectory), (info.st_mode & S_IFMT) == S_IFDIR,
            info.st_mode & 0o077 != 0, SimulatedFolders.personality(at: stateDirectory)?.fixedMode == nil
        else { return }
        _ = chmod(stateDirectory, Self.stateDirectoryMode)
    }

    /// Whether the notes folder's filesystem takes two names that differ only in case for one file (vfat, exFAT,
    /// CIFS, a casefold ext4 folder, a case-folding FUSE): a file made in ``stateDirectory`` under a mixed-case name is
    /// looked up in lower case, then removed. Nil when the probe file cannot be made (no state folder, read-only).
    /// The answer is the folder's own (a casefold ext4 sets it per folder): the state folder is in the notes folder.
    public func foldsCase() -> Bool? {
        let token = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let made = stateDirectory + "/" + ReservedNames.agentTempPrefix + "Case-Probe-" + token
        let looked = stateDirectory + "/" + ReservedNames.agentTempPrefix + "case-probe-" + token
        let fd = open(made, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        close(fd)
        defer { unlink(made) }
        return FileIO.lstatInfo(looked) != nil
    }

    /// The state folder's mode: its owner's only.
    public static let stateDirectoryMode: mode_t = 0o700

    /// A notes folder inside this one (its `.notesync/state.sqlite`), if there is one: walks the folder, skipping
    /// what notesync never syncs (other tools' folders such as `.git`), as the scanner walks it: into mounted
    /// filesystems, never through a symlink (the root's own excepted), not into folders whose names are not UTF-8.
    /// `progress` counts the names walked.
    public func nestedNotesFolder(progress: SyncProgress? = nil) -> NotesFolder? {
        // Folders only, from `readdir`'s kinds: no `stat` of each note, which Foundation's enumerator makes.
        var stack = [""]
        while let relative = stack.popLast() {
            let directory = relative.isEmpty ? root : root + "/" + relative
            guard let listed = try? FileIO.listSubdirectories(directory, followingLink: relative.isEmpty) else { continue }
            progress?.add(listed.entries)
            for name in listed.names {
                if name == ReservedNames.stateDirectoryName {
                    let inner = NotesFolder(root: directory)
                    if !relative.isEmpty, inner.isInitialized { return inner }
                } else if ![".git", ".hg", ".svn", "node_modules"].contains(name) {
                    stack.append(relative.isEmpty ? name : relative + "/" + name)
                }
            }
        }
        return nil
    }

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

    /// A lock refused closes what it opened before `fd` is set: a class whose initializer throws once its stored
    /// properties are set is deinitialized, and `deinit` would close the descriptor a second time, whatever another
    /// thread had opened under that number meanwhile (an HTTP client's socket, a database file).
    public init(_ folder: NotesFolder, waitSeconds: Double = 0) throws {
        let fd = open(folder.lockFile, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw NoteSyncError.posix("open", path: folder.lockFile, errno: errno) }
        let deadline = Date().addingTimeInterval(waitSeconds)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, Date() < deadline else {
                close(fd)
                throw NoteSyncError(
                    .locked, path: folder.root, "another notesync (sync or agent) is working on this folder",
                    fix: "wait for it to finish, or stop the agent (`systemctl --user stop notesync`)")
            }
            usleep(50_000)
        }
        self.fd = fd
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
