import Foundation
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport
import Testing

/// The local state database and the server marker when they cannot be used, through the real binary: an emptied
/// or replaced state (also under a running agent), a marker without the notes zone, a folder left by notesync 0.1.0;
/// and a few paths of the safety rails. Every printed fix is followed and must work.
@Suite struct StateAndMarkerTests {
    /// The commands that read the local state, each must say what is wrong without a raw SQLite message.
    static let readers: [[String]] = [["status"], ["diff"], ["conflicts"], ["history", "one.md"]]

    /// Checks that `result` failed (exit 1) with a clear message about the state database and the re-init fix.
    static func expectStateError(
        _ result: ProcessResult, _ folder: String, saying words: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let root = (folder as NSString).standardizingPath
        #expect(result.status == 1, "exit \(result.status): \(result.stdout) \(result.stderr)", sourceLocation: sourceLocation)
        #expect(!result.stderr.contains("SQLite error"), "a raw SQLite message: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(
            result.stderr.contains(root + "/.notesync/state.sqlite") && result.stderr.contains(words), "\(result.stderr)",
            sourceLocation: sourceLocation)
        let fix = result.stderr.split(separator: "\n").first { $0.contains("fix:") } ?? ""
        #expect(fix.contains("notesync init --notes \(root) --server DIR"), "\(result.stderr)", sourceLocation: sourceLocation)
    }

    /// Follows the re-init fix and checks the folder syncs again both ways, every note kept.
    static func followReinitFix(_ t: TwoDevices, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try t.expectOK(["init", "--notes", t.a, "--server", t.server, "--device-name", "alice"], sourceLocation: sourceLocation)
        let fresh = try t.expectOK(["status", "--notes", t.a], sourceLocation: sourceLocation)
        #expect(fresh.stdout.contains("last sync: never"), "\(fresh.stdout)", sourceLocation: sourceLocation)
        for command in readers { try t.expectOK(command + ["--notes", t.a], sourceLocation: sourceLocation) }
        try t.write(t.a, "after.md", "after the fresh start\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "after.md") == "after the fresh start\n", sourceLocation: sourceLocation)
        #expect(t.read(t.a, "one.md") == "one\n", sourceLocation: sourceLocation)
        #expect(try t.notes(t.a) == t.notes(t.b), sourceLocation: sourceLocation)
    }

    static func twoSyncedDevices(_ label: String) throws -> TwoDevices {
        let t = try TwoDevices(label)
        try t.write(t.a, "one.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        return t
    }

    /// An emptied `state.sqlite`: status, diff, conflicts and history say it is damaged (no raw SQLite message) and
    /// name the re-init fix; following it keeps every note and syncs.
    @Test func anEmptiedStateIsSaidClearlyByEveryReader() throws {
        let t = try Self.twoSyncedDevices("state-emptied")
        let database = t.a + "/.notesync/state.sqlite"
        for suffix in ["-wal", "-shm"] { unlink(database + suffix) }
        #expect(truncate(database, 0) == 0)
        for command in Self.readers {
            Self.expectStateError(try t.run(command + ["--notes", t.a]), t.a, saying: "damaged, empty or not a notesync state")
        }
        try Self.followReinitFix(t)
    }

    /// Another folder's database copied over this one's: every reader and sync refuse it (it holds another device),
    /// nothing is synced with it, and the re-init fix works.
    @Test func aStateCopiedFromAnotherFolderIsRefused() throws {
        let t = try Self.twoSyncedDevices("state-copied")
        let serverBefore = try treeFingerprint(t.server)
        #expect(try shell("cp '\(t.b)/.notesync/state.sqlite' '\(t.a)/.notesync/state.sqlite'", in: "/") == 0)
        for command in Self.readers + [["sync"]] {
            Self.expectStateError(try t.run(command + ["--notes", t.a]), t.a, saying: "was replaced")
        }
        #expect(try treeFingerprint(t.server) == serverBefore, "something was synced with a replaced state")
        try Self.followReinitFix(t)
    }

    enum Replacement: String, CaseIterable { case copiedOver, checkedOut }

    /// The database replaced under a running agent, by a copy over it (same file, another folder's content) or as
    /// `git checkout -f` does it (another file at the path): the agent stops with a clear error instead of syncing
    /// on; `status` says it too; the re-init fix works, and an agent started again syncs.
    @Test(arguments: Replacement.allCases)
    func aStateReplacedUnderTheAgentStopsIt(_ how: Replacement) throws {
        let t = try Self.twoSyncedDevices("state-agent-\(how.rawValue)")
        let agents = try TwoAgents(devices: t)
        defer { agents.stop() }
        let agent = try #require(agents.agentA)
        let database = t.a + "/.notesync/state.sqlite"
        switch how {
        case .copiedOver:
            #expect(try shell("cp '\(t.b)/.notesync/state.sqlite' '\(database)'", in: "/") == 0)
        case .checkedOut:
            #expect(try shell("cp '\(database)' '\(database).old' && mv '\(database).old' '\(database)'", in: "/") == 0)
        }
        try t.write(t.a, "wake.md", "wakes the agent\n")
        let stopped = eventually(30) { !agent.process.isRunning }
        #expect(stopped, "the agent goes on with a replaced database: \(agent.stderrText)")
        if !stopped { return }
        let result = agent.wait()
        #expect(result.status == 1 && result.stderr.contains("was replaced"), "\(result.status): \(result.stderr)")
        #expect(result.stderr.contains("fix: run `notesync init"), "\(result.stderr)")
        #expect(!result.stderr.contains("SQLite error"), "\(result.stderr)")
        Self.expectStateError(try t.run(["status", "--notes", t.a]), t.a, saying: "was replaced")

        try t.expectOK(["init", "--notes", t.a, "--server", t.server, "--device-name", "alice"])
        agents.agentA = try agents.start(t.a)
        #expect(eventually(30) { t.read(t.b, "wake.md") == "wakes the agent\n" }, "the agent started again does not sync")
        try t.write(t.a, "later.md", "after the fix\n")
        #expect(eventually(30) { t.read(t.b, "later.md") == "after the fix\n" })
    }

    /// A server marker that parses but lacks the "notes" zone: sync names the command that writes it again; following
    /// it (with the id `status` shows) works, keeps the server's format and id, and the devices sync on.
    @Test func aMarkerWithoutTheNotesZoneIsWrittenAgainByFollowingTheFix() throws {
        let t = try Self.twoSyncedDevices("marker-zone")
        let marker = ServerLayout(root: t.server).marker
        let original = try JSONDecoder().decode(ServerMarker.self, from: Data(contentsOf: URL(fileURLWithPath: marker)))
        var broken = original
        broken.zones = ["other"]
        unlink(marker)
        try JSONEncoder().encode(broken).write(to: URL(fileURLWithPath: marker))

        let refused = try t.run(["sync", "--notes", t.a])
        #expect(refused.status == 1 && refused.stderr.contains("has no zone"), "\(refused.stderr)")
        #expect(
            refused.stderr.contains("server fsck \((t.server as NSString).standardizingPath) --repair --server-id ID"), "\(refused.stderr)")
        let id = try t.serverIDShown(t.a)
        try t.expectOK(["server", "fsck", t.server, "--repair", "--server-id", id])
        let repaired = try JSONDecoder().decode(ServerMarker.self, from: Data(contentsOf: URL(fileURLWithPath: marker)))
        #expect(repaired.id == original.id && repaired.format == original.format && repaired.zones == ["notes"])
        try t.write(t.a, "two.md", "after the repair\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "two.md") == "after the repair\n")
        let again = try t.run(["server", "fsck", t.server, "--repair", "--server-id", id])
        #expect(again.status == 64 && again.stderr.contains("is a valid marker"), "\(again.stderr)")
    }

    /// Runs SQL on a database with the sqlite3 command.
    static func sqlite(_ database: String, _ sql: String) throws {
        let script = database + ".sql"
        try Data(sql.utf8).write(to: URL(fileURLWithPath: script))
        let result = runCommand("sqlite3 '\(database)' < '\(script)'")
        unlink(script)
        #expect(result.status == 0, "sqlite3: \(result.output)")
    }

    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    /// A notes folder and server as notesync 0.1.0 left them (server format 1, entries without chain links, a state
    /// database of schema v1 with no server id and no chain): a server made in its place is refused and not bound;
    /// with its own server back, this build syncs, binds the folder to it, and `server upgrade` then works.
    @Test func aFolderLeftByVersion010SyncsAndIsBoundOnlyAfterTheLogIsChecked() throws {
        #expect(runCommand("sqlite3 -version").status == 0, "the test needs the sqlite3 command")
        let scratch = try Scratch("state-010")
        let server = scratch.path + "/server"
        let notes = scratch.path + "/A"
        #expect(try notesync(["server", "init", server], scratch: scratch.path).status == 0)
        let layout = ServerLayout(root: server)
        let markerText = try String(contentsOfFile: layout.marker, encoding: .utf8)
        unlink(layout.marker)
        try Data(markerText.replacingOccurrences(of: "\"format\" : \(ServerMarker.plainFormat)", with: "\"format\" : 1").utf8)
            .write(to: URL(fileURLWithPath: layout.marker))
        let serverID = try JSONDecoder().decode(ServerMarker.self, from: Data(markerText.utf8)).id

        // The log as 0.1.0 devices wrote it: no `prev`.
        let device = "0123456789abcdef"
        let forger = ServerForger(server)
        let texts = ["old.md": "from 0.1.0\n", "other.md": "from another 0.1.0 device\n"]
        let first = try forger.save("old.md", texts["old.md"]!)
        let second = try forger.save("other.md", texts["other.md"]!)
        try forger.plantBytes(
            try SealedFile.seal(LogEntry(seq: 1, commit: "c1", device: device, time: 1, changes: [first]), kind: "entry"), seq: 1)
        try forger.plantBytes(
            try SealedFile.seal(LogEntry(seq: 2, commit: "c2", device: "fedcba9876543210", time: 2, changes: [second]), kind: "entry"),
            seq: 2)

        // The notes folder: both notes, and the state database of schema v1 (GRDB's migration "v1" only).
        try FileManager.default.createDirectory(atPath: notes + "/.notesync", withIntermediateDirectories: true)
        var rows = ""
        for (seq, change) in [(1, first), (2, second)] {
            let text = try #require(change.text)
            try Data(texts[change.name]!.utf8).write(to: URL(fileURLWithPath: notes + "/" + change.name))
            let (name, digest) = (Self.quoted(change.name), Self.quoted(text.sha256.hex))
            rows +=
                "INSERT INTO base(name, tag, digest, size, modified) VALUES ("
                + "\(name), \(seq), \(digest), \(text.size), \(change.modified));\n"
            rows +=
                "INSERT INTO head VALUES (\(name), \(seq), 0, \(digest), \(text.size), \(change.modified), 1, \(Self.quoted(device)));\n"
        }
        let meta: [(String, String)] = [
            ("device.id", device), ("device.name", "old"), ("server.path", (server as NSString).standardizingPath),
            ("created", "1"), ("token", "2"), ("planned.token", "2"), ("last.sync", "1")
        ]
        try Self.sqlite(
            notes + "/.notesync/state.sqlite",
            """
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            INSERT INTO grdb_migrations VALUES ('v1');
            CREATE TABLE "meta" ("key" TEXT PRIMARY KEY NOT NULL, "value" TEXT NOT NULL);
            CREATE TABLE "base" ("name" TEXT PRIMARY KEY NOT NULL, "tag" INTEGER NOT NULL, "digest" TEXT NOT NULL,
              "size" INTEGER NOT NULL, "modified" INTEGER NOT NULL, "fpSize" INTEGER, "fpMtime" INTEGER, "fpCtime" INTEGER,
              "fpInode" INTEGER);
            CREATE TABLE "head" ("name" TEXT PRIMARY KEY NOT NULL, "tag" INTEGER NOT NULL, "deleted" BOOLEAN NOT NULL,
              "digest" TEXT, "size" INTEGER, "modified" INTEGER NOT NULL, "version" INTEGER NOT NULL, "device" TEXT NOT NULL);
            CREATE TABLE "outbox" ("name" TEXT PRIMARY KEY NOT NULL, "op" TEXT NOT NULL, "digest" TEXT, "size" INTEGER NOT NULL,
              "queued" INTEGER NOT NULL);
            CREATE TABLE "conflict" ("copy" TEXT PRIMARY KEY NOT NULL, "original" TEXT NOT NULL, "device" TEXT NOT NULL,
              "time" INTEGER NOT NULL);
            \(meta.map { "INSERT INTO meta VALUES (\(Self.quoted($0.0)), \(Self.quoted($0.1)));" }.joined(separator: "\n"))
            \(rows)
            """)
        func run(_ arguments: [String]) throws -> ProcessResult { try notesync(arguments, scratch: scratch.path) }

        // A server made where the share should be mounted: behind the folder's token, so refused, and not bound.
        #expect(rename(server, server + ".away") == 0)
        #expect(try run(["server", "init", server]).status == 0)
        let fresh = try treeFingerprint(server)
        let refused = try run(["sync", "--notes", notes])
        #expect(refused.status == 1 && refused.stderr.contains("the server is behind this device"), "\(refused.stderr)")
        #expect(try treeFingerprint(server) == fresh, "something was written to the wrong server")
        #expect(!(try run(["status", "--notes", notes]).stdout.contains("server id:")), "bound to a server behind it")
        try FileManager.default.removeItem(atPath: server)
        #expect(rename(server + ".away", server) == 0)

        // Its own server back: it syncs, and is bound to it.
        try Data("written by this build\n".utf8).write(to: URL(fileURLWithPath: notes + "/new.md"))
        let synced = try run(["sync", "--notes", notes])
        #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
        let status = try run(["status", "--notes", notes])
        #expect(status.status == 0 && status.stdout.contains("server id: \(serverID)"), "\(status.stdout) \(status.stderr)")
        let other = scratch.path + "/B"
        #expect(try run(["init", "--notes", other, "--server", server, "--device-name", "bob"]).status == 0)
        #expect(try run(["sync", "--notes", other]).status == 0)
        #expect(try String(contentsOfFile: other + "/old.md", encoding: .utf8) == "from 0.1.0\n")
        #expect(try String(contentsOfFile: other + "/new.md", encoding: .utf8) == "written by this build\n")

        let upgraded = try run(["server", "upgrade", server])
        #expect(upgraded.status == 0 && upgraded.stdout.contains("now format \(ServerMarker.plainFormat)"), "\(upgraded.stderr)")
        try Data("after the upgrade\n".utf8).write(to: URL(fileURLWithPath: other + "/upgraded.md"))
        #expect(try run(["sync", "--notes", other]).status == 0)
        #expect(try run(["sync", "--notes", notes]).status == 0)
        #expect(try String(contentsOfFile: notes + "/upgraded.md", encoding: .utf8) == "after the upgrade\n")
        // The entries 0.1.0 wrote stay unlinked and are read as they are; the chain holds from the upgrade on: fsck
        // is clean, and a device new to the server reads the whole log.
        let fsck = try run(["server", "fsck", server])
        #expect(fsck.status == 0 && !fsck.stdout.contains("names no entry"), "\(fsck.stdout) \(fsck.stderr)")
        let third = scratch.path + "/C"
        #expect(try run(["init", "--notes", third, "--server", server, "--device-name", "carol"]).status == 0)
        let joined = try run(["sync", "--notes", third])
        #expect(joined.status == 0, "\(joined.stdout) \(joined.stderr)")
        for (note, text) in texts.merging(["upgraded.md": "after the upgrade\n"], uniquingKeysWith: { a, _ in a }) {
            #expect((try? String(contentsOfFile: third + "/" + note, encoding: .utf8)) == text, "\(note) on a new device")
        }
        #expect(try run(["--version"]).stdout.contains("0.2.0"))
    }

    /// `sync --dry-run --allow-mass-delete` previews the held deletes and changes nothing anywhere.
    @Test func aDryRunWithMassDeleteAllowedPreviewsAndChangesNothing() throws {
        let t = try TwoDevices("rails-dry-mass")
        for index in 0..<6 { try t.write(t.a, "old/n\(index).md", "note \(index)\n") }
        try t.write(t.a, "keep.md", "kept\n")
        try t.sync(t.a)
        try FileManager.default.removeItem(atPath: t.a + "/old")
        let server = try treeFingerprint(t.server)
        let local = try treeFingerprint(t.a)
        let preview = try t.run(["sync", "--notes", t.a, "--dry-run", "--allow-mass-delete"])
        #expect(preview.status == 0, "\(preview.stdout) \(preview.stderr)")
        #expect(preview.stdout.contains("dry run, nothing changed"), "\(preview.stdout)")
        for index in 0..<6 { #expect(preview.stdout.contains("old/n\(index).md"), "\(preview.stdout)") }
        #expect(try treeFingerprint(t.server) == server, "a dry run wrote to the server")
        #expect(try treeFingerprint(t.a) == local, "a dry run wrote to the notes folder")
        let held = try t.run(["sync", "--notes", t.a])
        #expect(held.status == 1 && held.stderr.contains("--allow-mass-delete"), "the preview approved the deletes: \(held.stderr)")
    }

    /// `init` on a notes folder already bound to a server, naming another one: refused (64); the fix it names
    /// (`recover --server DIR`) moves the folder there and works.
    @Test func initOnAFolderBoundToAnotherServerIsRefused() throws {
        let t = try Self.twoSyncedDevices("rails-init-bound")
        let next = t.scratch.path + "/next"
        try t.expectOK(["server", "init", next])
        let refused = try t.run(["init", "--notes", t.a, "--server", next])
        #expect(refused.status == 64 && refused.stderr.contains("is already a notesync notes folder"), "\(refused.stderr)")
        #expect(refused.stderr.contains("`notesync recover --server DIR`"), "\(refused.stderr)")
        try t.expectOK(["recover", "--notes", t.a, "--server", next])
        #expect(try t.run(["status", "--notes", t.a]).stdout.contains((next as NSString).standardizingPath))
        try t.write(t.a, "two.md", "on the next server\n")
        try t.sync(t.a)
        #expect(try logChanges(next, "two.md").count == 1 && logChanges(next, "one.md").count == 1)
    }

    /// `restore` while the note holds an edit the restore's sync could not push (saved while it ran, the server
    /// reachable): the edit is kept as a conflict copy, and the note holds the restored version.
    @Test func restoreKeepsAnEditMadeWhileItRuns() throws {
        let t = try TwoDevices("rails-restore-copy")
        try t.write(t.a, "n.md", "version one\n")
        try t.sync(t.a)
        try t.write(t.a, "n.md", "version two\n")
        try t.sync(t.a)
        try t.write(t.a, "n.md", "an edit not synced yet\n")
        // Stopped after its first sync claimed the slot for that edit (probe, asset, entry), while a late edit is saved.
        let restore = try StoppingNotesync(
            ["restore", "--notes", t.a, "n.md", "--version", "1"], scratch: t.scratch.path, stopAfter: 3)
        #expect(restore.stopped(), "the restore did not stop at its third publish")
        try t.write(t.a, "n.md", "an edit saved while the restore ran\n")
        restore.resume()
        let result = restore.wait()
        #expect(result.status == 0 && result.stdout.contains("kept as"), "\(result.stdout) \(result.stderr)")
        #expect(t.read(t.a, "n.md") == "version one\n")
        let kept = try t.notes(t.a).filter { String(decoding: $0.value, as: UTF8.self) == "an edit saved while the restore ran\n" }
        #expect(kept.count == 1 && kept.keys.first != "n.md", "the late edit is lost: \(kept.keys)")
        #expect(try t.run(["conflicts", "--notes", t.a]).stdout.contains(kept.keys.first ?? "?"))
        try t.sync(t.b)
        #expect(t.read(t.b, "n.md") == "version one\n")
        #expect(try logChanges(t.server, "n.md").contains { $0.text?.size == Int64("an edit not synced yet\n".utf8.count) })
    }

    /// The server's file times far from this device's clock (the entry just written touched back two hours while the
    /// sync is stopped right after publishing it): the sync warns of the clock skew, with the fix.
    @Test func aClockFarFromTheServersIsReported() throws {
        let t = try TwoDevices("rails-skew")
        try t.write(t.a, "n.md", "one\n")
        let sync = try StoppingNotesync(["sync", "--notes", t.a], scratch: t.scratch.path, stopAfter: 3)
        #expect(sync.stopped(), "the sync did not stop at its third publish")
        let entry = ServerLayout(root: t.server).entryPath(1)
        #expect(FileIO.lstatInfo(entry) != nil, "the third publish is not the entry")
        var times = [timespec(tv_sec: time(nil) - 7200, tv_nsec: 0), timespec(tv_sec: time(nil) - 7200, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, entry, &times, AT_SYMLINK_NOFOLLOW) == 0)
        sync.resume()
        let result = sync.wait()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stderr.contains("this device's clock is 1") && result.stderr.contains("minutes ahead of the server's"),
            "\(result.stderr)")
        #expect(result.stderr.contains("fix: set the clock right"), "\(result.stderr)")
        let again = try t.run(["sync", "--notes", t.a])
        #expect(!again.stderr.contains("clock"), "a sync that wrote nothing warns: \(again.stderr)")
    }
}
