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

/// Agents on both sides of an sshfs mount: one on the server folder itself (inotify on its log), others through
/// mounts (polling, since inotify does not see writes made by another machine).
extension SshfsTests {
    /// Three devices: `direct` on the server folder, `first` and `second` through two different mounts.
    final class Devices {
        let host: SshfsHost
        let mounts: [SshfsMount]
        var direct: String { host.scratch.path + "/direct" }
        var first: String { host.scratch.path + "/first" }
        var second: String { host.scratch.path + "/second" }
        var server: String { host.remote + "/server" }

        init(_ label: String, mounts count: Int) throws {
            let host = try SshfsHost(label)
            self.host = host
            mounts = try (1...count).map { try host.mount("mnt\($0)") }
            try expectOK(["init", "--notes", direct, "--server", server, "--device-name", "desk", "--create-server"])
            for (folder, mount) in zip([first, second], mounts) {
                try expectOK([
                    "init", "--notes", folder, "--server", mount.mountPoint + "/server", "--device-name",
                    URL(fileURLWithPath: folder).lastPathComponent
                ])
            }
        }

        func expectOK(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
            let result = try notesync(arguments, scratch: host.scratch.path)
            #expect(
                result.status == 0, "notesync \(arguments.joined(separator: " ")): \(result.stdout) \(result.stderr)",
                sourceLocation: sourceLocation)
        }

        func write(_ folder: String, _ name: String, _ text: String) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: folder + "/" + name))
        }

        func read(_ folder: String, _ name: String) -> String? {
            try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)
        }

        /// Every note in `folder` (not `.notesync/`) with its text.
        func notes(_ folder: String) throws -> [String: String] {
            var notes: [String: String] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: folder) where !name.hasPrefix(".notesync") {
                notes[name] = try String(contentsOfFile: folder + "/" + name, encoding: .utf8)
            }
            return notes
        }
    }

    /// How long an edit may take to reach the other side: polling every `interval` finds it within one interval,
    /// plus the sync itself over SSH. The bound is generous on purpose (a loaded CI machine); the figure itself is
    /// measured by `scripts/bench`.
    static func arrivalBound(pollInterval interval: Double) -> Double { max(10, 10 * interval) }

    /// An edit on the folder itself reaches the device behind the mount by polling, and edits behind one mount
    /// reach the folder itself (through inotify on its log) and the device behind the other mount (by polling).
    @Test func agentsOnBothSidesOfTheMountFindRemoteChangesByPolling() throws {
        let t = try Devices("agents", mounts: 2)
        defer { t.host.stop() }
        let interval = 0.5
        let direct = try WatchAgent(t.direct, scratch: t.host.scratch.path)
        let first = try WatchAgent(t.first, pollInterval: interval, scratch: t.host.scratch.path)
        let second = try WatchAgent(t.second, pollInterval: interval, scratch: t.host.scratch.path)
        defer { for agent in [first, second, direct] { agent.stop() } }
        #expect(direct.status?.serverWatch == .inotify)
        #expect(first.status?.serverWatch == .polling(every: .milliseconds(500)), "\(String(describing: first.status))")
        let bound = Self.arrivalBound(pollInterval: interval)

        try t.write(t.direct, "from-desk.md", "written on the machine that holds the folder\n")
        var start = Date()
        #expect(
            eventually(bound) { t.read(t.first, "from-desk.md") == "written on the machine that holds the folder\n" },
            "the edit did not reach the device behind the mount within \(bound) s: \(first.process.stderrText.suffix(3000))")
        #expect(eventually(bound) { t.read(t.second, "from-desk.md") != nil })
        let downstream = Date().timeIntervalSince(start)

        try t.write(t.first, "from-laptop.md", "written behind the first mount\n")
        start = Date()
        #expect(
            eventually(bound) { t.read(t.direct, "from-laptop.md") == "written behind the first mount\n" },
            "the edit did not reach the folder itself within \(bound) s: \(direct.process.stderrText.suffix(3000))")
        #expect(
            eventually(bound) { t.read(t.second, "from-laptop.md") == "written behind the first mount\n" },
            "the edit did not reach the second mount's device within \(bound) s")
        let upstream = Date().timeIntervalSince(start)

        try t.write(t.second, "from-desk.md", "edited behind the second mount\n")
        #expect(
            eventually(bound) {
                t.read(t.direct, "from-desk.md") == "edited behind the second mount\n"
                    && t.read(t.first, "from-desk.md") == "edited behind the second mount\n"
            }, "the edit did not reach both other devices within \(bound) s")
        print(
            "sshfs agents, polling every \(interval) s: desk → mounts \(String(format: "%.2f", downstream)) s, "
                + "first mount → desk and second mount \(String(format: "%.2f", upstream)) s")
        let expected = try t.notes(t.direct)
        #expect(expected.count == 2)
        for folder in [t.first, t.second] { #expect(try t.notes(folder) == expected) }
        #expect(first.process.stderrText.contains("server.primitive=link"), "the device behind the mount commits with link(2)")
    }

    enum Vanishing: String, CaseIterable, CustomStringConvertible, Sendable {
        /// `fusermount -u -z`: the mount is detached at once and the mount point is an empty folder again.
        case lazilyUnmounted
        /// sshfs is killed (the network dropped): the mount stays, and every access fails with ENOTCONN.
        case sshfsKilled
        var description: String { rawValue }
    }

    /// The mount goes away in the middle of a sync, while the device behind it is streaming new notes to the
    /// server: its agent stops itself at its fourth publish to the server (`NOTESYNC_TEST_STOP_AT`: after the
    /// primitive probe, an asset or the claim of a slot, as the batches fall), the mount goes, and the agent goes
    /// on. It reports itself offline and keeps every change queued (new notes, an edit, a delete), deletes
    /// nothing on either side; when the mount is back it resumes by itself: both sides converge, nothing is lost,
    /// the only delete in the log is the one the user made, and every note is committed once.
    @Test(arguments: Vanishing.allCases)
    func theMountVanishingMidStreamQueuesEverythingAndLosesNothing(_ how: Vanishing) throws {
        let t = try Devices("vanish-\(how)", mounts: 1)
        defer { t.host.stop() }
        let mount = t.mounts[0]
        let scratch = t.host.scratch.path
        let desk = try WatchAgent(t.direct, scratch: scratch)
        let laptop = try WatchAgent(
            t.first, pollInterval: 0.5, scratch: scratch,
            environment: [StopPoint.environmentVariable: "server.published:4"])
        defer { for agent in [laptop, desk] { agent.stop() } }
        for name in ["keep.md", "edited.md", "gone.md"] { try t.write(t.direct, name, "\(name) before\n") }
        #expect(eventually(20) { (try? t.notes(t.first)) == (try? t.notes(t.direct)) }, "the first notes did not arrive")

        // A stream of new notes behind the mount; the mount goes once some of them reached the server.
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/bin/bash")
        writer.arguments = ["-c", "for i in $(seq 1 60); do echo \"stream $i\" > stream-$i.md; sleep 0.02; done"]
        writer.currentDirectoryURL = URL(fileURLWithPath: t.first)
        try writer.run()
        #expect(eventually(30) { laptop.isStopped }, "the agent did not stop at its fourth publish to the server")
        switch how {
        case .lazilyUnmounted: mount.unmount(lazily: true)
        case .sshfsKilled: mount.killSshfs()
        }
        kill(laptop.process.pid, SIGCONT)
        writer.waitUntilExit()
        try t.write(t.first, "edited.md", "edited.md edited while the mount was gone\n")
        try t.write(t.first, "offline.md", "written while the mount was gone\n")
        #expect(unlink(t.first + "/gone.md") == 0)
        try t.write(t.direct, "keep.md", "keep.md edited on the desk meanwhile\n")

        let laptopNotes = try t.notes(t.first)
        #expect(laptopNotes.count == 63, "60 streamed, keep, edited, offline: \(laptopNotes.keys.sorted())")
        // The agent retries with a backoff: the last edits are queued at its next attempt.
        var shown = ""
        #expect(
            eventually(20) {
                guard let result = try? notesync(["status", "--notes", t.first, "--json"], scratch: scratch),
                    let json = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                    let pending = json["pending"] as? [String], let agent = json["agent"] as? [String: Any]
                else { return false }
                shown = result.stdout
                return agent["online"] as? Bool == false && json["reachable"] as? Bool == false
                    && ["save edited.md", "save offline.md", "delete gone.md"].allSatisfy(pending.contains)
            }, "the agent reports itself offline with the edit, the new note and the delete queued: \(shown)")
        let status = try notesync(["status", "--notes", t.first], scratch: scratch)
        #expect(status.stdout.contains("OFFLINE") && status.stdout.contains("UNREACHABLE"), "\(status.stdout)")
        if how == .sshfsKilled {
            // A dead FUSE mount answers ENOTCONN until it is unmounted: the fix says so (and it is followed below).
            #expect(status.stdout.contains("fusermount -u"), "\(status.stdout)")
        }
        #expect(
            laptop.status?.online == false && laptop.process.stderrText.contains("server.unreachable"),
            "the agent's status and log say it is offline")
        #expect(try t.notes(t.first) == laptopNotes, "nothing is deleted or changed behind the mount while it is gone")
        #expect(t.read(t.direct, "gone.md") == "gone.md before\n" && t.read(t.direct, "edited.md") == "edited.md before\n")

        if how == .sshfsKilled { mount.unmount() }
        try mount.mount()
        var expected = laptopNotes
        expected["keep.md"] = "keep.md edited on the desk meanwhile\n"
        #expect(
            eventually(40) { (try? t.notes(t.direct)) == expected && (try? t.notes(t.first)) == expected },
            """
            the agents did not converge by themselves once the mount was back: missing on the desk \
            \(Set(expected.keys).subtracting((try? t.notes(t.direct))?.keys ?? [:].keys).sorted())
            \(laptop.process.stderrText.suffix(3000))
            """)
        #expect(eventually(20) { laptop.status?.online == true && laptop.status?.pending == 0 })

        let changes = try allLogChanges(t.server)
        #expect(changes.filter { $0.change.op == .delete }.map(\.change.name) == ["gone.md"], "the only delete is the user's")
        for index in 1...60 {
            #expect(changes.filter { $0.change.name == "stream-\(index).md" }.count == 1, "stream-\(index).md committed once")
        }
        #expect(changes.filter { $0.change.name == "offline.md" }.count == 1)
        let fsck = try notesync(["server", "fsck", t.server], scratch: scratch)
        let unexpected = fsck.stdout.split(separator: "\n").filter { $0.contains(": ") && !$0.hasPrefix("temp file:") }
        #expect(unexpected.isEmpty, "only temp files of an interrupted writer may remain: \(unexpected)")
    }
}
