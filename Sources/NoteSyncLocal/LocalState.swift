import Foundation
import GRDB
import GRDBSQLite
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport
import Synchronization

/// Everything notesync keeps about a notes folder, in SQLite (GRDB) on local disk: never on the share.
///
/// Holds the device identity, the server path, the change token and server heads (so a sync reads only new
/// entries), the base of every note, the outbox, conflicts and the last sync result.
public final class LocalState: Sendable {
    package let queue: DatabaseQueue
    /// The database file's path (`queue.path` may be an `immutable` URI).
    package let path: String
    /// The file as this process last left it (at open, after each of its writes): another file there, or this one
    /// written by someone else, means the database was replaced under it (``requireSameFile()``).
    private let fileSeen = Mutex<StatFingerprint?>(nil)
    /// States found replaced: never closed, so that SQLite's checkpoint at close writes nothing into the file
    /// now at the path.
    private static let abandoned = Mutex<[LocalState]>([])
    /// The most SQLite keeps of the pages it read, in KiB (``init(path:readOnly:)`` says why so little)...
    static let pageCacheKiB = 256
    /// ...and while it writes (SQLite's default): each row written is found through the name's index, in no order,
    /// and with only the reading cache a large first sync reads the index's pages again and again (docs/benchmarks.md,
    /// "Why these settings").
    static let writeCacheKiB = 2048

    /// Opens (creating if asked) the state database at `path`; `readOnly` opens it without writing anything.
    public init(path: String, readOnly: Bool = false) throws {
        self.path = path
        var configuration = Configuration()
        configuration.readonly = readOnly
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // SQLite's default keeps up to 2 MB of the pages it read, a large share of a small folder's sync: a sync
            // reads the bases and heads once, in order, and writes rows it finds again through the index, so pages
            // it holds are rarely read twice, and the kernel's page cache holds them anyway.
            try db.execute(sql: "PRAGMA cache_size = -\(Self.pageCacheKiB)")
        }
        if !readOnly {
            // WAL with synchronous=NORMAL: a commit costs no fsync (the agent syncs many times a second). A power
            // cut may drop the last transactions but never corrupts the file, and nothing in it is lost for good:
            // a base or outbox row that is missing is re-derived by the next scan (same content = adopt).
            //
            // Set here rather than with GRDB's `journalMode = .wal`, which also writes a table into the log at each
            // open (for DatabasePool readers; this is a queue): that write costs a flush of the log and of its folder,
            // and a checkpoint at close, so a sync that changed nothing would write the database anyway.
            configuration.prepareDatabase { db in
                guard try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                    throw DatabaseError(message: "could not set the write-ahead log journal mode")
                }
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
        }
        do {
            var location = path
            if readOnly && FileIO.lstatInfo(path + "-wal") == nil,
                let encoded = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)
            {
                // A read-only connection to a WAL database would create its -wal and -shm files: a dry run must
                // write nothing, so with no writer around (no -wal file) open it immutable (a URI; Debian's SQLite
                // is built with SQLITE_USE_URI).
                location = "file:" + encoded + "?immutable=1"
            }
            if let reason = try FileIO.read(Self.replacedNotice(path), limit: 1 << 16) {
                throw Self.replaced(path, String(decoding: reason, as: UTF8.self))
            }
            queue = try DatabaseQueue(path: location, configuration: configuration)
            if !readOnly { try Self.migrator.migrate(queue) }
            try checkDevice(readOnly: readOnly)
        } catch let error as DatabaseError {
            throw Self.failure(error, path: path, doing: "open")
        }
        fileSeen.withLock { $0 = FileIO.lstatInfo(path).map(StatFingerprint.init) }
    }

    // MARK: a database replaced

    /// `.notesync/device-id`: the device id of the folder's state, outside the database, so that a database copied
    /// over this one from another notes folder is told from it.
    static func deviceFile(_ path: String) -> String { FileIO.parent(of: path) + "/device-id" }

    /// Left next to the database by a process that found it replaced under it: every later open says so, until
    /// `notesync init` moves the database aside.
    public static func replacedNotice(_ path: String) -> String { path + ".replaced" }

    /// The error for a database that is not the one this notes folder's notesync wrote.
    package static func replaced(_ path: String, _ what: String) -> NoteSyncError {
        let root = FileIO.parent(of: FileIO.parent(of: path))
        return NoteSyncError(
            .io, path: path,
            "the local state database was replaced (\(what)): it is not the state of this notes folder, and nothing "
                + "is synced with it",
            fix: "run `notesync init --notes \(root) --server DIR --device-name NAME` (DIR: this folder's server, NAME: "
                + "the name this device had) with no agent running: it moves the database aside and starts afresh as a "
                + "new device, keeping every note; then start the agent again")
    }

    /// Checks that the database holds this folder's device (``deviceFile(_:)``); a writable open of a folder made
    /// before the file existed writes it.
    private func checkDevice(readOnly: Bool) throws {
        guard let device = try meta(.deviceID) else { return }
        let file = Self.deviceFile(path)
        guard let data = try FileIO.read(file, limit: 4096) else {
            if !readOnly { try? Self.writeDeviceFile(path, device: device) }
            return
        }
        let recorded = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if recorded != device {
            throw Self.replaced(path, "it holds device \(device), this folder is device \(recorded): copied from another notes folder")
        }
    }

    /// Records `device` as the device of the state at `path` (``deviceFile(_:)``): by `notesync init`.
    public static func writeDeviceFile(_ path: String, device: String) throws {
        let file = deviceFile(path)
        let temp = file + ".tmp-" + FileIO.randomToken()
        try FileIO.createAndSync(temp, Data((device + "\n").utf8))
        if rename(temp, file) != 0 {
            unlink(temp)
            throw NoteSyncError.posix("rename", path: file, errno: errno)
        }
    }

    /// Throws when the file at the path is no longer the one this process opened and wrote (another inode: a
    /// `git checkout`, a restore, a move; the same inode written by someone else: a copy over it). Then the state is
    /// never written or closed again, and a notice makes every later open say so. For the agent, between syncs.
    public func requireSameFile() throws {
        let now = FileIO.lstatInfo(path).map(StatFingerprint.init)
        guard let seen = fileSeen.withLock({ $0 }), now != seen else { return }
        let what =
            now == nil ? "it is gone" : now?.inode != seen.inode ? "another file is at its path" : "it was written by another program"
        Self.abandoned.withLock { $0.append(self) }
        try? FileIO.createAndSync(Self.replacedNotice(path), Data("\(what) while notesync was running".utf8))
        throw Self.replaced(path, "\(what) while notesync was running")
    }

    /// A database error as the user reads it. A full disk is said to be one (SQLite reports it as "disk is full",
    /// or as an I/O error when its shared-memory file cannot grow), with a fix that keeps the state: moving the
    /// database away is advice for a damaged file only.
    package static func failure(_ error: DatabaseError, path: String, doing: String) -> NoteSyncError {
        var info = statvfs()
        let nearlyFull =
            statvfs(FileIO.parent(of: path), &info) == 0
            && UInt64(info.f_bavail) * UInt64(info.f_frsize) < 1 << 20
        if error.resultCode == .SQLITE_FULL || (error.resultCode == .SQLITE_IOERR && nearlyFull) {
            return NoteSyncError(
                .io, path: path, "cannot \(doing) the local state database: the filesystem holding it is full",
                fix: "free space there, then sync again; nothing is lost (what was not recorded is found again by the next scan)",
                errno: ENOSPC)
        }
        let root = FileIO.parent(of: FileIO.parent(of: path))
        let damaged: [ResultCode] = [.SQLITE_ERROR, .SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_IOERR, .SQLITE_SCHEMA]
        if damaged.contains(error.resultCode) {
            // An emptied file (no tables), one damaged, or one whose write-ahead log belongs to another file.
            return NoteSyncError(
                .io, path: path,
                "cannot \(doing) the local state database: it is damaged, empty or not a notesync state "
                    + "(SQLite says: \(error.message ?? "\(error.resultCode)"))",
                fix: "run `notesync init --notes \(root) --server DIR --device-name NAME` (DIR: this folder's server, "
                    + "NAME: the name this device had) with no agent running: it moves the database aside and starts "
                    + "afresh as a new device, keeping every note")
        }
        return NoteSyncError(
            .io, path: path, "cannot \(doing) the local state database: \(error.message ?? "\(error)")",
            fix: "check the file's permissions; if it was damaged or replaced (a restore, a git checkout), run "
                + "`notesync init --notes \(root) --server DIR` again: it moves it aside and starts afresh, keeping every note")
    }

    /// An in-memory database, for tests and dry runs of a folder that was never initialised.
    public init() throws {
        path = ":memory:"
        queue = try DatabaseQueue()
        try Self.migrator.migrate(queue)
    }

    /// Frees what SQLite holds for this database: its page cache (up to 2 MB, full after the bases of a big folder
    /// are read), its statements and schema. The agent calls this once a full sync is done; what the next sync
    /// needs is read again from the system's file cache.
    public func releaseMemory() {
        queue.releaseMemory()
    }

    /// The bytes SQLite's page cache holds for this database now.
    func cacheBytes() -> Int {
        queue.inDatabase { db in
            var current: Int32 = 0
            var highest: Int32 = 0
            sqlite3_db_status(db.sqliteConnection, SQLITE_DBSTATUS_CACHE_USED, &current, &highest, 0)
            return Int(current)
        }
    }

    /// Closes the database now (a checkpoint folds the write-ahead log in) rather than when the last reference
    /// goes: for a one-shot command that leaves its objects to the process exit (``OneShotProcess``).
    public func close() throws {
        do { try queue.close() } catch let error as DatabaseError {
            throw Self.failure(error, path: path, doing: "close")
        }
    }

    // MARK: the last sync

    /// `.notesync/last-sync`: its modification time is when the last sync of this folder finished. A file's time
    /// rather than a database value, so that a sync that changed nothing writes nothing to the database (neither
    /// its log nor a checkpoint at close). It is never flushed: a power cut can only make `status` name an earlier
    /// sync.
    public static func lastSyncFile(_ path: String) -> String { FileIO.parent(of: path) + "/last-sync" }

    /// Records that a sync finished now (``lastSyncFile(_:)``). Only a file of its own is touched: not a link
    /// (`O_NOFOLLOW`), not a FIFO (`O_NONBLOCK`: never a wait for a reader), not a hard link to a note (whose time
    /// would change, so that it no longer matched its base); anything else at the name is replaced by a new file.
    public func recordSyncFinished() {
        guard path != ":memory:" else { return }
        let file = Self.lastSyncFile(path)
        let fd = open(file, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd >= 0 {
            defer { Glibc.close(fd) }
            var info = stat()
            if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1 {
                _ = futimens(fd, nil)
                return
            }
        }
        Self.removeLastSync(path)
        let created = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o644)
        if created >= 0 { Glibc.close(created) }
    }

    /// Removes ``lastSyncFile(_:)`` (an empty folder of that name too): a state made afresh has not synced yet.
    public static func removeLastSync(_ path: String) {
        let file = lastSyncFile(path)
        if unlink(file) != 0 && errno == EISDIR { rmdir(file) }
    }

    /// When the last sync finished, in nanoseconds since 1970: the file's time (a regular file only), or the
    /// value ``MetaKey/lastSync`` holds (a sync clears it), whichever is later.
    public func lastSync() throws -> Int64? {
        let stored = try meta(.lastSync).flatMap(Int64.init)
        guard path != ":memory:", let info = FileIO.lstatInfo(Self.lastSyncFile(path)), (info.st_mode & S_IFMT) == S_IFREG
        else { return stored }
        let touched = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        return max(stored ?? touched, touched)
    }

    // MARK: meta

    public func meta(_ key: MetaKey) throws -> String? {
        try read { db in try Self.meta(db, key) }
    }

    /// One value of the meta table, through GRDB's cached statement (prepared once per connection).
    package static func meta(_ db: Database, _ key: MetaKey) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM meta WHERE key = ?"), arguments: [key.rawValue])
    }

    public func setMeta(_ values: [MetaKey: String?]) throws {
        try update { batch in
            for (key, value) in values { try batch.setMeta(key, value) }
        }
    }

    /// `update` without its fault points, for records a simulated crash next to gains nothing from (those of
    /// ``SyncEngine`` pending writes: a crash after one is one before the first write), so that adding one does
    /// not renumber the crash points of recorded schedules.
    package func updateQuietly(_ body: (Batch) throws -> Void) throws {
        do {
            try write { db in try body(Batch(db: db, statements: Batch.Statements(db))) }
        } catch let error as DatabaseError {
            throw Self.failure(error, path: path, doing: "update")
        }
        fileSeen.withLock { $0 = FileIO.lstatInfo(path).map(StatFingerprint.init) }
    }

    // MARK: bases, heads, outbox

    /// Every base (the last synced state of each note), for a sync.
    ///
    /// With `heads` (the zone's, loaded first), a base whose name is a head's too keeps the head's string instead of a
    /// copy of its own: a synced note's name is held once, not twice (the agent holds both tables for its whole life).
    public func bases(sharingNamesWith heads: RecordTable<RecordHead>? = nil) throws -> RecordTable<BaseRecord> {
        try read { db in
            var result: RecordTable<BaseRecord> = [:]
            result.reserveCapacity(try Int.fetchOne(db, sql: "SELECT count(*) FROM base") ?? 0)
            // Straight from SQLite, names trusted: this loads every note on every sync (names were validated
            // before they were stored, and only this process writes the file). Both tables are stored in name order
            // (schema v5), so a base's name is most often the next head's: `next` is where to look first.
            var next = 0
            try Self.eachRow(db, "SELECT name, tag, digest, size, modified, fpSize, fpMtime, fpCtime, fpInode FROM base") { row in
                guard var name = RecordName(trusted: row.text(0)), let digest = row.digest(2) else { return }
                let hash = NameHash(name)
                if let heads, let stored = heads.storedName(name, hash: hash, next: &next) { name = stored }
                var fingerprint: StatFingerprint?
                if !row.isNull(5) && !row.isNull(6) && !row.isNull(7) && !row.isNull(8) {
                    fingerprint = StatFingerprint(
                        size: row.int(5), mtime: row.int(6), ctime: row.int(7),
                        inode: UInt64(bitPattern: row.int(8)))
                }
                result.updateValue(
                    BaseRecord(tag: row.int(1), digest: digest, size: row.int(3), modified: row.int(4), fingerprint: fingerprint),
                    forKey: name, hash: hash)
            }
            return result
        }
    }

    /// The names of the bases under a folder: `folderPrefix` ends with "/" (`a/b/`). A range of the base table's
    /// primary key (BINARY collation: byte order, in which the names that start with `a/b/` are exactly those from
    /// `a/b/` up to `a/b0`, "0" being the byte after "/"): the agent's partial scan asks this for each path instead
    /// of going over every base.
    public func baseNames(under folderPrefix: String) throws -> [RecordName] {
        precondition(folderPrefix.hasSuffix("/"), "a folder prefix ends with /")
        let upper = String(folderPrefix.dropLast()) + "0"
        return try read { db in
            try String.fetchAll(db, sql: "SELECT name FROM base WHERE name >= ? AND name < ?", arguments: [folderPrefix, upper])
                .compactMap(RecordName.init(trusted:))
        }
    }

    /// The server state as last fetched (token and heads), so a sync reads only the entries after it.
    public func zoneState() throws -> ZoneState {
        try read { db in
            var state = ZoneState(
                token: Int64(try Self.meta(db, .token) ?? "0") ?? 0,
                chain: try Self.meta(db, .chain).flatMap(ContentDigest.init(hex:)))
            if let stored = try Self.meta(db, .chainEarlier) {
                state.earlier = stored.split(separator: ",", omittingEmptySubsequences: false).map { ContentDigest(hex: String($0)) }
            }
            state.verifiedTail = try Self.meta(db, .chainFile).flatMap(StatFingerprint.init(stored:))
            state.heads.reserveCapacity(try Int.fetchOne(db, sql: "SELECT count(*) FROM head") ?? 0)
            // A handful of devices write every record: their ids are shared, not allocated once per head.
            var devices: [String] = []
            // A move's heads name each other: a name moved to or from is the string of the head it names (the
            // other half of the move), not a copy. After a rename of a folder every head of it names another, and
            // until those names change again copies would weigh on every sync and on the idle agent (docs/benchmarks.md,
            // "Why these settings"). Copies replaced after the load would leave their pages taken: a name not loaded
            // yet waits in `later` (its bytes in `laterBytes`, no string each) and is looked up once all are.
            var later: [(row: Int, end: Int)] = []
            var laterBytes: [UInt8] = []
            try Self.eachRow(db, "SELECT name, tag, deleted, digest, size, modified, version, device, unverified, moved FROM head") { row in
                guard let name = RecordName(trusted: row.text(0)) else { return }
                var text: AssetRef?
                if !row.isNull(3), !row.isNull(4), let digest = row.digest(3) {
                    text = AssetRef(sha256: digest, size: row.int(4))
                }
                var moved: RecordName?
                var waiting: RecordName?
                if !row.isNull(9), let found = RecordName(trusted: row.text(9)) {
                    moved = state.heads.storedName(found)
                    if moved == nil { waiting = found }
                }
                let replaced = state.heads.updateValue(
                    RecordHead(
                        tag: row.int(1), deleted: row.int(2) != 0, text: text, modified: row.int(5),
                        version: Int(row.int(6)), device: row.text(7, reusing: &devices),
                        unverifiedSince: row.int(8), moved: moved),
                    forKey: name)
                // Two rows of one name (Unicode-equivalent names, stored apart: only damaged data, as names are
                // stored in NFC): the later row wins, so an earlier row's deferred lookup must not overwrite it.
                let headRow = replaced == nil ? state.heads.count - 1 : state.heads.rowIndex(of: name)!
                if replaced != nil { for index in later.indices where later[index].row == headRow { later[index].row = -1 } }
                if let waiting {
                    laterBytes += waiting.string.utf8
                    later.append((headRow, laterBytes.count))
                }
            }
            var start = 0
            for (row, end) in later {
                let found = RecordName(trusted: String(decoding: laterBytes[start..<end], as: UTF8.self))
                start = end
                guard row >= 0 else { continue }
                let moved = found.flatMap { state.heads.storedName($0) } ?? found
                state.heads.modifyValue(atRow: row) { $0.moved = moved }
            }
            return state
        }
    }

    /// The versions a sync recorded before writing them into notes and did not clear (it was killed), oldest first:
    /// the rows, then a value a database older than schema v4 holds in `meta` (``PendingWrite/decodeList(_:)``).
    package func pendingWrites() throws -> [PendingWrite] {
        try read { db in
            var writes: [PendingWrite] = []
            // A database older than schema v4 has no such table until a sync (not a dry run: it opens the database
            // read-only, never migrating it) has opened it. Asked of `sqlite_master` itself: GRDB's `tableExists`
            // reads the whole schema into its cache first, a cost every sync would pay.
            let exists = try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pendingWrite')"))
            if exists == true {
                try Self.eachRow(db, "SELECT name, tag, digest, size, modified FROM pendingWrite ORDER BY seq") { row in
                    guard let name = RecordName(trusted: row.text(0)), let digest = row.digest(2) else { return }
                    writes.append(
                        PendingWrite(
                            name: name, tag: row.int(1), text: AssetRef(sha256: digest, size: row.int(3)), modified: row.int(4)))
                }
            }
            if let stored = try Self.meta(db, .pendingWrites) { writes = PendingWrite.decodeList(stored) + writes }
            return writes
        }
    }

    /// One row of ``eachRow(_:_:_:)``: typed reads of its columns.
    struct RawRow {
        let statement: OpaquePointer
        func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
        func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
        package func text(_ column: Int32) -> String {
            guard let bytes = sqlite3_column_text(statement, column) else { return "" }
            let count = Int(sqlite3_column_bytes(statement, column))
            return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }
        /// The column's text, taken from `known` if it is there (no new string), else added to it (up to 16).
        package func text(_ column: Int32, reusing known: inout [String]) -> String {
            guard let bytes = sqlite3_column_text(statement, column) else { return "" }
            let buffer = UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, column)))
            for index in known.indices {
                var candidate = known[index]
                if candidate.withUTF8({
                    $0.count == buffer.count && ($0.isEmpty || memcmp($0.baseAddress!, buffer.baseAddress!, $0.count) == 0)
                }) {
                    return candidate
                }
            }
            let text = String(decoding: buffer, as: UTF8.self)
            if known.count < 16 { known.append(text) }
            return text
        }
        /// The column's text as a digest, parsed straight from SQLite's buffer.
        package func digest(_ column: Int32) -> ContentDigest? {
            guard let bytes = sqlite3_column_text(statement, column) else { return nil }
            return ContentDigest(hexBytes: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, column))))
        }
    }

    /// Steps through a query's rows with SQLite's own column accessors: several times faster than decoding
    /// rows, for the two tables every sync loads whole.
    static func eachRow(_ db: Database, _ sql: String, _ body: (RawRow) throws -> Void) throws {
        let statement = try db.makeStatement(sql: sql)
        let raw = statement.sqliteStatement
        defer { sqlite3_reset(raw) }
        while true {
            let code = sqlite3_step(raw)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
                    sql: sql)
            }
            try body(RawRow(statement: raw))
        }
    }

    public func outbox() throws -> [RecordName: OutboxItem] {
        try read { db in
            var result: [RecordName: OutboxItem] = [:]
            let rows = try Row.fetchCursor(db, sql: "SELECT name, op, digest, size, queued FROM outbox")
            while let row = try rows.next() {
                guard let name = try? RecordName(validating: row["name"]),
                    let op = RecordOp(rawValue: row["op"])
                else { continue }
                result[name] = OutboxItem(
                    name: name, op: op, digest: (row["digest"] as String?).flatMap(ContentDigest.init(hex:)),
                    size: row["size"], queued: row["queued"])
            }
            return result
        }
    }

    /// How many local changes wait for the server.
    public func outboxCount() throws -> Int {
        try read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox") ?? 0 }
    }

    public func conflicts() throws -> [ConflictRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT copy, original, device, time FROM conflict ORDER BY time").compactMap { row in
                guard let copy = try? RecordName(validating: row["copy"]),
                    let original = try? RecordName(validating: row["original"])
                else { return nil }
                return ConflictRecord(copy: copy, original: original, device: row["device"], time: row["time"])
            }
        }
    }

    /// Reads in one transaction; a database error is said as the user reads it (``failure(_:path:doing:)``).
    package func read<T>(_ body: (Database) throws -> T) throws -> T {
        do { return try queue.read(body) } catch let error as DatabaseError {
            throw Self.failure(error, path: path, doing: "read")
        }
    }

    /// Runs `body` in a transaction, with SQLite's cache at ``writeCacheKiB`` for it: lowered again once it is
    /// committed (or rolled back), which frees what the cache holds above ``pageCacheKiB``.
    private func write(_ body: (Database) throws -> Void) throws {
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA cache_size = -\(Self.writeCacheKiB)")
            defer { try? db.execute(sql: "PRAGMA cache_size = -\(Self.pageCacheKiB)") }
            try db.inTransaction {
                try body(db)
                return .commit
            }
        }
    }

    /// Applies a batch of changes to the local state in one transaction.
    public func update(_ body: (Batch) throws -> Void) throws {
        try FaultPoint.hit("state.beforeUpdate")
        do {
            try write { db in try body(Batch(db: db, statements: Batch.Statements(db))) }
        } catch let error as DatabaseError {
            throw Self.failure(error, path: path, doing: "update")
        }
        fileSeen.withLock { $0 = FileIO.lstatInfo(path).map(StatFingerprint.init) }
        try FaultPoint.hit("state.afterUpdate")
    }
}
