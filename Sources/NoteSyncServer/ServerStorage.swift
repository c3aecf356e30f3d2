import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport
import Synchronization

/// What the storage holding a server says about one of its files (or objects).
public struct StorageInfo: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case file, directory, link, other
    }

    public var kind: Kind
    public var size: Int64
    /// Last modification, in nanoseconds since 1970 (the server's clock).
    public var mtime: Int64
    /// Changes whenever the file is replaced or rewritten: `lstat`'s size, times and inode on a folder; size,
    /// time and a hash of the ETag on an object store.
    public var fingerprint: StatFingerprint

    public init(kind: Kind, size: Int64, mtime: Int64, fingerprint: StatFingerprint) {
        self.kind = kind
        self.size = size
        self.mtime = mtime
        self.fingerprint = fingerprint
    }

    /// From `lstat(2)`.
    public init(_ info: stat) {
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .link
        default: kind = .other
        }
        fingerprint = StatFingerprint(info)
        size = fingerprint.size
        mtime = fingerprint.mtime
    }

    public var isFile: Bool { kind == .file }
}

/// The server as a key space (docs/server-format.md, "Storage"): every server feature is written against this,
/// never against the filesystem, so a folder and an object store hold the same server.
///
/// Paths are the server root followed by `/` and the file's name inside the server (`zones/notes/log/…`), on every
/// backend: errors name them as the user sees the server. Every published file is immutable; the only operation
/// that decides anything is ``publish(_:as:)``: an atomic create-if-absent.
public protocol ServerStorage: Sendable {
    /// The server as the user names it: a folder's path, or `s3://bucket/prefix`.
    var root: String { get }
    /// Other devices' writes raise no inotify events here: the agent polls.
    var isNetwork: Bool { get }

    // What the storage can do and how it behaves: the server's features ask these, never which backend it is.

    /// Folders are real: one is made before files go in it (``makeDirectory(_:)``), flushed after
    /// (``syncDirectory(_:)``), stays when its last file goes (``removeEmptyDirectory(_:)``), and a link or a file
    /// planted in its place would carry writes named by path out of the server. False where a folder is only the
    /// common start of its files' names (an object store's keys): nothing to make, nothing left, nothing to plant.
    var hasDirectories: Bool { get }
    /// Paths are paths of this machine's filesystem: code that reads a file by its path (``FileDigest``, with its
    /// cache) may read a server file so. False where a path is only a name the storage answers for.
    var hasLocalPaths: Bool { get }
    /// A staged file is a temp file in the zone's `tmp/` (`<device>-<hex>.<suffix>`), written to disk as its pieces
    /// come (a staging sink never holds it whole) and made durable by ``syncStaged()``: a writer killed before it
    /// published or discarded one leaves it there, for ``ServerStore/removeOwnTemps()`` and fsck to sweep. False
    /// where staging holds the bytes for one request and leaves nothing behind.
    var stagesTempFiles: Bool { get }
    /// Every operation is a request to a service, billed and a round trip each, where a folder's `lstat` or `read`
    /// costs nearly nothing (even on a share): the fewest requests make an operation cheap, not the fewest bytes. So a
    /// small file is published without looking for it first (a create-if-absent answers that the name is taken), a
    /// file is read whole in one request rather than a piece a request, and an idle poll checks the log's end less
    /// often.
    var billsRequests: Bool { get }
    /// The start of the names the storage itself writes at the top of the server to probe the service
    /// (``S3Client/probePrefix``), nil when it writes none there: fsck takes them for the storage's, not foreign.
    var probeNamePrefix: String? { get }
    /// The biggest file the storage takes (S3: one `PutObject`); nil when it sets no limit of its own. A note
    /// bigger than that is left out of a sync with a warning, and the others sync.
    var largestFile: Int64? { get }

    /// The error that no server is at ``root``: `marker` is missing. It says what to check on this storage (a share
    /// not mounted; a wrong bucket, prefix or endpoint) and how a new server is made.
    func noServer(marker: String) -> NoteSyncError

    /// The file at `path`, or nil when there is none (or it cannot be examined).
    func info(_ path: String) -> StorageInfo?
    /// What ``info(_:)`` says of each of `paths`, in order, as cheaply as the storage can: stats in parallel on a
    /// folder; on an object store, for many paths, a listing of the folder that holds them in place of a HEAD each.
    func infos(_ paths: [String]) -> [StorageInfo?]
    /// Whether anything is at `path` (a folder, or a file in its place): on an object store, whether any key
    /// starts with it.
    func hasEntry(_ path: String) -> Bool
    /// The bytes at `path`, nil when there is none; a file larger than `limit` is `corrupt`.
    func read(_ path: String, limit: Int) throws -> Data?
    /// The file at `path` a piece at a time, in order, from one opening of it: `body` is given each piece until it
    /// returns false. True when it was read to its end, false when `body` stopped (or it grew past `limit` meanwhile),
    /// nil when there is none; throws as ``read(_:limit:)`` does. An object store's object comes in ranged reads.
    func readPieces(_ path: String, limit: Int, pieceBytes: Int, _ body: (Data) throws -> Bool) throws -> Bool?
    /// `length` bytes of the file at `path` from `offset` (fewer when the file ends first), nil when there is none:
    /// one asset of a pack.
    func readRange(_ path: String, offset: Int64, length: Int) throws -> Data?
    /// The names directly in `directory` (files and folders), unsorted; nil when there is none.
    func list(_ directory: String) throws -> [String]?
    /// The names directly in `directory` with what each is (nil for one that vanished meanwhile).
    func listWithInfo(_ directory: String) throws -> [(name: String, info: StorageInfo?)]?

    /// Makes `directory` exist (a folder backend; nothing on an object store).
    func makeDirectory(_ directory: String) throws
    /// Removes `directory` if it is empty (`rmdir`), best effort: gc's emptied log shards. Nothing on an object store.
    func removeEmptyDirectory(_ directory: String)
    /// Makes what was published into `directory` durable (a folder's fsync; nothing on an object store).
    func syncDirectory(_ directory: String) throws
    /// Makes every staged file durable at once (`syncfs`; nothing on an object store).
    func syncStaged() throws

    /// Writes `data` to be published (fsynced when `sync`), without publishing it.
    func stage(_ data: Data, device: String, suffix: String, sync: Bool) throws -> StagedFile
    /// Where a pack is written while it is made (``AssetPack/Builder``), staged (durable) when finished.
    func packSink(device: String) throws -> any StagingSink
    /// Where a file staged a piece at a time is written (a large log entry: ``SealedFile/sealEntry(_:minimumBytes:into:)``):
    /// a temp file named with `suffix` on a folder, fsynced when finished; a buffer staged whole elsewhere.
    func stagingSink(device: String, suffix: String) throws -> any StagingSink
    /// Where a big text's stored bytes are written while it is staged (``ServerStore/stageBigText(at:scratch:)``):
    /// a temp file in the server's `tmp/` on a folder; elsewhere a file in `scratch` (a local folder of the device's,
    /// never a buffer), sent from there when published.
    func bigStagingSink(device: String, scratch: String) throws -> any StagingSink
    /// The bytes of texts from which a pack being made is finished and another begun.
    var packSize: Int64 { get }
    /// Publishes a staged file as `path` if that name is free: the atomic create-if-absent. Throws on anything
    /// else; an error may be ambiguous (the file may be published all the same), so callers that must know read
    /// the path back.
    func publish(_ staged: StagedFile, as path: String) throws -> AtomicPublish.Outcome
    /// Removes what staging left (a temp file that was not published).
    func discard(_ staged: StagedFile)
    /// Replaces `path` whole with `data` (the marker, a device's status file, gc's lease): readers see the old
    /// bytes or the new ones, never a mix.
    func replace(_ path: String, with data: Data, device: String) throws
    /// Removes the file at `path`; false when there was none. Only gc, fsck and a device's own temps remove.
    @discardableResult
    func remove(_ path: String) throws -> Bool
    /// Moves the file at `path` to `target` (fsck's quarantine), making the folders it needs; false when it could
    /// not be moved.
    func move(_ path: String, to target: String) throws -> Bool
    /// Marks `path` as just used (its mtime), best effort: gc never sweeps an asset touched after its mark.
    func touch(_ path: String)

    /// `body(index)` for every index in `0..<count`, as wide as this storage does best (cores for a folder,
    /// requests in flight for an object store), results in index order; see ``Parallel/map(_:serialBelow:_:)``.
    func map<T>(_ count: Int, _ body: (Int) -> Result<T, any Error>) -> [Result<T, any Error>?]
}

extension ServerStorage {
    public var largestFile: Int64? { nil }

    /// Read whole, as one piece.
    public func readPieces(_ path: String, limit: Int, pieceBytes: Int, _ body: (Data) throws -> Bool) throws -> Bool? {
        guard let data = try read(path, limit: limit) else { return nil }
        return try body(data)
    }

    public func infos(_ paths: [String]) -> [StorageInfo?] {
        map(paths.count) { .success(info(paths[$0])) }.map { (try? $0?.get()) ?? nil }
    }

    /// Held in memory until sent: 1 MiB.
    public var packSize: Int64 { 1 << 20 }

    /// A pack held in memory, staged whole when finished (an object store takes it in one request).
    public func packSink(device: String) throws -> any StagingSink {
        try stagingSink(device: device, suffix: "pack")
    }

    /// Held in memory, staged whole when finished.
    public func stagingSink(device: String, suffix: String) throws -> any StagingSink {
        AssetPack.MemorySink { try self.stage($0, device: device, suffix: suffix, sync: true) }
    }

    /// A file made in `scratch` (made if missing), fsynced when finished: staged as its path.
    public func bigStagingSink(device: String, scratch: String) throws -> any StagingSink {
        try FileIO.makeDirectories(scratch, mode: 0o700)
        BigText.clearLeftovers(in: scratch)
        return try FileIO.WriteFile(scratch + "/" + device + "-" + FileIO.randomToken() + ".asset", mode: 0o600)
    }

    /// Stages `data` (fsynced) and publishes it as `path` if that name is free; nothing staged is left either way.
    public func create(_ data: Data, as path: String, device: String, suffix: String) throws -> AtomicPublish.Outcome {
        let staged = try stage(data, device: device, suffix: suffix, sync: true)
        defer { discard(staged) }
        return try publish(staged, as: path)
    }

    /// The folder that holds `path`.
    public func parent(of path: String) -> String { FileIO.parent(of: path) }
}

/// A server in a folder: a local disk, or a share mounted over NFS, SMB or sshfs. Publishes with the atomic
/// no-replace primitive the filesystem supports (probed once, on the first write): a temp file in the zone's
/// `tmp/`, fsynced, then `renameat2(RENAME_NOREPLACE)` or `link(2)` to its name.
public final class FolderStorage: ServerStorage {
    public let root: String
    public let isNetwork: Bool
    public var hasDirectories: Bool { true }
    public var hasLocalPaths: Bool { true }
    public var stagesTempFiles: Bool { true }
    public var billsRequests: Bool { false }
    public var probeNamePrefix: String? { nil }
    let tmpDirectory: String
    /// What the server folder's own mode calls for, read when the server is opened.
    public let modes: ServerModes
    private let forcedPrimitive: PublishPrimitive?
    private let probedPrimitive = Mutex<PublishPrimitive?>(nil)

    package let logger: Logger

    public init(root: String, tmpDirectory: String, primitive: PublishPrimitive? = nil, logger: Logger) {
        self.root = root
        self.tmpDirectory = tmpDirectory
        self.isNetwork = (try? FilesystemKind(path: root))?.isNetwork ?? true
        self.modes = ServerModes(root: root)
        self.forcedPrimitive = primitive
        self.logger = logger
    }

    /// The publish primitive: forced by the caller, or probed once on first use (and said in the debug log).
    public func primitive() throws -> PublishPrimitive {
        if let forcedPrimitive { return forcedPrimitive }
        if let known = probedPrimitive.withLock({ $0 }) { return known }
        let chosen = try FilesystemProbe.probe(in: tmpDirectory, device: "probe")
        probedPrimitive.withLock { $0 = chosen.primitive }
        logger.debug(
            "server.primitive",
            metadata: [
                "server.primitive": "\(chosen.primitive.rawValue)",
                "server.primitive.reason": "\(chosen.reason)"
            ])
        return chosen.primitive
    }

    public func noServer(marker: String) -> NoteSyncError {
        NoteSyncError(
            .notAServer, path: marker, "is missing: this folder is not a notesync server (or the share is not mounted)",
            fix: "mount the share (or bring the server folder back at this path); notes are kept and changes wait until then")
    }

    public func info(_ path: String) -> StorageInfo? { FileIO.lstatInfo(path).map(StorageInfo.init) }

    public func hasEntry(_ path: String) -> Bool { FileIO.lstatInfo(path) != nil }

    public func read(_ path: String, limit: Int) throws -> Data? { try FileIO.read(path, limit: limit) }

    public func readRange(_ path: String, offset: Int64, length: Int) throws -> Data? {
        try FileIO.readRange(path, offset: offset, length: length)
    }

    public func readPieces(_ path: String, limit: Int, pieceBytes: Int, _ body: (Data) throws -> Bool) throws -> Bool? {
        try FileIO.readPieces(path, limit: limit, pieceBytes: pieceBytes, body)
    }

    public func list(_ directory: String) throws -> [String]? { try FileIO.list(directory) }

    public func listWithInfo(_ directory: String) throws -> [(name: String, info: StorageInfo?)]? {
        guard let (entries, infos) = try FileIO.listEntriesWithInfo(directory) else { return nil }
        return zip(entries, infos).map { ($0.name, $1.map(StorageInfo.init)) }
    }

    public func makeDirectory(_ directory: String) throws {
        try FileIO.makeDirectory(directory, mode: modes.folder, exactMode: modes.exact)
    }

    public func removeEmptyDirectory(_ directory: String) { rmdir(directory) }

    public func syncDirectory(_ directory: String) throws { try FileIO.syncDirectory(directory) }

    public func syncStaged() throws { try FileIO.syncFilesystem(tmpDirectory) }

    /// `tmp/<device>-<hex>.<suffix>`: a device finds its own leftovers by the prefix (``ServerStore/removeOwnTemps()``).
    public func stage(_ data: Data, device: String, suffix: String, sync: Bool) throws -> StagedFile {
        let temp = tmpDirectory + "/" + device + "-" + FileIO.randomToken() + "." + suffix
        try FileIO.createAndSync(temp, data, mode: modes.file, exactMode: modes.exact, sync: sync)
        return StagedFile(temp: temp)
    }

    /// Written to a file as the texts come, never held: 16 MiB (a first sync's batch of 2,000 notes makes one pack).
    public var packSize: Int64 { 16 << 20 }

    /// A temp file in `tmp/` the pack's texts are written to as they come, fsynced when finished.
    public func packSink(device: String) throws -> any StagingSink {
        try stagingSink(device: device, suffix: "pack")
    }

    /// A temp file in `tmp/`, as a staged asset's (a big text is published from the server's own folder).
    public func bigStagingSink(device: String, scratch: String) throws -> any StagingSink {
        try stagingSink(device: device, suffix: "asset")
    }

    /// A temp file in `tmp/`, as ``stage(_:device:suffix:sync:)`` names it, written as the pieces come.
    public func stagingSink(device: String, suffix: String) throws -> any StagingSink {
        try FileIO.WriteFile(
            tmpDirectory + "/" + device + "-" + FileIO.randomToken() + "." + suffix, mode: modes.file, exactMode: modes.exact)
    }

    public func publish(_ staged: StagedFile, as path: String) throws -> AtomicPublish.Outcome {
        guard let temp = staged.temp else { preconditionFailure("a folder publishes temp files") }
        return try AtomicPublish.publish(temp, as: path, using: primitive())
    }

    public func discard(_ staged: StagedFile) {
        if let temp = staged.temp { unlink(temp) }
    }

    public func replace(_ path: String, with data: Data, device: String) throws {
        let staged = try stage(data, device: device, suffix: "replace", sync: true)
        defer { discard(staged) }
        guard rename(staged.temp!, path) == 0 else { throw NoteSyncError.posix("rename", path: path, errno: errno) }
        try FileIO.syncDirectory(parent(of: path))
    }

    public func remove(_ path: String) throws -> Bool {
        if unlink(path) == 0 { return true }
        if errno == ENOENT { return false }
        throw NoteSyncError.posix("unlink", path: path, errno: errno)
    }

    public func move(_ path: String, to target: String) throws -> Bool {
        try FileIO.makeDirectories(parent(of: target), mode: modes.folder, exactMode: modes.exact)
        return rename(path, target) == 0
    }

    public func touch(_ path: String) { _ = utimensat(AT_FDCWD, path, nil, AT_SYMLINK_NOFOLLOW) }

    public func map<T>(_ count: Int, _ body: (Int) -> Result<T, any Error>) -> [Result<T, any Error>?] {
        Parallel.map(count, body)
    }
}
