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

/// Retention and gc through the real `notesync` binary (docs/retention.md): what a user runs, and devices that were
/// away while gc compacted the log.
@Suite struct RetentionCLITests {
    /// Alice edits and deletes while Bob is away; gc thins and compacts the log; Bob's offline edit is merged and the
    /// delete reaches him; fsck is clean; `du` and `history` still work.
    @Test func aDeviceAwayDuringGCReconcilesAgainstTheSnapshot() throws {
        let t = try TwoDevices("gc-away")
        try t.write(t.a, "plan.md", "one\ntwo\nthree\nfour\nfive\n")
        try t.write(t.a, "old.md", "to be deleted\n")
        try t.sync(t.a)
        try t.sync(t.b)
        for round in 0..<5 {
            try t.write(t.a, "plan.md", "one \(round)\ntwo\nthree\nfour\nfive\n")
            try t.sync(t.a)
        }
        try FileManager.default.removeItem(atPath: t.a + "/old.md")
        try t.sync(t.a)
        try t.write(t.b, "plan.md", "one\ntwo\nthree\nfour\nfive by bob\n")

        _ = try t.expectOK(["server", "retention", t.server, "--all", "0", "--hourly", "0", "--daily", "0", "--weekly", "0"])
        let gc = try t.expectOK(["server", "gc", t.server, "--grace", "0"])
        #expect(gc.stdout.contains("compact the log at entry"), "\(gc.stdout)")
        #expect(try entryFiles(t.server).count == 1, "only the entry at the snapshot stays")

        let bob = try t.sync(t.b)
        #expect(bob.status == 0, "\(bob.stderr)")
        #expect(t.read(t.b, "plan.md") == "one 4\ntwo\nthree\nfour\nfive by bob\n", "merged with the base gc kept for bob")
        #expect(t.read(t.b, "old.md") == nil, "the delete reached bob: he is registered, so gc remembered it")
        try t.sync(t.a)
        #expect(try t.notes(t.a) == t.notes(t.b))
        let fsck = try t.expectOK(["server", "fsck", t.server])
        #expect(fsck.stdout.contains("0 findings"), "\(fsck.stdout)")
        let du = try t.expectOK(["server", "du", t.server])
        #expect(du.stdout.contains("live texts") && du.stdout.contains("device "), "\(du.stdout)")
        let history = try t.expectOK(["history", "--notes", t.a, "plan.md"])
        #expect(!history.stdout.isEmpty)
    }

    /// A device never registered with the server (its status file removed) comes back after gc forgot a delete: the
    /// note is kept, pushed again, and the sync says so.
    @Test func aForgottenDeleteIsKeptAndSaid() throws {
        let t = try TwoDevices("gc-forgotten")
        try t.write(t.a, "gone.md", "text\n")
        try t.write(t.a, "kept.md", "kept\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try FileManager.default.removeItem(atPath: t.a + "/gone.md")
        try t.sync(t.a)
        // One more entry, so the delete's entry is below the snapshot gc makes (the entry at a snapshot stays).
        try t.write(t.a, "kept.md", "kept, edited\n")
        try t.sync(t.a)
        for file in try FileManager.default.contentsOfDirectory(atPath: t.server + "/devices") {
            let info = try JSONDecoder().decode(
                DeviceInfo.self, from: Data(contentsOf: URL(fileURLWithPath: t.server + "/devices/" + file)))
            if info.name == "bob" { try FileManager.default.removeItem(atPath: t.server + "/devices/" + file) }
        }
        _ = try t.expectOK(["server", "retention", t.server, "--all", "0", "--hourly", "0", "--daily", "0", "--weekly", "0"])
        _ = try t.expectOK(["server", "gc", t.server, "--grace", "0"])
        try t.write(t.a, "new.md", "after gc\n")
        try t.sync(t.a)
        let bob = try t.sync(t.b)
        #expect(bob.status == 0)
        let said = bob.stdout + bob.stderr
        #expect(said.contains("gone.md") && said.contains("no longer remembers"), "\(said)")
        #expect(t.read(t.b, "gone.md") == "text\n", "kept, never deleted by a forgotten delete")
        #expect(t.read(t.b, "new.md") == "after gc\n")
        try t.sync(t.a)
        #expect(t.read(t.a, "gone.md") == "text\n", "pushed again")
    }

    /// `gc --dry-run` writes nothing; on a format 2 server gc refuses with the fix, and the fix works.
    @Test func dryRunAndAnOlderServer() throws {
        let t = try TwoDevices("gc-dry")
        for round in 0..<4 {
            try t.write(t.a, "a.md", "round \(round)\n")
            try t.sync(t.a)
        }
        _ = try t.expectOK(["server", "retention", t.server, "--all", "0"])
        let before = try treeFingerprint(t.server)
        let dry = try t.expectOK(["server", "gc", t.server, "--dry-run", "--grace", "0"])
        #expect(dry.stdout.contains("would remove 3 texts"), "\(dry.stdout)")
        #expect(try treeFingerprint(t.server) == before)
        let shown = try t.expectOK(["server", "retention", t.server])
        #expect(shown.stdout.contains("all 0, hourly 1d, daily 30d, weekly 1y"), "\(shown.stdout)")

        // A format 2 server: gc names the fix.
        let marker = ServerLayout(root: t.server).marker
        let text = try String(contentsOfFile: marker, encoding: .utf8)
        try Data(text.replacingOccurrences(of: "\"format\" : \(ServerMarker.plainFormat)", with: "\"format\" : 2").utf8)
            .write(to: URL(fileURLWithPath: marker))
        let refused = try t.run(["server", "gc", t.server])
        #expect(refused.status != 0 && refused.stderr.contains("notesync server upgrade"), "\(refused.stderr)")
        _ = try t.expectOK(["server", "upgrade", t.server])
        _ = try t.expectOK(["server", "gc", t.server, "--grace", "0"])
        try t.sync(t.b)
        #expect(t.read(t.b, "a.md") == "round 3\n")
    }

    func entryFiles(_ server: String) throws -> [String] {
        let log = ServerLayout(root: server).logDirectory
        return try FileManager.default.contentsOfDirectory(atPath: log).flatMap { shard in
            try FileManager.default.contentsOfDirectory(atPath: log + "/" + shard)
        }
    }
}
