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

/// Hand-made server files: what a hostile or broken device, or a damaged disk, leaves in a server folder.
struct ServerForger {
    let layout: ServerLayout

    /// `root` as notesync records it (standardized: the paths it prints are compared with ours).
    init(_ root: String) { layout = ServerLayout(root: (root as NSString).standardizingPath) }

    /// The next free log slot.
    func nextSlot() -> Int64 {
        var seq: Int64 = 1
        while FileIO.lstatInfo(layout.entryPath(seq)) != nil { seq += 1 }
        return seq
    }

    /// Writes `data` as the file of log slot `seq`, as a device would publish it.
    /// Published whole (written to a temp, then linked in), so that no reader meets a file half written: a device
    /// that read half of it would chain its next commit to bytes the others never saw.
    func plantBytes(_ data: Data, seq: Int64) throws {
        try FileIO.makeDirectories(layout.shardDirectory(of: seq))
        try FileIO.makeDirectories(layout.tmpDirectory)
        let temp = layout.tmpDirectory + "/forged-\(UUID().uuidString)"
        try FileIO.createAndSync(temp, data)
        defer { unlink(temp) }
        guard link(temp, layout.entryPath(seq)) == 0 else {
            throw NoteSyncError(.io, path: layout.entryPath(seq), "link failed", errno: errno)
        }
    }

    /// `body` (any bytes) under a valid header: passes the length and checksum, so the JSON layer judges it.
    static func seal(rawBody body: Data) -> Data {
        Data("notesync-entry 1 \(body.count) \(ContentDigest(of: body).hex)\n".utf8) + body
    }

    /// The digest of the file in the slot before `seq`, which an entry in `seq` names to continue the chain.
    func prev(before seq: Int64) -> ContentDigest? {
        ((try? FileIO.read(layout.entryPath(seq - 1))) ?? nil).map { ContentDigest(of: $0) }
    }

    /// A correctly sealed and chained entry: it passes the checksum and the chain, so whatever is wrong with it is
    /// found by the layers after.
    func plant(_ changes: [RecordChange], seq: Int64, device: String = "evil") throws {
        let entry = LogEntry(
            seq: seq, commit: UUID().uuidString.lowercased(), device: device, time: Clock.nowNanoseconds(),
            changes: changes, prev: prev(before: seq))
        try plantBytes(try SealedFile.seal(entry, kind: "entry"), seq: seq)
    }

    /// Publishes `data` as an asset under its digest, as a device would.
    @discardableResult
    func putAsset(_ data: Data) throws -> AssetRef {
        let ref = AssetRef(of: data)
        try FileIO.makeDirectories(layout.assetShard(ref.sha256))
        if FileIO.lstatInfo(layout.assetPath(ref.sha256)) == nil {
            try FileIO.createAndSync(layout.assetPath(ref.sha256), data)
        }
        return ref
    }

    /// A save of `name` with `text`, its asset published.
    func save(_ name: String, _ text: String, base: Int64 = 0, version: Int = RecordChange.currentVersion) throws -> RecordChange {
        RecordChange(
            name: name, base: base, op: .save, text: try putAsset(Data(text.utf8)), modified: Clock.nowNanoseconds(),
            version: version)
    }
}

/// Checks that nothing a sync printed can drive a terminal: no ESC (C0) and no CSI (C1) from names or contents.
func expectNoTerminalControls(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) {
    for (stream, text) in [("stdout", result.stdout), ("stderr", result.stderr)] {
        let raw = text.unicodeScalars.filter { $0.value == 0x1B || $0.value == 0x9B || $0.value == 0x07 || $0.value == 0 }
        #expect(raw.isEmpty, "raw control characters reached \(stream): \(text.debugDescription)", sourceLocation: sourceLocation)
    }
}

/// Every path under `root` with its type, size and content digest (symlinks by their target): to prove that a
/// sync wrote nothing outside the folders it owns.
func treeState(_ root: String, skipping skipped: Set<String> = []) throws -> [String: String] {
    var result: [String: String] = [:]
    func walk(_ relative: String) throws {
        let directory = relative.isEmpty ? root : root + "/" + relative
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            let path = relative.isEmpty ? name : relative + "/" + name
            if skipped.contains(path) { continue }
            guard let info = FileIO.lstatInfo(root + "/" + path) else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                result[path] = "dir"
                try walk(path)
            case S_IFLNK:
                result[path] = "link " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/" + path)) ?? "?")
            case S_IFREG:
                let data = try Data(contentsOf: URL(fileURLWithPath: root + "/" + path))
                result[path] = "file \(data.count) \(ContentDigest(of: data).hex) mode \(String(info.st_mode & 0o7777, radix: 8))"
            default:
                result[path] = "special \(info.st_mode)"
            }
        }
    }
    try walk("")
    return result
}

/// Runs a command line through bash; returns status and combined output.
@discardableResult
func runCommand(_ command: String) -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    process.arguments = ["-c", command + " 2>&1"]
    let pipe = Pipe()
    process.standardOutput = pipe
    do { try process.run() } catch { return (-1, "\(error)") }
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

/// A filesystem mounted for one test: a tmpfs of a given size or a bind mount, read-only if asked.
///
/// Tests run as root in the container; mounting needs CAP_SYS_ADMIN (`available`). Unmount in a `defer` that
/// also keeps the test's folders alive, so that a failing test never leaves a mount behind.
final class TestMount {
    let path: String
    private(set) var mounted = false

    /// Whether this process may mount here (root with CAP_SYS_ADMIN, mount(8) present).
    static let available: Bool = {
        guard getuid() == 0 else { return false }
        let probe = NSTemporaryDirectory() + "/notesync-mount-probe-\(getpid())"
        try? FileManager.default.createDirectory(atPath: probe, withIntermediateDirectories: true)
        defer { rmdir(probe) }
        guard runCommand("mount -t tmpfs -o size=64k notesync-probe '\(probe)'").status == 0 else { return false }
        return runCommand("umount '\(probe)'").status == 0
    }()

    /// Mounts a tmpfs of `size` (e.g. "1m") at `path` (created if missing).
    init(tmpfs path: String, size: String) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try mount("mount -t tmpfs -o size=\(size),mode=0755 notesync-test '\(path)'")
    }

    /// Bind-mounts `source` at `path`; read-only if asked (a second, remounting step).
    init(bind source: String, at path: String, readOnly: Bool = false) throws {
        self.path = path
        try mount("mount --bind '\(source)' '\(path)'")
        if readOnly { try mount("mount -o remount,bind,ro '\(path)'") }
    }

    /// Moves the folder at `path` onto a new tmpfs of `size`, contents and all (a server or notes folder that
    /// `notesync init` made on the ordinary disk).
    static func tmpfs(replacing path: String, size: String) throws -> TestMount {
        let saved = path + ".on-disk"
        guard rename(path, saved) == 0 else { throw NoteSyncError(.io, path: path, "cannot move aside", errno: errno) }
        let mounted = try TestMount(tmpfs: path, size: size)
        let copy = runCommand("cp -a '\(saved)/.' '\(path)/' && rm -rf '\(saved)'")
        guard copy.status == 0 else { throw NoteSyncError(.io, path: path, "cannot copy onto the tmpfs: \(copy.output)") }
        return mounted
    }

    private func mount(_ command: String) throws {
        let result = runCommand(command)
        guard result.status == 0 else {
            unmount()
            throw NoteSyncError(.io, path: path, "\(command) failed: \(result.output)")
        }
        mounted = true
    }

    /// Unmounts (lazily if busy); safe to call twice.
    func unmount() {
        guard mounted else { return }
        if runCommand("umount '\(path)'").status != 0 { runCommand("umount -l '\(path)'") }
        mounted = false
    }

    deinit { unmount() }
}

/// Fills the filesystem holding `directory` with one file until writes fail with ENOSPC, then gives back
/// `leaving` bytes; returns the file's path (remove it to make room again).
func fillFilesystem(_ directory: String, leaving: Int = 0) throws -> String {
    let path = directory + "/filler-\(UUID().uuidString.prefix(8))"
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
    guard fd >= 0 else { throw NoteSyncError(.io, path: path, "cannot create filler", errno: errno) }
    defer { close(fd) }
    let chunk = [UInt8](repeating: 0x66, count: 1 << 16)
    var size = 0
    while true {
        let wrote = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if wrote < 0 {
            guard errno == ENOSPC else { throw NoteSyncError(.io, path: path, "filling failed", errno: errno) }
            break
        }
        size += wrote
    }
    guard ftruncate(fd, off_t(max(size - leaving, 0))) == 0 else {
        throw NoteSyncError(.io, path: path, "ftruncate failed", errno: errno)
    }
    return path
}

/// `notesync` that stops itself (SIGSTOP) right after its `stopAfter`-th publish to the server
/// (`NOTESYNC_TEST_STOP_AT=server.published:<n>`, see `StopPoint`): the primitive probe, each asset, the claim
/// of a log slot are one each, whichever primitive the server uses, so a test can change the world between two
/// exact steps of a commit, with no tracer and no timing involved.
final class StoppingNotesync {
    let process = Process()
    let outPath: String
    let errPath: String

    init(_ arguments: [String], scratch: String, stopAfter publishes: Int) throws {
        let token = UUID().uuidString
        outPath = scratch + "/proc-\(token).out"
        errPath = scratch + "/proc-\(token).err"
        for path in [outPath, errPath] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        process.executableURL = URL(fileURLWithPath: try notesyncBinary())
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment[StopPoint.environmentVariable] = "server.published:\(publishes)"
        process.environment = environment
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        try process.run()
    }

    /// Whether every thread of the process is stopped: a group stop, nothing runs on.
    private var isStopped: Bool { processIsStopped(process.processIdentifier) }

    /// Waits until notesync has stopped itself at the chosen step; false if it ended first.
    func stopped(within seconds: Double = 60) -> Bool {
        eventually(seconds) { !self.process.isRunning || self.isStopped } && process.isRunning
    }

    func resume() { kill(process.processIdentifier, SIGCONT) }

    /// Waits for the sync to end; after `seconds` it is killed and the result says so, rather than the test
    /// waiting for ever.
    func wait(seconds: Double = 120) -> ProcessResult {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return ProcessResult(status: -1, stdout: "", stderr: "the sync did not end within \(Int(seconds)) s; killed")
        }
        return ProcessResult(
            status: process.terminationStatus,
            stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }

    deinit {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// Whether `setpriv` can drop to user nobody here (root only): the way to test what root is never denied.
let canRunAsNobody: Bool =
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    && runCommand("/usr/bin/setpriv --reuid=nobody --regid=nogroup --clear-groups -- /bin/true").status == 0

/// Runs `notesync` as user nobody (group nogroup), to completion.
func notesyncAsNobody(_ arguments: [String], scratch: String) throws -> ProcessResult {
    let token = UUID().uuidString
    let outPath = scratch + "/proc-\(token).out"
    let errPath = scratch + "/proc-\(token).err"
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", try notesyncBinary()] + arguments
    process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    try process.run()
    process.waitUntilExit()
    return ProcessResult(
        status: process.terminationStatus,
        stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
}

/// Waits for `child` at most `seconds`; a child still running then is killed and reported (a hang is a failure,
/// never a stuck test run).
func finishes(_ child: NotesyncProcess, within seconds: Double, sourceLocation: SourceLocation = #_sourceLocation) -> ProcessResult? {
    let done = eventually(seconds) { !child.process.isRunning }
    if !done {
        kill(child.pid, SIGKILL)
        child.process.waitUntilExit()
        Issue.record("notesync did not finish within \(Int(seconds)) s: it hangs", sourceLocation: sourceLocation)
        return nil
    }
    return child.wait()
}

/// `directory/name` where `name` is raw bytes (not necessarily UTF-8), as a C path.
private func withRawPath<T>(_ directory: String, _ name: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
    let bytes = Array((directory + "/").utf8) + name + [0]
    return bytes.withUnsafeBufferPointer { buffer in
        buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: bytes.count) { body($0) }
    }
}

/// Creates a file whose name is raw bytes, with `contents`; returns whether it worked.
@discardableResult
func createRawNamedFile(_ directory: String, _ name: [UInt8], contents: String) -> Bool {
    let fd = withRawPath(directory, name) { open($0, O_WRONLY | O_CREAT | O_EXCL, 0o644) }
    guard fd >= 0 else { return false }
    defer { close(fd) }
    let data = Array(contents.utf8)
    return data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == data.count
}

/// The bytes of a file whose name is raw bytes; nil when it is not there.
func readRawNamedFile(_ directory: String, _ name: [UInt8]) -> String? {
    let fd = withRawPath(directory, name) { open($0, O_RDONLY | O_NOFOLLOW) }
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    return got < 0 ? nil : String(decoding: buffer[0..<got], as: UTF8.self)
}

/// The record names the server's log holds heads for, deleted or not.
func serverHeads(_ server: String) throws -> [String: RecordHead] {
    let store = try ServerStore(root: server, device: "checker", logger: .init(label: "t"))
    var zone = ZoneState()
    try store.fetch(into: &zone)
    return Dictionary(uniqueKeysWithValues: zone.heads.map { ($0.key.string, $0.value) })
}

/// Every change the server's log holds for `name` (each save or delete committed, in order).
func logChanges(_ server: String, _ name: String) throws -> [RecordChange] {
    let store = try ServerStore(root: server, device: "checker", logger: .init(label: "t"))
    var changes: [RecordChange] = []
    var seq: Int64 = 1
    while true {
        switch try store.readSlot(seq) {
        case .missing: return changes
        case .damaged: break
        case .entry(let entry): changes += entry.changes.filter { $0.name == name }
        }
        seq += 1
    }
}
