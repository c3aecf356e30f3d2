import Foundation
import Synchronization
import Testing

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// Where the unit tests make their servers: a folder in the test's temporary directory, or with
/// `NOTESYNC_TEST_SERVER=s3` a prefix of its own in the bucket `NOTESYNC_TEST_BUCKET` on the service at
/// `NOTESYNC_S3_ENDPOINT` (credentials from the AWS environment variables). scripts/test runs the store's suites both
/// ways, the second against moto's server and against SeaweedFS: every server feature runs over both backends.
///
/// `NOTESYNC_TEST_BUCKET_PER_TEST=1` gives each test a bucket of its own instead (made here), for moto: it lists a
/// bucket by going through every key in it, so a listing in a shared bucket slows down with every test that ran.
/// Not for SeaweedFS, which makes a collection of volumes for each bucket.
enum TestServer {
    enum Backend: String {
        case folder, s3
    }

    static let backend: Backend = ProcessInfo.processInfo.environment["NOTESYNC_TEST_SERVER"] == "s3" ? .s3 : .folder
    static var isFolder: Bool { backend == .folder }
    static var isS3: Bool { backend == .s3 }

    /// A run of its own in the bucket: the names of temporary directories come back in later runs.
    private static let run = "run-" + UUID().uuidString.lowercased().prefix(8)
    private static let bucketPerTest = ProcessInfo.processInfo.environment["NOTESYNC_TEST_BUCKET_PER_TEST"] == "1"
    /// The bucket made for each test directory, with `NOTESYNC_TEST_BUCKET_PER_TEST`.
    private static let buckets = Mutex<[String: String]>([:])

    /// The root of the server `name` of the test that owns `dir`: `dir/name` on a folder, else
    /// `s3://BUCKET/RUN/DIR/name`, the same for every call with the same directory.
    static func root(_ dir: TempDirectory, _ name: String = "server") throws -> String {
        guard isS3 else { return dir.sub(name) }
        let environment = ProcessInfo.processInfo.environment
        guard let endpoint = environment["NOTESYNC_S3_ENDPOINT"], !endpoint.isEmpty else {
            throw NoteSyncError(
                .usage, path: nil, "NOTESYNC_TEST_SERVER=s3 needs an S3 service: NOTESYNC_S3_ENDPOINT is not set",
                fix: "run scripts/test, which starts moto and SeaweedFS, or export NOTESYNC_S3_ENDPOINT, "
                    + "NOTESYNC_TEST_BUCKET and AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
        }
        let shared = environment["NOTESYNC_TEST_BUCKET"].flatMap { $0.isEmpty ? nil : $0 } ?? "notesync-test"
        let bucket = bucketPerTest ? try bucket(for: dir, endpoint: endpoint) : shared
        return "s3://\(bucket)/\(run)/\(URL(fileURLWithPath: dir.path).lastPathComponent)/\(name)"
    }

    /// The bucket of the test that owns `dir`, made on first use.
    private static func bucket(for dir: TempDirectory, endpoint: String) throws -> String {
        if let known = buckets.withLock({ $0[dir.path] }) { return known }
        let bucket = "\(run)-" + UUID().uuidString.lowercased().prefix(12)
        let (credentials, region) = try S3Credentials.load()
        let location = try S3Location(url: "s3://\(bucket)", endpoint: endpoint, region: region)
        let client = S3Client(location: location, credentials: credentials, logger: testLogger)
        defer { client.shutdown() }
        try client.createBucketIfMissing()
        // The first bucket made for the directory is its bucket for the whole test: every store of the test opens the
        // same server.
        return buckets.withLock { known in
            if let first = known[dir.path] { return first }
            known[dir.path] = bucket
            return bucket
        }
    }

    /// The storage at `root`, a server there or not yet (as ``ServerStore/openStorage(_:endpoint:primitive:logger:)``
    /// opens it, without requiring the folder).
    static func storage(_ root: String) throws -> any ServerStorage {
        if ServerAddress.isObjectStore(root) { return try S3Storage.open(root: root, endpoint: nil, logger: testLogger) }
        return FolderStorage(root: root, tmpDirectory: ServerLayout(root: root).tmpDirectory, logger: testLogger)
    }

    /// `NOTESYNC_TEST_ENCRYPTED=1`: every server the tests make is encrypted (docs/encryption.md), with one key for
    /// the whole run, and every store and device opens it with that key. scripts/test runs the store's suites so, on
    /// a folder and in a bucket: every server feature runs encrypted as well.
    static let isEncrypted = ProcessInfo.processInfo.environment["NOTESYNC_TEST_ENCRYPTED"] == "1"

    /// The run's key when servers are encrypted, else nil: what every store and device of a test opens its server
    /// with.
    static let vault: Vault? = isEncrypted ? Vault.generate() : nil

    /// Makes a new server at `root`: encrypted with ``vault`` when the run is.
    @discardableResult
    static func create(_ root: String) throws -> ServerMarker {
        let encryption = vault.map { ServerStore.NewVault(vault: $0, passphrase: "test passphrase for the run") }
        return try ServerStore.create(root: root, logger: testLogger, encryption: encryption)
    }

    /// Waits until the server's clock has moved on: a bucket's times are whole seconds (`Last-Modified`), so a file
    /// written after this is newer than one written before only a second later.
    static func waitForTheServersClock() { Thread.sleep(forTimeInterval: isFolder ? 0.05 : 1.1) }

    /// Publish primitives to run a test with: each of `primitives` on a folder; one on an object store, which has
    /// its own (create-if-absent) whatever the test asks for.
    static func primitives(_ primitives: [PublishPrimitive] = PublishPrimitive.allCases) -> [PublishPrimitive] {
        isFolder ? primitives : Array(primitives.prefix(1))
    }
}

extension Trait where Self == ConditionTrait {
    /// Runs only against a folder server, for `reason`: the test works on the folder itself (a file where a
    /// folder must be, a link, a temp file) or on what only a folder has.
    static func folderOnly(_ reason: Comment) -> Self { .enabled(if: TestServer.isFolder, reason) }

    /// Runs only against a plain server, for `reason`: the test reads or plants a server file by its plain name or
    /// bytes, which an encrypted server never holds (its own tests check the encrypted ones).
    static func plainOnly(_ reason: Comment) -> Self { .enabled(if: !TestServer.isEncrypted, reason) }
}

/// A server's files as a test plants, damages, holds back or lists them: through its storage, so that the test runs
/// against a folder and against a bucket alike.
struct ServerFiles {
    let storage: any ServerStorage

    init(_ store: ServerStore) { storage = store.storage }

    init(root: String) throws { storage = try TestServer.storage(root) }

    var root: String { storage.root }

    /// Puts `data` at `path` whatever is there (a file replaced, folders made as needed), as a tool other than
    /// notesync would.
    func write(_ path: String, _ data: Data) throws {
        if !storage.hasLocalPaths {
            try storage.replace(path, with: data, device: "test")
            return
        }
        try FileIO.makeDirectories(FileIO.parent(of: path))
        unlink(path)
        try FileIO.createAndSync(path, data)
    }

    func read(_ path: String) throws -> Data? { try storage.read(path, limit: 1 << 30) }

    func exists(_ path: String) -> Bool { storage.info(path) != nil }

    func remove(_ path: String) throws { try storage.remove(path) }

    /// Takes the file at `path` out of the server and returns its bytes (``write(_:_:)`` delivers it again).
    func take(_ path: String) throws -> Data {
        let data = try #require(try read(path), "\(path) is not there")
        try remove(path)
        return data
    }

    /// The names in `directory`, none when there is no such folder (or, in a bucket, no key under it).
    func names(in directory: String) throws -> [String] { try storage.list(directory) ?? [] }

    /// Every file of the server by its path under the root, with what the storage says of it, and in a folder every
    /// folder too (its path ending in `/`): a listing that changes when any file is written, replaced, touched or
    /// removed.
    func listing() throws -> [String: StorageInfo] {
        if let bucket = storage as? S3Storage {
            let objects = try bucket.client.list(prefix: "").objects
            return Dictionary(objects.map { ($0.key, S3Storage.info($0)) }, uniquingKeysWith: { first, _ in first })
        }
        var found: [String: StorageInfo] = [:]
        func visit(_ relative: String) throws {
            let directory = relative.isEmpty ? root : root + "/" + relative
            for (name, info) in try storage.listWithInfo(directory) ?? [] {
                let path = relative.isEmpty ? name : relative + "/" + name
                guard let info else { continue }
                if info.kind == .directory {
                    found[path + "/"] = info
                    try visit(path)
                } else {
                    found[path] = info
                }
            }
        }
        try visit("")
        return found
    }

    /// Every file of the server with its bytes, by its path under the root.
    func contents() throws -> [String: Data] {
        var files: [String: Data] = [:]
        for path in try listing().keys where !path.hasSuffix("/") { files[path] = try read(root + "/" + path) }
        return files
    }

    /// Makes the server hold exactly `files` (``contents()`` of an earlier moment): a server restored from a copy.
    func restore(_ files: [String: Data]) throws {
        for path in try listing().keys where !path.hasSuffix("/") && files[path] == nil { try remove(root + "/" + path) }
        for (path, data) in files { try write(root + "/" + path, data) }
    }
}
