import Foundation
import GRDB
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// The local state's tables, as migrations: v1 made them, each later one changes them in place.
extension LocalState {
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
        migrator.registerMigration("v3") { db in
            // RecordHead.moved: the other name of a move (a tombstone's new name, a save's old one).
            try db.alter(table: "head") { t in t.add(column: "moved", .text) }
        }
        migrator.registerMigration("v4") { db in
            // The versions a sync is about to write into notes (SyncEngine+PendingWrites.swift), one row each, not
            // one JSON value in `meta`, which a first sync would hold three times over to record; a value a database
            // older than v4 holds there is still read.
            try db.create(table: "pendingWrite") { t in
                t.column("seq", .integer).primaryKey()
                t.column("name", .text).notNull()
                t.column("tag", .integer).notNull()
                t.column("digest", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("modified", .integer).notNull()
            }
        }
        migrator.registerMigration("v5") { db in
            // The bases and heads as tables without rowids, stored in name order: a sync reads both whole, and the
            // bases share the heads' name strings (``LocalState/bases(sharingNamesWith:)``), found row by row when
            // both come in the same order, without a lookup in the heads' index (a cache miss on a head's string)
            // for each base. Each row is also written once, not in a table and in the index of its name.
            try db.execute(
                sql: """
                    CREATE TABLE "base_v5" ("name" TEXT PRIMARY KEY NOT NULL, "tag" INTEGER NOT NULL,
                      "digest" TEXT NOT NULL, "size" INTEGER NOT NULL, "modified" INTEGER NOT NULL, "fpSize" INTEGER,
                      "fpMtime" INTEGER, "fpCtime" INTEGER, "fpInode" INTEGER) WITHOUT ROWID;
                    INSERT INTO "base_v5" SELECT name, tag, digest, size, modified, fpSize, fpMtime, fpCtime, fpInode
                      FROM "base";
                    DROP TABLE "base";
                    ALTER TABLE "base_v5" RENAME TO "base";
                    CREATE TABLE "head_v5" ("name" TEXT PRIMARY KEY NOT NULL, "tag" INTEGER NOT NULL,
                      "deleted" BOOLEAN NOT NULL, "digest" TEXT, "size" INTEGER, "modified" INTEGER NOT NULL,
                      "version" INTEGER NOT NULL, "device" TEXT NOT NULL, "unverified" INTEGER NOT NULL DEFAULT 0,
                      "moved" TEXT) WITHOUT ROWID;
                    INSERT INTO "head_v5" SELECT name, tag, deleted, digest, size, modified, version, device,
                      unverified, moved FROM "head";
                    DROP TABLE "head";
                    ALTER TABLE "head_v5" RENAME TO "head";
                    """)
        }
        return migrator
    }
}
