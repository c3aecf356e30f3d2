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

/// An encrypted server (docs/encryption.md) through the real binary: nothing readable reaches it, a wrong
/// passphrase writes nothing, and every kind of tampering is reported with its path and never applied.
@Suite(.serialized) struct EncryptionTests {
    /// Words that must never appear in any byte of the server: in note texts, note names, folder names and
    /// device names.
    static let canaries = ["quetzalcoatl", "zanzibarian", "xylophonist", "brontosaurine", "aubergiste"]
    /// The devices' names, canaries too: long enough never to turn up by chance in ciphertext or base64 ("bob" once
    /// did, in a wrapped key).
    static let deviceNames = (a: "kalimbaphile", b: "theorbomancer")

    enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case folder, moto
        var testDescription: String { rawValue }
    }

    /// Every file of the server with its bytes.
    static func serverFiles(_ devices: TwoDevices, s3: S3TestServer?) throws -> [String: Data] {
        if let s3 {
            let prefix = String(devices.server.dropFirst("s3://\(S3TestServer.bucket)/".count))
            let client = try s3.makeClient(prefix: prefix)
            defer { client.shutdown() }
            var files: [String: Data] = [:]
            for object in try client.list(prefix: "").objects { files[object.key] = try client.read(object.key) }
            return files
        }
        var files: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: devices.server)
        while let path = enumerator?.nextObject() as? String {
            let full = devices.server + "/" + path
            if let info = FileIO.lstatInfo(full), (info.st_mode & S_IFMT) == S_IFREG {
                files[path] = try Data(contentsOf: URL(fileURLWithPath: full))
            }
        }
        return files
    }

    @Test(arguments: Backend.allCases)
    func canaryWordsNeverReachTheServer(_ backend: Backend) throws {
        let s3 = backend == .moto && S3TestServer.available ? try S3TestServer(.moto, label: "canary") : nil
        guard backend == .folder || s3 != nil else { return }
        let devices = try TwoDevices("canary", s3: s3, encrypted: true, names: Self.deviceNames)
        let c = devices.scratch.path + "/C"
        try devices.expectOK(["init", "--notes", c, "--server", devices.server, "--device-name", "xylophonist laptop"])
        // Names, folders and texts full of canaries; long texts (compressed, several chunks) and short ones.
        try devices.write(devices.a, "quetzalcoatl notes.md", "the quetzalcoatl flies\n")
        try devices.write(devices.a, "zanzibarian/trip.md", String(repeating: "zanzibarian spice market\n", count: 4000))
        try devices.write(devices.b, "brontosaurine.txt", "brontosaurine bones\n")
        try devices.sync(devices.a)
        try devices.sync(devices.b)
        try devices.sync(c)
        // Edits on two devices at once (a merge), a delete, a move, then the third device.
        try devices.write(devices.a, "quetzalcoatl notes.md", "the quetzalcoatl flies\naubergiste at noon\n")
        try devices.write(devices.b, "quetzalcoatl notes.md", "aubergiste opens\nthe quetzalcoatl flies\n")
        try devices.sync(devices.a)
        try devices.sync(devices.b)
        try FileManager.default.moveItem(atPath: c + "/brontosaurine.txt", toPath: c + "/zanzibarian/brontosaurine moved.txt")
        try devices.sync(c)
        unlink(devices.a + "/zanzibarian/trip.md")
        try devices.sync(devices.a)
        for folder in [devices.a, devices.b, c] { try devices.sync(folder) }
        #expect(try devices.notes(devices.a) == devices.notes(devices.b))
        #expect(try devices.notes(devices.a) == devices.notes(c))
        #expect(devices.read(c, "quetzalcoatl notes.md")?.contains("aubergiste") == true)
        // gc compacts the log into a snapshot and sweeps the deleted text: still nothing readable.
        try devices.expectOK(["server", "gc", devices.server, "--grace", "0"])
        try devices.sync(c)
        let files = try Self.serverFiles(devices, s3: s3)
        #expect(files.keys.contains { $0.contains("snapshots/") }, "gc wrote a snapshot: \(files.keys.sorted())")
        for (path, data) in files {
            let lowered = Data(String(decoding: data, as: UTF8.self).lowercased().utf8)
            for word in Self.canaries + [Self.deviceNames.a, Self.deviceNames.b] {
                #expect(lowered.range(of: Data(word.utf8)) == nil, "\(word) in \(path)")
                #expect(!path.lowercased().contains(word), "\(word) in the name \(path)")
            }
        }
        let fsck = try devices.run(["server", "fsck", devices.server])
        #expect(fsck.status == 0, "\(fsck.stdout) \(fsck.stderr)")
    }

    /// A wrong passphrase: exit 1, a message naming the key file and the fix, nothing written (no notes folder, no
    /// file on the server). Following the fix (the right passphrase, or the recovery key) works.
    @Test func aWrongPassphraseWritesNothingAndTheRightOneOrTheRecoveryKeyWorks() throws {
        let scratch = try Scratch("passphrase")
        let server = scratch.path + "/server"
        let environment = ["NOTESYNC_SCRYPT_LOG_N": "12"]
        func run(_ arguments: [String], _ passphrase: String) throws -> ProcessResult {
            try NotesyncProcess(
                arguments, scratch: scratch.path, environment: environment.merging(["NOTESYNC_PASSPHRASE": passphrase]) { $1 }
            ).wait()
        }
        let made = try run(["server", "init", server, "--encrypt"], "first passphrase")
        #expect(made.status == 0, "\(made.stderr)")
        let recovery = try #require(
            made.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                $0.count == 64 && $0.split(separator: "-").count == 13
            }, "\(made.stdout)")
        #expect(try run(["server", "init", scratch.path + "/short", "--encrypt"], "short").status == 64)
        let before = try FileManager.default.subpathsOfDirectory(atPath: server).sorted()
        let wrong = try run(["init", "--notes", scratch.path + "/A", "--server", server], "second passphrase")
        #expect(wrong.status == 1, "\(wrong.stdout) \(wrong.stderr)")
        #expect(wrong.stderr.contains("does not open this server's key"), "\(wrong.stderr)")
        #expect(wrong.stderr.contains("server/keys/000000000001"), "the path of the key file: \(wrong.stderr)")
        #expect(FileIO.lstatInfo(scratch.path + "/A") == nil, "nothing written in the notes folder")
        #expect(try FileManager.default.subpathsOfDirectory(atPath: server).sorted() == before, "nothing written on the server")
        // The fix: the right passphrase.
        #expect(try run(["init", "--notes", scratch.path + "/A", "--server", server], "first passphrase").status == 0)
        let key = try #require(FileIO.lstatInfo(scratch.path + "/A/.notesync/vault-key"))
        #expect(key.st_mode & 0o777 == 0o600)
        // The recovery key in its place, in lowercase and without dashes, opens it as well.
        let spelled = recovery.replacingOccurrences(of: "-", with: "").lowercased()
        let byRecovery = try run(["init", "--notes", scratch.path + "/B", "--server", server], spelled)
        #expect(byRecovery.status == 0, "\(byRecovery.stderr)")
        try Data("from A\n".utf8).write(to: URL(fileURLWithPath: scratch.path + "/A/note.md"))
        #expect(try run(["sync", "--notes", scratch.path + "/A"], "").status == 0)
        #expect(try run(["sync", "--notes", scratch.path + "/B"], "").status == 0)
        #expect(try String(contentsOfFile: scratch.path + "/B/note.md", encoding: .utf8) == "from A\n")

        // NOTESYNC_PASSPHRASE holds the current passphrase: never taken as the new one (no terminal here to ask on).
        let noTerminal = Glibc.open("/dev/tty", O_RDWR) < 0
        if noTerminal {
            let unchanged = try run(["server", "passphrase", server], "first passphrase")
            #expect(unchanged.status == 64 && unchanged.stderr.contains("--new-passphrase-file"), "\(unchanged.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: server + "/keys") == ["000000000001"])
        }
        // A new passphrase: the old one stops working, the new one and the recovery key work, devices go on.
        let change = try NotesyncProcess(
            ["server", "passphrase", server, "--new-passphrase-file", try Self.file(scratch, "new", "a brand new passphrase")],
            scratch: scratch.path, environment: environment.merging(["NOTESYNC_PASSPHRASE": "first passphrase"]) { $1 }
        ).wait()
        #expect(change.status == 0, "\(change.stdout) \(change.stderr)")
        #expect(try run(["init", "--notes", scratch.path + "/C", "--server", server], "first passphrase").status == 1)
        #expect(try run(["init", "--notes", scratch.path + "/C", "--server", server], "a brand new passphrase").status == 0)
        #expect(try run(["init", "--notes", scratch.path + "/D", "--server", server], recovery).status == 0)
        try Data("from A again\n".utf8).write(to: URL(fileURLWithPath: scratch.path + "/A/note.md"))
        #expect(try run(["sync", "--notes", scratch.path + "/A"], "").status == 0)
        #expect(try run(["sync", "--notes", scratch.path + "/C"], "").status == 0)
        #expect(try String(contentsOfFile: scratch.path + "/C/note.md", encoding: .utf8) == "from A again\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: server + "/keys") == ["000000000002"])
    }

    static func file(_ scratch: Scratch, _ name: String, _ text: String) throws -> String {
        let path = scratch.path + "/" + name
        try Data((text + "\n").utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The key kept with a mode others can read is refused, naming the file and the fix; the fix works. Without
    /// the key file, a sync says how to get it back, and `init` with the passphrase keeps it again.
    @Test func theKeptKeyIsGuardedAndCanBeKeptAgain() throws {
        let devices = try TwoDevices("keyfile", encrypted: true)
        let key = devices.a + "/.notesync/vault-key"
        chmod(key, 0o644)
        let open = try devices.run(["sync", "--notes", devices.a])
        #expect(
            open.status == 1 && open.stderr.contains("fix: chmod 600 ") && open.stderr.contains("/A/.notesync/vault-key"), "\(open.stderr)")
        chmod(key, 0o600)
        try devices.sync(devices.a)
        unlink(key)
        try devices.write(devices.a, "kept.md", "kept\n")
        let without = try devices.run(["sync", "--notes", devices.a], environment: ["NOTESYNC_PASSPHRASE": ""])
        #expect(without.status == 1 && without.stderr.contains("run `notesync init --notes "), "\(without.stderr)")
        #expect(try devices.notes(devices.a)["kept.md"] == Data("kept\n".utf8), "the note is kept")
        // `history` and `status` say the same, also once a gc has left a snapshot (history read "no versions" and
        // exit 0 then, and called the snapshot damaged; status said "reachable").
        try devices.expectOK(["server", "gc", devices.server, "--grace", "0"])
        for command in [["history", "kept.md"], ["history", "a-note-never-synced.md"], ["status"]] {
            let result = try devices.run(command + ["--notes", devices.a], environment: ["NOTESYNC_PASSPHRASE": ""])
            #expect(
                result.status == 1 && (result.stdout + result.stderr).contains("run `notesync init --notes ")
                    && !result.stdout.contains("no versions") && !result.stderr.contains("damaged"),
                "\(command): \(result.stdout) \(result.stderr)")
        }
        try devices.expectOK(["init", "--notes", devices.a, "--server", devices.server])
        try devices.sync(devices.a)
        try devices.sync(devices.b)
        #expect(devices.read(devices.b, "kept.md") == "kept\n")
    }

    /// Another encrypted server put in the place of this folder's own is another server, not a missing key: sync
    /// says so (and that `recover` moves the folder to it on purpose), and reads and writes nothing there. With the
    /// own server back, the next sync goes on.
    @Test func anotherEncryptedServerAtThePathIsAnotherServer() throws {
        let devices = try TwoDevices("other-encrypted", encrypted: true)
        let other = try TwoDevices("other-encrypted-2", encrypted: true)
        try devices.write(devices.a, "mine.md", "mine\n")
        try devices.sync(devices.a)
        let own = devices.scratch.path + "/own-server"
        let untouched = try Self.serverFiles(other, s3: nil)
        try FileManager.default.moveItem(atPath: devices.server, toPath: own)
        try FileManager.default.moveItem(atPath: other.server, toPath: devices.server)
        try devices.write(devices.a, "later.md", "later\n")
        let swapped = try devices.run(["sync", "--notes", devices.a])
        #expect(
            swapped.status != 0 && swapped.stderr.contains("this is not its server") && swapped.stderr.contains("notesync recover")
                && !swapped.stderr.contains("has no key"), "\(swapped.stderr)")
        #expect(try Self.serverFiles(devices, s3: nil) == untouched, "nothing written to the other server")
        try FileManager.default.moveItem(atPath: devices.server, toPath: other.server)
        try FileManager.default.moveItem(atPath: own, toPath: devices.server)
        try devices.sync(devices.a)
        try devices.sync(devices.b)
        #expect(devices.read(devices.b, "later.md") == "later\n")
    }

    /// `server encrypt SRC DEST`: a plain server with history, compacted by gc, copied encrypted; devices move to
    /// the copy with `recover --server`, keep every note, and still see the history from before the copy. The copy
    /// holds no canary, and fsck finds it whole; a plain server copied before gc (its log from entry 1) too.
    @Test func aPlainServerIsCopiedEncryptedWithItsHistory() throws {
        let devices = try TwoDevices("encrypt-copy", names: Self.deviceNames)
        for version in 1...3 {
            try devices.write(devices.a, "quetzalcoatl.md", "quetzalcoatl version \(version)\n")
            try devices.sync(devices.a)
        }
        try devices.write(devices.b, "zanzibarian/notes.md", "zanzibarian\n")
        try devices.sync(devices.b)
        try devices.sync(devices.a)
        let environment = ["NOTESYNC_PASSPHRASE": TwoDevices.passphrase, "NOTESYNC_SCRYPT_LOG_N": "12"]
        // Before gc: the whole log, from entry 1.
        let early = devices.scratch.path + "/early"
        let copied = try devices.run(["server", "encrypt", devices.server, early], environment: environment)
        #expect(copied.status == 0, "\(copied.stdout) \(copied.stderr)")
        #expect(try devices.run(["server", "fsck", early], environment: environment).status == 0)
        // After gc compacted the log into a snapshot (history kept), and one more edit.
        try devices.expectOK(["server", "gc", devices.server, "--grace", "0"])
        try devices.write(devices.a, "quetzalcoatl.md", "quetzalcoatl version 4\n")
        try devices.sync(devices.a)
        let copy = devices.scratch.path + "/encrypted"
        let made = try devices.run(["server", "encrypt", devices.server, copy], environment: environment)
        #expect(made.status == 0 && made.stdout.contains("from the snapshot at"), "\(made.stdout) \(made.stderr)")
        let fsck = try devices.run(["server", "fsck", copy], environment: environment)
        #expect(fsck.status == 0, "\(fsck.stdout) \(fsck.stderr)")
        for folder in [devices.a, devices.b] {
            let moved = try devices.run(["recover", "--notes", folder, "--server", copy], environment: environment)
            #expect(moved.status == 0, "\(moved.stdout) \(moved.stderr)")
        }
        try devices.write(devices.b, "after.md", "after the move\n")
        try devices.sync(devices.b)
        try devices.sync(devices.a)
        #expect(devices.read(devices.a, "after.md") == "after the move\n")
        #expect(devices.read(devices.b, "quetzalcoatl.md") == "quetzalcoatl version 4\n")
        #expect(try devices.notes(devices.a) == devices.notes(devices.b))
        let history = try devices.run(["history", "--notes", devices.b, "quetzalcoatl.md"])
        let versions = history.stdout.split(separator: "\n").filter { $0.hasPrefix("version ") }
        #expect(history.status == 0 && versions.count == 4 && versions[0].hasPrefix("version 1 "), "\(history.stdout)")
        let restored = try devices.run(["restore", "--notes", devices.b, "quetzalcoatl.md", "--version", "1"])
        #expect(restored.status == 0, "\(restored.stdout) \(restored.stderr)")
        #expect(devices.read(devices.b, "quetzalcoatl.md") == "quetzalcoatl version 1\n")
        for root in [copy, early] {
            let enumerator = FileManager.default.enumerator(atPath: root)
            while let path = enumerator?.nextObject() as? String {
                guard let data = FileManager.default.contents(atPath: root + "/" + path) else { continue }
                let text = String(decoding: data, as: UTF8.self).lowercased()
                for word in ["quetzalcoatl", "zanzibarian", Self.deviceNames.a, Self.deviceNames.b] {
                    #expect(!text.contains(word) && !path.contains(word), "\(word) in \(root)/\(path)")
                }
            }
        }
        // An encrypted server is not copied again.
        let again = try devices.run(["server", "encrypt", copy, devices.scratch.path + "/again"], environment: environment)
        #expect(again.status == 64 && again.stderr.contains("encrypted already"), "\(again.stderr)")
    }

    /// The server's files that `body` adds, by path.
    static func added(_ devices: TwoDevices, _ body: () throws -> Void) throws -> [String] {
        let before = Set(try serverFiles(devices, s3: nil).keys)
        try body()
        return try serverFiles(devices, s3: nil).keys.filter { !before.contains($0) }.sorted()
    }

    enum Tampering: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case flippedEntryByte, flippedAssetByte, assetsSwapped, oldEntryInNewSlot, entryOfAnotherServer
        var testDescription: String { rawValue }
    }

    /// Each kind of tampering: B, syncing after it, reports the file by its path and applies nothing of it; its notes
    /// stay as they were; fsck with the key reports it too.
    @Test(arguments: Tampering.allCases)
    func tamperingIsReportedWithItsPathAndNeverApplied(_ tampering: Tampering) throws {
        let devices = try TwoDevices("tamper", encrypted: true)
        try devices.write(devices.a, "one.md", "one\n")
        try devices.sync(devices.a)
        try devices.sync(devices.b)
        let firstEntry = devices.server + "/zones/notes/log/000000/000000000001"
        var planted: String
        let written = try Self.added(devices) {
            try devices.write(devices.a, "two.md", "two, never to be read as anything else\n")
            try devices.write(devices.a, "three.md", "three\n")
            try devices.sync(devices.a)
        }
        let entry = devices.server + "/" + (try #require(written.first(where: { $0.contains("/log/") })))
        let assets = written.filter { $0.contains("/assets/") }.map { devices.server + "/" + $0 }
        #expect(assets.count == 2)
        func flip(_ path: String) throws {
            var data = try Data(contentsOf: URL(fileURLWithPath: path))
            data[data.count - 5] ^= 0x01
            unlink(path)
            try data.write(to: URL(fileURLWithPath: path))
        }
        func put(_ data: Data, at path: String) throws {
            unlink(path)
            try data.write(to: URL(fileURLWithPath: path))
        }
        switch tampering {
        case .flippedEntryByte:
            try flip(entry)
            planted = entry
        case .flippedAssetByte:
            try flip(assets[0])
            planted = assets[0]
        case .assetsSwapped:
            let (first, second) = (
                try Data(contentsOf: URL(fileURLWithPath: assets[0])), try Data(contentsOf: URL(fileURLWithPath: assets[1]))
            )
            try put(second, at: assets[0])
            try put(first, at: assets[1])
            planted = assets[0]
        case .oldEntryInNewSlot:
            try put(try Data(contentsOf: URL(fileURLWithPath: firstEntry)), at: entry)
            planted = entry
        case .entryOfAnotherServer:
            // Another encrypted server with the same passphrase: its entry 1, well formed, in this server's slot.
            let other = try TwoDevices("tamper-other", encrypted: true)
            try other.write(other.a, "two.md", "planted from another server\n")
            try other.sync(other.a)
            try put(try Data(contentsOf: URL(fileURLWithPath: other.server + "/zones/notes/log/000000/000000000001")), at: entry)
            planted = entry
        }
        let notesBefore = try devices.notes(devices.b)
        let synced = try devices.run(["sync", "--notes", devices.b])
        let said = synced.stdout + synced.stderr
        // Paths are shown normalised (the scratch folder's path may hold a double slash).
        let relative = String(planted.dropFirst(devices.server.count + 1))
        #expect(said.contains(relative), "the path of the tampered file \(relative): \(said)")
        // Nothing of it applied: no note took a text that is not its own.
        let after = try devices.notes(devices.b)
        for (name, data) in after where notesBefore[name] != data {
            let expected = ["two.md": "two, never to be read as anything else\n", "three.md": "three\n"][name]
            #expect(String(decoding: data, as: UTF8.self) == expected, "\(name) took a text that is not its own")
        }
        #expect(after["one.md"] == Data("one\n".utf8))
        if tampering == .entryOfAnotherServer || tampering == .oldEntryInNewSlot || tampering == .flippedEntryByte {
            #expect(after["two.md"] == nil && after["three.md"] == nil, "the entry is not applied")
        }
        let fsck = try devices.run(["server", "fsck", devices.server])
        #expect(fsck.status == 1 && fsck.stdout.contains(relative), "\(fsck.stdout) \(fsck.stderr)")
    }
}
