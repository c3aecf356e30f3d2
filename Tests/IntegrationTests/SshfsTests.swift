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

/// The server on a real network folder: a real sshd on loopback and real sshfs mounts of one folder, with devices
/// on both sides of the mount, one on the folder itself and others through sshfs, where the rename flag is refused
/// and commits go through `link(2)` (OpenSSH's `hardlink@openssh.com`). The agent tests are in
/// SshfsAgentTests.swift.
///
/// Skipped, with the reason printed, only where FUSE cannot be mounted (``SshfsHost/unavailableReason``).
@Suite(
    .serialized,
    .enabled(
        if: SshfsHost.available,
        Comment(rawValue: "sshfs tests skipped: \(SshfsHost.unavailableReason ?? "")")))
struct SshfsTests {
    /// Writers through two different sshfs mounts (link) and on the folder itself (rename, on the local disk that
    /// holds it) commit at once to the same few records: the log stays dense, every commit lands once in the slot
    /// its writer won, no two saves are based on the same head, and fsck finds nothing.
    @Test func commitsThroughTwoMountsAndTheFolderItselfNeverAcceptTwoSavesOnOneBase() throws {
        let host = try SshfsHost("concurrent")
        defer { host.stop() }
        let first = try host.mount("mnt1")
        let second = try host.mount("mnt2")
        let kind = try FilesystemKind(path: first.mountPoint)
        #expect(kind.name == "fuse" && kind.isNetwork)
        let scratch = host.scratch.path
        let direct = host.remote + "/server"
        #expect(try notesync(["server", "init", direct], scratch: scratch).status == 0)
        for mount in [first, second] {
            let server = mount.mountPoint + "/server"
            #expect(try FilesystemProbe.choosePrimitive(in: ServerLayout(root: server).tmpDirectory, device: "probe") == .link)
        }
        #expect(try FilesystemProbe.choosePrimitive(in: ServerLayout(root: direct).tmpDirectory, device: "probe") == .rename)

        let servers = [("d", direct), ("m1", first.mountPoint + "/server"), ("m2", second.mountPoint + "/server")]
        let perServer = 2
        let commits = 25
        var writers: [(device: String, process: NotesyncProcess)] = []
        for (prefix, server) in servers {
            for index in 1...perServer {
                let device = "\(prefix)w\(index)"
                writers.append(
                    (
                        device,
                        try NotesyncProcess(
                            [
                                "commit-load", "--server", server, "--device", device,
                                "--commits", "\(commits)", "--records", "6",
                                "--out", scratch + "/won-\(device).txt"
                            ], scratch: scratch, executable: try loadBinary())
                    ))
            }
        }
        var conflicts = 0
        for writer in writers {
            let result = writer.process.wait()
            #expect(result.status == 0, "\(writer.device): \(result.stderr)")
            conflicts +=
                Int(
                    result.stdout.split(separator: ",").first { $0.hasPrefix("\"conflicts\"") }?
                        .split(separator: ":").last ?? "0") ?? 0
        }
        #expect(conflicts > 0, "the writers must really contend for the same records")

        var won: [Int64: String] = [:]
        for writer in writers {
            let lines = try String(contentsOfFile: scratch + "/won-\(writer.device).txt", encoding: .utf8).split(separator: "\n")
            #expect(lines.count == commits, "\(writer.device) landed every commit")
            for line in lines {
                let parts = line.split(separator: " ")
                let seq = try #require(Int64(parts[0]))
                #expect(won[seq] == nil, "slot \(seq) was won twice")
                won[seq] = String(parts[1])
            }
        }
        let total = Int64(writers.count * commits)
        #expect(Set(won.keys) == Set(1...total), "the log is dense and every commit landed once")

        // Read back through the other side: the folder itself, as the machine that holds it sees it.
        let store = try ServerStore(root: direct, device: "checker", logger: Logger(label: "test"))
        var heads: [String: Int64] = [:]
        var commitIDs = Set<String>()
        var devices = Set<String>()
        for seq in 1...total {
            guard case .entry(let entry) = try store.readSlot(seq) else {
                Issue.record("slot \(seq) is not a valid entry")
                continue
            }
            #expect(entry.commit == won[seq], "slot \(seq) holds the commit its writer says it won")
            #expect(commitIDs.insert(entry.commit).inserted, "commit \(entry.commit) appears twice")
            devices.insert(entry.device)
            for change in entry.changes {
                #expect(change.base == heads[change.name, default: 0], "two saves of \(change.name) on one base (slot \(seq))")
                heads[change.name] = seq
                if let text = change.text { #expect(try store.readAsset(text).count == Int(text.size)) }
            }
        }
        #expect(try store.readSlot(total + 1) == .missing)
        #expect(devices.count == writers.count, "every writer's commits are in the log")
        for (label, server) in servers {
            let fsck = try notesync(["server", "fsck", server], scratch: scratch)
            #expect(fsck.status == 0, "fsck through \(label): \(fsck.stdout)")
        }
    }

    /// `--log-level debug` says which primitive was chosen and why: `link` on sshfs, because FUSE refuses the
    /// rename flag; `rename` on the local disk that holds the same folder.
    @Test func theDebugLogSaysWhichPrimitiveWasChosenAndWhy() throws {
        let host = try SshfsHost("primitive-log")
        defer { host.stop() }
        let mount = try host.mount("mnt")
        let scratch = host.scratch.path
        let direct = scratch + "/direct"
        let remote = scratch + "/remote-side"
        #expect(
            try notesync(
                [
                    "init", "--notes", direct, "--server", host.remote + "/server", "--device-name", "desk",
                    "--create-server"
                ], scratch: scratch
            ).status == 0)
        #expect(
            try notesync(
                ["init", "--notes", remote, "--server", mount.mountPoint + "/server", "--device-name", "laptop"],
                scratch: scratch
            ).status == 0)
        for folder in [direct, remote] {
            try Data("a note from \(folder)\n".utf8).write(to: URL(fileURLWithPath: folder + "/n.md"))
        }

        let overSshfs = try notesync(["sync", "--notes", remote, "--log-level", "debug"], scratch: scratch)
        #expect(overSshfs.status == 0, "\(overSshfs.stderr)")
        let line = overSshfs.stderr.split(separator: "\n").first { $0.contains("server.primitive=") }
        #expect(line?.contains("server.primitive=link") == true, "\(overSshfs.stderr)")
        #expect(
            line?.contains("fuse: renameat2(RENAME_NOREPLACE) is not tried") == true
                && line?.contains("sshfs refuse the flag") == true && line?.contains("link(2) worked in the probe") == true,
            "the reason is logged: \(line ?? "no server.primitive line")")

        let onDisk = try notesync(["sync", "--notes", direct, "--log-level", "debug"], scratch: scratch)
        #expect(onDisk.status == 0, "\(onDisk.stderr)")
        let local = onDisk.stderr.split(separator: "\n").first { $0.contains("server.primitive=") }
        #expect(
            local?.contains("server.primitive=rename") == true
                && local?.contains("renameat2(RENAME_NOREPLACE) worked in the probe") == true, "\(local.map(String.init) ?? onDisk.stderr)")
    }

    /// Two devices through one mount and one on the folder itself, synced with the CLI: edits to different lines
    /// of one note from all three merge, and every device ends with the same text.
    @Test func devicesOnBothSidesOfTheMountSyncWithTheCLI() throws {
        let host = try SshfsHost("cli")
        defer { host.stop() }
        let mount = try host.mount("mnt")
        let scratch = host.scratch.path
        let server = mount.mountPoint + "/server"
        let a = scratch + "/A"
        let b = scratch + "/B"
        let c = scratch + "/C"
        func run(_ arguments: [String]) throws -> ProcessResult { try notesync(arguments, scratch: scratch) }
        #expect(try run(["init", "--notes", a, "--server", server, "--device-name", "alice", "--create-server"]).status == 0)
        #expect(try run(["init", "--notes", b, "--server", server, "--device-name", "bob"]).status == 0)
        #expect(try run(["init", "--notes", c, "--server", host.remote + "/server", "--device-name", "carol"]).status == 0)
        let lines = ["one", "two", "three", "four", "five", "six", "seven"]
        func text(upper: Set<Int>) -> Data {
            Data(
                lines.enumerated().map { upper.contains($0.offset) ? $0.element.uppercased() : $0.element }
                    .joined(separator: "\n").appending("\n").utf8)
        }
        try text(upper: []).write(to: URL(fileURLWithPath: a + "/n.md"))
        for folder in [a, b, c] { #expect(try run(["sync", "--notes", folder]).status == 0) }
        try text(upper: [0]).write(to: URL(fileURLWithPath: a + "/n.md"))
        try text(upper: [3]).write(to: URL(fileURLWithPath: b + "/n.md"))
        try text(upper: [6]).write(to: URL(fileURLWithPath: c + "/n.md"))
        for folder in [a, b, c, a, b] { #expect(try run(["sync", "--notes", folder]).status == 0) }
        for folder in [a, b, c] {
            #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/n.md")) == text(upper: [0, 3, 6]), "\(folder)")
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: folder).filter { !$0.hasPrefix(".") } == ["n.md"],
                "merged, no conflict copy")
        }
        #expect(try run(["server", "fsck", server]).status == 0)
    }
}
