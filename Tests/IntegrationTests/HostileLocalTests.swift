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

/// Hostile things in a notes folder: links out of it, FIFOs, notes notesync may not read, folders in a note's
/// place, names that are not UTF-8. Each is skipped and reported: never followed, never written through, never
/// taken as deleted, never a hang.
@Suite struct HostileLocalTests {
    /// Symlinks named like notes the server has (new to this device, or synced before), and a symlinked folder:
    /// the targets outside stay untouched, the links stay links, the records stay on the server.
    @Test func symlinksToOutsideAreNeverWrittenThroughEvenWhenTheServerHasTheName() throws {
        let t = try TwoDevices("symlink-outside")
        let outside = t.scratch.path + "/outside"
        try FileManager.default.createDirectory(atPath: outside + "/dir", withIntermediateDirectories: true)
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: outside + "/secret.txt"))
        try t.write(t.a, "shared.md", "A's shared note\n")
        try t.write(t.a, "was-note.md", "synced, then replaced by a link on B\n")
        try t.write(t.a, "linkdir/inside.md", "a note in a folder that is a link on B\n")
        try t.sync(t.a)
        // B: its first sync finds links where the server has notes.
        try FileManager.default.createSymbolicLink(atPath: t.b + "/shared.md", withDestinationPath: outside + "/secret.txt")
        try FileManager.default.createSymbolicLink(atPath: t.b + "/linkdir", withDestinationPath: outside + "/dir")
        try t.write(t.b, "was-note.md", "synced, then replaced by a link on B\n")
        let outsideBefore = try treeState(outside)

        let first = try t.sync(t.b)
        #expect(
            first.stderr.contains("shared.md") && first.stderr.contains("symbolic link") && first.stderr.contains("fix:"),
            "\(first.stderr)")
        #expect(first.stderr.contains("linkdir") && first.stderr.contains("never writes through links"), "\(first.stderr)")
        expectNoTerminalControls(first)
        #expect(try treeState(outside) == outsideBefore, "nothing is written through a link")
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: t.b + "/shared.md") == outside + "/secret.txt",
            "the link itself is neither replaced nor deleted")
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.b).allSatisfy { !$0.hasPrefix(".notesync-tmp-") })

        // A synced note replaced by a link on B, then edited on A: still not written through, and not deleted.
        try FileManager.default.removeItem(atPath: t.b + "/was-note.md")
        try FileManager.default.createSymbolicLink(atPath: t.b + "/was-note.md", withDestinationPath: outside + "/secret.txt")
        let replaced = try t.sync(t.b)
        expectNoTerminalControls(replaced)
        try t.write(t.a, "was-note.md", "edited on A\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(try treeState(outside) == outsideBefore)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: t.b + "/was-note.md") == outside + "/secret.txt")
        let heads = try serverHeads(t.server)
        #expect(
            heads["was-note.md"]?.deleted == false && heads["shared.md"]?.deleted == false,
            "a link is skipped, never taken as a delete: \(heads)")
        try t.sync(t.a)
        #expect(t.read(t.a, "was-note.md") == "edited on A\n" && t.read(t.a, "shared.md") == "A's shared note\n")

        // Once the links are gone, the notes sync into their places.
        for link in ["shared.md", "was-note.md", "linkdir"] { try FileManager.default.removeItem(atPath: t.b + "/" + link) }
        try t.sync(t.b)
        #expect(t.read(t.b, "shared.md") == "A's shared note\n" && t.read(t.b, "was-note.md") == "edited on A\n")
        #expect(t.read(t.b, "linkdir/inside.md") == "a note in a folder that is a link on B\n")
        #expect(try treeState(outside) == outsideBefore)
    }

    /// A FIFO where a note is expected, with no writer on the other end: skipped at once, never opened for a
    /// blocking read, never replaced, never taken as deleted.
    @Test func aFIFOIsSkippedWithoutHanging() throws {
        let t = try TwoDevices("fifo")
        try t.write(t.a, "pipe.md", "A's note named like B's FIFO\n")
        try t.write(t.a, "was-note.md", "synced, then replaced by a FIFO\n")
        try t.sync(t.a)
        try t.write(t.b, "was-note.md", "synced, then replaced by a FIFO\n")
        try t.write(t.b, "ok.md", "an ordinary note\n")
        #expect(mkfifo(t.b + "/pipe.md", 0o644) == 0)
        #expect(mkfifo(t.b + "/lonely.fifo", 0o644) == 0)
        let first = try #require(finishes(try NotesyncProcess(["sync", "--notes", t.b], scratch: t.scratch.path), within: 60))
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("pipe.md") && first.stderr.contains("lonely.fifo"), "\(first.stderr)")

        try FileManager.default.removeItem(atPath: t.b + "/was-note.md")
        #expect(mkfifo(t.b + "/was-note.md", 0o644) == 0)
        try t.write(t.a, "pipe.md", "edited on A\n")
        try t.sync(t.a)
        let second = try #require(finishes(try NotesyncProcess(["sync", "--notes", t.b], scratch: t.scratch.path), within: 60))
        #expect(second.status == 0, "\(second.stderr)")
        for fifo in ["pipe.md", "lonely.fifo", "was-note.md"] {
            #expect(FileIO.lstatInfo(t.b + "/" + fifo).map { $0.st_mode & S_IFMT == S_IFIFO } == true, "\(fifo) is still a FIFO")
        }
        let heads = try serverHeads(t.server)
        #expect(heads["was-note.md"]?.deleted == false, "a FIFO in a note's place is not a delete")
        #expect(heads["lonely.fifo"] == nil)
        try t.sync(t.a)
        #expect(t.read(t.a, "ok.md") == "an ordinary note\n" && t.read(t.a, "was-note.md") == "synced, then replaced by a FIFO\n")
    }

    /// Notes and a folder that notesync's user may not read (root reads everything, so the syncs run as nobody):
    /// reported with the fix, left alone on both sides, never taken as deleted; readable again, they sync.
    @Test(.enabled(if: canRunAsNobody, "needs root and setpriv to run notesync as nobody"))
    func anUnreadableNoteIsReportedAndNeverTakenAsDeleted() throws {
        let t = try TwoDevices("unreadable")
        try t.write(t.a, "locked.md", "v1\n")
        try t.write(t.a, "open.md", "open v1\n")
        try t.write(t.a, "private/inner.md", "in a folder that becomes unreadable\n")
        #expect(runCommand("chown -R nobody:nogroup '\(t.scratch.path)'").status == 0)
        let initial = try notesyncAsNobody(["sync", "--notes", t.a], scratch: t.scratch.path)
        #expect(initial.status == 0, "\(initial.stderr)")
        func syncB() throws {
            let result = try notesyncAsNobody(["sync", "--notes", t.b], scratch: t.scratch.path)
            #expect(result.status == 0, "\(result.stderr)")
        }
        try syncB()

        // root owns them now, with no access for others: nobody cannot read them.
        #expect(
            runCommand("chown root:root '\(t.a)/locked.md' '\(t.a)/private' && chmod 000 '\(t.a)/locked.md' && chmod 700 '\(t.a)/private'")
                .status == 0)
        try t.write(t.a, "open.md", "open v2\n")
        let blocked = try notesyncAsNobody(["sync", "--notes", t.a], scratch: t.scratch.path)
        #expect(blocked.status == 0, "\(blocked.stderr)")
        #expect(
            blocked.stderr.contains("locked.md: cannot be read, left alone") && blocked.stderr.contains("Permission denied")
                && blocked.stderr.contains("fix:"), "\(blocked.stderr)")
        #expect(blocked.stderr.contains("private: cannot be listed"), "\(blocked.stderr)")
        #expect(
            blocked.stdout.split(separator: "\n").contains { $0.hasPrefix("upload ") && $0.hasSuffix(" open.md") },
            "the rest of the sync is done: \(blocked.stdout)")
        #expect(!blocked.stdout.contains("upload-delete"), "\(blocked.stdout)")

        // B changes the unreadable note: A leaves its own copy alone instead of replacing what it cannot check.
        try syncB()
        try t.write(t.b, "locked.md", "v2 from B\n")
        try syncB()
        let again = try notesyncAsNobody(["sync", "--notes", t.a], scratch: t.scratch.path)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(t.read(t.a, "locked.md") == "v1\n", "what could not be checked is not overwritten")
        let heads = try serverHeads(t.server)
        #expect(heads["locked.md"]?.deleted == false && heads["private/inner.md"]?.deleted == false, "\(heads)")
        #expect(t.read(t.b, "open.md") == "open v2\n" && t.read(t.b, "private/inner.md") != nil)

        // Readable again: the server's version arrives (A had not changed the note).
        #expect(runCommand("chown -R nobody:nogroup '\(t.a)' && chmod 644 '\(t.a)/locked.md' && chmod 755 '\(t.a)/private'").status == 0)
        let healed = try notesyncAsNobody(["sync", "--notes", t.a], scratch: t.scratch.path)
        #expect(healed.status == 0, "\(healed.stderr)")
        #expect(t.read(t.a, "locked.md") == "v2 from B\n")
        #expect(t.read(t.a, "private/inner.md") == "in a folder that becomes unreadable\n")
    }

    /// A folder in a note's place (the note synced before, or a note the server has and this device never had):
    /// the folder and the notes in it are never moved, hidden or replaced, the record is not deleted.
    @Test func aFolderInANotesPlaceIsNeverReplacedNorTakenAsDeleted() throws {
        let t = try TwoDevices("folder-for-note")
        try t.write(t.a, "n.md", "a note\n")
        try t.write(t.a, "fresh.md", "B has a folder of this name before its first sync\n")
        try t.sync(t.a)
        try t.write(t.b, "n.md", "a note\n")
        try t.write(t.b, "fresh.md/mine.md", "B's note in a folder named like A's note\n")
        let first = try t.sync(t.b)
        #expect(
            first.stderr.contains("fresh.md") && first.stderr.contains("is a folder, not a note") && first.stderr.contains("fix:"),
            "\(first.stderr)")
        #expect(t.read(t.b, "fresh.md/mine.md") == "B's note in a folder named like A's note\n")

        try FileManager.default.removeItem(atPath: t.b + "/n.md")
        try t.write(t.b, "n.md/inside.md", "a note where the note was\n")
        let replaced = try t.sync(t.b)
        #expect(
            replaced.stderr.contains("n.md: a folder now has the name of this synced note") && replaced.stderr.contains("fix:"),
            "\(replaced.stderr)")
        try t.write(t.a, "n.md", "edited on A\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "n.md/inside.md") == "a note where the note was\n")
        #expect(t.read(t.b, "fresh.md/mine.md") == "B's note in a folder named like A's note\n")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: t.b).allSatisfy { !$0.hasPrefix(".notesync-tmp-") },
            "no folder hidden under a temp name")
        let heads = try serverHeads(t.server)
        #expect(heads["n.md"]?.deleted == false && heads["fresh.md"]?.deleted == false, "\(heads)")
        #expect(heads["n.md/inside.md"] != nil && heads["fresh.md/mine.md"] != nil, "the notes in the folders sync")
        try t.sync(t.a)
        #expect(t.read(t.a, "n.md") == "edited on A\n", "A keeps its note (and is told why the folder's notes cannot land)")
    }

    /// Names that are not UTF-8, or hold control characters and terminal escapes: skipped with a warning that shows
    /// them escaped, the files left as they are, never uploaded; a valid neighbour with a similar name syncs.
    @Test func namesThatAreNotUTF8OrHoldEscapesAreSkippedAndShownEscaped() throws {
        let t = try TwoDevices("bad-names")
        let latin1: [UInt8] = Array("caf".utf8) + [0xE9] + Array(".md".utf8)
        let escapeAndInvalid: [UInt8] = [0x1B] + Array("[31mred".utf8) + [0xFF] + Array(".md".utf8)
        let csiOnly: [UInt8] = [0xC2, 0x9B] + Array("31mcsi.md".utf8)
        for (name, text) in [(latin1, "latin-1 name\n"), (escapeAndInvalid, "escape in an invalid name\n"), (csiOnly, "C1 CSI\n")] {
            #expect(createRawNamedFile(t.a, name, contents: text))
        }
        try t.write(t.a, "\u{1B}[2Jclear.md", "escape in a valid name\n")
        try t.write(t.a, "bell\u{7}.md", "bell\n")
        try t.write(t.a, "café.md", "the valid name\n")
        let result = try t.sync(t.a)
        expectNoTerminalControls(result)
        #expect(result.stderr.contains("caf\u{FFFD}.md: name is not valid UTF-8, skipped; rename it"), "\(result.stderr)")
        #expect(result.stderr.contains("\\u{1b}[2Jclear.md: skipped: contains a control character; rename it"), "\(result.stderr)")
        #expect(result.stderr.contains("\\u{9b}31mcsi.md"), "\(result.stderr)")
        #expect(Set(try serverHeads(t.server).keys) == ["café.md"], "only the valid name is uploaded")
        #expect(
            readRawNamedFile(t.a, latin1) == "latin-1 name\n" && readRawNamedFile(t.a, escapeAndInvalid) == "escape in an invalid name\n")
        #expect(t.read(t.a, "\u{1B}[2Jclear.md") == "escape in a valid name\n")
        try t.sync(t.b)
        #expect(try t.notes(t.b).keys.sorted() == ["café.md"])
        let status = try t.run(["status", "--notes", t.a])
        expectNoTerminalControls(status)
        let dry = try t.run(["diff", "--notes", t.a])
        expectNoTerminalControls(dry)
    }
}
