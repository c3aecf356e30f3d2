import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport

/// What ``InotifyWatcher`` reports, copied out of the kernel's `inotify_event` into a plain value.
///
/// Events are hints, not facts: editors save through renames and temp files (docs/agent.md, "Settling"), so the
/// consumer settles each path and decides by `lstat` and hashing. `root` is the id ``InotifyWatcher/addRoot(_:recursive:ignore:)``
/// returned; `path` is relative to that root, `/`-separated, valid UTF-8, and `""` for the root itself.
public enum WatchEvent: Sendable, Hashable {
    /// A file (or symlink, FIFO…) may have changed or appeared: written, closed after writing, attributes
    /// changed, created, moved in, or found by the scan of a directory that just appeared.
    case changed(root: Int, path: String)
    /// A file was deleted or moved away; the consumer confirms with `lstat` after settling.
    case removed(root: Int, path: String)
    /// A directory was created, moved in or renamed to `path`, and it is watched. The contents of one created or
    /// moved in are reported after it (`changed` for each file, `directoryAppeared` for each subdirectory); those of
    /// one renamed within its root are not (they were watched all along): everything under `path` may have changed
    /// name.
    case directoryAppeared(root: Int, path: String)
    /// A directory was deleted, moved out of the tree or renamed away: everything under `path` may be gone.
    /// `path == ""` means the root itself went away; that root reports nothing more.
    case directoryRemoved(root: Int, path: String)
    /// A file or directory was renamed within one root (an `IN_MOVED_FROM` and an `IN_MOVED_TO` with one cookie,
    /// neither name ignored). Comes after the old name's event (`removed` or `directoryRemoved`) and before the new
    /// name's (`changed` or `directoryAppeared`), so that however a consumer batches the stream, it never holds the
    /// new name without knowing of the rename; a consumer that does not care about renames may skip it.
    case renamed(root: Int, from: String, to: String)
    /// The kernel queue overflowed (or the consumer fell too far behind) and events were lost. The watches
    /// have been repaired by the time this arrives; the consumer must rescan every root.
    case overflow
    /// `fs.inotify.max_user_watches` is exhausted: some directories are not watched. The message says how to
    /// raise the limit. The watcher keeps the watches it has; the consumer must fall back to periodic scans.
    case watchLimitReached(String)
    /// Reading inotify events failed. Last event: the stream finishes right after it.
    case failed(String)
}
