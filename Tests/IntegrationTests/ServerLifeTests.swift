import Foundation
import Logging
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

/// A server over its whole life, through the real binary: unmounted and made again, restored from an older copy,
/// an entry lost from the middle of its log, a log that does not continue the one a device read, a format-1 server.
/// No device may stop syncing silently, and nothing may be lost on the way.
@Suite struct ServerLifeTests {
    /// The server's log entry files, by slot.
    static func entries(_ server: String) throws -> [Int64: String] {
        let layout = ServerLayout(root: server)
        var found: [Int64: String] = [:]
        for shard in try FileIO.list(layout.logDirectory) ?? [] {
            for name in try FileIO.list(layout.logDirectory + "/" + shard) ?? [] {
                if let seq = Int64(name) { found[seq] = layout.logDirectory + "/" + shard + "/" + name }
            }
        }
        return found
    }

    static func copyTree(_ from: String, _ to: String) throws {
        #expect(try shell("cp -a '\(from)' '\(to)'", in: "/") == 0)
    }

    /// The share is not mounted: sync is offline (exit 3) and never suggests making a server. A server made in its
    /// place anyway is refused (exit 1), and nothing is written to it; once the real server is back, all syncs.
    @Test func aServerMadeInPlaceOfTheRealOneIsRefused() throws {
        let t = try TwoDevices("life-recreated")
        try t.write(t.a, "one.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(rename(t.server, t.server + ".unmounted") == 0)
        try t.write(t.a, "two.md", "written while the share was away\n")

        let away = try t.run(["sync", "--notes", t.a])
        #expect(away.status == 3, "\(away.stdout) \(away.stderr)")
        #expect(!(away.stdout + away.stderr).contains("server init"), "the fix suggests making a server: \(away.stdout)")

        try t.expectOK(["server", "init", t.server])
        let fresh = try treeFingerprint(t.server)
        let refused = try t.run(["sync", "--notes", t.a])
        #expect(refused.status == 1, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("not its server") && refused.stderr.contains("notesync recover"), "\(refused.stderr)")
        #expect(try treeFingerprint(t.server) == fresh, "nothing is written to another server")
        let status = try t.run(["status", "--notes", t.a])
        #expect(status.status == 1 && status.stdout.contains("SYNC STOPPED"), "\(status.stdout)")
        let watch = try NotesyncProcess(["watch", "--notes", t.a], scratch: t.scratch.path)
        #expect(
            eventually(20) {
                (try? String(contentsOfFile: t.a + "/.notesync/status.json", encoding: .utf8))?.contains("not its server") == true
            },
            "the agent does not report it")
        watch.process.terminate()
        _ = watch.wait()
        #expect(watch.stderrText.contains("not its server"), "the agent's log does not say it")
        #expect(try treeFingerprint(t.server) == fresh, "the agent wrote to another server")

        try FileManager.default.removeItem(atPath: t.server)
        #expect(rename(t.server + ".unmounted", t.server) == 0)
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "two.md") == "written while the share was away\n")
        #expect(try t.run(["status", "--notes", t.a]).status == 0)
    }

    /// A NAS snapshot rolled back: every device finds the server behind it, says so (exit 1, status), and
    /// `recover` (dry run first, changing nothing) pushes back what the server lost; every text reaches every
    /// device, and no note is deleted anywhere: a note deleted after the backup comes back, on every device.
    @Test func aServerRestoredFromAnOlderCopyIsDetectedAndRecovered() throws {
        let t = try TwoDevices("life-rollback")
        try t.write(t.a, "old.md", "from before the backup\n")
        try t.write(t.a, "gone.md", "deleted after the backup\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let backup = t.scratch.path + "/backup"
        try Self.copyTree(t.server, backup)
        try t.write(t.a, "old.md", "from before the backup\nedited after it on A\n")
        try t.write(t.a, "a-new.md", "made on A after the backup\n")
        try FileManager.default.removeItem(atPath: t.a + "/gone.md")
        try t.sync(t.a)
        try t.sync(t.b)
        try t.write(t.b, "b-new.md", "made on B after the backup\n")
        try t.sync(t.b)
        try t.sync(t.a)

        try FileManager.default.removeItem(atPath: t.server)
        try Self.copyTree(backup, t.server)
        for folder in [t.a, t.b] {
            let stopped = try t.run(["sync", "--notes", folder])
            #expect(stopped.status == 1, "\(stopped.stdout) \(stopped.stderr)")
            #expect(stopped.stderr.contains("notesync recover"), "\(stopped.stderr)")
            let status = try t.run(["status", "--notes", folder])
            #expect(status.status == 1 && status.stdout.contains("SYNC STOPPED"), "\(status.stdout)")
        }

        // SQLite's shared-memory lock table (`-shm`) is written by any reader of a WAL database: left out, as in
        // every dry-run purity check.
        func state() throws -> [String: String] { try treeFingerprint(t.a + "/.notesync").filter { !$0.key.hasSuffix("-shm") } }
        let before = (try treeFingerprint(t.server), try t.notes(t.a), try state())
        let preview = try t.run(["recover", "--notes", t.a, "--dry-run"])
        #expect(preview.status == 0, "\(preview.stdout) \(preview.stderr)")
        #expect(preview.stdout.contains("a-new.md") && preview.stdout.contains("+made on A after the backup"), "\(preview.stdout)")
        #expect(!preview.stdout.contains("upload-delete") && preview.stdout.contains("gone.md"), "\(preview.stdout)")
        #expect(try treeFingerprint(t.server) == before.0 && t.notes(t.a) == before.1, "a dry run changed something")
        #expect(try state() == before.2, "a dry run changed the local state")

        let expected = try t.notes(t.a)
        try t.expectOK(["recover", "--notes", t.a])
        try t.expectOK(["recover", "--notes", t.b])
        try t.sync(t.a)
        try t.sync(t.b)
        try t.sync(t.a)
        let a = try t.notes(t.a)
        let b = try t.notes(t.b)
        #expect(a == b)
        for (name, text) in expected { #expect(a[name] == text, "\(name) is not what A had") }
        #expect(a["b-new.md"] == Data("made on B after the backup\n".utf8))
        #expect(a["gone.md"] == Data("deleted after the backup\n".utf8), "the delete the server lost is not made again")
        #expect(try t.run(["status", "--notes", t.b]).status == 0)
        #expect(try t.run(["server", "fsck", t.server]).status == 0)
    }

    /// An entry damaged on the server after devices read it (a disk error, a replicating tool): B, which had not
    /// read it yet, skips it with the fix; A, which wrote it, is stopped with the damage named, not told the server
    /// was replaced; following the printed fix (`recover` on A) brings every text to B, and nothing is lost.
    @Test func anEntryDamagedAfterItsWriterReadItIsNamedAndRecovered() throws {
        let t = try TwoDevices("life-damaged-tip")
        try t.write(t.a, "x.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try t.write(t.a, "x.md", "one\ntwo, in the entry that is damaged\n")
        try t.write(t.a, "y.md", "made in the entry that is damaged\n")
        try t.sync(t.a)
        let entries = try Self.entries(t.server)
        let last = try #require(entries.keys.max())
        let path = try #require(entries[last])
        #expect(truncate(path, try FileIO.read(path)!.count - 3) == 0)

        let skipped = try t.run(["sync", "--notes", t.b])
        #expect(
            skipped.stderr.contains(String(format: "%012d", last)) && skipped.stderr.contains("torn")
                && skipped.stderr.contains("notesync recover"), "\(skipped.stderr)")
        // Its bytes still name the writer and the notes: which device to run the fix on, and what is missing.
        #expect(
            skipped.stderr.contains("(by its bytes: \"alice\" (") && skipped.stderr.contains("(by its bytes: x.md, y.md)"),
            "\(skipped.stderr)")
        #expect(t.read(t.b, "x.md") == "one\n" && t.read(t.b, "y.md") == nil)

        let stopped = try t.run(["sync", "--notes", t.a])
        #expect(stopped.status == 1, "\(stopped.stdout) \(stopped.stderr)")
        #expect(
            stopped.stderr.contains("entry \(last), the last one this device read, is damaged now")
                && stopped.stderr.contains("notesync recover") && !stopped.stderr.contains("replaced"),
            "\(stopped.stderr)")
        let status = try t.run(["status", "--notes", t.a])
        #expect(status.status == 1 && status.stdout.contains("is damaged now"), "\(status.stdout)")

        let preview = try t.run(["recover", "--notes", t.a, "--dry-run"])
        #expect(preview.status == 0 && preview.stdout.contains("y.md"), "\(preview.stdout) \(preview.stderr)")
        try t.expectOK(["recover", "--notes", t.a])
        try t.sync(t.b)
        try t.sync(t.a)
        for folder in [t.a, t.b] {
            #expect(t.read(folder, "x.md") == "one\ntwo, in the entry that is damaged\n")
            #expect(t.read(folder, "y.md") == "made in the entry that is damaged\n")
            #expect(try t.run(["status", "--notes", folder]).status == 0)
        }
    }

    /// The same rollback, then the other device writes on and `server gc --grace 0` compacts the log past what A
    /// read: A's entries are gone, yet A's sync stops with the mismatch (the snapshot links every entry it
    /// compacted) instead of taking B's todo.md for a successor of its own; following the printed fix keeps both
    /// texts on both devices.
    @Test func aRestoredServerCompactedPastADeviceStopsItAndRecoverKeepsBothTexts() throws {
        let t = try TwoDevices("life-rollback-gc")
        try t.write(t.a, "old.md", "from before the backup\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let backup = t.scratch.path + "/backup"
        try Self.copyTree(t.server, backup)
        try t.write(t.a, "todo.md", "A's todo, committed after the backup\n")
        try t.sync(t.a)

        try FileManager.default.removeItem(atPath: t.server)
        try Self.copyTree(backup, t.server)
        try t.write(t.b, "b-new.md", "made on B on the restored server\n")
        try t.sync(t.b)
        try t.write(t.b, "todo.md", "B's todo, on the restored server\n")
        try t.sync(t.b)
        try t.write(t.b, "later.md", "B again\n")
        try t.sync(t.b)
        // Entries 1 to 3 go; entry 4 (the end) stays: A, at token 2, finds slot 3 empty and must jump.
        try t.expectOK(["server", "gc", t.server, "--grace", "0"])
        #expect(try Self.entries(t.server).keys.sorted() == [4])

        let stopped = try t.run(["sync", "--notes", t.a])
        #expect(stopped.status == 1, "\(stopped.stdout) \(stopped.stderr)")
        #expect(stopped.stderr.contains("notesync recover"), "\(stopped.stderr)")
        #expect(t.read(t.a, "todo.md") == "A's todo, committed after the backup\n", "nothing pulled over A's text")

        try t.expectOK(["recover", "--notes", t.a])
        try t.sync(t.b)
        try t.sync(t.a)
        let a = try t.notes(t.a)
        #expect(try t.notes(t.b) == a)
        let texts = Set(a.values.map { String(decoding: $0, as: UTF8.self) })
        #expect(texts.contains("A's todo, committed after the backup\n") && texts.contains("B's todo, on the restored server\n"))
        #expect(a["b-new.md"] == Data("made on B on the restored server\n".utf8))
        #expect(try t.run(["status", "--notes", t.a]).status == 0)
    }

    /// An entry lost from the middle of the log: a one-shot sync reports the gap at once (exit 1, the entry's
    /// path, the fix); `fsck --repair` seals it once old enough; the device whose commit was lost pushes it again.
    @Test func aGapIsReportedSealedAndTheLostCommitPushedAgain() throws {
        let t = try TwoDevices("life-gap")
        try t.write(t.a, "base.md", "shared\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try t.write(t.a, "lost.md", "in the entry that is lost\n")
        try t.write(t.a, "base.md", "shared\nedited in the entry that is lost\n")
        try t.sync(t.a)
        let lostSlot = try #require(Self.entries(t.server).keys.max())
        try t.write(t.a, "after.md", "in the entry after the gap\n")
        try t.sync(t.a)
        let lostPath = try #require(Self.entries(t.server)[lostSlot])
        #expect(unlink(lostPath) == 0)

        let stopped = try t.run(["sync", "--notes", t.b])
        #expect(stopped.status == 1, "\(stopped.stdout) \(stopped.stderr)")
        #expect(
            stopped.stderr.contains((lostPath as NSString).standardizingPath) && stopped.stderr.contains("gap")
                && stopped.stderr.contains("fsck --repair"),
            "\(stopped.stderr)")
        #expect(try t.run(["status", "--notes", t.b]).stdout.contains("SYNC STOPPED"))
        let young = try t.run(["server", "fsck", t.server, "--repair"])
        #expect(young.status == 1 && young.stdout.contains("younger than --gap-age"), "\(young.stdout)")
        #expect(FileIO.lstatInfo(lostPath) == nil, "a young gap was sealed")

        try t.expectOK(["server", "fsck", t.server, "--repair", "--gap-age", "0"])
        try t.expectOK(["server", "fsck", t.server])
        // A seal cut off before its notice: fsck finds the notice missing, and --repair writes it.
        let notice = ServerLayout(root: t.server).voidPath(lostSlot)
        #expect(unlink(notice) == 0)
        let unnoticed = try t.run(["server", "fsck", t.server])
        #expect(unnoticed.status == 1 && unnoticed.stdout.contains("notice of the void entry"), "\(unnoticed.stdout)")
        try t.expectOK(["server", "fsck", t.server, "--repair"])
        #expect(FileIO.lstatInfo(notice) != nil)
        try t.sync(t.b)
        #expect(t.read(t.b, "after.md") == "in the entry after the gap\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "lost.md") == "in the entry that is lost\n", "the lost commit was not pushed again")
        #expect(t.read(t.b, "base.md") == "shared\nedited in the entry that is lost\n")
        #expect(try t.notes(t.a) == t.notes(t.b))
    }

    /// The agent waits out a gap for its grace period (a replicating tool may deliver the entry late), pushing
    /// nothing meanwhile; an entry delivered within it is read as if nothing happened. After the grace period
    /// it reports the gap.
    @Test func theAgentWaitsOutAGapThenReportsIt() throws {
        let t = try TwoDevices("life-gap-agent")
        try t.write(t.a, "base.md", "shared\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try t.write(t.a, "late.md", "delivered late\n")
        try t.sync(t.a)
        let lateSlot = try #require(Self.entries(t.server).keys.max())
        try t.write(t.a, "after.md", "after the late one\n")
        try t.sync(t.a)
        let latePath = try #require(Self.entries(t.server)[lateSlot])
        let held = t.scratch.path + "/held-entry"
        #expect(rename(latePath, held) == 0)

        let agent = try NotesyncProcess(
            ["watch", "--notes", t.b, "--poll-interval", "0.2", "--gap-grace", "4"],
            scratch: t.scratch.path)
        defer {
            if agent.process.isRunning {
                kill(agent.pid, SIGKILL)
                agent.process.waitUntilExit()
            }
        }
        let statusFile = t.b + "/.notesync/status.json"
        #expect(
            eventually(20) { (try? String(contentsOfFile: statusFile, encoding: .utf8))?.contains("gap") == true },
            "the agent does not say it waits for a gap")
        try t.write(t.b, "mine.md", "written on B during the gap\n")
        Thread.sleep(forTimeInterval: 1)
        #expect(Set(try Self.entries(t.server).keys).count == Int(lateSlot), "something was pushed past a gap")
        // Delivered within the grace period: read as if nothing happened.
        #expect(rename(held, latePath) == 0)
        #expect(eventually(20) { t.read(t.b, "late.md") != nil && t.read(t.b, "after.md") != nil })
        #expect(eventually(20) { (try? t.run(["status", "--notes", t.a]))?.status == 0 })
        try t.sync(t.a)
        #expect(t.read(t.a, "mine.md") == "written on B during the gap\n")

        // Lost for good (an entry after an empty slot, as a replicating tool that lost one leaves it): reported
        // once the grace period is over.
        let lastSlot = try #require(Self.entries(t.server).keys.max())
        let forger = ServerForger(t.server)
        try forger.plant([try forger.save("next.md", "after the lost one\n")], seq: lastSlot + 2, device: "other")
        #expect(
            eventually(30) { agent.stderrText.contains("sync.failed") && agent.stderrText.contains("gap in the log") },
            "the agent never reports the gap")
        agent.process.terminate()
        _ = agent.wait()
    }

    /// An entry replaced under a device (the same slot, other content), and an entry that names another entry
    /// before it: both are a log that does not continue the one the device read.
    @Test func aLogThatDoesNotContinueTheChainIsDetected() throws {
        let t = try TwoDevices("life-chain")
        try t.write(t.a, "one.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        let forger = ServerForger(t.server)
        let last = try #require(Self.entries(t.server).keys.max())
        let path = try #require(Self.entries(t.server)[last])
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        unlink(path)
        try forger.plant([try forger.save("forged.md", "a different entry in the same slot\n")], seq: last)
        let replaced = try t.run(["sync", "--notes", t.b])
        #expect(replaced.status == 1 && replaced.stderr.contains("is not the entry \(last) this device read"), "\(replaced.stderr)")

        unlink(path)
        try FileIO.createAndSync(path, original)
        try t.sync(t.b)
        let entry = LogEntry(
            seq: last + 1, commit: "forked", device: "evil", time: 0,
            changes: [try forger.save("fork.md", "on another branch\n")], prev: ContentDigest(of: Data("x".utf8)))
        try forger.plantBytes(try SealedFile.seal(entry, kind: "entry"), seq: last + 1)
        let forked = try t.run(["sync", "--notes", t.b])
        #expect(forked.status == 1 && forked.stderr.contains("does not follow"), "\(forked.stderr)")
        let fsck = try t.run(["server", "fsck", t.server])
        #expect(fsck.status == 1 && fsck.stdout.contains("broken chain"), "\(fsck.stdout)")
        #expect(t.read(t.b, "fork.md") == nil)
    }

    /// A server made by notesync 0.1.0 (format 1) keeps working as it is; `server upgrade` moves it to format 2
    /// without rewriting its log.
    @Test func aFormatOneServerKeepsWorkingAndUpgrades() throws {
        let t = try TwoDevices("life-format1")
        let marker = ServerLayout(root: t.server).marker
        let text = try String(contentsOfFile: marker, encoding: .utf8)
        unlink(marker)
        try Data(text.replacingOccurrences(of: "\"format\" : \(ServerMarker.plainFormat)", with: "\"format\" : 1").utf8)
            .write(to: URL(fileURLWithPath: marker))
        // An entry as a format-1 build writes it: no chain link.
        let forger = ServerForger(t.server)
        let entry = LogEntry(seq: 1, commit: "v1", device: "old", time: 0, changes: [try forger.save("v1.md", "from 0.1.0\n")])
        try forger.plantBytes(try SealedFile.seal(entry, kind: "entry"), seq: 1)
        try t.write(t.a, "new.md", "from this build\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "v1.md") == "from 0.1.0\n" && t.read(t.b, "new.md") == "from this build\n")
        let log = try Self.entries(t.server).mapValues { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        let upgraded = try t.expectOK(["server", "upgrade", t.server])
        #expect(upgraded.stdout.contains("now format \(ServerMarker.plainFormat)"))
        #expect(try String(contentsOfFile: marker, encoding: .utf8).contains("\"format\" : \(ServerMarker.plainFormat)"))
        #expect(try Self.entries(t.server).mapValues { try Data(contentsOf: URL(fileURLWithPath: $0)) } == log, "the log was rewritten")
        try t.write(t.b, "after.md", "after the upgrade\n")
        try t.sync(t.b)
        try t.sync(t.a)
        #expect(t.read(t.a, "after.md") == "after the upgrade\n")
        try t.expectOK(["server", "fsck", t.server])
    }

    /// A garbage server marker: sync says to take the id from `status` and rewrite the marker with fsck; following
    /// the fix works, and the devices go on syncing with their server (the same id).
    @Test func aGarbageMarkerIsWrittenAgainByFollowingTheFix() throws {
        let t = try TwoDevices("life-marker")
        try t.write(t.a, "one.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        _ = try t.damageMarker()
        let broken = try t.run(["sync", "--notes", t.a])
        #expect(broken.status == 1 && broken.stderr.contains("--server-id ID"), "\(broken.stderr)")
        let id = try t.serverIDShown(t.a)
        #expect(try t.run(["server", "fsck", t.server, "--server-id", id]).status == 64, "--server-id needs --repair")
        try t.expectOK(["server", "fsck", t.server, "--repair", "--server-id", id])
        try t.write(t.a, "two.md", "after the repair\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "two.md") == "after the repair\n")
        let again = try t.run(["server", "fsck", t.server, "--repair", "--server-id", id])
        #expect(again.status == 64 && again.stderr.contains("is a valid marker"), "\(again.stderr)")
    }

    /// A notes folder moved on purpose to a new server (an old share retired): `recover --server DIR`, previewed
    /// first (nothing changes), binds it there and pushes every note; the other device follows the same way.
    @Test func aNotesFolderMovesToANewServerOnPurpose() throws {
        let t = try TwoDevices("life-move")
        try t.write(t.a, "one.md", "one\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try t.write(t.b, "two.md", "two, not synced before the move\n")
        let next = t.scratch.path + "/next-server"
        try t.expectOK(["server", "init", next])
        let empty = try treeFingerprint(next)
        let preview = try t.run(["recover", "--notes", t.a, "--server", next, "--dry-run"])
        #expect(preview.status == 0 && preview.stdout.contains("one.md"), "\(preview.stdout) \(preview.stderr)")
        #expect(try treeFingerprint(next) == empty, "a dry run wrote to the new server")
        try t.expectOK(["recover", "--notes", t.a, "--server", next])
        try t.expectOK(["recover", "--notes", t.b, "--server", next])
        try t.sync(t.a)
        #expect(t.read(t.a, "two.md") == "two, not synced before the move\n")
        #expect(try t.notes(t.a) == t.notes(t.b))
        #expect(try t.run(["status", "--notes", t.a]).stdout.contains((next as NSString).standardizingPath))
        #expect(try t.run(["server", "fsck", t.server]).status == 0, "the old server is left as it was")
    }
}
