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

/// Two devices synced through a server into which hostile or broken files are then planted by hand.
///
/// Device A holds `keep.md` and `other.md`, synced to B. After the planting, A saves `after.md` (its commit lands
/// after the hostile slot) and B syncs: the rest of the sync must be done, nothing written outside the two notes
/// folders and the server, no note overwritten, nothing printed that drives a terminal.
final class HostileWorld {
    let t: TwoDevices
    let forger: ServerForger
    private var outsideBefore: [String: String] = [:]
    var outside: String { t.scratch.path + "/outside" }

    init(_ label: String) throws {
        t = try TwoDevices("hostile-\(label)")
        forger = ServerForger(t.server)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("secret outside the server\n".utf8).write(to: URL(fileURLWithPath: outside + "/secret.txt"))
        try t.write(t.a, "keep.md", "kept v1\n")
        try t.write(t.a, "other.md", "other\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try recordOutside()
    }

    /// Takes what is outside now as the state that must not change (after planting files there on purpose).
    func recordOutside() throws { outsideBefore = try outsideState() }

    /// Everything in the scratch folder but the two notes folders, the server and the process logs.
    func outsideState() throws -> [String: String] {
        try treeState(t.scratch.path).filter { path, _ in
            let first = path.split(separator: "/").first.map(String.init) ?? path
            return !["A", "B", "server"].contains(first) && !first.hasPrefix("proc-")
        }
    }

    /// A commits `after.md` behind the hostile files, then B syncs; checks what every hostile case must keep.
    @discardableResult
    func syncPast(expectKeep: String? = "kept v1\n", sourceLocation: SourceLocation = #_sourceLocation) throws -> (
        a: ProcessResult, b: ProcessResult
    ) {
        try t.write(t.a, "after.md", "written after\n")
        let a = try t.run(["sync", "--notes", t.a])
        #expect(a.status == 0, "A: \(a.stdout) \(a.stderr)", sourceLocation: sourceLocation)
        let b = try t.run(["sync", "--notes", t.b])
        #expect(b.status == 0, "B: \(b.stdout) \(b.stderr)", sourceLocation: sourceLocation)
        for result in [a, b] { expectNoTerminalControls(result, sourceLocation: sourceLocation) }
        #expect(t.read(t.b, "after.md") == "written after\n", "the rest of the sync is done", sourceLocation: sourceLocation)
        if let expectKeep {
            #expect(
                t.read(t.a, "keep.md") == expectKeep && t.read(t.b, "keep.md") == expectKeep,
                "no note is overwritten with bad data", sourceLocation: sourceLocation)
        }
        #expect(
            try outsideState() == outsideBefore, "nothing is written outside the notes folders and the server",
            sourceLocation: sourceLocation)
        let status = try t.run(["status", "--notes", t.b])
        #expect(status.status == 0, sourceLocation: sourceLocation)
        expectNoTerminalControls(status, sourceLocation: sourceLocation)
        return (a, b)
    }

    /// `notesync server fsck`: must find a problem (exit 1), print it with its path, and nothing raw.
    func fsckFinds(_ needles: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fsck = try t.run(["server", "fsck", forger.layout.root])
        #expect(fsck.status == 1, "\(fsck.stdout) \(fsck.stderr)", sourceLocation: sourceLocation)
        for needle in needles { #expect(fsck.stdout.contains(needle), "fsck: \(fsck.stdout)", sourceLocation: sourceLocation) }
        expectNoTerminalControls(fsck, sourceLocation: sourceLocation)
    }
}

/// Checks that `text` holds a warning about `path` that says what is wrong and the fix.
func expectWarning(_ text: String, about path: String, saying reason: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let lines = text.components(separatedBy: "\nwarning: ")
    let hit = lines.first { $0.contains(path) && $0.contains(reason) }
    #expect(hit != nil, "no warning about \(path) saying \"\(reason)\" in:\n\(text)", sourceLocation: sourceLocation)
    #expect(hit?.contains("fix:") == true, "the warning gives no fix: \(hit ?? "")", sourceLocation: sourceLocation)
}

@Suite struct HostileServerTests {
    /// Log entries that fail at each layer: the seal (torn, damaged), the JSON, the record names.
    enum BadEntry: String, CaseIterable, CustomStringConvertible, Sendable {
        case truncated, checksumMismatch, malformedJSON, wrongShapeJSON, dotDot, absolutePath, nul, controlCharacters,
            terminalEscapes, overLongNames, agentOwnedNames, agentOwnedSpellings, hundredMegabytes
        var description: String { rawValue }
    }

    @Test(arguments: BadEntry.allCases)
    func aBadEntryIsSkippedAndReportedAndTheRestSyncs(_ kind: BadEntry) throws {
        let w = try HostileWorld(kind.rawValue)
        let seq = w.forger.nextSlot()
        let path = w.forger.layout.entryPath(seq)
        let good = try w.forger.save("fine.md", "a valid change in the same entry\n")
        func entry(_ changes: [RecordChange]) throws -> Data {
            try SealedFile.seal(
                LogEntry(
                    seq: seq, commit: "c-\(seq)", device: "evil", time: 0, changes: changes,
                    prev: w.forger.prev(before: seq)), kind: "entry")
        }
        func named(_ names: [String]) throws -> [RecordChange] {
            try names.enumerated().map { try w.forger.save($1, "evil \($0)\n") } + [good]
        }
        var expected = ["keep.md", "other.md", "after.md"]
        var reason = ""
        var shown: [String] = []
        switch kind {
        case .truncated:
            try w.forger.plantBytes(try entry([good]).dropLast(7), seq: seq)
            reason = "torn"
        case .checksumMismatch:
            var data = try entry([good])
            data[data.count - 10] ^= 0x20
            try w.forger.plantBytes(data, seq: seq)
            reason = "checksum mismatch"
        case .malformedJSON:
            let body = Data("{\"seq\": \(seq), \"changes\": [{\"name\": \"\u{1B}[2Jx.md\"".utf8)
            try w.forger.plantBytes(ServerForger.seal(rawBody: body), seq: seq)
            reason = "malformed content"
        case .wrongShapeJSON:
            let body = Data(
                "{\"seq\":\(seq),\"commit\":\"c\",\"device\":\"evil\",\"time\":0,\"changes\":[{\"name\":\"x.md\",\"base\":\"\u{1B}[2J\"}]}"
                    .utf8)
            try w.forger.plantBytes(ServerForger.seal(rawBody: body), seq: seq)
            reason = "malformed content"
        case .dotDot:
            try w.forger.plantBytes(try entry(try named(["../escape.md", "sub/../../../escape.md", "..", "./x.md"])), seq: seq)
            reason = "contains a \"..\" component"
            expected.append("fine.md")
            shown = ["../escape.md", "sub/../../../escape.md"]
        case .absolutePath:
            try w.forger.plantBytes(try entry(try named([w.outside + "/absolute.md", "/etc/notesync-test-absolute.md"])), seq: seq)
            reason = "absolute path"
            expected.append("fine.md")
            #expect(FileIO.lstatInfo("/etc/notesync-test-absolute.md") == nil)
        case .nul:
            try w.forger.plantBytes(try entry(try named(["nul\u{0}.md", "\u{0}"])), seq: seq)
            reason = "contains NUL"
            expected.append("fine.md")
        case .controlCharacters:
            try w.forger.plantBytes(try entry(try named(["bell\u{7}.md", "new\nline.md", "cr\r.md", "del\u{7F}.md", "tab\t.md"])), seq: seq)
            reason = "contains a control character"
            expected.append("fine.md")
            shown = ["bell\\u{7}.md", "new\\u{a}line.md"]
        case .terminalEscapes:
            try w.forger.plantBytes(
                try entry(
                    try named([
                        "\u{1B}[2J\u{1B}[31mred.md", "\u{9B}31mcsi.md", "\u{1B}]0;title\u{7}.md",
                        "dir\u{1B}[1A/n.md"
                    ])), seq: seq)
            reason = "contains a control character"
            expected.append("fine.md")
            shown = ["\\u{1b}[2J\\u{1b}[31mred.md", "\\u{9b}31mcsi.md"]
        case .overLongNames:
            try w.forger.plantBytes(
                try entry(
                    try named([
                        String(repeating: "y", count: 300) + ".md",
                        Array(repeating: String(repeating: "d", count: 200), count: 20).joined(separator: "/") + "/x.md"
                    ])), seq: seq)
            reason = "longer than"
            expected.append("fine.md")
        case .agentOwnedNames:
            try w.forger.plantBytes(try entry(try named([".notesync/state.sqlite", ".notesync/lock", "sub/.notesync-tmp-0123"])), seq: seq)
            reason = "names notesync's own state or temp files"
            expected.append("fine.md")
        case .agentOwnedSpellings:
            // What a case-folding, dot-stripping or short-name folder takes for `.notesync`: refused on every device.
            try w.forger.plantBytes(
                try entry(
                    try named([
                        ".Notesync/state.sqlite", ".NOTESYNC/evil.md", ".note\u{17F}ync/x.md", ".notesync./y.md",
                        "NOTESY~1/state.sqlite", "sub/.NoteSync-Tmp-0123"
                    ])), seq: seq)
            reason = "names notesync's own state or temp files"
            expected.append("fine.md")
        case .hundredMegabytes:
            try FileIO.makeDirectories(w.forger.layout.shardDirectory(of: seq))
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
            #expect(fd >= 0 && ftruncate(fd, 100 << 20) == 0)
            close(fd)
            reason = "over the limit"
        }
        let (_, b) = try w.syncPast()
        #expect(try Set(w.t.notes(w.t.b).keys) == Set(expected), "only valid records become notes")
        #expect(try w.t.notes(w.t.a) == w.t.notes(w.t.b))
        switch kind {
        case .truncated, .checksumMismatch, .malformedJSON, .wrongShapeJSON, .hundredMegabytes:
            expectWarning(b.stderr, about: path, saying: reason)
            try w.fsckFinds(["damaged entry: \(path)"])
        default:
            expectWarning(b.stderr, about: "entry \(seq)", saying: reason)
            for name in shown { #expect(b.stderr.contains(name), "the bad name is shown escaped: \(b.stderr)") }
            try w.fsckFinds(["quarantined change: \(path)"])
        }
        // Reported once, when the entry is read; later syncs are quiet and change nothing.
        let again = try w.t.sync(w.t.b)
        #expect(again.stdout.contains("nothing to do") && again.stderr.isEmpty, "\(again.stdout) \(again.stderr)")
    }

    /// A symlink in the log, pointing outside the server at a valid entry: never followed, so never applied.
    @Test func aSymlinkedLogEntryIsNeverFollowed() throws {
        let w = try HostileWorld("log-symlink")
        let seq = w.forger.nextSlot()
        let entry = LogEntry(
            seq: seq, commit: "planted", device: "evil", time: 0,
            changes: [
                try w.forger.save("pwned.md", "followed the link\n"),
                try w.forger.save("keep.md", "overwritten through a link\n", base: 1)
            ],
            prev: w.forger.prev(before: seq))
        let target = w.outside + "/entry"
        try Data(try SealedFile.seal(entry, kind: "entry")).write(to: URL(fileURLWithPath: target))
        try FileIO.makeDirectories(w.forger.layout.shardDirectory(of: seq))
        #expect(symlink(target, w.forger.layout.entryPath(seq)) == 0)
        try w.recordOutside()
        let (_, b) = try w.syncPast()
        #expect(w.t.read(w.t.b, "pwned.md") == nil && w.t.read(w.t.a, "pwned.md") == nil)
        expectWarning(b.stderr, about: w.forger.layout.entryPath(seq), saying: "symbolic link")
        try w.fsckFinds(["symlink: \(w.forger.layout.entryPath(seq))"])
    }

    /// Assets that lie: content not matching the digest, missing, a link to a file outside (even with the right
    /// content), or far larger than the record says. The note is never written with them, and others sync.
    enum BadAsset: String, CaseIterable, CustomStringConvertible, Sendable {
        case digestMismatch, missing, symlinkOutside, oversized
        var description: String { rawValue }
    }

    @Test(arguments: BadAsset.allCases)
    func aBadAssetNeverReachesANote(_ kind: BadAsset) throws {
        let w = try HostileWorld("asset-\(kind.rawValue)")
        let text = Data("the server says this is version 2\n".utf8)
        let ref = AssetRef(of: text)
        let assetPath = w.forger.layout.assetPath(ref.sha256)
        try FileIO.makeDirectories(w.forger.layout.assetShard(ref.sha256))
        switch kind {
        case .digestMismatch:
            try Data("not what the digest says, same len\n".utf8).write(to: URL(fileURLWithPath: assetPath))
        case .missing:
            break
        case .symlinkOutside:
            try text.write(to: URL(fileURLWithPath: w.outside + "/asset"))
            #expect(symlink(w.outside + "/asset", assetPath) == 0)
        case .oversized:
            let fd = open(assetPath, O_WRONLY | O_CREAT | O_EXCL, 0o644)
            #expect(fd >= 0 && ftruncate(fd, 100 << 20) == 0)
            close(fd)
        }
        try w.recordOutside()
        // An update of a note both devices hold, and a new note.
        let seq = w.forger.nextSlot()
        try w.forger.plant(
            [
                RecordChange(name: "keep.md", base: 1, op: .save, text: ref, modified: Clock.nowNanoseconds()),
                RecordChange(name: "new.md", base: 0, op: .save, text: ref, modified: Clock.nowNanoseconds())
            ], seq: seq)
        let (a, b) = try w.syncPast()
        #expect(w.t.read(w.t.b, "new.md") == nil && w.t.read(w.t.a, "new.md") == nil)
        let reason =
            switch kind {
            case .digestMismatch: "does not match its digest"
            case .missing: "missing from the server"
            case .symlinkOutside: "symbolic link"
            case .oversized: "over the limit"
            }
        for result in [a, b] {
            expectWarning(result.stderr, about: "keep.md: \(assetPath)", saying: reason)
            expectWarning(result.stderr, about: "new.md: \(assetPath)", saying: reason)
        }
        // Still reported at the next sync (the record waits for a readable text), still nothing written.
        let again = try w.t.run(["sync", "--notes", w.t.b])
        #expect(again.status == 0)
        expectWarning(again.stderr, about: "keep.md: \(assetPath)", saying: reason)
        #expect(w.t.read(w.t.b, "keep.md") == "kept v1\n")
        // Not "nothing to do" alone: the summary counts the notes left, and `status` names them until they arrive.
        #expect(again.stdout.contains("not synced: 2 note(s) left as they are"), "\(again.stdout)")
        let status = try w.t.run(["status", "--notes", w.t.b])
        #expect(status.status == 0)
        #expect(status.stdout.contains("waiting:   2 note(s)"), "\(status.stdout)")
        #expect(status.stdout.contains("           keep.md\n") && status.stdout.contains("           new.md\n"))
        // A dry run reports the same instead of failing on it.
        let dry = try w.t.run(["diff", "--notes", w.t.b])
        #expect(dry.status == 0, "\(dry.stderr)")
        expectWarning(dry.stderr, about: "keep.md: \(assetPath)", saying: reason)
        try w.fsckFinds([kind == .symlinkOutside ? "symlink: \(assetPath)" : "missing asset: \(assetPath)"])
        guard kind == .missing else { return }
        // The text put back: the next sync writes both notes, and `status` has nothing waiting.
        try text.write(to: URL(fileURLWithPath: assetPath))
        let mended = try w.t.run(["sync", "--notes", w.t.b])
        #expect(mended.status == 0 && !mended.stdout.contains("not synced"), "\(mended.stdout)\(mended.stderr)")
        #expect(w.t.read(w.t.b, "keep.md") == String(decoding: text, as: UTF8.self))
        #expect(w.t.read(w.t.b, "new.md") == String(decoding: text, as: UTF8.self))
        #expect(!(try w.t.run(["status", "--notes", w.t.b]).stdout.contains("waiting:")))
    }

    /// A symlink in place of an asset shard folder, pointing outside: no asset is ever written through it; the
    /// push fails with a message naming it, and `server fsck --repair` clears the way for the next sync.
    @Test func aSymlinkedAssetFolderIsNeverWrittenThrough() throws {
        let w = try HostileWorld("asset-dir-symlink")
        // A text whose shard folder does not exist yet, so the link replaces nothing.
        let text = try #require(
            (0..<1000).lazy.map { "a note whose asset shard is a link \($0)\n" }.first {
                FileIO.lstatInfo(w.forger.layout.assetShard(ContentDigest(of: Data($0.utf8)))) == nil
            })
        let shard = w.forger.layout.assetShard(ContentDigest(of: Data(text.utf8)))
        try FileManager.default.createDirectory(atPath: w.outside + "/shard", withIntermediateDirectories: true)
        #expect(symlink(w.outside + "/shard", shard) == 0)
        let outsideBefore = try w.outsideState()
        try w.t.write(w.t.a, "linked.md", text)
        let failed = try w.t.run(["sync", "--notes", w.t.a])
        #expect(failed.status == 1)
        #expect(
            failed.stderr.contains(shard) && failed.stderr.contains("symbolic link") && failed.stderr.contains("fix:"),
            "\(failed.stderr)")
        expectNoTerminalControls(failed)
        #expect(try w.outsideState() == outsideBefore, "nothing was written through the link")
        #expect(try FileManager.default.contentsOfDirectory(atPath: w.outside + "/shard").isEmpty)

        let repair = try w.t.run(["server", "fsck", "--repair", w.forger.layout.root])
        #expect(repair.stdout.contains("symlink: \(shard)") && repair.stdout.contains("moved to"), "\(repair.stdout)")
        try w.t.sync(w.t.a)
        try w.t.sync(w.t.b)
        #expect(w.t.read(w.t.b, "linked.md") == text, "the queued note is pushed once the way is clear")
        #expect(try w.t.run(["server", "fsck", w.forger.layout.root]).status == 0)
    }

    /// A folder of the server's own layout replaced by a link to a folder outside: nothing is written through it,
    /// not even a temp file (writes name these folders by path); the message names it with the fix; with the
    /// folder back in place, the queued note is pushed.
    @Test(arguments: ["zones/notes/tmp", "devices", "zones/notes/assets", "zones/notes/log"])
    func aServerFolderReplacedByALinkIsNeverWrittenThrough(_ folder: String) throws {
        let w = try HostileWorld("linked-" + folder.replacingOccurrences(of: "/", with: "-"))
        let path = w.forger.layout.root + "/" + folder
        let moved = w.outside + "/moved"
        #expect(rename(path, moved) == 0 && symlink(moved, path) == 0)
        let outsideBefore = try w.outsideState()
        try w.t.write(w.t.a, "new.md", "pushed once the folder is back\n")
        let refused = try w.t.run(["sync", "--notes", w.t.a])
        #expect(refused.status == 1, "\(refused.stdout) \(refused.stderr)")
        #expect(
            refused.stderr.contains(path) && refused.stderr.contains("symbolic link") && refused.stderr.contains("fix:"),
            "\(refused.stderr)")
        expectNoTerminalControls(refused)
        #expect(try w.outsideState() == outsideBefore, "nothing written through the link")

        #expect(unlink(path) == 0 && rename(moved, path) == 0)
        try w.t.sync(w.t.a)
        try w.t.sync(w.t.b)
        #expect(w.t.read(w.t.b, "new.md") == "pushed once the folder is back\n")
    }

    /// A record version newer than this build: the note is left alone on every side (a local edit too), reported.
    @Test func aNewerRecordVersionIsLeftAloneAndReported() throws {
        let w = try HostileWorld("newer-record")
        try w.forger.plant(
            [
                try w.forger.save("keep.md", "written by notesync 2\n", base: 1, version: 2),
                try w.forger.save("future.md", "also from the future\n", version: 2)
            ], seq: w.forger.nextSlot())
        try w.t.write(w.t.b, "keep.md", "edited on B meanwhile\n")
        let (a, b) = try w.syncPast(expectKeep: nil)
        #expect(w.t.read(w.t.a, "keep.md") == "kept v1\n", "the older build does not take the newer record")
        #expect(w.t.read(w.t.b, "keep.md") == "edited on B meanwhile\n", "nor overwrite, nor push over it")
        #expect(w.t.read(w.t.b, "future.md") == nil)
        for result in [a, b] {
            #expect(
                result.stdout.contains("newer-version    keep.md") && result.stdout.contains("newer-version    future.md"),
                "\(result.stdout)")
        }
        let status = try w.t.run(["status", "--notes", w.t.b])
        #expect(status.stdout.contains("save keep.md"), "B's edit stays queued: \(status.stdout)")
    }

    /// A server whose format is newer than this build: read up to what it understands, never written, reported with
    /// the fix; local changes stay queued. An entry of the newer format stops the reading (never skipped for good).
    @Test func aNewerServerFormatIsNeverWritten() throws {
        let w = try HostileWorld("newer-format")
        try w.t.write(w.t.a, "before.md", "committed before the upgrade\n")
        try w.t.sync(w.t.a)
        let marker = w.forger.layout.marker
        let text = try #require(w.t.read(w.t.server, ServerLayout.markerName))
        unlink(marker)
        let newerFormat = ServerMarker.currentFormat + 1
        try Data(
            text.replacingOccurrences(of: "\"format\" : \(ServerMarker.plainFormat)", with: "\"format\" : \(newerFormat)").utf8
        ).write(to: URL(fileURLWithPath: marker))
        try w.t.write(w.t.b, "mine.md", "written on B\n")
        let server = try treeState(w.t.server)

        let first = try w.t.run(["sync", "--notes", w.t.b])
        #expect(first.status == 1)
        #expect(
            first.stderr.contains(marker) && first.stderr.contains("format \(newerFormat)") && first.stderr.contains("update notesync"),
            "\(first.stderr)")
        #expect(w.t.read(w.t.b, "before.md") == "committed before the upgrade\n", "what it understands is read")
        #expect(try treeState(w.t.server) == server, "nothing is written to a newer server")

        let seq = w.forger.nextSlot()
        let newer = LogEntry(
            seq: seq, commit: "v2", device: "newer", time: 0, changes: [try w.forger.save("v2.md", "from v2\n")],
            prev: w.forger.prev(before: seq))
        var sealed = try SealedFile.seal(newer, kind: "entry")
        sealed.replaceSubrange(0..<16, with: Data("notesync-entry 3".utf8))
        try w.forger.plantBytes(sealed, seq: seq)
        try w.forger.plant([try w.forger.save("v2-later.md", "after it\n")], seq: seq + 1)
        let second = try w.t.run(["sync", "--notes", w.t.b])
        #expect(second.status == 1)
        #expect(second.stderr.contains(w.forger.layout.entryPath(seq)) && second.stderr.contains("update notesync"), "\(second.stderr)")
        #expect(w.t.read(w.t.b, "v2-later.md") == nil, "nothing past the entry it cannot read")
        #expect(w.t.read(w.t.b, "mine.md") == "written on B\n")
        let status = try w.t.run(["status", "--notes", w.t.b])
        #expect(status.stdout.contains("save mine.md"), "\(status.stdout)")
        let fsck = try w.t.run(["server", "fsck", "--repair", w.forger.layout.root])
        #expect(fsck.status == 1 && fsck.stderr.contains("updated notesync"), "fsck does not judge a newer server: \(fsck.stdout)")
        #expect(FileIO.lstatInfo(w.forger.layout.entryPath(seq)) != nil)
        for result in [first, second, status, fsck] { expectNoTerminalControls(result) }
    }

    /// Conflict copies that Dropbox or Syncthing made inside the server (log shard, asset, marker): every sync
    /// names them with the fix, the sync itself goes on, and `server fsck --repair` moves them to quarantine/.
    @Test func foreignConflictCopiesInsideTheServerAreReported() throws {
        let w = try HostileWorld("foreign-copies")
        let layout = w.forger.layout
        let logCopy = layout.entryPath(1) + ".sync-conflict-20260101-120000-ABCDEFG"
        try FileManager.default.copyItem(atPath: layout.entryPath(1), toPath: logCopy)
        let dropboxEntry = layout.shardDirectory(of: 1) + "/000000000002 (Bob's conflicted copy 2026-01-01)"
        try Data("x".utf8).write(to: URL(fileURLWithPath: dropboxEntry))
        let ref = try w.forger.putAsset(Data("kept v1\n".utf8))
        let assetCopy = layout.assetPath(ref.sha256) + " (Bob's conflicted copy 2026-01-01)"
        try Data("kept v1 but different\n".utf8).write(to: URL(fileURLWithPath: assetCopy))
        let markerCopy = layout.root + "/notesync-server (Bob's conflicted copy 2026-01-01).json"
        try Data("{}".utf8).write(to: URL(fileURLWithPath: markerCopy))

        let (a, b) = try w.syncPast()
        for result in [a, b] {
            expectWarning(result.stderr, about: logCopy, saying: "Syncthing conflict copy inside the server")
            expectWarning(result.stderr, about: dropboxEntry, saying: "the commit in the copy is not applied")
            expectWarning(result.stderr, about: markerCopy, saying: "Dropbox conflict copy inside the server")
        }
        try w.fsckFinds([
            "foreign file: \(logCopy)", "foreign file: \(dropboxEntry)", "foreign file: \(assetCopy)",
            "foreign file: \(markerCopy)"
        ])
        let repair = try w.t.run(["server", "fsck", "--repair", w.forger.layout.root])
        #expect(repair.status == 0, "\(repair.stdout)")
        for path in [logCopy, dropboxEntry, assetCopy, markerCopy] { #expect(FileIO.lstatInfo(path) == nil) }
        let quiet = try w.t.sync(w.t.b)
        #expect(quiet.stderr.isEmpty, "\(quiet.stderr)")
    }

    /// A device whose id and name (both from the server) hold terminal escapes and path separators: its deletes
    /// and conflicting edits are shown and named without them, in a dry run and in a sync.
    @Test func aHostileDeviceNameNeverReachesTheTerminalOrAPath() throws {
        let w = try HostileWorld("device-name")
        let devices = w.forger.layout.devicesDirectory
        try Data("{\"id\":\"evil\",\"name\":\"\\u001b[2J\\u001b]0;pwned\\u0007../../../x\\u009b31m\",\"lastSeen\":0,\"token\":0}".utf8)
            .write(to: URL(fileURLWithPath: devices + "/evil.json"))
        let seq = w.forger.nextSlot()
        try w.forger.plant(
            [RecordChange(name: "other.md", base: 1, op: .delete, text: nil, modified: Clock.nowNanoseconds())],
            seq: seq, device: "evil")
        try w.forger.plant([try w.forger.save("keep.md", "evil's edit\n", base: 1)], seq: seq + 1, device: "\u{1B}[2Jraw-id")
        try w.t.write(w.t.b, "keep.md", "B's edit\n")
        let dry = try w.t.run(["diff", "--notes", w.t.b])
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains("deleted on the server by") && dry.stdout.contains("conflict "), "\(dry.stdout)")
        expectNoTerminalControls(dry)
        let (_, b) = try w.syncPast(expectKeep: nil)
        #expect(b.stdout.contains("download-delete  other.md"))
        let notes = try w.t.notes(w.t.b)
        let copy = try #require(notes.keys.first { ConflictCopyName.isNotesyncConflictCopy($0) }, "\(notes.keys)")
        #expect(!copy.contains("/"), "the device name adds no folder: \(copy)")
        #expect(!copy.unicodeScalars.contains { $0.properties.generalCategory == .control })
        #expect(Set(notes.values.map { String(decoding: $0, as: UTF8.self) }).isSuperset(of: ["evil's edit\n", "B's edit\n"]))
        let conflicts = try w.t.run(["conflicts", "--notes", w.t.b])
        expectNoTerminalControls(conflicts)
        let history = try w.t.run(["history", "--notes", w.t.b, "keep.md"])
        expectNoTerminalControls(history)
    }
}

/// The agent meets hostile entries like a one-shot sync does: reported once, when read, not at every later sync.
@Suite(.serialized) struct HostileServerAgentTests {
    @Test func anAgentReportsADamagedEntryOnceAndKeepsSyncing() throws {
        let agents = try TwoAgents("hostile-agent")
        defer { agents.stop() }
        let t = agents.devices
        try t.write(t.a, "first.md", "first\n")
        #expect(eventually { t.read(t.b, "first.md") == "first\n" })
        let forger = ServerForger(t.server)
        let seq = forger.nextSlot()
        var torn = try SealedFile.seal(
            LogEntry(
                seq: seq, commit: "torn", device: "evil", time: 0,
                changes: [try forger.save("torn.md", "never applied\n")],
                prev: forger.prev(before: seq)), kind: "entry")
        torn.removeLast(3)
        try forger.plantBytes(torn, seq: seq)
        for index in 0..<3 {
            try t.write(t.a, "later-\(index).md", "later \(index)\n")
            #expect(
                eventually { t.read(t.b, "later-\(index).md") == "later \(index)\n" },
                "the agent keeps syncing past it: \((agents.agentB?.stderrText ?? "").suffix(3000))")
        }
        let logB = try #require(agents.agentB).stderrText
        #expect(
            logB.components(separatedBy: "every device skips this entry").count - 1 == 1,
            "reported once, not at every sync: \(logB.suffix(3000))")
        #expect(t.read(t.b, "torn.md") == nil)
    }
}
