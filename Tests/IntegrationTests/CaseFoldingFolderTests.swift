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

/// `Todo.md` and `todo.md` on an ext4 device, and a device whose notes folder does not tell case apart (the
/// case-folding FUSE passthrough, and exFAT): the second gets one of them and a warning, `status` lists the other
/// as waiting, nothing is deleted or overwritten anywhere; once one is renamed on the first device, both arrive.
/// One-shot syncs, and agents (`notesync watch`) on both devices.
@Suite(.serialized)
struct CaseFoldingFolderTests {
    /// Runs the commands of one scenario in `scratch`: A's notes in `a` (ext4), B's in `b`.
    struct Devices {
        let scratch: String
        let a: String
        let b: String
        var server: String { scratch + "/server" }

        @discardableResult
        func run(_ arguments: [String]) throws -> ProcessResult {
            let result = try notesync(arguments, scratch: scratch)
            #expect(result.status == 0, "notesync \(arguments.joined(separator: " ")): \(result.stdout) \(result.stderr)")
            return result
        }

        @discardableResult
        func sync(_ folder: String) throws -> ProcessResult { try run(["sync", "--notes", folder]) }

        func write(_ folder: String, _ name: String, _ text: String) throws {
            let path = folder + "/" + name
            try FileManager.default.createDirectory(atPath: FileIO.parent(of: path), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        }

        func read(_ folder: String, _ name: String) -> String? {
            try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)
        }

        /// The notes in `folder` as listed (the spelling on disk), with their texts.
        func notes(_ folder: String) -> [String: String] {
            var found: [String: String] = [:]
            for path in FileManager.default.subpaths(atPath: folder) ?? [] where !path.hasPrefix(".notesync") {
                guard (FileIO.lstatInfo(folder + "/" + path)?.st_mode ?? 0) & S_IFMT == S_IFREG else { continue }
                found[path] = read(folder, path)
            }
            return found
        }

        func trash(_ folder: String) -> [String] {
            (FileManager.default.subpaths(atPath: folder + "/.notesync/trash") ?? []).filter {
                (FileIO.lstatInfo(folder + "/.notesync/trash/" + $0)?.st_mode ?? 0) & S_IFMT == S_IFREG
            }
        }

        func setUp() throws {
            try write(a, "Todo.md", "upper\n")
            try write(a, "todo.md", "lower\n")
            try run(["init", "--notes", a, "--server", server, "--device-name", "alice", "--create-server"])
            try sync(a)
            try run(["init", "--notes", b, "--server", server, "--device-name", "bob"])
        }

        /// What B must show while the pair waits.
        func expectWaiting() throws {
            #expect(notes(b) == ["Todo.md": "upper\n"], "\(notes(b))")
            #expect(notes(a) == ["Todo.md": "upper\n", "todo.md": "lower\n"], "\(notes(a))")
            #expect(trash(a).isEmpty && trash(b).isEmpty, "nothing deleted: \(trash(a)) \(trash(b))")
            let status = try run(["status", "--notes", b])
            #expect(status.stdout.contains("one file:  1 note(s) wait"), "\(status.stdout)")
            #expect(status.stdout.contains("todo.md  (one file with Todo.md)"), "\(status.stdout)")
        }

        func oneShot() throws {
            try setUp()
            for _ in 0..<2 {
                let synced = try sync(b)
                #expect(
                    synced.stderr.contains("todo.md and Todo.md are one file in this notes folder"),
                    "\(synced.stdout) \(synced.stderr)")
                #expect(synced.stderr.contains("fix: rename one of them on a device whose folder tells them apart"))
                #expect(!synced.stdout.contains("upload"), "B pushes nothing: \(synced.stdout)")
            }
            let back = try sync(a)
            #expect(!back.stdout.contains("download"), "\(back.stdout)")
            try expectWaiting()
            #expect(rename(a + "/todo.md", a + "/todo-2.md") == 0)
            try sync(a)
            let after = try sync(b)
            #expect(!after.stderr.contains("one file"), "\(after.stderr)")
            #expect(notes(b) == ["Todo.md": "upper\n", "todo-2.md": "lower\n"], "\(notes(b))")
            #expect(!(try run(["status", "--notes", b])).stdout.contains("one file"))
            try sync(a)
            #expect(notes(a) == ["Todo.md": "upper\n", "todo-2.md": "lower\n"], "\(notes(a))")
            #expect(trash(a).isEmpty && trash(b).isEmpty)
        }
    }

    @Test(.enabled(if: FilesystemMount.caseFoldingAvailable))
    func aCasePairOnACaseFoldingFolder() throws {
        let scratch = try Scratch("casepair")
        let mount = try FilesystemMount.caseFolding(backing: scratch.path + "/backing", mountPoint: scratch.path + "/mnt")
        defer { mount.unmount() }
        try Devices(scratch: scratch.path, a: scratch.path + "/A", b: mount.path + "/B").oneShot()
    }

    @Test(.enabled(if: FilesystemMount.exfatAvailable))
    func aCasePairOnExfat() throws {
        let scratch = try Scratch("casepair-exfat")
        let stick = try FilesystemMount.exfat(at: scratch.path + "/stick")
        defer { stick.unmount() }
        try Devices(scratch: scratch.path, a: scratch.path + "/A", b: stick.path + "/B").oneShot()
    }

    /// `Notes/a.md` and `notes/b.md`: one folder on B, both notes in it, and nothing read as a rename or a delete.
    @Test(.enabled(if: FilesystemMount.caseFoldingAvailable))
    func foldersThatDifferInCaseAreOneFolder() throws {
        let scratch = try Scratch("casepair-folders")
        let mount = try FilesystemMount.caseFolding(backing: scratch.path + "/backing", mountPoint: scratch.path + "/mnt")
        defer { mount.unmount() }
        let devices = Devices(scratch: scratch.path, a: scratch.path + "/A", b: mount.path + "/B")
        let (a, b) = (devices.a, devices.b)
        try devices.write(a, "Notes/a.md", "a\n")
        try devices.write(a, "notes/b.md", "b\n")
        try devices.run(["init", "--notes", a, "--server", devices.server, "--device-name", "alice", "--create-server"])
        try devices.sync(a)
        try devices.run(["init", "--notes", b, "--server", devices.server, "--device-name", "bob"])
        try devices.sync(b)
        #expect(devices.notes(b) == ["Notes/a.md": "a\n", "Notes/b.md": "b\n"], "\(devices.notes(b))")
        let again = try devices.sync(b)
        #expect(again.stdout.contains("nothing to do"), "\(again.stdout)")
        try devices.write(b, "Notes/b.md", "b, edited on B\n")
        let edited = try devices.sync(b)
        #expect(edited.stdout.contains("upload           notes/b.md"), "\(edited.stdout)")
        try devices.sync(a)
        #expect(devices.notes(a) == ["Notes/a.md": "a\n", "notes/b.md": "b, edited on B\n"], "\(devices.notes(a))")
        #expect(devices.trash(a).isEmpty && devices.trash(b).isEmpty)
    }

    /// The same pair with an agent on each device.
    @Test(.enabled(if: FilesystemMount.caseFoldingAvailable))
    func aCasePairUnderAgents() throws {
        let scratch = try Scratch("casepair-agents")
        let mount = try FilesystemMount.caseFolding(backing: scratch.path + "/backing", mountPoint: scratch.path + "/mnt")
        defer { mount.unmount() }
        let devices = Devices(scratch: scratch.path, a: scratch.path + "/A", b: mount.path + "/B")
        let (a, b) = (devices.a, devices.b)
        try devices.setUp()
        func start(_ folder: String) throws -> NotesyncProcess {
            let agent = try NotesyncProcess(["watch", "--notes", folder, "--log-level", "debug"], scratch: scratch.path)
            let started = eventually(30) { FileManager.default.fileExists(atPath: folder + "/.notesync/status.json") }
            #expect(started, "the agent did not start: \(agent.stderrText)")
            return agent
        }
        let agentA = try start(a)
        let agentB = try start(b)
        defer {
            for agent in [agentA, agentB] where agent.process.isRunning {
                kill(agent.pid, SIGKILL)
                agent.process.waitUntilExit()
            }
        }
        func logs() -> String { "A:\n\(agentA.stderrText.suffix(3000))\nB:\n\(agentB.stderrText.suffix(3000))" }
        #expect(eventually(30) { devices.notes(b) == ["Todo.md": "upper\n"] }, "\(devices.notes(b)) \(logs())")
        #expect(agentB.stderrText.contains("one file in this notes folder"), "\(logs())")
        // Edits on both sides, a sync served by B's agent: still nothing deleted.
        try devices.write(a, "Todo.md", "upper, edited\n")
        #expect(eventually(30) { devices.read(b, "Todo.md") == "upper, edited\n" }, "\(logs())")
        try devices.write(b, "Todo.md", "upper, edited on B\n")
        #expect(eventually(30) { devices.read(a, "Todo.md") == "upper, edited on B\n" }, "\(logs())")
        try devices.sync(b)
        #expect(devices.notes(a) == ["Todo.md": "upper, edited on B\n", "todo.md": "lower\n"], "\(devices.notes(a))")
        #expect(devices.trash(a).isEmpty && devices.trash(b).isEmpty, "\(logs())")
        #expect((try devices.run(["status", "--notes", b])).stdout.contains("todo.md  (one file with Todo.md)"))
        // Renamed on A: both arrive at B.
        #expect(rename(a + "/todo.md", a + "/todo-2.md") == 0)
        #expect(
            eventually(30) { devices.notes(b) == ["Todo.md": "upper, edited on B\n", "todo-2.md": "lower\n"] },
            "\(devices.notes(b)) \(logs())")
        #expect(devices.notes(a) == ["Todo.md": "upper, edited on B\n", "todo-2.md": "lower\n"], "\(devices.notes(a))")
        #expect(devices.trash(a).isEmpty && devices.trash(b).isEmpty, "\(logs())")
        for agent in [agentA, agentB] {
            agent.process.terminate()
            #expect(agent.wait().status == 0)
        }
    }

    /// B has synced `todo.md`; A then makes `Todo.md`. B's agent scans the name fetched, whose lookup finds
    /// `todo.md`'s file: the file stays `todo.md`'s (the spelling listed), `Todo.md` waits, nothing is written over,
    /// and when A renames `Todo.md` no delete of `todo.md` is read from its release.
    @Test(.enabled(if: FilesystemMount.caseFoldingAvailable))
    func aNameFetchedUnderAnAgentNeverTakesTheFileOfANoteHere() throws {
        let scratch = try Scratch("casepair-fetched")
        let mount = try FilesystemMount.caseFolding(backing: scratch.path + "/backing", mountPoint: scratch.path + "/mnt")
        defer { mount.unmount() }
        let devices = Devices(scratch: scratch.path, a: scratch.path + "/A", b: mount.path + "/B")
        let (a, b) = (devices.a, devices.b)
        try devices.write(a, "todo.md", "lower\n")
        try devices.run(["init", "--notes", a, "--server", devices.server, "--device-name", "alice", "--create-server"])
        try devices.sync(a)
        try devices.run(["init", "--notes", b, "--server", devices.server, "--device-name", "bob"])
        try devices.sync(b)
        #expect(devices.notes(b) == ["todo.md": "lower\n"])
        func start(_ folder: String) throws -> NotesyncProcess {
            let agent = try NotesyncProcess(["watch", "--notes", folder, "--log-level", "debug"], scratch: scratch.path)
            let started = eventually(30) { FileManager.default.fileExists(atPath: folder + "/.notesync/status.json") }
            #expect(started, "the agent did not start: \(agent.stderrText)")
            return agent
        }
        let agentA = try start(a)
        let agentB = try start(b)
        defer {
            for agent in [agentA, agentB] where agent.process.isRunning {
                kill(agent.pid, SIGKILL)
                agent.process.waitUntilExit()
            }
        }
        func logs() -> String { "A:\n\(agentA.stderrText.suffix(3000))\nB:\n\(agentB.stderrText.suffix(3000))" }
        try devices.write(a, "Todo.md", "upper\n")
        #expect(
            eventually(30) { agentB.stderrText.contains("Todo.md and todo.md are one file in this notes folder") },
            "\(logs())")
        #expect(devices.notes(b) == ["todo.md": "lower\n"], "\(devices.notes(b)) \(logs())")
        #expect(devices.notes(a) == ["Todo.md": "upper\n", "todo.md": "lower\n"], "\(devices.notes(a))")
        // Renamed on A: both arrive at B, and nothing is deleted anywhere.
        #expect(rename(a + "/Todo.md", a + "/Todo-2.md") == 0)
        #expect(
            eventually(30) { devices.notes(b) == ["todo.md": "lower\n", "Todo-2.md": "upper\n"] },
            "\(devices.notes(b)) \(logs())")
        try devices.sync(a)
        #expect(devices.notes(a) == ["todo.md": "lower\n", "Todo-2.md": "upper\n"], "\(devices.notes(a))")
        #expect(devices.trash(a).isEmpty && devices.trash(b).isEmpty, "\(devices.trash(a)) \(logs())")
        for agent in [agentA, agentB] {
            agent.process.terminate()
            #expect(agent.wait().status == 0)
        }
    }
}
