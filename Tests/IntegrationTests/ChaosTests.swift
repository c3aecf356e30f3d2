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

/// Process-level chaos: real `notesync` processes on real folders (three devices, one server folder), killed
/// with SIGKILL at random moments during `sync` and during `watch` while the users edit, then restarted. After
/// healing: no lost write, convergence (every folder is the server's heads), no leftover temp file, and the
/// server passes `notesync server fsck` (after at most a `--repair` of temp files).
///
/// `NOTESYNC_CHAOS_ITERATIONS` sets the rounds of each test (default 4, under a minute: the CI run); scripts/soak
/// sets it high. `NOTESYNC_CHAOS_SEED` fixes the random choices (the seed is printed on failure); kill times are
/// real time, so a run is not replayed exactly, only its choices.
///
/// Users never race the agent on one note, which no sync tool can win (an editor's write through an fd opened
/// before the agent swapped the file): in `watch` rounds each device edits only its own folder of notes (no one
/// else writes them); notes edited by everyone are edited only between `sync` runs.
@Suite(.serialized) struct ChaosTests {
    static let environment = ProcessInfo.processInfo.environment
    static let iterations = Int(environment["NOTESYNC_CHAOS_ITERATIONS"] ?? "") ?? 4
    static let names = ["alice", "bob", "carol"]
    static let shared = ["shared.md", "notes/plan.md", "notes/deep/todo.txt"]

    /// The users' side: what each wrote, to judge what may be gone.
    final class World {
        let scratch: Scratch
        let server: String
        var rng: SplitMix
        /// Lines some user removed from a note they had in front of them: these may go.
        var removed: Set<String> = []
        var written: [String: String] = [:]
        /// Each device's own notes: the last text its user saved, or nil when the user deleted it.
        var owned: [String: [String]?] = [:]
        var counter = 0
        var kills = 0

        init(_ label: String, seed: UInt64) throws {
            scratch = try Scratch(label)
            server = scratch.path + "/server"
            rng = SplitMix(seed: seed)
            for (index, name) in ChaosTests.names.enumerated() {
                let result = try notesync(
                    ["init", "--notes", folder(index), "--server", server, "--device-name", name]
                        + (index == 0 ? ["--create-server"] : []), scratch: scratch.path)
                #expect(result.status == 0, "init \(name): \(result.stderr)")
            }
        }

        func folder(_ device: Int) -> String { scratch.path + "/" + ChaosTests.names[device] }

        func lines(_ path: String) -> [String]? {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
            return text.split(separator: "\n").map(String.init)
        }

        /// A user's save of `note` on `device`: replaces one line or appends one, saved as a random editor does.
        func edit(_ device: Int, _ note: String) throws {
            let path = folder(device) + "/" + note
            let before = lines(path)
            counter += 1
            let fresh = "\(ChaosTests.names[device]) \(note) edit \(counter)"
            var after = before ?? []
            if !after.isEmpty && rng.next(3) == 0 { after[rng.next(after.count)] = fresh } else { after.append(fresh) }
            removed.formUnion(Set(before ?? []).subtracting(after))
            written[fresh] = note
            try FileManager.default.createDirectory(
                atPath: FileIO.parent(of: path),
                withIntermediateDirectories: true)
            let data = Data(after.map { $0 + "\n" }.joined().utf8)
            switch rng.next(3) {
            case 0:
                // Truncate and write in place (nano, shell redirection).
                try data.write(to: URL(fileURLWithPath: path))
            case 1:
                // Write a temp file and rename it over the note (vim's writebackup, gedit, most GUI editors).
                let temp = FileIO.parent(of: path) + "/.\(counter).swp"
                try data.write(to: URL(fileURLWithPath: temp))
                rename(temp, path)
            default:
                // Rename the note to its backup, write a new file (emacs; the backup stays, ignored).
                if before != nil { rename(path, path + "~") }
                try data.write(to: URL(fileURLWithPath: path))
            }
            if ChaosTests.owner(of: note) != nil { owned[note] = .some(after) }
        }

        func delete(_ device: Int, _ note: String) {
            let path = folder(device) + "/" + note
            guard let before = lines(path) else { return }
            unlink(path)
            removed.formUnion(before)
            if ChaosTests.owner(of: note) != nil { owned[note] = .some(nil) }
        }

        /// A random user action on `device`: its own notes, and with `sharedToo` the notes everyone edits.
        func act(_ device: Int, sharedToo: Bool) throws {
            let own = (0..<4).map { "\(ChaosTests.names[device])/n\($0).md" }
            let pool = own + (sharedToo ? ChaosTests.shared : [])
            let note = pool[rng.next(pool.count)]
            if rng.next(6) == 0 { delete(device, note) } else { try edit(device, note) }
        }

        func kill(_ process: NotesyncProcess) {
            if process.process.isRunning {
                Glibc.kill(process.pid, SIGKILL)
                kills += 1
            }
            process.process.waitUntilExit()
        }

        func sync(_ device: Int) throws -> NotesyncProcess {
            try NotesyncProcess(["sync", "--notes", folder(device), "--allow-mass-delete"], scratch: scratch.path)
        }

        /// Syncs every device round-robin until a round changes no folder; returns false if they never settle.
        func heal() throws -> Bool {
            var previous: [[String: Data]] = []
            for _ in 0..<8 {
                for device in ChaosTests.names.indices {
                    let result = try sync(device).wait()
                    #expect(result.status == 0, "healing sync of \(ChaosTests.names[device]): \(result.stderr)")
                }
                let now = try ChaosTests.names.indices.map(notes)
                if now == previous { return true }
                previous = now
            }
            return false
        }

        /// The notes of a device, litter the engine ignores left out.
        func notes(_ device: Int) throws -> [String: Data] {
            let rules = try IgnoreRules(userRules: nil)
            var files: [String: Data] = [:]
            let root = folder(device)
            let enumerator = FileManager.default.enumerator(atPath: root)
            while let path = enumerator?.nextObject() as? String {
                let full = root + "/" + path
                guard let info = FileIO.lstatInfo(full) else { continue }
                let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
                if path == ".notesync" || rules.isIgnored(path, isDirectory: isDirectory) {
                    if isDirectory { enumerator?.skipDescendants() }
                    continue
                }
                if !isDirectory { files[path] = try Data(contentsOf: URL(fileURLWithPath: full)) }
            }
            return files
        }

        /// Every check after healing.
        func check() throws {
            #expect(try heal(), "the devices did not settle")
            let store = try ServerStore(root: server, device: "checker", logger: .init(label: "chaos"))
            let heads = try store.bootstrap().heads
            var serverNotes: [String: Data] = [:]
            for (name, head) in heads where !head.deleted {
                if let text = head.text { serverNotes[name.string] = try store.readAsset(text) }
            }
            for device in ChaosTests.names.indices {
                let who = ChaosTests.names[device]
                let local = try notes(device)
                #expect(
                    local == serverNotes,
                    "\(who) differs from the server: only here \(Set(local.keys).subtracting(serverNotes.keys).sorted()), only there \(Set(serverNotes.keys).subtracting(local.keys).sorted()), different \(local.filter { serverNotes[$0.key] != nil && serverNotes[$0.key] != $0.value }.keys.sorted())"
                )
                let held = Set(local.values.flatMap { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) })
                let lost = written.keys.filter { !removed.contains($0) && !held.contains($0) }.sorted()
                #expect(lost.isEmpty, "\(who) lost \(lost.count) line(s) written by users: \(lost.prefix(5))")
                for (note, last) in owned {
                    let actual = local[note].map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) }
                    #expect(
                        actual == last,
                        "\(note) on \(who) is \(actual.map { "\($0)" } ?? "absent"), its owner left it \(last.map { "\($0)" } ?? "deleted")"
                    )
                }
                let temps = try FileManager.default.subpathsOfDirectory(atPath: folder(device))
                    .filter { path in
                        path.hasPrefix(".notesync/")
                            ? path.hasPrefix(".notesync/staging/") && !path.hasSuffix("/")
                                && FileIO.lstatInfo(folder(device) + "/" + path).map { ($0.st_mode & S_IFMT) == S_IFREG } == true
                            : (path as NSString).lastPathComponent.hasPrefix(ReservedNames.agentTempPrefix)
                    }
                #expect(temps.isEmpty, "\(who) keeps temp files: \(temps)")
            }
            let fsck = try notesync(["server", "fsck", server], scratch: scratch.path)
            let unexpected = fsck.stdout.split(separator: "\n").filter { $0.contains(": ") && !$0.hasPrefix("temp file:") }
            #expect(unexpected.isEmpty, "server fsck: \(unexpected)")
            if fsck.status != 0 {
                let repaired = try notesync(["server", "fsck", server, "--repair", "--temp-age", "0"], scratch: scratch.path)
                #expect(repaired.status == 0, "\(repaired.stdout)")
            }
            #expect(try notesync(["server", "fsck", server], scratch: scratch.path).status == 0)
        }
    }

    static func owner(of note: String) -> Int? {
        names.firstIndex { note.hasPrefix($0 + "/") }
    }

    /// `NOTESYNC_CHAOS_SEED`, or a random seed; printed, so that a failure names it.
    static func seed(_ test: String) -> UInt64 {
        var generator = SystemRandomNumberGenerator()
        let seed = UInt64(environment["NOTESYNC_CHAOS_SEED"] ?? "") ?? generator.next()
        print("chaos: \(test): NOTESYNC_CHAOS_SEED=\(seed), \(iterations) iterations")
        return seed
    }

    /// One-shot syncs of all three devices at once, each killed at a random moment (or not), with edits of the
    /// notes everyone shares in between.
    @Test func syncsKilledAtRandomMomentsLoseNothing() throws {
        let seed = Self.seed("syncs")
        let world = try World("chaos-sync", seed: seed)
        for _ in 0..<(Self.iterations * 3) {
            for device in Self.names.indices {
                for _ in 0..<(1 + world.rng.next(3)) { try world.act(device, sharedToo: true) }
            }
            let processes = try Self.names.indices.map { try world.sync($0) }
            for process in processes {
                if world.rng.next(4) != 0 { usleep(useconds_t(world.rng.next(60_000))) }
                if world.rng.next(3) != 0 { world.kill(process) } else { process.process.waitUntilExit() }
            }
        }
        #expect(world.kills > 0, "seed \(seed): the test must really kill syncs")
        try world.check()
    }

    /// Agents (`notesync watch`) on all three devices while the users edit their own notes; agents are killed at
    /// random moments and restarted.
    @Test func agentsKilledAtRandomMomentsLoseNothing() throws {
        let seed = Self.seed("agents")
        let world = try World("chaos-watch", seed: seed)
        func start(_ device: Int) throws -> NotesyncProcess {
            try NotesyncProcess(
                ["watch", "--notes", world.folder(device), "--settle-ms", "20", "--delete-settle-ms", "100"],
                scratch: world.scratch.path)
        }
        var agents = try Self.names.indices.map(start)
        for _ in 0..<Self.iterations {
            for _ in 0..<12 {
                let device = world.rng.next(Self.names.count)
                try world.act(device, sharedToo: false)
                usleep(useconds_t(world.rng.next(40_000)))
                if world.rng.next(5) == 0 {
                    let victim = world.rng.next(Self.names.count)
                    world.kill(agents[victim])
                    agents[victim] = try start(victim)
                }
            }
            usleep(useconds_t(world.rng.next(400_000)))
        }
        for agent in agents { world.kill(agent) }
        #expect(world.kills > 0, "seed \(seed): the test must really kill agents")
        try world.check()
    }
}
