import Foundation
import GRDB
import GRDBSQLite
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

extension LocalState {
    /// One write transaction's worth of changes.
    public struct Batch {
        let db: Database
        let statements: Statements

        public func setBase(_ name: RecordName, _ base: BaseRecord) throws {
            let statement = try statements.get(
                .setBase,
                """
                INSERT OR REPLACE INTO base(name, tag, digest, size, modified, fpSize, fpMtime, fpCtime, fpInode)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            statement.bind(1, name.string)
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

        /// Records a version a sync is about to write into a note (``SyncEngine/recordPendingWrites(_:)``).
        package func addPendingWrite(_ write: PendingWrite) throws {
            let statement = try statements.get(
                .addPendingWrite, "INSERT INTO pendingWrite(name, tag, digest, size, modified) VALUES (?, ?, ?, ?, ?)")
            statement.bind(1, write.name.string)
            statement.bind(2, write.tag)
            statement.bind(3, write.text.sha256)
            statement.bind(4, write.text.size)
            statement.bind(5, write.modified)
            try statement.run()
        }

        /// Forgets the recorded pending writes: written and recorded as bases, or adopted.
        package func clearPendingWrites() throws {
            try db.execute(sql: "DELETE FROM pendingWrite")
            try setMeta(.pendingWrites, nil)
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
            changed heads: [(name: RecordName, head: RecordHead?)]
        ) throws {
            try setZone(token: token, chain: chain, earlier: earlier, heads: heads.lazy.map { ($0.name, $0.head) })
        }

        /// Stores the token and the heads of `names`, each read from `head` (nil: the server forgot it), without a
        /// dictionary of them made first (a first sync stores a head a note: a dictionary of them all is a large copy).
        public func setZone(
            token: Int64, chain: ContentDigest?, earlier: [ContentDigest?], names: some Sequence<RecordName>,
            head: (RecordName) -> RecordHead?
        ) throws {
            try withoutActuallyEscaping(head) { head in
                try setZone(token: token, chain: chain, earlier: earlier, heads: names.lazy.map { ($0, head($0)) })
            }
        }

        /// Stores the token and each head (nil: the server forgot it).
        private func setZone(
            token: Int64, chain: ContentDigest?, earlier: [ContentDigest?],
            heads: some Sequence<(RecordName, RecordHead?)>
        ) throws {
            let statement = try statements.get(
                .setHead,
                """
                INSERT OR REPLACE INTO head(name, tag, deleted, digest, size, modified, version, device, unverified, moved)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for (name, head) in heads {
                guard let head else {
                    // A head the server forgot (gc dropped an old tombstone, and this device jumped to the snapshot).
                    let remove = try statements.get(.removeHead, "DELETE FROM head WHERE name = ?")
                    remove.bind(1, name.string)
                    try remove.run()
                    continue
                }
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
                if let moved = head.moved { statement.bind(10, moved.string) } else { statement.bindNull(10) }
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
        /// SQLite's C interface: a first sync writes three rows a note, and building arguments for each
        /// cost more than SQLite's own work.
        final class Statements {
            package enum Kind: Int, CaseIterable {
                case setBase, removeBase, setFingerprint, setHead, removeHead, queue, dequeue, addPendingWrite
            }
            private let db: Database
            private var prepared: [Statement?] = Array(repeating: nil, count: Kind.allCases.count)

            package init(_ db: Database) { self.db = db }

            package func get(_ kind: Kind, _ sql: String) throws -> Statement {
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

            package init(_ db: Database, _ sql: String) throws {
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

            package func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(handle, index, value) }
            func bindNull(_ index: Int32) { sqlite3_bind_null(handle, index) }
            package func bind(_ index: Int32, _ text: String) {
                sqlite3_bind_text(handle, index, text, Int32(text.utf8.count), Self.transient)
            }
            package func bind(_ index: Int32, _ digest: ContentDigest) {
                digest.withHex { hex in
                    _ = sqlite3_bind_text(
                        handle, index, UnsafeRawPointer(hex.baseAddress!).assumingMemoryBound(to: CChar.self),
                        Int32(hex.count), Self.transient)
                }
            }

            /// Runs the statement with what is bound, and makes it ready for the next binding.
            package func run() throws {
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

        /// Forgets the conflict a copy recorded, once the copy is deleted (here or on another device, and synced):
        /// the conflict is resolved, and `notesync conflicts` no longer has a row to filter out.
        public func resolveConflict(copy: RecordName) throws {
            try db.execute(sql: "DELETE FROM conflict WHERE copy = ?", arguments: [copy.string])
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
            try clearPendingWrites()
            for key: MetaKey in [.token, .chain, .chainEarlier, .chainFile, .plannedToken] { try setMeta(key, nil) }
            try setMeta(.serverID, serverID)
            try setMeta(.recovering, "1")
        }

        /// Sets one meta value; a value that is already there is not written again (a sync that changed nothing
        /// then writes nothing to the database).
        public func setMeta(_ key: MetaKey, _ value: String?) throws {
            guard try LocalState.meta(db, key) != value else { return }
            if let value {
                try db.execute(sql: "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", arguments: [key.rawValue, value])
            } else {
                try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [key.rawValue])
            }
        }
    }
}
