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

/// The `notesync` binary under test: `$NOTESYNC_BIN` (scripts/test sets it), else next to the test bundle.
func notesyncBinary() throws -> String {
    if let path = ProcessInfo.processInfo.environment["NOTESYNC_BIN"], !path.isEmpty {
        // Set but not there is an error, not a reason to test another build (scripts/test's release pass).
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw NoteSyncError(.usage, path: path, "NOTESYNC_BIN is not an executable", fix: "build it, or unset NOTESYNC_BIN")
        }
        return path
    }
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("notesync").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory.deleteLastPathComponent()
    }
    throw NoteSyncError(.usage, path: "notesync", "binary not found", fix: "build it first, or set NOTESYNC_BIN")
}

/// The load generator `notesync-load` (Sources/NoteSyncLoad): `$NOTESYNC_LOAD_BIN`, else the one beside the `notesync`
/// under test (scripts/test and scripts/bench build both into one folder), else the one next to the test bundle.
func loadBinary() throws -> String {
    if let path = ProcessInfo.processInfo.environment["NOTESYNC_LOAD_BIN"], !path.isEmpty { return path }
    let beside = URL(fileURLWithPath: try notesyncBinary()).deletingLastPathComponent().appendingPathComponent("notesync-load").path
    if FileManager.default.isExecutableFile(atPath: beside) { return beside }
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("notesync-load").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory.deleteLastPathComponent()
    }
    throw NoteSyncError(
        .usage, path: beside, "the load generator is not built",
        fix: "build it (`swift build --product notesync-load`), or set NOTESYNC_LOAD_BIN")
}

/// The result of a finished child process.
struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Starts `notesync` with `arguments`; output goes to files so that a full pipe never blocks the child.
final class NotesyncProcess {
    let process = Process()
    let outPath: String
    let errPath: String

    /// `executable`: another binary than `notesync` (``loadBinary()``).
    init(
        _ arguments: [String], scratch: String, environment: [String: String] = [:], directory: String? = nil,
        executable: String? = nil
    ) throws {
        let token = UUID().uuidString
        outPath = scratch + "/proc-\(token).out"
        errPath = scratch + "/proc-\(token).err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: try executable ?? notesyncBinary())
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    func wait() -> ProcessResult {
        process.waitUntilExit()
        return ProcessResult(
            status: process.terminationStatus,
            stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }
}

/// Runs `notesync` to completion.
@discardableResult
func notesync(_ arguments: [String], scratch: String, directory: String? = nil) throws -> ProcessResult {
    try NotesyncProcess(arguments, scratch: scratch, directory: directory).wait()
}

/// A fresh directory under the system temp folder, removed when the test ends.
final class Scratch {
    let path: String

    init(_ label: String) throws {
        path = NSTemporaryDirectory() + "/notesync-it-\(label)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Whether every thread of process `pid` is stopped (state `T` in /proc): a group stop, nothing runs on. A process
/// that hit its `NOTESYNC_TEST_STOP_AT` point stops itself so.
func processIsStopped(_ pid: Int32) -> Bool {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"), !tasks.isEmpty
    else { return false }
    return tasks.allSatisfy { task in
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8)) ?? ""
        return stat.split(separator: ")").last?.split(separator: " ").first == "T"
    }
}
