import CSyscalls
import Foundation
import Synchronization

/// Thin wrappers over the POSIX calls the engine needs, with errors that name the file.
///
/// Everything opens with `O_NOFOLLOW | O_CLOEXEC`: a symlink planted in the server or the notes folder
/// is never followed (`ELOOP`), and no descriptor leaks into child processes.
public enum FileIO {
    /// Whether the absolute, standardized paths `a` and `b` are one folder or one holds the other.
    public static func overlaps(_ a: String, _ b: String) -> Bool {
        a == b || a.hasPrefix(b + "/") || b.hasPrefix(a + "/")
    }

    /// `path` made absolute (relative to the current directory) and standardized: `.` and `..` components and
    /// doubled slashes resolved as text, symlinks left as they are.
    public static func absolutePath(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        return (absolute as NSString).standardizingPath
    }

    /// Reads a regular file whole; `nil` when it does not exist. Refuses symlinks and non-regular files.
    public static func read(_ path: String, limit: Int = 1 << 31) throws -> Data? {
        guard let (fd, size) = try openRegularFile(path, limit: limit) else { return nil }
        defer { close(fd) }
        return try readAll(fd: fd, path: path, sizeHint: size)
    }

    /// A regular file a piece of up to `pieceBytes` at a time, in order, from one opening of it: `body` is given each
    /// piece until it returns false. True when the file was read to its end, false when `body` stopped (or the file
    /// grew past `limit` while read), nil when it does not exist. Refuses what ``read(_:limit:)`` refuses.
    public static func readPieces(
        _ path: String, limit: Int, pieceBytes: Int, _ body: (Data) throws -> Bool
    ) throws -> Bool? {
        guard let (fd, size) = try openRegularFile(path, limit: limit) else { return nil }
        defer { close(fd) }
        var total = 0
        while true {
            // What `fstat` said is left, and a byte more: a file read to its end ends a piece short of its room.
            let room = min(pieceBytes, max(size - total, 0) + 1)
            var piece = zeroedData(count: room)
            var filled = 0
            try piece.withUnsafeMutableBytes { buffer in
                while filled < room {
                    let got = Glibc.read(fd, buffer.baseAddress! + filled, room - filled)
                    if got < 0 {
                        if errno == EINTR { continue }
                        throw NoteSyncError.posix("read", path: path, errno: errno)
                    }
                    if got == 0 { break }
                    filled += got
                }
            }
            if filled == 0 { return true }
            if filled < room { piece.count = filled }
            total += filled
            if total > limit { return false }
            guard try body(piece) else { return false }
            if filled < room { return true }
        }
    }

    /// `length` bytes of a regular file from `offset` (fewer when it ends first); nil when it does not exist.
    /// Refuses symlinks and non-regular files.
    public static func readRange(_ path: String, offset: Int64, length: Int) throws -> Data? {
        guard let (fd, info) = try openRegularFile(path) else { return nil }
        defer { close(fd) }
        let wanted = max(0, min(Int64(length), Int64(info.st_size) - offset))
        var data = zeroedData(count: Int(wanted))
        var done = 0
        try data.withUnsafeMutableBytes { buffer in
            while done < buffer.count {
                let count = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
                if count < 0 {
                    if errno == EINTR { continue }
                    throw NoteSyncError.posix("pread", path: path, errno: errno)
                }
                if count == 0 { break }
                done += count
            }
        }
        if done < data.count { data.count = done }
        return data
    }

    /// ``openRegularFile(_:)``, with the file's size, refused as corrupt when it is over `limit`.
    static func openRegularFile(_ path: String, limit: Int) throws -> (Int32, size: Int)? {
        guard let (fd, info) = try openRegularFile(path) else { return nil }
        let size = Int(info.st_size)
        guard size <= limit else {
            close(fd)
            throw NoteSyncError(
                .corrupt, path: path, "is \(size) bytes, over the limit of \(limit)",
                fix: "move it out of the way")
        }
        return (fd, size)
    }

    /// Opens a regular file to read it, with what `fstat` says of it; nil when it does not exist. Refuses links and
    /// anything that is not a regular file (the descriptor is closed then).
    static func openRegularFile(_ path: String) throws -> (Int32, stat)? {
        guard let fd = try openForReading(path) else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw NoteSyncError.posix("fstat", path: path, errno: code)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw NoteSyncError(.corrupt, path: path, "is not a regular file", fix: "move it out of the way")
        }
        return (fd, info)
    }

    /// Opens a file to read it, refusing links (`nil` when it does not exist).
    package static func openForReading(_ path: String) throws -> Int32? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd >= 0 { return fd }
        let code = errno
        if code == ENOENT { return nil }
        if code == ELOOP {
            throw NoteSyncError(
                .corrupt, path: path, "is a symbolic link; notesync never follows links",
                fix: "remove the link or replace it with a regular file")
        }
        throw NoteSyncError.posix("open", path: path, errno: code)
    }

    /// Reads an open regular file with `body` and returns what it made and the fingerprint the file had
    /// throughout, reading again (from the start) if the file changed meanwhile: a note being saved while it is
    /// read. Stat calls on the descriptor, not the path: no path lookups. A save that renames a new file over
    /// the name is not seen here: what was read is the old file, with the old file's fingerprint, and the next
    /// scan finds the new one by its other inode.
    package static func stable<T>(_ fd: Int32, _ path: String, _ body: (Int) throws -> (T, Int)) throws -> (T, StatFingerprint) {
        for attempt in 0..<3 {
            var before = stat()
            guard fstat(fd, &before) == 0 else { throw NoteSyncError.posix("fstat", path: path, errno: errno) }
            guard (before.st_mode & S_IFMT) == S_IFREG else {
                throw NoteSyncError(.corrupt, path: path, "is not a regular file", fix: "move it out of the way")
            }
            if attempt > 0, lseek(fd, 0, SEEK_SET) != 0 { throw NoteSyncError.posix("lseek", path: path, errno: errno) }
            let (value, count) = try body(Int(before.st_size))
            var after = stat()
            guard fstat(fd, &after) == 0 else { throw NoteSyncError.posix("fstat", path: path, errno: errno) }
            let fingerprint = StatFingerprint(after)
            if StatFingerprint(before) == fingerprint && fingerprint.size == Int64(count) { return (value, fingerprint) }
        }
        throw NoteSyncError(.io, path: path, "keeps changing while it is read", fix: "sync again when it is quiet")
    }

    /// A regular file's bytes and the fingerprint it had while they were read; `nil` when it does not exist.
    public static func readStable(_ path: String) throws -> (Data, StatFingerprint)? {
        guard let fd = try openForReading(path) else { return nil }
        defer { close(fd) }
        return try stable(fd, path) { size in
            let data = try readAll(fd: fd, path: path, sizeHint: size)
            return (data, data.count)
        }
    }

    /// `count` zero bytes, allocated at that size: `Data(count:)` makes room for a quarter more than it is asked for.
    package static func zeroedData(count: Int) -> Data {
        guard count > 0, let buffer = calloc(count, 1) else { return Data(count: max(count, 0)) }
        return Data(bytesNoCopy: buffer, count: count, deallocator: .free)
    }

    /// Reads `fd` to its end into a buffer made for `sizeHint` bytes (and one more: the read that finds the end
    /// needs no bigger one), grown by half when the file is longer. Allocated here rather than by `Data(count:)`,
    /// which makes room for a quarter more than it is asked for: that quarter of a large log entry would count in
    /// the reading device's peak.
    static func readAll(fd: Int32, path: String, sizeHint: Int) throws -> Data {
        var capacity = max(sizeHint, 0) + 1
        guard var buffer = malloc(capacity) else { throw NoteSyncError(.io, path: path, "out of memory reading it") }
        var filled = 0
        while true {
            if filled == capacity {
                capacity += max(4096, capacity / 2)
                guard let grown = realloc(buffer, capacity) else {
                    free(buffer)
                    throw NoteSyncError(.io, path: path, "out of memory reading it")
                }
                buffer = grown
            }
            let got = Glibc.read(fd, buffer.advanced(by: filled), capacity - filled)
            if got < 0 {
                if errno == EINTR { continue }
                let error = errno
                free(buffer)
                throw NoteSyncError.posix("read", path: path, errno: error)
            }
            if got == 0 { break }
            filled += got
        }
        // A buffer more than a page larger than what was read (the file grew, or shrank, while read) gives back the rest.
        if capacity - filled > 4096, let shrunk = realloc(buffer, max(filled, 1)) { buffer = shrunk }
        // Data takes the buffer as it is, and frees it when the last copy goes.
        return Data(bytesNoCopy: buffer, count: filled, deallocator: .free)
    }

    /// Creates `path` exclusively (`O_CREAT|O_EXCL`) with `mode` (less the umask, or exactly `mode` with `exactMode`:
    /// ``setModeExactly(_:_:)``), writes `data`, fsyncs and closes it.
    public static func createAndSync(
        _ path: String, _ data: Data, mode: mode_t = 0o644, exactMode: Bool = false, sync: Bool = true
    ) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        if fd < 0 { throw NoteSyncError.posix("create", path: path, errno: errno) }
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(path) }
        }
        settleMode(fd, path, mode, exactMode: exactMode)
        try writeAll(fd: fd, data, path: path)
        if sync, fsync(fd) != 0 { throw NoteSyncError.posix("fsync", path: path, errno: errno) }
        ok = true
    }

    /// A file made exclusively (`O_CREAT|O_EXCL`) and written at offsets as its bytes come, fsynced when finished, and
    /// removed unless finished: a pack's temp, or a large log entry's (``StagingSink``). Bytes that follow one
    /// another are gathered and written 256 KiB at a time: a pack of 2,000 notes is some 30 writes, not one per note.
    package final class WriteFile: StagingSink {
        package static let gather = 256 << 10
        package let path: String
        private var fd: Int32
        private var pending = Data()
        private var pendingOffset: Int64 = 0

        package init(_ path: String, mode: mode_t = 0o644, exactMode: Bool = false) throws {
            self.path = path
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            if fd < 0 { throw NoteSyncError.posix("create", path: path, errno: errno) }
            settleMode(fd, path, mode, exactMode: exactMode)
        }

        package func write(_ bytes: Data, at offset: Int64) throws {
            if !pending.isEmpty && offset != pendingOffset + Int64(pending.count) { try flush() }
            if pending.isEmpty {
                guard bytes.count < Self.gather else { return try writeThrough(bytes, at: offset) }
                pendingOffset = offset
                pending.reserveCapacity(Self.gather)
            }
            pending.append(bytes)
            if pending.count >= Self.gather { try flush() }
        }

        private func flush() throws {
            guard !pending.isEmpty else { return }
            try writeThrough(pending, at: pendingOffset)
            pending.removeAll(keepingCapacity: true)
        }

        private func writeThrough(_ bytes: Data, at offset: Int64) throws {
            try bytes.withUnsafeBytes { buffer in
                var done = 0
                while done < buffer.count {
                    let wrote = pwrite(fd, buffer.baseAddress!.advanced(by: done), buffer.count - done, off_t(offset) + off_t(done))
                    if wrote < 0 {
                        if errno == EINTR { continue }
                        throw NoteSyncError.posix("write", path: path, errno: errno)
                    }
                    done += wrote
                }
            }
        }

        package func finish() throws -> StagedFile {
            try flush()
            pending = Data()
            if fsync(fd) != 0 { throw NoteSyncError.posix("fsync", path: path, errno: errno) }
            close(fd)
            fd = -1
            return StagedFile(temp: path)
        }

        package func discard() {
            pending = Data()
            guard fd >= 0 else { return }
            close(fd)
            fd = -1
            unlink(path)
        }

        deinit { discard() }
    }

    static func writeAll(fd: Int32, _ data: Data, path: String) throws {
        try data.withUnsafeBytes { buf in
            var done = 0
            while done < buf.count {
                let wrote = write(fd, buf.baseAddress!.advanced(by: done), buf.count - done)
                if wrote < 0 {
                    if errno == EINTR { continue }
                    throw NoteSyncError.posix("write", path: path, errno: errno)
                }
                done += wrote
            }
        }
    }

    /// syncfs(2): flushes every dirty file of the filesystem holding `path`, one call for a whole batch.
    public static func syncFilesystem(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 { throw NoteSyncError.posix("open directory", path: path, errno: errno) }
        defer { close(fd) }
        if ns_syncfs(fd) != 0 { throw NoteSyncError.posix("syncfs", path: path, errno: errno) }
    }

    /// fsync(2) on a directory, so that a rename or link into it is durable.
    public static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 { throw NoteSyncError.posix("open directory", path: path, errno: errno) }
        defer { close(fd) }
        if fsync(fd) != 0 && errno != EINVAL && errno != EROFS {
            throw NoteSyncError.posix("fsync directory", path: path, errno: errno)
        }
    }

    /// `fchmod(2)` to `mode`, whatever the umask took away at creation; best effort: a filesystem without modes
    /// (vfat, exFAT, many FUSE and SMB mounts) refuses or ignores it, and what is written there is written all the same.
    static func setModeExactly(_ fd: Int32, _ mode: mode_t) {
        _ = fchmod(fd, mode)
    }

    /// Gives the file `fd`, just made at `path`, `mode` (less the umask, or exactly with `exactMode`), or what a
    /// test's filesystem without modes gives every file (``SimulatedFolders``).
    private static func settleMode(_ fd: Int32, _ path: String, _ mode: mode_t, exactMode: Bool) {
        if let fixed = SimulatedFolders.personality(at: path)?.fixedMode {
            _ = fchmod(fd, fixed)
        } else if exactMode {
            setModeExactly(fd, mode)
        }
    }

    /// mkdir(2) that accepts an existing directory (but not a symlink or file in its place). A directory it makes
    /// has `mode` less the umask, or exactly `mode` with `exactMode` (``setModeExactly(_:_:)``, through a descriptor
    /// opened without following a link).
    public static func makeDirectory(_ path: String, mode: mode_t = 0o755, exactMode: Bool = false) throws {
        if mkdir(path, mode) == 0 {
            if exactMode || SimulatedFolders.personality(at: path)?.fixedMode != nil {
                let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                if fd >= 0 {
                    settleMode(fd, path, mode, exactMode: exactMode)
                    close(fd)
                }
            }
            return
        }
        let code = errno
        if code == EEXIST, let info = lstatInfo(path) {
            if (info.st_mode & S_IFMT) == S_IFDIR { return }
            throw NoteSyncError(
                .corrupt, path: path,
                (info.st_mode & S_IFMT) == S_IFLNK
                    ? "is a symbolic link where notesync needs a folder; links are never followed"
                    : "is a file where notesync needs a folder",
                fix: "move it out of the way (in a server folder, `notesync server fsck --repair` does that)")
        }
        throw NoteSyncError.posix("mkdir", path: path, errno: code)
    }

    /// The folder holding `path`, as `NSString.deletingLastPathComponent` gives it: `"a/b"` → `"a"`, `"/a"` → `"/"`,
    /// `"a"` → `""`, trailing slashes ignored. That Foundation method traps (Swift 6.3.1) on a one-character
    /// relative path, or one with a trailing slash (`"S"`, `"b/"`): `notesync server init S` crashed.
    public static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        var head = trimmed[..<slash]
        while head.count > 1, head.hasSuffix("/") { head = head.dropLast() }
        return head.isEmpty ? "/" : String(head)
    }

    /// Creates `path` and its missing parents (as ``makeDirectory(_:mode:exactMode:)`` does).
    public static func makeDirectories(_ path: String, mode: mode_t = 0o755, exactMode: Bool = false) throws {
        if let info = lstatInfo(path), (info.st_mode & S_IFMT) == S_IFDIR { return }
        let parent = parent(of: path)
        if !parent.isEmpty && parent != path && parent != "/" { try makeDirectories(parent, mode: mode, exactMode: exactMode) }
        try makeDirectory(path, mode: mode, exactMode: exactMode)
    }

    /// Removes `path` and the folders under it, as far as they are empty: a file anywhere keeps its folders.
    /// Never removes a file, and never follows a link.
    @discardableResult
    public static func removeEmptyFolders(_ path: String) -> Bool {
        if rmdir(path) == 0 { return true }
        guard errno == ENOTEMPTY || errno == EEXIST, let entries = try? listEntries(path) else { return false }
        var empty = true
        for entry in entries {
            let child = path + "/" + entry.name
            guard let info = lstatInfo(child), (info.st_mode & S_IFMT) == S_IFDIR, removeEmptyFolders(child) else {
                empty = false
                continue
            }
        }
        return empty && rmdir(path) == 0
    }

    /// lstat(2); `nil` when the path does not exist or cannot be examined.
    public static func lstatInfo(_ path: String) -> stat? {
        var info = stat()
        return lstat(path, &info) == 0 ? info : nil
    }

    /// Names in a directory (not `.`/`..`), unsorted; `nil` when it does not exist. Names that are not valid
    /// UTF-8 come back with replacement characters: use ``listEntries(_:)`` where that matters.
    public static func list(_ path: String) throws -> [String]? {
        try listEntries(path)?.map(\.name)
    }

    /// A directory entry's name, and whether its bytes were valid UTF-8.
    public struct DirectoryEntry: Sendable {
        public var name: String
        public var isValidUTF8: Bool

        package init(name: String, isValidUTF8: Bool) {
            self.name = name
            self.isValidUTF8 = isValidUTF8
        }
    }

    /// A `readdir` entry's name (`nil` for `.` and `..`), and whether it is valid UTF-8.
    private static func decode(_ entry: UnsafeMutablePointer<dirent>) -> DirectoryEntry? {
        withUnsafeBytes(of: entry.pointee.d_name) { raw -> DirectoryEntry? in
            let bytes = raw.bindMemory(to: UInt8.self)
            let length = bytes.firstIndex(of: 0) ?? bytes.count
            let slice = UnsafeBufferPointer(rebasing: bytes[0..<length])
            if length == 1 && slice[0] == 46 || length == 2 && slice[0] == 46 && slice[1] == 46 { return nil }
            // ASCII (nearly every name) is valid as it is: `String(validating:as:)` is generic, and made its type's
            // metadata again for each of a walk's 10,000 names.
            if !slice.contains(where: { $0 >= 0x80 }) {
                return DirectoryEntry(name: String(decoding: slice, as: UTF8.self), isValidUTF8: true)
            }
            if let valid = String(validating: slice, as: UTF8.self) { return DirectoryEntry(name: valid, isValidUTF8: true) }
            return DirectoryEntry(name: String(decoding: slice, as: UTF8.self), isValidUTF8: false)
        }
    }

    /// Entries of a directory (not `.`/`..`), unsorted; `nil` when it does not exist.
    public static func listEntries(_ path: String) throws -> [DirectoryEntry]? {
        guard let dir = opendir(path) else {
            if errno == ENOENT { return nil }
            throw NoteSyncError.posix("opendir", path: path, errno: errno)
        }
        defer { closedir(dir) }
        var entries: [DirectoryEntry] = []
        while let entry = readdir(dir) {
            let decoded = decode(entry)
            if let decoded { entries.append(decoded) }
        }
        return entries
    }

    /// Entries of a directory (not `.`/`..`), unsorted, each with its `lstat` taken relative to the open
    /// directory (no path lookup per entry; `nil` for one that vanished meanwhile); `nil` when the directory does
    /// not exist. The directory itself is opened without following a symlink.
    public static func listEntriesWithInfo(_ path: String) throws -> (entries: [DirectoryEntry], infos: [stat?])? {
        guard let dir = try openDirectory(path, followingLink: false) else { return nil }
        defer { closedir(dir) }
        let descriptor = dirfd(dir)
        var entries: [DirectoryEntry] = []
        var infos: [stat?] = []
        while let entry = readdir(dir) {
            let decoded = decode(entry)
            guard let decoded else { continue }
            entries.append(decoded)
            infos.append(entryInfo(entry, in: descriptor))
        }
        return (entries, infos)
    }

    /// Opens a directory to list it (without following `path` when it is a symlink, unless `followingLink`); nil
    /// when it does not exist.
    private static func openDirectory(_ path: String, followingLink: Bool) throws -> OpaquePointer? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (followingLink ? 0 : O_NOFOLLOW))
        guard fd >= 0, let dir = fdopendir(fd) else {
            let code = errno
            if fd >= 0 { close(fd) }
            if code == ENOENT { return nil }
            throw NoteSyncError.posix("opendir", path: path, errno: code)
        }
        return dir
    }

    /// The `lstat` of a `readdir` entry, relative to its open directory (no path lookup); nil when it vanished.
    private static func entryInfo(_ entry: UnsafeMutablePointer<dirent>, in directory: Int32) -> stat? {
        var info = stat()
        let found = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            fstatat(directory, raw.baseAddress!.assumingMemoryBound(to: CChar.self), &info, AT_SYMLINK_NOFOLLOW) == 0
        }
        return found ? info : nil
    }

    /// The subdirectories of a directory (symlinks in it are not followed; names not valid UTF-8 left out), and how
    /// many entries it holds in all; `nil` when it does not exist. The kind comes from `readdir` (`d_type`), with an
    /// `lstat` only where the filesystem does not say: a walk that looks for folders costs no `stat` per file.
    /// `path` itself is a symlink followed only when `followingLink` (a notes folder's root may be one).
    public static func listSubdirectories(_ path: String, followingLink: Bool = false) throws -> (names: [String], entries: Int)? {
        guard let dir = try openDirectory(path, followingLink: followingLink) else { return nil }
        defer { closedir(dir) }
        let descriptor = dirfd(dir)
        var names: [String] = []
        var entries = 0
        while let entry = readdir(dir) {
            guard let decoded = decode(entry) else { continue }
            entries += 1
            var isDirectory = entry.pointee.d_type == UInt8(DT_DIR)
            if entry.pointee.d_type == UInt8(DT_UNKNOWN) {
                isDirectory = entryInfo(entry, in: descriptor).map { ($0.st_mode & S_IFMT) == S_IFDIR } ?? false
            }
            if isDirectory && decoded.isValidUTF8 { names.append(decoded.name) }
        }
        return (names, entries)
    }

    private static let tokenCounter = Atomic<UInt64>(0)
    /// Mixed into every token: the hash seed alone is fixed when SWIFT_DETERMINISTIC_HASHING is set.
    private static let tokenSeed: UInt64 = {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }()

    /// Random lowercase hex, for unique temp names.
    ///
    /// Each word is the process's randomly keyed hash (SipHash, seeded from the kernel once per process) of a
    /// counter: unpredictable to anyone else, and no system call per name (a first sync names 10,000 temp files).
    /// A collision would only make `O_EXCL` creation fail, never overwrite anything.
    public static func randomToken(bytes: Int = 8) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(bytes * 2)
        var word: UInt64 = 0
        for index in 0..<bytes {
            if index % 8 == 0 {
                var hasher = Hasher()
                hasher.combine(tokenSeed)
                hasher.combine(tokenCounter.add(1, ordering: .relaxed).newValue)
                word = UInt64(bitPattern: Int64(hasher.finalize()))
            }
            let byte = UInt8(truncatingIfNeeded: word >> (8 * UInt64(index % 8)))
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: hex, as: UTF8.self)
    }
}
