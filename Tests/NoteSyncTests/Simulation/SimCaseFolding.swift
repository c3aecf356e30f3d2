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

/// The case-folding notes folders of the simulation (``SimSchedule/Filesystem/caseFolding``): real case-insensitive,
/// case-keeping folders, `scripts/casefold-fs` (a FUSE passthrough) mounted on first use; each folding device's notes
/// folder is a folder in one. The passthrough answers one request at a time, so schedules running at once take
/// mounts of their own where they can (``acquire()``, up to one per core): on one mount they would queue behind it.
///
/// A mount is `<base>/notesync-casefold-<pid>[-N]/mount` over `…/backing` (base: ``SimRunner/baseDirectory``). They
/// are unmounted when the process exits; a mount left by a process that died is unmounted by the next one that mounts.
/// Where none can be made (no `/dev/fuse`, no fusepy, not allowed to mount), ``root`` is nil and such a device runs
/// plain (the figures count it).
enum SimCaseFolding {
    /// The first mounted folder, or why there is none.
    static let mount: Result<String, any Error> = Result {
        cleanStale(in: SimRunner.baseDirectory)
        return try makeMount(SimRunner.baseDirectory + "/notesync-casefold-\(getpid())")
    }

    /// The mounts made so far, each with the schedules using it, and whether another could not be made.
    private static let pool = Mutex<(mounts: [(path: String, users: Int)], full: Bool)>(([], false))

    /// A mount for a schedule to keep its folding devices' folders in until it gives it back (``release(_:)``): the
    /// least used, a new one while every mount is in use and fewer than one per core are made; nil where none can be.
    static func acquire() -> String? {
        guard let first = root else { return nil }
        return pool.withLock { pool in
            if pool.mounts.isEmpty { pool.mounts.append((first, 0)) }
            var index = pool.mounts.indices.min { pool.mounts[$0].users < pool.mounts[$1].users } ?? 0
            if pool.mounts[index].users > 0, !pool.full, pool.mounts.count < ProcessInfo.processInfo.activeProcessorCount {
                let folder = SimRunner.baseDirectory + "/notesync-casefold-\(getpid())-\(pool.mounts.count)"
                if let another = try? makeMount(folder) {
                    pool.mounts.append((another, 0))
                    index = pool.mounts.count - 1
                } else {
                    pool.full = true
                }
            }
            pool.mounts[index].users += 1
            return pool.mounts[index].path
        }
    }

    /// Gives back a mount ``acquire()`` gave.
    static func release(_ path: String) {
        pool.withLock { pool in
            if let index = pool.mounts.firstIndex(where: { $0.path == path }) { pool.mounts[index].users -= 1 }
        }
    }

    /// Mounts the passthrough at `folder/mount` over `folder/backing`; unmounted when the process exits.
    private static func makeMount(_ folder: String) throws -> String {
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
        let first = mounted.withLock { mounted in
            mounted.append(mountPoint)
            return mounted.count == 1
        }
        if first { atexit { SimCaseFolding.unmountAtExit() } }
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

    private static let mounted = Mutex<[String]>([])

    private static func isMounted(_ path: String) -> Bool { (try? FilesystemKind(path: path))?.name == "fuse" }

    /// Unmounts this process's folders (each passthrough then exits) and removes what they held.
    private static func unmountAtExit() {
        for mountPoint in mounted.withLock({ $0 }) {
            unmount(mountPoint)
            try? FileManager.default.removeItem(atPath: FileIO.parent(of: mountPoint))
        }
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
            let owner = entry.dropFirst(prefix.count).prefix { $0 != "-" }
            guard let pid = Int32(owner), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            let mountPoint = base + "/" + entry + "/mount"
            if mounts.contains(" \(mountPoint) ") { unmount(mountPoint) }
            try? FileManager.default.removeItem(atPath: base + "/" + entry)
        }
    }
}
