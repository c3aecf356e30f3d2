import Foundation
import Logging
import NoteSync
import Testing

/// A real sshd on loopback and a real sshfs mount, started by the test: the server on a FUSE filesystem that
/// refuses `renameat2(RENAME_NOREPLACE)`, where commits must go through `link(2)`.
final class SshfsMount {
    let scratch: Scratch
    let port: Int
    var mountPoint: String { scratch.path + "/mnt" }
    var remote: String { scratch.path + "/remote" }
    private var sshd: Int32 = 0
    private let sshfs = Process()

    init() throws {
        scratch = try Scratch("sshfs")
        port = Int.random(in: 20000...29999)
        let dir = scratch.path
        try FileManager.default.createDirectory(atPath: remote, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        #expect(try shell("ssh-keygen -q -t ed25519 -N '' -f hostkey && ssh-keygen -q -t ed25519 -N '' -f userkey && cp userkey.pub authorized_keys", in: dir) == 0)
        let config = """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(dir)/hostkey
            AuthorizedKeysFile \(dir)/authorized_keys
            PasswordAuthentication no
            PermitRootLogin prohibit-password
            StrictModes no
            UsePAM no
            PidFile \(dir)/sshd.pid
            Subsystem sftp internal-sftp
            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: dir + "/sshd_config"))
        #expect(try shell("/usr/sbin/sshd -f \(dir)/sshd_config -E \(dir)/sshd.log", in: dir) == 0, "sshd did not start")
        #expect(eventually(10) { FileManager.default.fileExists(atPath: dir + "/sshd.pid") })
        sshd = Int32((try? String(contentsOfFile: dir + "/sshd.pid", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        let options = "IdentityFile=\(dir)/userkey,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes"
        // In the foreground (-f): a daemonised sshfs keeps Foundation's Process waiting for descriptors it inherited.
        sshfs.executableURL = URL(fileURLWithPath: "/usr/bin/sshfs")
        sshfs.arguments = ["-f", "-p", "\(port)", "-o", options, "root@127.0.0.1:\(remote)", mountPoint]
        sshfs.standardOutput = FileHandle.nullDevice
        sshfs.standardError = FileHandle.nullDevice
        try sshfs.run()
        let mounted = eventually(15) { (try? FilesystemKind(path: mountPoint))?.name == "fuse" }
        #expect(mounted, "sshfs mount failed")
    }

    deinit {
        _ = try? shell("fusermount3 -u \(mountPoint) || fusermount -u \(mountPoint)", in: "/")
        if sshfs.isRunning { sshfs.terminate() }
        sshfs.waitUntilExit()
        if sshd > 0 { kill(sshd, SIGTERM) }
    }
}

@Suite(.serialized) struct SshfsTests {
    @Test func aServerOnSshfsCommitsThroughLinkAndStaysConsistentUnderConcurrency() throws {
        let mount = try SshfsMount()
        let kind = try FilesystemKind(path: mount.mountPoint)
        #expect(kind.name == "fuse" && kind.isNetwork)
        let server = mount.mountPoint + "/server"
        #expect(try notesync(["server", "init", server], scratch: mount.scratch.path).status == 0)
        #expect(try FilesystemProbe.choosePrimitive(in: ServerLayout(root: server).tmpDirectory, device: "probe") == .link)

        let writers = 4, commits = 40
        let processes = try (1...writers).map { index in
            try NotesyncProcess(["debug", "commit-load", "--server", server, "--device", "s\(index)", "--commits", "\(commits)",
                                 "--records", "6", "--out", mount.scratch.path + "/won-\(index).txt"], scratch: mount.scratch.path)
        }
        for process in processes {
            let result = process.wait()
            #expect(result.status == 0, "\(result.stderr)")
        }
        var won = Set<Int64>()
        for index in 1...writers {
            for line in try String(contentsOfFile: mount.scratch.path + "/won-\(index).txt", encoding: .utf8).split(separator: "\n") {
                #expect(won.insert(try #require(Int64(line.split(separator: " ")[0]))).inserted, "a slot was won twice")
            }
        }
        #expect(won == Set(1...Int64(writers * commits)), "the log is dense and every commit landed once")
        let fsck = try notesync(["server", "fsck", server], scratch: mount.scratch.path)
        #expect(fsck.status == 0, "\(fsck.stdout)")
    }

    @Test func twoDevicesSyncThroughAnSshfsServer() throws {
        let mount = try SshfsMount()
        let server = mount.mountPoint + "/server"
        let a = mount.scratch.path + "/A", b = mount.scratch.path + "/B"
        func run(_ arguments: [String]) throws -> ProcessResult { try notesync(arguments, scratch: mount.scratch.path) }
        #expect(try run(["init", "--notes", a, "--server", server, "--device-name", "alice", "--create-server"]).status == 0)
        #expect(try run(["init", "--notes", b, "--server", server, "--device-name", "bob"]).status == 0)
        try Data("one\ntwo\nthree\nfour\n".utf8).write(to: URL(fileURLWithPath: a + "/n.md"))
        #expect(try run(["sync", "--notes", a]).status == 0)
        #expect(try run(["sync", "--notes", b]).status == 0)
        try Data("ONE\ntwo\nthree\nfour\n".utf8).write(to: URL(fileURLWithPath: a + "/n.md"))
        try Data("one\ntwo\nthree\nFOUR\n".utf8).write(to: URL(fileURLWithPath: b + "/n.md"))
        #expect(try run(["sync", "--notes", a]).status == 0)
        #expect(try run(["sync", "--notes", b]).status == 0)
        #expect(try run(["sync", "--notes", a]).status == 0)
        for folder in [a, b] {
            #expect(try String(contentsOfFile: folder + "/n.md", encoding: .utf8) == "ONE\ntwo\nthree\nFOUR\n")
        }
        #expect(try run(["server", "fsck", server]).status == 0)
    }
}
