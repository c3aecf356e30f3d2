import Crypto
import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport
import Synchronization

/// A server in an S3 bucket (AWS S3 or an S3-compatible service): the server's files are objects under the
/// location's prefix, named as in a folder (`zones/notes/log/000000/000000000001`). Every publish is a
/// `PutObject` with `If-None-Match: *`, the object store's create-if-absent (docs/object-storage.md).
public final class S3Storage: ServerStorage {
    public let root: String
    public let client: S3Client
    public var isNetwork: Bool { true }
    /// A folder is the common start of its keys.
    public var hasDirectories: Bool { false }
    public var hasLocalPaths: Bool { false }
    /// A staged file is held for its `PutObject` (a big text: a file of the device's, outside the server).
    public var stagesTempFiles: Bool { false }
    /// Each call is one or more HTTP requests, each billed by the service.
    public var billsRequests: Bool { true }
    /// The open's check that conditional writes hold (``S3Client/probePrefix``).
    public var probeNamePrefix: String? { S3Client.probePrefix }
    /// S3's limit on one `PutObject` (5 GiB): a big text is sent in one request (no multipart upload).
    public var largestFile: Int64? { 5 << 30 }
    /// Requests in flight at once for a batch.
    package let width: Int

    /// `root` is `s3://BUCKET/PREFIX` as the user gave it (the paths' start); the client talks to its location.
    public init(root: String, client: S3Client, width: Int = 32) {
        var root = root
        while root.hasSuffix("/") && root.count > 5 { root.removeLast() }
        self.root = root
        self.client = client
        self.width = width
    }

    /// The object key of `path`, relative to the location's prefix.
    package func key(_ path: String) -> String {
        precondition(path.hasPrefix(root), "\(path) is not under \(root)")
        var key = path.dropFirst(root.count)
        while key.hasPrefix("/") { key = key.dropFirst() }
        return String(key)
    }

    package static func info(_ object: S3Client.Object) -> StorageInfo {
        // The ETag changes with the bytes; its first 8 bytes of digest stand for the inode of a folder's fingerprint.
        let tag = SHA256.hash(data: Data(object.etag.utf8)).withUnsafeBytes { $0.load(as: UInt64.self) }
        return StorageInfo(
            kind: .file, size: object.size, mtime: object.lastModified,
            fingerprint: StatFingerprint(size: object.size, mtime: object.lastModified, ctime: 0, inode: tag))
    }

    static let directoryInfo = StorageInfo(
        kind: .directory, size: 0, mtime: 0, fingerprint: StatFingerprint(size: 0, mtime: 0, ctime: 0, inode: 0))

    public func noServer(marker: String) -> NoteSyncError {
        NoteSyncError(
            .notAServer, path: marker,
            "is missing: no notesync server at \(root) (wrong bucket or prefix, or none made yet)",
            fix: "check the bucket, the prefix and --endpoint; for a new server, run `notesync server init \(root)` "
                + "(or `notesync init --create-server`)")
    }

    public func info(_ path: String) -> StorageInfo? {
        let key = key(path)
        guard !key.isEmpty, let object = try? client.head(key) else { return nil }
        return Self.info(object)
    }

    /// Below this many paths, a HEAD each; from it on, a listing of the folder that holds them.
    static let listingThreshold = 64
    /// A listing page may cost this many HEADs (AWS charges a LIST as 12.5 GETs) and still be the cheaper way.
    static let headsPerPage = 25

    /// Many paths (an upload's assets, checked after its commit) from a listing of their common folder, 1,000 keys
    /// a page, while that costs fewer requests than a HEAD each: at most one page per `headsPerPage` paths. Paths
    /// past the last key the listing reached are asked one by one. A listing that fails falls back to HEADs.
    public func infos(_ paths: [String]) -> [StorageInfo?] {
        guard paths.count >= Self.listingThreshold else { return headEach(paths) }
        let keys = paths.map(key)
        var common = keys[0][...]
        for key in keys.dropFirst() where !key.hasPrefix(common) {
            common = common.prefix(zip(common.utf8, key.utf8).prefix { $0 == $1 }.count)
        }
        let folder = String(common[..<(common.lastIndex(of: "/").map { common.index(after: $0) } ?? common.startIndex)])
        guard let listed = try? client.list(prefix: folder, pages: max(1, paths.count / Self.headsPerPage)) else {
            return headEach(paths)
        }
        var found: [String: StorageInfo] = [:]
        for object in listed.objects { found[object.key] = Self.info(object) }
        var reached: String?
        if !listed.complete {
            guard let last = listed.objects.last?.key else { return headEach(paths) }
            reached = last
        }
        var results = [StorageInfo?](repeating: nil, count: paths.count)
        var unreached: [Int] = []
        for (index, key) in keys.enumerated() {
            if let reached, !key.utf8.lexicographicallyPrecedes(reached.utf8), key != reached {
                unreached.append(index)
            } else {
                results[index] = found[key]
            }
        }
        for (index, info) in zip(unreached, headEach(unreached.map { paths[$0] })) { results[index] = info }
        return results
    }

    func headEach(_ paths: [String]) -> [StorageInfo?] {
        map(paths.count) { .success(info(paths[$0])) }.map { (try? $0?.get()) ?? nil }
    }

    public func hasEntry(_ path: String) -> Bool {
        if info(path) != nil { return true }
        let key = key(path)
        guard let listed = try? client.list(prefix: key.isEmpty ? "" : key + "/", delimiter: "/", maxKeys: 1) else { return false }
        return !listed.objects.isEmpty || !listed.prefixes.isEmpty
    }

    public func read(_ path: String, limit: Int) throws -> Data? { try client.read(key(path), limit: limit) }

    public func readRange(_ path: String, offset: Int64, length: Int) throws -> Data? {
        try client.readRange(key(path), offset: offset, length: length)
    }

    public func list(_ directory: String) throws -> [String]? {
        try listWithInfo(directory)?.map(\.name)
    }

    public func listWithInfo(_ directory: String) throws -> [(name: String, info: StorageInfo?)]? {
        let key = key(directory)
        let prefix = key.isEmpty ? "" : key + "/"
        let listed = try client.list(prefix: prefix, delimiter: "/")
        var found: [(name: String, info: StorageInfo?)] = []
        for object in listed.objects where object.key.count > prefix.count {
            found.append((String(object.key.dropFirst(prefix.count)), Self.info(object)))
        }
        for folder in listed.prefixes where folder.count > prefix.count {
            var name = folder.dropFirst(prefix.count)
            while name.hasSuffix("/") { name = name.dropLast() }
            if !name.isEmpty { found.append((String(name), Self.directoryInfo)) }
        }
        return found.isEmpty ? nil : found
    }

    public func makeDirectory(_ directory: String) throws {}

    public func removeEmptyDirectory(_ directory: String) {}

    public func syncDirectory(_ directory: String) throws {}

    public func syncStaged() throws {}

    public func stage(_ data: Data, device: String, suffix: String, sync: Bool) throws -> StagedFile {
        StagedFile(data: data)
    }

    /// Publishes bytes, or a local file (a big text's asset, ``bigStagingSink(device:scratch:)``), sent a piece at a
    /// time and removed once published.
    public func publish(_ staged: StagedFile, as path: String) throws -> AtomicPublish.Outcome {
        let outcome: S3Client.CreateOutcome
        if let temp = staged.temp {
            outcome = try client.createIfAbsent(key(path), file: temp)
            if outcome == .created { unlink(temp) }
        } else {
            guard let data = staged.data else { preconditionFailure("an object store publishes bytes or a file") }
            outcome = try client.createIfAbsent(key(path), data)
        }
        switch outcome {
        case .created:
            StopPoint.pass("server.published")
            return .published
        case .exists: return .exists
        }
    }

    public func discard(_ staged: StagedFile) {
        if let temp = staged.temp { unlink(temp) }
    }

    public func replace(_ path: String, with data: Data, device: String) throws { try client.put(key(path), data) }

    public func remove(_ path: String) throws -> Bool {
        try client.delete(key(path))
        return true
    }

    public func move(_ path: String, to target: String) throws -> Bool {
        guard let data = try client.read(key(path), limit: 1 << 30) else { return false }
        _ = try client.createIfAbsent(key(target), data)
        try client.delete(key(path))
        return true
    }

    public func touch(_ path: String) { try? client.touch(key(path)) }

    public func map<T>(_ count: Int, _ body: (Int) -> Result<T, any Error>) -> [Result<T, any Error>?] {
        if count < 2 || FaultPoint.isActive { return Parallel.map(count, body) }
        return Parallel.threads(count, width: min(width, count), body)
    }
}

extension S3Storage {
    private static let opened = Mutex<[String: S3Storage]>([:])

    /// The storage of the server at `root` (`s3://BUCKET/PREFIX`) on `endpoint` (else `NOTESYNC_S3_ENDPOINT`, else
    /// AWS S3), with credentials from the AWS environment variables or `~/.aws` profiles. The service is probed
    /// once per process for honest preconditions: one that ignores `If-None-Match` would let every writer win.
    public static func open(root: String, endpoint: String?, logger: Logger) throws -> S3Storage {
        let environment = ProcessInfo.processInfo.environment
        let endpoint = endpoint.flatMap { $0.isEmpty ? nil : $0 } ?? environment["NOTESYNC_S3_ENDPOINT"].flatMap { $0.isEmpty ? nil : $0 }
        let cacheKey = root + " " + (endpoint ?? "")
        if let known = opened.withLock({ $0[cacheKey] }) { return known }
        let (credentials, region) = try S3Credentials.load(environment: environment)
        let location = try S3Location(url: root, endpoint: endpoint, region: region)
        let client = try S3Client(location: location, credentials: credentials, logger: logger)
        try client.probePreconditions()
        let storage = S3Storage(root: root, client: client)
        return opened.withLock { cache in
            if let known = cache[cacheKey] {
                client.shutdown()
                return known
            }
            cache[cacheKey] = storage
            return storage
        }
    }
}
