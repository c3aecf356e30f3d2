import CInotifyTools
import Foundation
import Logging
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport
import Synchronization

extension InotifyWatcher {
    /// The watcher thread: owns libinotifytools, the inotify descriptor and the wd → (root, path) map.
    ///
    /// Not Sendable on purpose: one instance is made and dropped inside the thread's closure, so all of
    /// this state is confined to that thread. Callers reach it only through ``InotifyWatcher/control``.
    final class Loop {
        let watcher: InotifyWatcher
        package var logger: Logger { watcher.logger }
        package var initialized = false
        package var descriptor: Int32 = -1
        package var roots: [Int: Root] = [:]
        /// Every watched directory by wd, and the reverse index.
        package var directories: [Int32: Directory] = [:]
        var descriptors: [Location: Int32] = [:]
        /// A directory's `IN_MOVED_FROM`, held until the next event shows whether its `IN_MOVED_TO` follows.
        var pendingMove: PendingMove?
        /// A file's `IN_MOVED_FROM` (not ignored), until the next event: its `IN_MOVED_TO` makes it a rename.
        var fileMoveFrom: PendingMove?
        var limitReported = false
        /// errno of the last failed `inotify_add_watch`.
        var lastWatchError: Int32 = 0
        /// Set when ``events`` was full and dropped an event: the consumer is owed an overflow.
        var owedOverflow = false
        /// Roots whose return could not be watched, with the directory (device, inode) found then: not tried again,
        /// nor logged again, until another directory is at the path (``checkRoots()``).
        var revivalFailed: [Int: (UInt64, UInt64)] = [:]
        /// Live roots whose path did not read at the last check: dropped at the second miss in a row (one failed
        /// `lstat` on a flaky mount is no root gone).
        var rootMisses: Set<Int> = []

        struct Root {
            package let id: Int
            package let path: String
            let recursive: Bool
            package let ignore: @Sendable (String, Bool) -> Bool
            var alive = true

            package func absolute(_ relative: String) -> String {
                relative.isEmpty ? path : (path == "/" ? "/" : path + "/") + relative
            }
        }

        /// A directory in a root. Compared byte for byte: two names that differ only in Unicode
        /// normalization are different directories on Linux, though Swift's `String ==` calls them equal.
        struct Location: Hashable {
            package let root: Int
            package let path: String

            package static func == (lhs: Location, rhs: Location) -> Bool {
                lhs.root == rhs.root && lhs.path.utf8.elementsEqual(rhs.path.utf8)
            }

            package func hash(into hasher: inout Hasher) {
                hasher.combine(root)
                for byte in path.utf8 { hasher.combine(byte) }
            }

            /// Whether `self` is `ancestor` or lies under it.
            func isWithin(_ ancestor: Location) -> Bool {
                guard root == ancestor.root else { return false }
                if ancestor.path.isEmpty { return true }
                var own = path.utf8.makeIterator()
                for byte in ancestor.path.utf8 {
                    guard own.next() == byte else { return false }
                }
                let next = own.next()
                return next == nil || next == UInt8(ascii: "/")
            }

            /// `self`'s path moved from under `old` to under `new`.
            package func moved(from old: Location, to new: Location) -> Location {
                Location(root: new.root, path: new.path + String(decoding: path.utf8.dropFirst(old.path.utf8.count), as: UTF8.self))
            }
        }

        struct Directory {
            package var location: Location
            package let device: UInt64
            package let inode: UInt64
        }

        struct PendingMove {
            package let cookie: UInt32
            package let location: Location
        }

        /// An `inotify_event` copied out of libinotifytools' static buffer before the next call reuses it.
        struct RawEvent {
            package enum Name {
                case none
                case valid(String)
                case invalid
            }
            let wd: Int32
            package let mask: UInt32
            package let cookie: UInt32
            package let name: Name

            package init(_ event: UnsafePointer<inotify_event>) {
                wd = event.pointee.wd
                mask = event.pointee.mask
                cookie = event.pointee.cookie
                let length = Int(event.pointee.len)
                guard length > 0 else {
                    name = .none
                    return
                }
                // `name` is a flexible array member, which Swift does not import; it is NUL-padded to `len`.
                let start = UnsafeRawPointer(event).advanced(by: MemoryLayout<inotify_event>.size)
                let bytes = UnsafeBufferPointer(start: start.assumingMemoryBound(to: UInt8.self), count: length)
                let used = UnsafeBufferPointer(rebasing: bytes[..<(bytes.firstIndex(of: 0) ?? length)])
                name = String(validating: used, as: UTF8.self).map(Name.valid) ?? .invalid
            }
        }

        static let rootMask = directoryMask | UInt32(IN_DELETE_SELF | IN_MOVE_SELF)
        /// Subdirectories leave out `IN_DELETE_SELF`/`IN_MOVE_SELF`: their parent reports those as
        /// `IN_DELETE`/`IN_MOVED_FROM` with a name, and the kernel still sends `IN_IGNORED` when it drops them.
        static let directoryMask = UInt32(
            IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM
                | IN_MOVED_TO | IN_EXCL_UNLINK | IN_ONLYDIR | IN_DONT_FOLLOW)

        package init(watcher: InotifyWatcher) {
            self.watcher = watcher
        }

        // MARK: lifecycle

        package func run(started: Reply) {
            if let error = initialize() {
                shutDown()
                started.finish(error)
                return
            }
            var startError: NoteSyncError?
            for request in takeQueuedRequests() {
                let error = addRoot(request)
                if let reply = request.reply {
                    reply.finish(error)
                } else if startError == nil {
                    startError = error
                }
            }
            if let startError {
                shutDown()
                started.finish(startError)
                return
            }
            started.finish(nil)
            readEvents()
            shutDown()
        }

        /// `inotifytools_initialize()`, then finds the descriptor it opened (the library has no getter): the one
        /// `anon_inode:inotify` entry of `/proc/self/fd` that was not there before.
        package func initialize() -> NoteSyncError? {
            let before = Self.inotifyDescriptors()
            guard inotifytools_initialize() != 0 else {
                let code = inotifytools_error()
                return NoteSyncError(
                    .io, "inotify_init failed",
                    fix: code == EMFILE
                        ? "too many inotify instances for this user: raise fs.inotify.max_user_instances (sudo sysctl fs.inotify.max_user_instances=512) or stop other file watchers"
                        : nil,
                    errno: code)
            }
            initialized = true
            let opened = Self.inotifyDescriptors().subtracting(before)
            guard opened.count == 1, let descriptor = opened.first else {
                return NoteSyncError(
                    .io,
                    "cannot find the inotify descriptor libinotifytools opened (\(opened.count) new inotify descriptors in /proc/self/fd)",
                    fix: "make sure nothing else in the process creates inotify instances while the watcher starts")
            }
            // libinotifytools waits with select(): a descriptor past FD_SETSIZE would overflow its fd_set.
            guard descriptor < FD_SETSIZE else {
                return NoteSyncError(
                    .io, "the inotify descriptor is \(descriptor), too high for libinotifytools' select()",
                    fix: "start the watcher before the process opens over \(FD_SETSIZE) files")
            }
            // inotify_init() without IN_CLOEXEC: do not leak it into child processes.
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            self.descriptor = descriptor
            watcher.control.withLock { $0.descriptor = descriptor }
            return nil
        }

        static func inotifyDescriptors() -> Set<Int32> {
            guard let entries = try? FileIO.listEntries("/proc/self/fd") else { return [] }
            var found: Set<Int32> = []
            var target = [CChar](repeating: 0, count: 64)
            for entry in entries {
                guard let fd = Int32(entry.name) else { continue }
                let length = readlink("/proc/self/fd/\(fd)", &target, target.count - 1)
                guard length > 0 else { continue }
                let text = target[..<length].withUnsafeBufferPointer { buffer in
                    String(decoding: UnsafeRawBufferPointer(buffer), as: UTF8.self)
                }
                if text == "anon_inode:inotify" { found.insert(fd) }
            }
            return found
        }

        /// Releases libinotifytools and hands the process slot back, then finishes the stream.
        ///
        /// `inotifytools_cleanup()` does not reset `next_events`' static buffer: unread events left there would be
        /// returned by the next watcher's first reads, with wds that mean other directories in the new
        /// instance. So first remove every watch and read until the `IN_IGNORED` of the last one removed (the
        /// last event the kernel can queue), or until a read times out.
        func shutDown() {
            // The drain needs a descriptor select() can take; with none, nothing was read and nothing is buffered.
            if initialized && descriptor >= 0 {
                var last: Int32?
                for wd in directories.keys {
                    if inotify_rm_watch(descriptor, wd) == 0 { last = wd }
                }
                directories.removeAll()
                descriptors.removeAll()
                while let event = inotifytools_next_event(1) {
                    if let last, event.pointee.wd == last, event.pointee.mask & UInt32(IN_IGNORED) != 0 { break }
                }
            }
            if initialized {
                inotifytools_cleanup()
                initialized = false
            }
            let leftovers = watcher.control.withLock { state -> [RootRequest] in
                state.phase = .stopped
                state.descriptor = nil
                state.paused = false
                defer { state.requests.removeAll() }
                return state.requests
            }
            InotifyWatcher.processSlot.withLock { $0 = false }
            for request in leftovers {
                request.reply?.finish(
                    NoteSyncError(
                        .usage, path: request.path, "cannot be watched: the watcher has stopped",
                        fix: "create a new InotifyWatcher"))
            }
            watcher.continuation.finish()
        }

        // MARK: the read loop

        func readEvents() {
            var handled = 0
            while true {
                guard takeRequests() else { return }
                guard let event = inotifytools_next_event(1) else {
                    let code = inotifytools_error()
                    if code == 0 {
                        settlePendingMove()
                        if owedOverflow && offer(.overflow) { owedOverflow = false }
                        checkRoots()
                        continue
                    }
                    if code == EINTR { continue }
                    let reason = code > 0 ? String(cString: strerror(code)) : "error \(code)"
                    logger.error("watch.read.failed", metadata: ["errno": "\(code)"])
                    emit(.failed("reading inotify events failed: \(reason)"))
                    return
                }
                handle(RawEvent(event))
                handled += 1
                if let limit = watcher.stopAfterEventsForTesting, handled >= limit { return }
            }
        }

        func takeQueuedRequests() -> [RootRequest] {
            watcher.control.withLock { state in
                defer { state.requests.removeAll() }
                return state.requests
            }
        }

        /// Handles stop, pause and new roots between reads; false once stop was asked for.
        func takeRequests() -> Bool {
            for request in takeQueuedRequests() { request.reply?.finish(addRoot(request)) }
            var (stop, pause) = watcher.control.withLock { state in
                if state.pauseRequested && !state.stopRequested { state.paused = true }
                return (state.stopRequested, state.pauseRequested)
            }
            while pause && !stop {
                usleep(10_000)
                (stop, pause) = watcher.control.withLock { state in
                    if !state.pauseRequested || state.stopRequested { state.paused = false }
                    return (state.stopRequested, state.pauseRequested)
                }
            }
            return !stop
        }

        func addRoot(_ request: RootRequest) -> NoteSyncError? {
            let root = Root(id: request.id, path: request.path, recursive: request.recursive, ignore: request.ignore)
            guard let info = FileIO.lstatInfo(root.path), (info.st_mode & S_IFMT) == S_IFDIR else {
                return NoteSyncError(
                    .io, path: root.path, "cannot be watched: it is gone or no longer a directory",
                    fix: "create the directory or correct the path")
            }
            roots[root.id] = root
            if ensureWatched(root, "", info) == nil && lastWatchError != ENOSPC {
                roots[root.id] = nil
                return NoteSyncError(
                    .io, path: root.path, "cannot be watched: inotify_add_watch failed",
                    fix: "check that the directory exists and is readable", errno: lastWatchError)
            }
            if root.recursive { walk(root, "", announce: false) }
            logger.debug("watch.root.added", metadata: ["watch.root": "\(root.id)", "watch.path": "\(root.path)"])
            return nil
        }

        // MARK: events

        package func handle(_ event: RawEvent) {
            let mask = event.mask
            if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                settlePendingMove()
                repairAfterOverflow()
                emit(.overflow)
                return
            }
            if let pending = pendingMove, !(mask & UInt32(IN_MOVED_TO) != 0 && event.cookie == pending.cookie) {
                settlePendingMove()
            }
            // The kernel queues a rename's two events together: anything else between them means no rename here.
            let movedFrom = fileMoveFrom
            fileMoveFrom = nil
            if mask & UInt32(IN_IGNORED) != 0 {
                kernelDropped(event.wd)
                return
            }
            guard let directory = directories[event.wd], let root = roots[directory.location.root], root.alive else { return }
            if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT) != 0 {
                if directory.location.path.isEmpty { rootGone(root) }
                return
            }
            let name: String
            switch event.name {
            case .none:
                return
            case .invalid:
                // The scanner skips such names and warns on its next pass; nothing to sync until renamed.
                logger.debug("watch.name.invalid", metadata: ["watch.path": "\(directory.location.path)"])
                return
            case .valid(let valid):
                name = valid
            }
            let path = directory.location.path.isEmpty ? name : directory.location.path + "/" + name
            let isDirectory = mask & UInt32(IN_ISDIR) != 0
            let ignored = root.ignore(path, isDirectory)
            if isDirectory {
                directoryEvent(root, path, mask: mask, cookie: event.cookie, ignored: ignored)
            } else if !ignored {
                if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 {
                    emit(.removed(root: root.id, path: path))
                    if mask & UInt32(IN_MOVED_FROM) != 0 {
                        fileMoveFrom = PendingMove(cookie: event.cookie, location: Location(root: root.id, path: path))
                    }
                } else if mask & UInt32(IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_MOVED_TO) != 0 {
                    // The rename before the new name's event: a consumer that takes events in batches learns of it
                    // no later than of the new name (``WatchEvent/renamed(root:from:to:)``).
                    if mask & UInt32(IN_MOVED_TO) != 0, let from = movedFrom, from.cookie == event.cookie,
                        from.location.root == root.id
                    {
                        emit(.renamed(root: root.id, from: from.location.path, to: path))
                    }
                    emit(.changed(root: root.id, path: path))
                }
            }
        }

        func directoryEvent(_ root: Root, _ path: String, mask: UInt32, cookie: UInt32, ignored: Bool) {
            let location = Location(root: root.id, path: path)
            if mask & UInt32(IN_CREATE) != 0 {
                if !ignored { arrived(root, path) }
            } else if mask & UInt32(IN_MOVED_TO) != 0 {
                if let pending = pendingMove, pending.cookie == cookie {
                    pendingMove = nil
                    if !ignored && pending.location.root == root.id {
                        // The watches stay, their paths rewritten, so nothing under the directory went unseen: it is
                        // walked to check the watches, not announced entry by entry (the new name's one event covers
                        // its subtree, however big). The rename comes before the new name, so that no consumer's
                        // batch holds the new name without it.
                        renameSubtree(from: pending.location, to: location)
                        emit(.directoryRemoved(root: root.id, path: pending.location.path))
                        emit(.renamed(root: root.id, from: pending.location.path, to: path))
                        emit(.directoryAppeared(root: root.id, path: path))
                        if root.recursive { walk(root, path, announce: false) }
                        return
                    } else {
                        movedOut(pending)
                    }
                }
                if !ignored { arrived(root, path) }
            } else if mask & UInt32(IN_MOVED_FROM) != 0 {
                if !ignored { pendingMove = PendingMove(cookie: cookie, location: location) }
            } else if mask & UInt32(IN_DELETE) != 0 {
                if !ignored {
                    forgetSubtree(location, removeWatches: true)
                    emit(.directoryRemoved(root: root.id, path: path))
                }
            }
        }

        /// A directory was created or moved in (or renamed within the root): watch it and everything under it,
        /// *then* list it, so that whatever was written before the watches existed is reported too.
        func arrived(_ root: Root, _ path: String) {
            emit(.directoryAppeared(root: root.id, path: path))
            if root.recursive { walk(root, path, announce: true) }
        }

        /// No `IN_MOVED_TO` followed: the directory left the watched trees. Its watches would keep reporting
        /// events under a path that is no longer there.
        func settlePendingMove() {
            guard let pending = pendingMove else { return }
            pendingMove = nil
            movedOut(pending)
        }

        func movedOut(_ pending: PendingMove) {
            forgetSubtree(pending.location, removeWatches: true)
            emit(.directoryRemoved(root: pending.location.root, path: pending.location.path))
        }

        /// `IN_IGNORED`: the kernel dropped the watch (directory deleted, filesystem unmounted, or our own
        /// `inotify_rm_watch`, in which case the wd is already forgotten).
        func kernelDropped(_ wd: Int32) {
            guard let directory = directories[wd] else { return }
            if directory.location.path.isEmpty, let root = roots[directory.location.root], root.alive {
                rootGone(root)
                return
            }
            forget(wd)
        }

        /// Each root's path still names the directory watched, and a root that went is watched again once its path
        /// is a directory again: a server folder replaced by a copy (the watch followed the old one away, or went
        /// with it), a share mounted again. One `lstat` a root, in a second without events. A root watched again
        /// reports `directoryAppeared` at its top: whatever happened meanwhile is looked at.
        func checkRoots() {
            for root in roots.values {
                let info = FileIO.lstatInfo(root.path).flatMap { ($0.st_mode & S_IFMT) == S_IFDIR ? $0 : nil }
                if root.alive {
                    guard let wd = descriptors[Location(root: root.id, path: "")], let watched = directories[wd] else { continue }
                    if let info, watched.device == UInt64(info.st_dev) && watched.inode == UInt64(info.st_ino) {
                        rootMisses.remove(root.id)
                        continue
                    }
                    // Another directory there is gone at once; a path that did not read, at the second time.
                    if info == nil && rootMisses.insert(root.id).inserted { continue }
                    rootMisses.remove(root.id)
                    rootGone(root)
                }
                guard let info, var back = roots[root.id] else { continue }
                let found = (UInt64(info.st_dev), UInt64(info.st_ino))
                if let failed = revivalFailed[root.id], failed == found { continue }
                back.alive = true
                roots[root.id] = back
                guard ensureWatched(back, "", info) != nil else {
                    roots[root.id]?.alive = false
                    revivalFailed[root.id] = found
                    continue
                }
                revivalFailed[root.id] = nil
                if back.recursive { walk(back, "", announce: false) }
                logger.notice("watch.root.back", metadata: ["watch.root": "\(root.id)", "watch.path": "\(root.path)"])
                emit(.directoryAppeared(root: root.id, path: ""))
            }
        }

        func rootGone(_ root: Root) {
            roots[root.id]?.alive = false
            forgetSubtree(Location(root: root.id, path: ""), removeWatches: true)
            logger.warning("watch.root.gone", metadata: ["watch.root": "\(root.id)", "watch.path": "\(root.path)"])
            emit(.directoryRemoved(root: root.id, path: ""))
        }

        /// After `IN_Q_OVERFLOW` renames may have been lost, so paths in the map may be wrong and new directories
        /// unwatched: walk every root again. `inotify_add_watch` on a watched inode returns its existing wd,
        /// which puts renamed directories back at their real paths; watches not met on the walk are dropped.
        func repairAfterOverflow() {
            for root in roots.values where root.alive {
                guard let info = FileIO.lstatInfo(root.path), (info.st_mode & S_IFMT) == S_IFDIR else {
                    rootGone(root)
                    continue
                }
                var visited: Set<Int32> = []
                if root.recursive {
                    walk(root, "", announce: false, visited: &visited)
                } else if let wd = ensureWatched(root, "", info) {
                    visited.insert(wd)
                }
                for (wd, directory) in directories where directory.location.root == root.id && !visited.contains(wd) {
                    forget(wd)
                    inotify_rm_watch(descriptor, wd)
                }
            }
        }

        // MARK: the watch map

        package func walk(_ root: Root, _ top: String, announce: Bool) {
            var visited: Set<Int32> = []
            walk(root, top, announce: announce, visited: &visited)
        }

        /// Watches `top` and the directories under it (lstat: symlinks are never followed; ignored directories
        /// are skipped), and with `announce` reports every entry found after its directory's watch exists.
        package func walk(_ root: Root, _ top: String, announce: Bool, visited: inout Set<Int32>) {
            var stack = [top]
            while let relative = stack.popLast() {
                let absolute = root.absolute(relative)
                guard let info = FileIO.lstatInfo(absolute), (info.st_mode & S_IFMT) == S_IFDIR else { continue }
                if let wd = ensureWatched(root, relative, info) { visited.insert(wd) }
                let entries: [FileIO.DirectoryEntry]
                do {
                    guard let listed = try FileIO.listEntries(absolute) else { continue }
                    entries = listed
                } catch {
                    logger.warning("watch.list.failed", metadata: ["watch.path": "\(absolute)", "detail": "\(error)"])
                    continue
                }
                var subdirectories: [String] = []
                for entry in entries.sorted(by: { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }) where entry.isValidUTF8 {
                    let path = relative.isEmpty ? entry.name : relative + "/" + entry.name
                    guard let child = FileIO.lstatInfo(root.absolute(path)) else { continue }
                    let isDirectory = (child.st_mode & S_IFMT) == S_IFDIR
                    if root.ignore(path, isDirectory) { continue }
                    if isDirectory {
                        if announce { emit(.directoryAppeared(root: root.id, path: path)) }
                        subdirectories.append(path)
                    } else if announce {
                        emit(.changed(root: root.id, path: path))
                    }
                }
                stack.append(contentsOf: subdirectories.reversed())
            }
        }

        /// Makes sure the directory `info` describes, at `relative`, is watched and mapped there; its wd, or nil
        /// when it cannot be watched (gone, not permitted, or the watch limit).
        @discardableResult
        func ensureWatched(_ root: Root, _ relative: String, _ info: stat) -> Int32? {
            let location = Location(root: root.id, path: relative)
            let device = UInt64(info.st_dev)
            let inode = UInt64(info.st_ino)
            if let wd = descriptors[location], let known = directories[wd], known.device == device, known.inode == inode {
                return wd
            }
            if let limit = watcher.watchLimitForTesting, directories.count >= limit {
                lastWatchError = ENOSPC
                reportWatchLimit()
                return nil
            }
            let mask = relative.isEmpty ? Self.rootMask : Self.directoryMask
            let wd = inotify_add_watch(descriptor, root.absolute(relative), mask)
            guard wd >= 0 else {
                let code = errno
                lastWatchError = code
                if code == ENOSPC {
                    reportWatchLimit()
                } else if code != ENOENT && code != ENOTDIR {
                    logger.warning("watch.add.failed", metadata: ["watch.path": "\(root.absolute(relative))", "errno": "\(code)"])
                }
                return nil
            }
            if let stale = descriptors[location], stale != wd {
                // Another directory used to be here and its removal is still queued: what we mapped under it is stale.
                forgetSubtree(location, removeWatches: true, keeping: wd)
            }
            if let moved = directories[wd], moved.location != location, descriptors[moved.location] == wd {
                // The kernel has one watch per inode: this directory was mapped elsewhere (a rename not read yet).
                descriptors[moved.location] = nil
            }
            directories[wd] = Directory(location: location, device: device, inode: inode)
            descriptors[location] = wd
            return wd
        }

        package func forget(_ wd: Int32) {
            guard let directory = directories.removeValue(forKey: wd) else { return }
            if descriptors[directory.location] == wd { descriptors[directory.location] = nil }
        }

        /// Drops `location` and everything mapped under it; with `removeWatches` also from the kernel. A wd
        /// the kernel already dropped makes `inotify_rm_watch` fail with `EINVAL`, which is harmless and silent
        /// (unlike `inotifytools_remove_watch_by_wd`, which prints to stderr).
        func forgetSubtree(_ location: Location, removeWatches: Bool, keeping kept: Int32? = nil) {
            let doomed = directories.compactMap { wd, directory in directory.location.isWithin(location) ? wd : nil }
            for wd in doomed {
                forget(wd)
                if removeWatches && wd != kept { inotify_rm_watch(descriptor, wd) }
            }
        }

        /// A directory renamed within its root: the watches stay, the paths of the whole subtree change.
        func renameSubtree(from old: Location, to new: Location) {
            // A directory renamed over an empty one replaces it.
            forgetSubtree(new, removeWatches: true)
            let moving = directories.filter { $0.value.location.isWithin(old) }
            for (wd, directory) in moving where descriptors[directory.location] == wd {
                descriptors[directory.location] = nil
            }
            for (wd, directory) in moving {
                let location = directory.location.moved(from: old, to: new)
                directories[wd]?.location = location
                descriptors[location] = wd
            }
        }

        func reportWatchLimit() {
            guard !limitReported else { return }
            limitReported = true
            let limit = inotifytools_get_max_user_watches()
            logger.error("watch.limit.reached", metadata: ["watch.limit": "\(limit)"])
            emit(
                .watchLimitReached(
                    "the inotify watch limit (fs.inotify.max_user_watches = \(limit)) is reached, so some folders are not watched "
                        + "and their changes are found only by periodic scans. Raise it with `sudo sysctl fs.inotify.max_user_watches=524288` "
                        + "and keep it across reboots with `echo fs.inotify.max_user_watches=524288 | sudo tee /etc/sysctl.d/90-notesync.conf`, "
                        + "then restart notesync"))
        }

        // MARK: delivery

        package func emit(_ event: WatchEvent) {
            if owedOverflow {
                guard offer(.overflow) else { return }
                owedOverflow = false
            }
            if !offer(event) { owedOverflow = true }
        }

        /// Yields to the stream; false when the buffer was full and the event was dropped.
        func offer(_ event: WatchEvent) -> Bool {
            if case .dropped = watcher.continuation.yield(event) { return false }
            return true
        }
    }
}
