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

/// A real sshd on loopback serving one remote folder, with its own host key, user key and config in the test's
/// scratch folder (no system file is read or changed), and the sshfs mounts of that folder a test asks for.
///
/// Devices can then sit on both sides: one on `remote` directly, others on mounts of it, as on a machine that
/// shares a folder over SSH with laptops. ``stop()`` unmounts every mount and stops sshd; the test calls it in a
/// `defer`, so a failing test leaves no mount and no daemon behind (and `deinit` does it again, to be sure).
final class SshfsHost {
    let scratch: Scratch
    private(set) var port = 0
    private var sshd: Int32 = 0
    private(set) var mounts: [SshfsMount] = []

    /// The folder sshd serves: the server as the machine that holds it sees it.
    var remote: String { scratch.path + "/remote" }

    /// Why FUSE cannot be mounted on this machine, or nil when it can: the tests are skipped, with this reason,
    /// only when it is not nil. scripts/test installs sshfs and openssh-server, and CI runs as root with
    /// `/dev/fuse`, so there they always run.
    static let unavailableReason: String? = {
        for tool in ["/usr/bin/sshfs", "/usr/sbin/sshd", "/usr/bin/ssh-keygen", "/usr/bin/fusermount3"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (scripts/test installs sshfs and openssh-server)"
        }
        let fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC)
        guard fuse >= 0 else {
            return "/dev/fuse cannot be opened (\(String(cString: strerror(errno)))): this machine cannot mount FUSE"
        }
        close(fuse)
        if getuid() != 0, !TestMount.available {
            let setuid = ((FileIO.lstatInfo("/usr/bin/fusermount3")?.st_mode ?? 0) & S_ISUID) != 0
            if !setuid { return "not root and fusermount3 is not setuid: this user cannot mount FUSE" }
        }
        return nil
    }()

    /// Whether the sshfs tests can run; prints the reason they are skipped when not (once), so that it shows in
    /// the log besides the test runner's own "skipped" lines.
    static let available: Bool = {
        guard let reason = unavailableReason else { return true }
        FileHandle.standardError.write(Data("SKIPPED sshfs tests: \(reason)\n".utf8))
        return false
    }()

    /// Starts sshd on a free loopback port (a few random ports are tried).
    ///
    /// sshd runs as a daemon and is stopped by the pid it writes: a foreground sshd under Foundation's `Process`
    /// closes the descriptor through which `Process` learns that a child ended, and `Process` then blocks in
    /// `waitpid` for it, so that no other child's end is ever seen.
    init(_ label: String) throws {
        scratch = try Scratch("sshfs-\(label)")
        let dir = scratch.path
        try FileManager.default.createDirectory(atPath: remote, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        try #require(
            try shell(
                "ssh-keygen -q -t ed25519 -N '' -f hostkey && ssh-keygen -q -t ed25519 -N '' -f userkey"
                    + " && cp userkey.pub authorized_keys", in: dir) == 0, "ssh-keygen failed")
        var log = ""
        for _ in 0..<5 {
            port = Int.random(in: 20000...29999)
            log = dir + "/sshd-\(port).log"
            let config = """
                Port \(port)
                ListenAddress 127.0.0.1
                HostKey \(dir)/hostkey
                AuthorizedKeysFile \(dir)/authorized_keys
                PasswordAuthentication no
                KbdInteractiveAuthentication no
                PermitRootLogin prohibit-password
                StrictModes no
                UsePAM no
                PidFile \(dir)/sshd.pid
                Subsystem sftp internal-sftp
                """
            try Data(config.utf8).write(to: URL(fileURLWithPath: dir + "/sshd_config"))
            // sshd listens before it detaches, so a port already taken fails here.
            guard runCommand("/usr/sbin/sshd -f '\(dir)/sshd_config' -E '\(log)'").status == 0 else { continue }
            let started = eventually(10) {
                ((try? String(contentsOfFile: dir + "/sshd.pid", encoding: .utf8)).flatMap {
                    Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
                } ?? 0) > 0
            }
            if started, let text = try? String(contentsOfFile: dir + "/sshd.pid", encoding: .utf8),
                let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                sshd = pid
                return
            }
        }
        Issue.record("sshd did not start on loopback: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        throw NoteSyncError(.io, path: dir, "sshd did not start", fix: "see its log")
    }

    /// Mounts `remote` at a new mount point `scratch/<name>` with its own sshfs process and SSH connection.
    func mount(_ name: String) throws -> SshfsMount {
        let options =
            "IdentityFile=\(scratch.path)/userkey,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,"
            + "BatchMode=yes,LogLevel=ERROR"
        let mount = SshfsMount(
            at: scratch.path + "/" + name,
            arguments: ["-p", "\(port)", "-o", options, "root@127.0.0.1:\(remote)"],
            log: scratch.path + "/sshfs-\(name).log")
        mounts.append(mount)
        try mount.mount()
        return mount
    }

    /// Unmounts every mount and stops sshd. Safe to call more than once.
    func stop() {
        for mount in mounts { mount.unmount() }
        if sshd > 0, kill(sshd, SIGTERM) == 0 {
            if !eventually(10, { kill(sshd, 0) != 0 }) { kill(sshd, SIGKILL) }
        }
        sshd = 0
    }

    deinit { stop() }
}

/// One sshfs mount of an ``SshfsHost``'s folder: mounted, unmounted (lazily, as `fusermount -u -z` does when the
/// mount is busy), or cut off by killing sshfs, which leaves a dead mount where every access fails with
/// `ENOTCONN`, as when the network goes away.
final class SshfsMount {
    let mountPoint: String
    private let arguments: [String]
    private let log: String
    private var sshfs: Process?

    fileprivate init(at mountPoint: String, arguments: [String], log: String) {
        self.mountPoint = mountPoint
        self.arguments = arguments
        self.log = log
    }

    /// Whether a FUSE filesystem is mounted at the mount point (a dead one too).
    var isMounted: Bool { (try? FilesystemKind(path: mountPoint))?.name == "fuse" || errnoOfStat == ENOTCONN }

    private var errnoOfStat: Int32 {
        var info = stat()
        return stat(mountPoint, &info) == 0 ? 0 : errno
    }

    /// Starts sshfs in the foreground (a daemonised sshfs would keep Foundation's `Process` waiting for the
    /// descriptors it inherited) and waits until the mount is there.
    func mount() throws {
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sshfs")
        process.arguments = ["-f"] + arguments + [mountPoint]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try process.run()
        sshfs = process
        let mounted = eventually(15) { !process.isRunning || (try? FilesystemKind(path: mountPoint))?.name == "fuse" }
        guard mounted, process.isRunning else {
            let message = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            Issue.record("sshfs did not mount \(mountPoint): \(message)")
            throw NoteSyncError(.io, path: mountPoint, "sshfs did not mount: \(message)", fix: "see the sshfs log")
        }
    }

    /// Unmounts (lazily: detached at once, released when no longer busy) and waits for sshfs to end.
    func unmount(lazily: Bool = false) {
        if isMounted {
            let result = runCommand("fusermount3 -u \(lazily ? "-z " : "")'\(mountPoint)' || umount -l '\(mountPoint)'")
            if result.status != 0 { Issue.record("could not unmount \(mountPoint): \(result.output)") }
        }
        reap()
    }

    /// Kills sshfs with SIGKILL: the mount stays, dead, until ``unmount(lazily:)``.
    func killSshfs() {
        if let sshfs, sshfs.isRunning { kill(sshfs.processIdentifier, SIGKILL) }
        reap()
    }

    private func reap() {
        guard let process = sshfs else { return }
        if !eventually(10, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        sshfs = nil
    }

    deinit { unmount() }
}

/// A `notesync watch` process on one notes folder, at debug level, its log in the scratch folder.
final class WatchAgent {
    let folder: String
    let process: NotesyncProcess

    /// Starts the agent (with `--poll-interval` when given, and `environment` added to the test's) and waits until
    /// it has written its first status.
    init(_ folder: String, pollInterval: Double? = nil, scratch: String, environment: [String: String] = [:]) throws {
        self.folder = folder
        try? FileManager.default.removeItem(atPath: folder + "/.notesync/status.json")
        process = try NotesyncProcess(
            ["watch", "--notes", folder, "--log-level", "debug"]
                + (pollInterval.map { ["--poll-interval", "\($0)"] } ?? []),
            scratch: scratch, environment: environment)
        let started = eventually(30) { FileManager.default.fileExists(atPath: folder + "/.notesync/status.json") }
        #expect(started, "the agent on \(folder) did not start: \(process.stderrText)")
    }

    /// What the agent last wrote to `.notesync/status.json`.
    var status: AgentStatus? {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: folder + "/.notesync/status.json")) else { return nil }
        return try? JSONDecoder().decode(AgentStatus.self, from: data)
    }

    /// Whether every thread of the agent is stopped: it stopped itself at its `NOTESYNC_TEST_STOP_AT` point.
    var isStopped: Bool { processIsStopped(process.pid) }

    /// Stops the agent with SIGTERM (it pushes what is pending and exits 0); killed if it takes over 30 s.
    @discardableResult
    func stop() -> ProcessResult? {
        guard process.process.isRunning else { return nil }
        kill(process.pid, SIGCONT)
        process.process.terminate()
        if !eventually(30, { !process.process.isRunning }) { kill(process.pid, SIGKILL) }
        let result = process.wait()
        #expect(result.status == 0, "agent on \(folder) exited \(result.status): \(result.stderr.suffix(2000))")
        return result
    }

    deinit {
        if process.process.isRunning {
            kill(process.pid, SIGKILL)
            process.process.waitUntilExit()
        }
    }
}

/// Every change the server's log holds, in log order, with the entry's sequence number.
func allLogChanges(_ server: String) throws -> [(seq: Int64, change: RecordChange)] {
    let store = try ServerStore(root: server, device: "checker", logger: .init(label: "t"))
    var changes: [(seq: Int64, change: RecordChange)] = []
    var seq: Int64 = 1
    while case .entry(let entry) = try store.readSlot(seq) {
        changes += entry.changes.map { (seq, $0) }
        seq += 1
    }
    #expect(try store.readSlot(seq) == .missing, "slot \(seq) is damaged")
    return changes
}
