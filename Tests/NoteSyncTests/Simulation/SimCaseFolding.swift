import Foundation
import Synchronization

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// The case-folding notes folders of the simulation (``SimSchedule/Filesystem/caseFolding``): one real
/// case-insensitive, case-keeping folder, `scripts/casefold-fs` (a FUSE passthrough) mounted once per test process
/// on first use and shared by every schedule and thread; each folding device's notes folder is a folder in it.
///
/// The mount is `<base>/notesync-casefold-<pid>/mount` over `…/backing` (base: ``SimRunner/baseDirectory``). It is
/// unmounted when the process exits; a mount left by a process that died is unmounted by the next one that mounts.
/// Where it cannot be made (no `/dev/fuse`, no fusepy, not allowed to mount), ``root`` is nil and such a device
/// runs plain (the figures count it).
enum SimCaseFolding {
    /// The mounted folder, or why there is none.
    static let mount: Result<String, any Error> = Result {
        let base = SimRunner.baseDirectory
        cleanStale(in: base)
        let folder = base + "/notesync-casefold-\(getpid())"
        let (backing, mountPoint) = (folder + "/backing", folder + "/mount")
        try FileIO.makeDirectories(backing)
        try FileIO.makeDirectories(mountPoint)
        guard access("/dev/fuse", R_OK | W_OK) == 0 else {
            throw NoteSyncError(.io, path: "/dev/fuse", "FUSE is not available here", fix: "run as root with /dev/fuse")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script, backing, mountPoint]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let log = folder + "/casefold-fs.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && !isMounted(mountPoint) && Date() < deadline { usleep(20_000) }
        guard process.isRunning, isMounted(mountPoint) else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            let message = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw NoteSyncError(
                .io, path: mountPoint, "scripts/casefold-fs did not mount: \(message)",
                fix: "install fuse3 and python3-fusepy (scripts/test does) and run as root")
        }
        mounted.withLock { $0 = mountPoint }
        atexit { SimCaseFolding.unmountAtExit() }
        return mountPoint
    }

    /// The mounted folder; nil where it cannot be made.
    static var root: String? { try? mount.get() }

    /// Why there is no case-folding folder, or nil when there is one.
    static var unavailableReason: String? {
        if case .failure(let error) = mount { return "\(error)" }
        return nil
    }

    /// The name as the folder compares it: ``CasePairs/fold(_:)`` of each path component.
    static func fold(_ name: String) -> String {
        UTF8Bytes.isASCII(name) ? name.lowercased() : name.folding(options: [.caseInsensitive], locale: nil)
    }

    /// `name` (relative to `root`) as the folder spells it: each component that exists under another case takes
    /// the spelling the folder lists; the first missing one and those after it stay as given.
    static func spelling(of name: String, in root: String) -> String {
        var resolved: [String] = []
        var missing = false
        for component in name.split(separator: "/").map(String.init) {
            if !missing {
                let folder = resolved.isEmpty ? root : root + "/" + resolved.joined(separator: "/")
                let entries = try? FileIO.list(folder)
                if let entries, entries.contains(component) {
                    resolved.append(component)
                    continue
                }
                if let found = entries?.sorted().first(where: { fold($0) == fold(component) }) {
                    resolved.append(found)
                    continue
                }
                missing = true
            }
            resolved.append(component)
        }
        return resolved.joined(separator: "/")
    }

    /// The repository's `scripts/casefold-fs`, found from this file's place.
    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts/casefold-fs").path
    }

    private static let mounted = Mutex<String?>(nil)

    private static func isMounted(_ path: String) -> Bool { (try? FilesystemKind(path: path))?.name == "fuse" }

    /// Unmounts this process's folder (the passthrough then exits) and removes what it held.
    private static func unmountAtExit() {
        guard let mountPoint = mounted.withLock({ $0 }) else { return }
        unmount(mountPoint)
        try? FileManager.default.removeItem(atPath: FileIO.parent(of: mountPoint))
    }

    private static func unmount(_ mountPoint: String) {
        if umount2(mountPoint, Int32(MNT_DETACH)) == 0 { return }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/fusermount3")
        process.arguments = ["-u", "-z", mountPoint]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        if (try? process.run()) != nil { process.waitUntilExit() }
    }

    /// Unmounts and removes the folders of test processes that died without doing it.
    private static func cleanStale(in base: String) {
        let prefix = "notesync-casefold-"
        let mounts = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        for entry in (try? FileIO.list(base)) ?? [] where entry.hasPrefix(prefix) {
            guard let pid = Int32(entry.dropFirst(prefix.count)), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            let mountPoint = base + "/" + entry + "/mount"
            if mounts.contains(" \(mountPoint) ") { unmount(mountPoint) }
            try? FileManager.default.removeItem(atPath: base + "/" + entry)
        }
    }
}
