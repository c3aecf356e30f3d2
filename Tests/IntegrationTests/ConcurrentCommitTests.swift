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

/// Many real processes commit to one server directory at once: the log must stay dense and every
/// compare-and-swap must hold, with either publish primitive, and with writers killed at random moments.
@Suite(.serialized) struct ConcurrentCommitTests {
    static let writers = 8
    static let commitsPerWriter = 200

    @Test(arguments: PublishPrimitive.allCases)
    func eightWritersKeepTheLogDenseAndConsistent(_ primitive: PublishPrimitive) throws {
        let scratch = try Scratch("concurrent-\(primitive.rawValue)")
        let server = scratch.path + "/server"
        #expect(try notesync(["server", "init", server], scratch: scratch.path).status == 0)
        let processes = try (1...Self.writers).map { index in
            try NotesyncProcess(
                [
                    "commit-load", "--server", server, "--device", "w\(index)",
                    "--commits", "\(Self.commitsPerWriter)", "--records", "12",
                    "--primitive", primitive.rawValue, "--out", scratch.path + "/won-\(index).txt"
                ],
                scratch: scratch.path, executable: try loadBinary())
        }
        var conflicts = 0
        for process in processes {
            let result = process.wait()
            #expect(result.status == 0, "\(result.stderr)")
            conflicts +=
                Int(
                    result.stdout.split(separator: ",").first { $0.hasPrefix("\"conflicts\"") }?
                        .split(separator: ":").last ?? "0") ?? 0
        }
        #expect(conflicts > 0, "the load must actually contend for records")

        var won: [Int64: String] = [:]
        for index in 1...Self.writers {
            let lines = try String(contentsOfFile: scratch.path + "/won-\(index).txt", encoding: .utf8).split(separator: "\n")
            #expect(lines.count == Self.commitsPerWriter)
            for line in lines {
                let parts = line.split(separator: " ")
                let seq = try #require(Int64(parts[0]))
                #expect(won[seq] == nil, "slot \(seq) was won twice")
                won[seq] = String(parts[1])
            }
        }
        let total = Int64(Self.writers * Self.commitsPerWriter)
        #expect(won.count == Int(total))

        let store = try ServerStore(root: server, device: "checker", logger: Logger(label: "test"))
        try verifyLog(store, expectedEntries: total, won: won)
        let fsck = try notesync(["server", "fsck", server], scratch: scratch.path)
        #expect(fsck.status == 0, "\(fsck.stdout)")
    }

    @Test(arguments: PublishPrimitive.allCases)
    func writersKilledAtRandomLeaveAValidServer(_ primitive: PublishPrimitive) async throws {
        let scratch = try Scratch("kill-\(primitive.rawValue)")
        let server = scratch.path + "/server"
        #expect(try notesync(["server", "init", server], scratch: scratch.path).status == 0)
        var generator = SystemRandomNumberGenerator()
        var kills = 0
        for round in 0..<6 {
            let processes = try (1...Self.writers).map { index in
                try NotesyncProcess(
                    [
                        "commit-load", "--server", server, "--device", "k\(round)x\(index)",
                        "--commits", "100", "--records", "12", "--primitive", primitive.rawValue,
                        "--out", scratch.path + "/won-\(round)-\(index).txt"
                    ], scratch: scratch.path, executable: try loadBinary())
            }
            for process in processes.shuffled(using: &generator) {
                try await Task.sleep(for: .milliseconds(Int.random(in: 20...250, using: &generator)))
                if process.process.isRunning {
                    kill(process.pid, SIGKILL)
                    kills += 1
                }
            }
            for process in processes { _ = process.wait() }
        }
        #expect(kills > 0)

        let store = try ServerStore(root: server, device: "checker", logger: Logger(label: "test"))
        var won: [Int64: String] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: scratch.path) where file.hasPrefix("won-") {
            for line in try String(contentsOfFile: scratch.path + "/" + file, encoding: .utf8).split(separator: "\n") {
                let parts = line.split(separator: " ")
                won[try #require(Int64(parts[0]))] = String(parts[1])
            }
        }
        var state = ZoneState()
        try store.fetch(into: &state)
        try verifyLog(store, expectedEntries: state.token, won: won, everyEntryListed: false)

        let before = try notesync(["server", "fsck", server], scratch: scratch.path)
        let unexpected = before.stdout.split(separator: "\n").filter { $0.contains(": ") && !$0.hasPrefix("temp file:") }
        #expect(unexpected.isEmpty, "only temp files may be left: \(unexpected)")
        let repaired = try notesync(["server", "fsck", server, "--repair", "--temp-age", "0"], scratch: scratch.path)
        #expect(repaired.status == 0, "\(repaired.stdout)")
        #expect(try notesync(["server", "fsck", server], scratch: scratch.path).status == 0)
    }

    /// gc runs again and again (grace 1 s: far longer than a commit) while 8 processes commit: the log is compacted
    /// under them, and still every head's text and every kept version's text is there, no two saves were accepted
    /// on one base after the compaction point, and fsck is clean.
    @Test func gcWhileEightWritersCommit() async throws {
        let scratch = try Scratch("gc-concurrent")
        let server = scratch.path + "/server"
        #expect(try notesync(["server", "init", server], scratch: scratch.path).status == 0)
        #expect(try notesync(["server", "retention", server, "--all", "0", "--hourly", "0"], scratch: scratch.path).status == 0)
        let processes = try (1...Self.writers).map { index in
            try NotesyncProcess(
                [
                    "commit-load", "--server", server, "--device", "g\(index)", "--commits", "\(Self.commitsPerWriter)",
                    "--records", "12", "--out", scratch.path + "/won-\(index).txt"
                ], scratch: scratch.path, executable: try loadBinary())
        }
        var runs = 0
        var swept = 0
        while processes.contains(where: { $0.process.isRunning }) {
            let gc = try notesync(["server", "gc", server, "--grace", "1", "--json"], scratch: scratch.path)
            #expect(gc.status == 0, "\(gc.stderr)")
            if let report = try? JSONDecoder().decode(GCReport.self, from: Data(gc.stdout.utf8)) { swept += report.entriesRemoved }
            runs += 1
            try await Task.sleep(for: .milliseconds(150))
        }
        for process in processes { #expect(process.wait().status == 0) }
        try await Task.sleep(for: .milliseconds(1100))
        let last = try notesync(["server", "gc", server, "--grace", "1", "--json"], scratch: scratch.path)
        #expect(last.status == 0, "\(last.stderr)")
        #expect(runs >= 2 && swept > 0, "gc ran \(runs) times, swept \(swept) entries: it must compact under the writers")
        try checkCompactedServer(server, scratch: scratch)
    }

    /// gc processes SIGKILLed at random moments while writers commit leave a valid server; a last gc finishes.
    @Test func gcKilledAtRandomLeavesAValidServer() async throws {
        let scratch = try Scratch("gc-kill")
        let server = scratch.path + "/server"
        #expect(try notesync(["server", "init", server], scratch: scratch.path).status == 0)
        #expect(try notesync(["server", "retention", server, "--all", "0", "--hourly", "0"], scratch: scratch.path).status == 0)
        var generator = SystemRandomNumberGenerator()
        var kills = 0
        for round in 0..<4 {
            let writers = try (1...4).map { index in
                try NotesyncProcess(
                    [
                        "commit-load", "--server", server, "--device", "k\(round)x\(index)", "--commits", "150",
                        "--records", "40", "--out", scratch.path + "/won-\(round)-\(index).txt"
                    ], scratch: scratch.path, executable: try loadBinary())
            }
            while writers.contains(where: { $0.process.isRunning }) {
                let gc = try NotesyncProcess(["server", "gc", server, "--grace", "0"], scratch: scratch.path)
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...60, using: &generator)))
                if gc.process.isRunning {
                    kill(gc.pid, SIGKILL)
                    kills += 1
                }
                _ = gc.wait()
            }
            for writer in writers { _ = writer.wait() }
        }
        #expect(kills > 0)
        // Killed gcs leave their marks and snapshots; the server reads whole, and a last gc sweeps what they left.
        let last = try notesync(["server", "gc", server, "--grace", "0"], scratch: scratch.path)
        #expect(last.status == 0, "\(last.stderr)")
        try checkCompactedServer(server, scratch: scratch)
    }

    /// A compacted server: a new device reads it whole (jumping to the snapshot), every head's text and every kept
    /// version's text is there, and fsck finds nothing but temp files.
    private func checkCompactedServer(_ server: String, scratch: Scratch) throws {
        let store = try ServerStore(root: server, device: "checker", logger: Logger(label: "test"))
        var state = ZoneState()
        try store.fetch(into: &state)
        #expect(state.casViolations.isEmpty, "\(state.casViolations)")
        for (name, head) in state.heads where !head.deleted {
            #expect((try? store.readAsset(try #require(head.text))) != nil, "the text of \(name) is missing")
        }
        if let newest = try store.snapshotSequences().first {
            for version in try store.readSnapshot(newest).history ?? [] {
                guard let text = version.text else { continue }
                #expect((try? store.readAsset(text)) != nil, "kept version \(version.seq) of \(version.name) is missing")
            }
        }
        let fsck = try notesync(["server", "fsck", server], scratch: scratch.path)
        let unexpected = fsck.stdout.split(separator: "\n").filter { $0.contains(": ") && !$0.hasPrefix("temp file:") }
        #expect(unexpected.isEmpty, "\(fsck.stdout)")
    }

    /// Reads the whole log and checks: dense from 1, every slot a valid entry, each entry the commit its
    /// writer says it won and chained to the entry before it (each writer claimed its slot with that entry read and
    /// verified), every change based on the head at its slot, every referenced asset intact.
    private func verifyLog(
        _ store: ServerStore, expectedEntries: Int64, won: [Int64: String],
        everyEntryListed: Bool = true
    ) throws {
        var heads: [String: Int64] = [:]
        var commits = Set<String>()
        var assets = Set<AssetRef>()
        var seq: Int64 = 1
        var previous: ContentDigest?
        while true {
            let slot = try store.readSlot(seq)
            guard case .entry(let entry) = slot else {
                #expect(slot == .missing, "slot \(seq) is damaged: \(slot)")
                break
            }
            #expect(entry.prev == previous, "entry \(seq) does not name the entry before it")
            previous = entry.digest
            #expect(commits.insert(entry.commit).inserted, "commit \(entry.commit) appears twice")
            if let listed = won[seq] {
                #expect(listed == entry.commit)
            } else {
                #expect(!everyEntryListed, "entry \(seq) was won by nobody")
            }
            for change in entry.changes {
                #expect(change.base == heads[change.name, default: 0], "two saves of \(change.name) on the same base")
                heads[change.name] = seq
                if let text = change.text { assets.insert(text) }
            }
            seq += 1
        }
        #expect(seq - 1 == expectedEntries, "the log is dense up to the last entry")
        for (listed, _) in won { #expect(listed < seq, "won slot \(listed) is missing from the log") }
        for asset in assets { #expect(try store.readAsset(asset).count == Int(asset.size)) }
    }
}
