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

/// The permission bits (and setgid) of `path`.
private func mode(_ path: String) -> mode_t? { FileIO.lstatInfo(path).map { $0.st_mode & 0o7777 } }

/// Every file and folder under `root` (not `root` itself) with its mode.
private func modes(under root: String) -> [(path: String, mode: mode_t, isFolder: Bool)] {
    var found: [(String, mode_t, Bool)] = []
    let enumerator = FileManager.default.enumerator(atPath: root)
    while let relative = enumerator?.nextObject() as? String {
        guard let info = FileIO.lstatInfo(root + "/" + relative) else { continue }
        found.append((relative, info.st_mode & 0o7777, (info.st_mode & S_IFMT) == S_IFDIR))
    }
    return found
}

/// Whether `setpriv` can run notesync as other users and groups here (root only), by number: no account is made.
private let canSwitchUsers: Bool =
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    && runCommand("/usr/bin/setpriv --reuid=61001 --regid=61001 --groups=61000 -- /bin/true").status == 0

/// Runs `notesync` as user `uid` (its own group `uid`, and group 61000) with `umask`, to completion.
private func notesync(as uid: Int, umask: String, _ arguments: [String], scratch: String) throws -> ProcessResult {
    let token = UUID().uuidString
    let outPath = scratch + "/proc-\(token).out"
    let errPath = scratch + "/proc-\(token).err"
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    process.arguments =
        [
            "--reuid=\(uid)", "--regid=\(uid)", "--groups=61000", "--", "/bin/sh", "-c", "umask \(umask) && exec \"$0\" \"$@\"",
            try notesyncBinary()
        ] + arguments
    process.environment = ProcessInfo.processInfo.environment.merging(["HOME": scratch]) { _, new in new }
    process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    try process.run()
    process.waitUntilExit()
    return ProcessResult(
        status: process.terminationStatus,
        stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
}

@Suite struct ModeCLITests {
    /// A note made private (`chmod 600`) stays 0600 through a pulled edit, a merge and a conflict, and its
    /// conflict copy is 0600 too: a version from another device never widens it.
    @Test func aPrivateNoteStaysPrivateThroughPullsMergesAndConflicts() throws {
        let t = try TwoDevices("modes-sync")
        try t.write(t.a, "p.md", "one\ntwo\nthree\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(chmod(t.b + "/p.md", 0o600) == 0)

        try t.write(t.a, "p.md", "one from A\ntwo\nthree\n")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "p.md") == "one from A\ntwo\nthree\n")
        #expect(mode(t.b + "/p.md") == 0o600, "a pulled edit")

        try t.write(t.a, "p.md", "one from A again\ntwo\nthree\n")
        try t.sync(t.a)
        #expect(chmod(t.b + "/p.md", 0o600) == 0)
        let local = try #require(FileHandle(forWritingAtPath: t.b + "/p.md"))
        try local.truncate(atOffset: 0)
        try local.write(contentsOf: Data("one from A\ntwo\nthree from B\n".utf8))
        try local.close()
        try t.sync(t.b)
        #expect(t.read(t.b, "p.md") == "one from A again\ntwo\nthree from B\n", "merged")
        #expect(mode(t.b + "/p.md") == 0o600, "a merge")

        try t.sync(t.a)
        try t.write(t.a, "p.md", "one from A again\ntwo by A\nthree from B\n")
        try t.sync(t.a)
        let edit = try #require(FileHandle(forWritingAtPath: t.b + "/p.md"))
        try edit.truncate(atOffset: 0)
        try edit.write(contentsOf: Data("one from A again\ntwo by B\nthree from B\n".utf8))
        try edit.close()
        try t.sync(t.b)
        let versions = try t.notes(t.b).keys.filter { $0.hasPrefix("p") }.sorted()
        #expect(versions.count == 2, "the note and its conflict copy: \(versions)")
        for version in versions { #expect(mode(t.b + "/" + version) == 0o600, "\(version) after a conflict") }
    }

    /// Under the agent: an edit pulled by `notesync watch` keeps the note's mode.
    @Test func aPrivateNoteStaysPrivateUnderTheAgent() throws {
        let agents = try TwoAgents("modes-agent")
        let t = agents.devices
        defer { agents.stop() }
        try t.write(t.a, "p.md", "v1\n")
        #expect(eventually(30) { t.read(t.b, "p.md") == "v1\n" }, "\(agents.logs())")
        #expect(chmod(t.b + "/p.md", 0o600) == 0)
        try t.write(t.a, "p.md", "v2 from A\n")
        #expect(eventually(30) { t.read(t.b, "p.md") == "v2 from A\n" }, "\(agents.logs())")
        #expect(mode(t.b + "/p.md") == 0o600)
    }

    /// A server shared by a group (its root setgid and group-writable, as `chmod 2775` makes it): two users of the
    /// group sync through it, whatever their umask, and everything in it stays group-writable with the root's group.
    @Test(.enabled(if: canSwitchUsers, "needs root and setpriv to run notesync as two users of one group"), arguments: ["002", "022"])
    func twoUsersOfAGroupShareAServer(_ umask: String) throws {
        let scratch = try Scratch("modes-group")
        let server = scratch.path + "/server"
        let a = scratch.path + "/A"
        let b = scratch.path + "/B"
        for folder in [server, a, b] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false) }
        try Data("from the first user\n".utf8).write(to: URL(fileURLWithPath: a + "/first.md"))
        #expect(
            runCommand(
                "chmod 755 '\(scratch.path)' && chown root:61000 '\(server)' && chmod 2775 '\(server)' "
                    + "&& chown -R 61001:61001 '\(a)' && chown 61002:61002 '\(b)'"
            ).status == 0)
        func run(_ uid: Int, _ arguments: [String]) throws {
            let result = try notesync(as: uid, umask: umask, arguments, scratch: scratch.path)
            #expect(result.status == 0, "user \(uid): notesync \(arguments.joined(separator: " ")): \(result.stdout) \(result.stderr)")
        }
        try run(61001, ["init", "--notes", a, "--server", server, "--device-name", "first", "--create-server"])
        try run(61001, ["sync", "--notes", a])
        try run(61002, ["init", "--notes", b, "--server", server, "--device-name", "second"])
        try run(61002, ["sync", "--notes", b])
        #expect((try? String(contentsOfFile: b + "/first.md", encoding: .utf8)) == "from the first user\n")
        try Data("from the second user\n".utf8).write(to: URL(fileURLWithPath: b + "/second.md"))
        #expect(runCommand("chown 61002:61002 '\(b)/second.md'").status == 0)
        try run(61002, ["sync", "--notes", b])
        try run(61001, ["sync", "--notes", a])
        #expect((try? String(contentsOfFile: a + "/second.md", encoding: .utf8)) == "from the second user\n")

        for entry in modes(under: server) {
            let info = try #require(FileIO.lstatInfo(server + "/" + entry.path))
            #expect(info.st_gid == 61000, "\(entry.path) has the server folder's group")
            if entry.isFolder {
                #expect(entry.mode & 0o2070 == 0o2070, "\(entry.path) is \(String(entry.mode, radix: 8)), not 2775")
            } else {
                #expect(entry.mode & 0o060 == 0o060, "\(entry.path) is \(String(entry.mode, radix: 8)), not 0664")
            }
        }
    }

    /// `server init --private`: only the owner can read the server, and what devices write in it later stays so;
    /// the notes folder's `.notesync/` is its owner's only, and one made before is tightened by the next sync.
    @Test func aPrivateServerStaysItsOwnersOnly() throws {
        let scratch = try Scratch("modes-private")
        let server = scratch.path + "/server"
        let notes = scratch.path + "/notes"
        func run(_ arguments: [String]) throws {
            let result = try notesync(arguments, scratch: scratch.path)
            #expect(result.status == 0, "notesync \(arguments.joined(separator: " ")): \(result.stdout) \(result.stderr)")
        }
        try run(["server", "init", server, "--private"])
        #expect(mode(server) == 0o700)
        try run(["init", "--notes", notes, "--server", server, "--device-name", "owner"])
        #expect(mode(notes + "/.notesync") == 0o700)
        try FileManager.default.createDirectory(atPath: notes + "/sub", withIntermediateDirectories: true)
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: notes + "/sub/secret.md"))
        #expect(chmod(notes + "/.notesync", 0o755) == 0)
        try run(["sync", "--notes", notes])
        #expect(mode(notes + "/.notesync") == 0o700, "a state folder made before is tightened")
        for entry in modes(under: server) {
            #expect(entry.mode == (entry.isFolder ? 0o700 : 0o600), "\(entry.path) is \(String(entry.mode, radix: 8))")
        }
        #expect(modes(under: server).contains { !$0.isFolder && $0.path.contains("/log/") }, "a log entry was written")

        let bucket = try notesync(["server", "init", "s3://bucket/notes", "--private"], scratch: scratch.path)
        #expect(bucket.status != 0 && bucket.stderr.contains("--private") && bucket.stderr.contains("fix:"), "\(bucket.stderr)")
    }
}
