import Foundation
import GRDB
import GRDBSQLite

/// The last synced state of one record, which both sides agreed on: the ancestor of the three-way comparison.
public struct BaseRecord: Codable, Hashable, Sendable {
    public var name: RecordName
    /// The server change tag the local note was synced at.
    public var tag: Int64
    public var digest: ContentDigest
    public var size: Int64
    public var modified: Int64
    /// The stat fingerprint of the local file when it was last hashed; `nil` forces a hash.
    public var fingerprint: StatFingerprint?

    public init(
        name: RecordName, tag: Int64, digest: ContentDigest, size: Int64, modified: Int64,
        fingerprint: StatFingerprint?
    ) {
        self.name = name
        self.tag = tag
        self.digest = digest
        self.size = size
        self.modified = modified
        self.fingerprint = fingerprint
    }
}

/// A local change that is not on the server yet: survives crashes and offline periods.
public struct OutboxItem: Codable, Hashable, Sendable {
    public var name: RecordName
    public var op: RecordOp
    public var digest: ContentDigest?
    public var size: Int64
    public var queued: Int64
}

/// A conflict copy notesync made, kept until the user deals with it (`notesync conflicts`).
public struct ConflictRecord: Codable, Hashable, Sendable {
    public var copy: RecordName
    public var original: RecordName
    public var device: String
    public var time: Int64

    public init(copy: RecordName, original: RecordName, device: String, time: Int64) {
        self.copy = copy
        self.original = original
        self.device = device
        self.time = time
    }
}

/// Everything notesync keeps about a notes folder, in SQLite (GRDB) on local disk: never on the share.
///
/// Holds the device identity, the server path, the change token and server heads (so a sync reads only new
/// entries), the base of every note, the outbox, conflicts and the last sync result.
public final class LocalState: Sendable {
    let queue: DatabaseQueue

    /// Opens (creating if asked) the state database at `path`; `readOnly` opens it without writing anything.
    public init(path: String, readOnly: Bool = false) throws {
        var configuration = Configuration()
        configuration.readonly = readOnly
        configuration.busyMode = .timeout(5)
        if !readOnly {
            // WAL with synchronous=NORMAL: a commit costs no fsync (the agent syncs many times a second). A power
            // cut may drop the last transactions but never corrupts the file, and nothing in it is lost for good:
            // a base or outbox row that is missing is re-derived by the next scan (same content = adopt).
            configuration.journalMode = .wal
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
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
            queue = try DatabaseQueue(path: location, configuration: configuration)
            if !readOnly { try Self.migrator.migrate(queue) }
        } catch let error as DatabaseError {
            throw Self.failure(error, path: path, doing: "open")
        }
    }

    /// A database error as the user reads it. A full disk is said to be one (SQLite reports it as "disk is full",
    /// or as an I/O error when its shared-memory file cannot grow), with a fix that keeps the state: moving the
    /// database away is advice for a damaged file only.
    static func failure(_ error: DatabaseError, path: String, doing: String) -> NoteSyncError {
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
        return NoteSyncError(
            .io, path: path, "cannot \(doing) the local state database: \(error.message ?? "\(error)")",
            fix: "check the file's permissions; if it was damaged or replaced (a restore, a git checkout), run "
                + "`notesync init --notes \(root) --server DIR` again: it moves it aside and starts afresh, keeping every note")
    }

    /// An in-memory database, for tests and dry runs of a folder that was never initialised.
    public init() throws {
        queue = try DatabaseQueue()
        try Self.migrator.migrate(queue)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "meta") { t in
                t.primaryKey("key", .text)
                t.column("value", .text).notNull()
            }
            try db.create(table: "base") { t in
                t.primaryKey("name", .text)
                t.column("tag", .integer).notNull()
                t.column("digest", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("modified", .integer).notNull()
                t.column("fpSize", .integer)
                t.column("fpMtime", .integer)
                t.column("fpCtime", .integer)
                t.column("fpInode", .integer)
            }
            try db.create(table: "head") { t in
                t.primaryKey("name", .text)
                t.column("tag", .integer).notNull()
                t.column("deleted", .boolean).notNull()
                t.column("digest", .text)
                t.column("size", .integer)
                t.column("modified", .integer).notNull()
                t.column("version", .integer).notNull()
                t.column("device", .text).notNull()
            }
            try db.create(table: "outbox") { t in
                t.primaryKey("name", .text)
                t.column("op", .text).notNull()
                t.column("digest", .text)
                t.column("size", .integer).notNull()
                t.column("queued", .integer).notNull()
            }
            try db.create(table: "conflict") { t in
                t.primaryKey("copy", .text)
                t.column("original", .text).notNull()
                t.column("device", .text).notNull()
                t.column("time", .integer).notNull()
            }
        }
        migrator.registerMigration("v2") { db in
            // RecordHead.unverifiedSince: where the record's line has an unchecked link (0: none).
            try db.alter(table: "head") { t in t.add(column: "unverified", .integer).notNull().defaults(to: 0) }
        }
        return migrator
    }

    /// Closes the database now (a checkpoint folds the write-ahead log in) rather than when the last reference
    /// goes: for a one-shot command that leaves its objects to the process exit (``OneShotProcess``).
    public func close() throws {
        do { try queue.close() } catch let error as DatabaseError {
            throw Self.failure(error, path: queue.path, doing: "close")
        }
    }

    // MARK: meta

    public func meta(_ key: MetaKey) throws -> String? {
        try queue.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key.rawValue]) }
    }

    public func setMeta(_ values: [MetaKey: String?]) throws {
        try update { batch in
            for (key, value) in values { try batch.setMeta(key, value) }
        }
    }

    // MARK: bases, heads, outbox

    public func bases() throws -> [RecordName: BaseRecord] {
        try queue.read { db in
            var result: [RecordName: BaseRecord] = [:]
            result.reserveCapacity(try Int.fetchOne(db, sql: "SELECT count(*) FROM base") ?? 0)
            // Straight from SQLite, names trusted: this loads every note on every sync (names were validated
            // before they were stored, and only this process writes the file).
            try Self.eachRow(db, "SELECT name, tag, digest, size, modified, fpSize, fpMtime, fpCtime, fpInode FROM base") { row in
                guard let name = RecordName(trusted: row.text(0)), let digest = row.digest(2) else { return }
                var fingerprint: StatFingerprint?
                if !row.isNull(5) && !row.isNull(6) && !row.isNull(7) && !row.isNull(8) {
                    fingerprint = StatFingerprint(
                        size: row.int(5), mtime: row.int(6), ctime: row.int(7),
                        inode: UInt64(bitPattern: row.int(8)))
                }
                result[name] = BaseRecord(
                    name: name, tag: row.int(1), digest: digest, size: row.int(3),
                    modified: row.int(4), fingerprint: fingerprint)
            }
            return result
        }
    }

    /// The server state as last fetched (token and heads), so a sync reads only the entries after it.
    public func zoneState() throws -> ZoneState {
        try queue.read { db in
            var state = ZoneState(
                token: Int64(
                    try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [MetaKey.token.rawValue]) ?? "0") ?? 0,
                chain: try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [MetaKey.chain.rawValue]).flatMap(
                    ContentDigest.init(hex:)))
            if let stored = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [MetaKey.chainEarlier.rawValue])
            {
                state.earlier = stored.split(separator: ",", omittingEmptySubsequences: false).map { ContentDigest(hex: String($0)) }
            }
            state.verifiedTail = try String.fetchOne(
                db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [MetaKey.chainFile.rawValue]
            )
            .flatMap(StatFingerprint.init(stored:))
            state.heads.reserveCapacity(try Int.fetchOne(db, sql: "SELECT count(*) FROM head") ?? 0)
            // A handful of devices write every record: their ids are shared, not allocated once per head.
            var devices: [String] = []
            try Self.eachRow(db, "SELECT name, tag, deleted, digest, size, modified, version, device, unverified FROM head") { row in
                guard let name = RecordName(trusted: row.text(0)) else { return }
                var text: AssetRef?
                if !row.isNull(3), !row.isNull(4), let digest = row.digest(3) {
                    text = AssetRef(sha256: digest, size: row.int(4))
                }
                state.heads[name] = RecordHead(
                    tag: row.int(1), deleted: row.int(2) != 0, text: text, modified: row.int(5),
                    version: Int(row.int(6)), device: row.text(7, reusing: &devices),
                    unverifiedSince: row.int(8))
            }
            return state
        }
    }

    /// One row of ``eachRow(_:_:_:)``: typed reads of its columns.
    struct RawRow {
        let statement: OpaquePointer
        func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
        func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
        func text(_ column: Int32) -> String {
            guard let bytes = sqlite3_column_text(statement, column) else { return "" }
            let count = Int(sqlite3_column_bytes(statement, column))
            return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }
        /// The column's text, taken from `known` if it is there (no new string), else added to it (up to 16).
        func text(_ column: Int32, reusing known: inout [String]) -> String {
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
        func digest(_ column: Int32) -> ContentDigest? {
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
        try queue.read { db in
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
        try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox") ?? 0 }
    }

    public func conflicts() throws -> [ConflictRecord] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT copy, original, device, time FROM conflict ORDER BY time").compactMap { row in
                guard let copy = try? RecordName(validating: row["copy"]),
                    let original = try? RecordName(validating: row["original"])
                else { return nil }
                return ConflictRecord(copy: copy, original: original, device: row["device"], time: row["time"])
            }
        }
    }

    /// Applies a batch of changes to the local state in one transaction.
    public func update(_ body: (Batch) throws -> Void) throws {
        try FaultPoint.hit("state.beforeUpdate")
        do {
            try queue.write { db in try body(Batch(db: db, statements: Batch.Statements(db))) }
        } catch let error as DatabaseError {
            throw Self.failure(error, path: queue.path, doing: "update")
        }
        try FaultPoint.hit("state.afterUpdate")
    }

    /// One write transaction's worth of changes.
    public struct Batch {
        let db: Database
        let statements: Statements

        public func setBase(_ base: BaseRecord) throws {
            let statement = try statements.get(
                .setBase,
                """
                INSERT OR REPLACE INTO base(name, tag, digest, size, modified, fpSize, fpMtime, fpCtime, fpInode)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            statement.bind(1, base.name.string)
            statement.bind(2, base.tag)
            statement.bind(3, base.digest)
            statement.bind(4, base.size)
            statement.bind(5, base.modified)
            if let fp = base.fingerprint {
                statement.bind(6, fp.size)
                statement.bind(7, fp.mtime)
                statement.bind(8, fp.ctime)
                statement.bind(9, Int64(bitPattern: fp.inode))
            } else {
                for column in Int32(6)...9 { statement.bindNull(column) }
            }
            try statement.run()
        }

        public func removeBase(_ name: RecordName) throws {
            let statement = try statements.get(.removeBase, "DELETE FROM base WHERE name = ?")
            statement.bind(1, name.string)
            try statement.run()
        }

        public func setFingerprint(_ name: RecordName, _ fingerprint: StatFingerprint) throws {
            let statement = try statements.get(
                .setFingerprint,
                "UPDATE base SET fpSize = ?, fpMtime = ?, fpCtime = ?, fpInode = ? WHERE name = ?")
            statement.bind(1, fingerprint.size)
            statement.bind(2, fingerprint.mtime)
            statement.bind(3, fingerprint.ctime)
            statement.bind(4, Int64(bitPattern: fingerprint.inode))
            statement.bind(5, name.string)
            try statement.run()
        }

        /// Stores the token and the heads that changed since the last save.
        public func setZone(
            token: Int64, chain: ContentDigest?, earlier: [ContentDigest?],
            changed heads: [RecordName: RecordHead]
        ) throws {
            let statement = try statements.get(
                .setHead,
                """
                INSERT OR REPLACE INTO head(name, tag, deleted, digest, size, modified, version, device, unverified)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for (name, head) in heads {
                statement.bind(1, name.string)
                statement.bind(2, head.tag)
                statement.bind(3, head.deleted ? 1 : 0)
                if let text = head.text {
                    statement.bind(4, text.sha256)
                    statement.bind(5, text.size)
                } else {
                    statement.bindNull(4)
                    statement.bindNull(5)
                }
                statement.bind(6, head.modified)
                statement.bind(7, Int64(head.version))
                statement.bind(8, head.device)
                statement.bind(9, head.unverifiedSince)
                try statement.run()
            }
            try setMeta(.token, String(token))
            if let chain {
                try setMeta(.chain, chain.hex)
            } else {
                try setMeta(.chain, nil)
            }
            try setMeta(.chainEarlier, earlier.map { $0?.hex ?? "" }.joined(separator: ","))
        }

        public func queue(_ item: OutboxItem) throws {
            let statement = try statements.get(
                .queue,
                "INSERT OR REPLACE INTO outbox(name, op, digest, size, queued) VALUES (?, ?, ?, ?, ?)")
            statement.bind(1, item.name.string)
            statement.bind(2, item.op.rawValue)
            if let digest = item.digest { statement.bind(3, digest) } else { statement.bindNull(3) }
            statement.bind(4, item.size)
            statement.bind(5, item.queued)
            try statement.run()
        }

        public func dequeue(_ name: RecordName) throws {
            let statement = try statements.get(.dequeue, "DELETE FROM outbox WHERE name = ?")
            statement.bind(1, name.string)
            try statement.run()
        }

        /// The statements a transaction runs for every record, prepared once each and bound straight through
        /// SQLite's C interface: a first sync writes 30,000 rows per 10,000 notes, and building arguments for each
        /// cost more than SQLite's own work.
        final class Statements {
            enum Kind: Int, CaseIterable { case setBase, removeBase, setFingerprint, setHead, queue, dequeue }
            private let db: Database
            private var prepared: [Statement?] = Array(repeating: nil, count: Kind.allCases.count)

            init(_ db: Database) { self.db = db }

            func get(_ kind: Kind, _ sql: String) throws -> Statement {
                if let statement = prepared[kind.rawValue] { return statement }
                let statement = try Statement(db, sql)
                prepared[kind.rawValue] = statement
                return statement
            }
        }

        /// One prepared statement of ``Statements``, finalized with them.
        final class Statement {
            private let handle: OpaquePointer
            private let db: Database
            private let sql: String
            private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

            init(_ db: Database, _ sql: String) throws {
                var handle: OpaquePointer?
                let code = sqlite3_prepare_v2(db.sqliteConnection, sql, -1, &handle, nil)
                guard code == SQLITE_OK, let handle else {
                    throw DatabaseError(
                        resultCode: ResultCode(rawValue: code),
                        message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: sql)
                }
                self.handle = handle
                self.db = db
                self.sql = sql
            }

            deinit { sqlite3_finalize(handle) }

            func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(handle, index, value) }
            func bindNull(_ index: Int32) { sqlite3_bind_null(handle, index) }
            func bind(_ index: Int32, _ text: String) {
                sqlite3_bind_text(handle, index, text, Int32(text.utf8.count), Self.transient)
            }
            func bind(_ index: Int32, _ digest: ContentDigest) {
                digest.withHex { hex in
                    _ = sqlite3_bind_text(
                        handle, index, UnsafeRawPointer(hex.baseAddress!).assumingMemoryBound(to: CChar.self),
                        Int32(hex.count), Self.transient)
                }
            }

            /// Runs the statement with what is bound, and makes it ready for the next binding.
            func run() throws {
                let code = sqlite3_step(handle)
                sqlite3_reset(handle)
                guard code == SQLITE_DONE || code == SQLITE_ROW else {
                    throw DatabaseError(
                        resultCode: ResultCode(rawValue: code),
                        message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: sql)
                }
            }
        }

        public func addConflict(_ conflict: ConflictRecord) throws {
            try db.execute(
                sql: "INSERT OR REPLACE INTO conflict(copy, original, device, time) VALUES (?, ?, ?, ?)",
                arguments: [conflict.copy.string, conflict.original.string, conflict.device, conflict.time])
        }

        /// Forgets everything this device knew of its server (bases, heads, token, chain) and binds the folder to
        /// the server `serverID`: what `notesync recover` starts from. Notes, queued changes and conflicts stay.
        /// Forgets the heads, token and chain: the next fetch reads the whole log again.
        public func forgetZone() throws {
            try db.execute(sql: "DELETE FROM head")
            for key: MetaKey in [.token, .chain, .chainEarlier, .chainFile] { try setMeta(key, nil) }
        }

        public func forgetServer(bindingTo serverID: String) throws {
            try db.execute(sql: "DELETE FROM base")
            try db.execute(sql: "DELETE FROM head")
            for key: MetaKey in [.token, .chain, .chainEarlier, .chainFile, .plannedToken] { try setMeta(key, nil) }
            try setMeta(.serverID, serverID)
        }

        public func setMeta(_ key: MetaKey, _ value: String?) throws {
            if let value {
                try db.execute(sql: "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", arguments: [key.rawValue, value])
            } else {
                try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [key.rawValue])
            }
        }
    }
}

/// The keys of the local state's `meta` table: the folder's identity and configuration, and what syncs keep between
/// runs. Named once here, so that the engine, the agent and the commands cannot disagree on a spelling.
public enum MetaKey: String, CaseIterable, Sendable {
    /// This device: its id (in log entries) and its name (in conflict copies).
    case deviceID = "device.id"
    case deviceName = "device.name"
    /// When `init` made the folder.
    case created
    /// The server folder's path and the id of the server the folder is bound to (its marker's).
    case serverPath = "server.path"
    case serverID = "server.id"
    /// The change token, the chain digest of the entry at it, those of the entries before it (`ZoneState.earlier`),
    /// and the stat fingerprint of the entry file last verified.
    case token
    case chain
    case chainEarlier = "chain.earlier"
    case chainFile = "chain.file"
    /// The token the last finished sync planned up to.
    case plannedToken = "planned.token"
    /// The voided slots this device has checked its heads and bases against.
    case voidsSeen = "voids.seen"
    /// Local deletes held by the mass-delete guard (absent: none).
    case heldDeletes = "held.deletes"
    /// The time of the last sync that reached the server, and the error the last one ended with.
    case lastSync = "last.sync"
    case lastError = "last.error"
}
