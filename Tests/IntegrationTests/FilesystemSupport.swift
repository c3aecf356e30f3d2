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

/// A real filesystem that is not like ext4, mounted for one test: an exFAT volume or a case-folding folder.
///
/// API:
/// - `try FilesystemMount.exfat(at: mountPoint)`: a fresh exFAT volume (a sparse image made by `mkfs.exfat`
///   beside the mount point, on a loop device, mounted with `mount.exfat-fuse`). What exFAT lacks shows there as
///   it does on a USB stick: no `renameat2` flags (EINVAL), no hard links (EPERM), no symlinks or FIFOs, every
///   mode `0777` (chmod is accepted and ignored), mtimes in whole seconds, inode numbers given anew at each mount
///   (``remount()``).
/// - `try FilesystemMount.caseFolding(backing: folder, mountPoint: mountPoint)`: `folder` seen through
///   `scripts/casefold-fs`, which looks names up by their Unicode casefold and keeps the case a file was created
///   with (`normalizing: true` also folds NFC and NFD, as ext4's casefold does). Hard links work; `renameat2`
///   flags fail with EINVAL, as on every libfuse2 filesystem.
/// - `mount.path` is the mounted folder; `mount.unmount()` unmounts (safe twice; `deinit` does it too).
/// - Suites that need them: `@Suite(.enabled(if: FilesystemMount.exfatAvailable))` and
///   `FilesystemMount.caseFoldingAvailable`; the reason they are skipped is printed once
///   (`exfatUnavailableReason`, `caseFoldingUnavailableReason`). scripts/test installs the packages, and CI runs
///   as root with `/dev/fuse`, so there they always run.
final class FilesystemMount {
    /// The mounted folder.
    let path: String
    private let kind: Kind
    private var mounted = true
    private var released = false

    private enum Kind {
        case exfat(image: String, loop: String)
        case caseFolding(process: Process, log: String)
    }

    private init(path: String, kind: Kind) {
        self.path = path
        self.kind = kind
    }

    /// Why an exFAT volume cannot be mounted here, or nil when it can.
    static let exfatUnavailableReason: String? = {
        if getuid() != 0 { return "not root: a loop device and a fuseblk mount need root" }
        for tool in ["/usr/sbin/mkfs.exfat", "/usr/sbin/mount.exfat-fuse", "/usr/sbin/losetup", "/usr/bin/fusermount3"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (scripts/test installs exfatprogs, exfat-fuse, fuse3 and util-linux)"
        }
        if let reason = fuseUnavailableReason { return reason }
        let loop = runCommand("losetup --find")
        if loop.status != 0 { return "no free loop device: \(loop.output)" }
        return nil
    }()

    /// Why a case-folding folder cannot be mounted here, or nil when it can.
    static let caseFoldingUnavailableReason: String? = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/fusermount3") else {
            return "/usr/bin/fusermount3 is missing (scripts/test installs fuse3)"
        }
        let module = runCommand("/usr/bin/python3 -c 'import fusepy'")
        if module.status != 0 { return "/usr/bin/python3 cannot import fusepy (scripts/test installs python3-fusepy)" }
        if let reason = fuseUnavailableReason { return reason }
        if getuid() != 0 {
            let setuid = ((FileIO.lstatInfo("/usr/bin/fusermount3")?.st_mode ?? 0) & S_ISUID) != 0
            if !setuid { return "not root and fusermount3 is not setuid: this user cannot mount FUSE" }
        }
        return nil
    }()

    private static var fuseUnavailableReason: String? {
        let fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC)
        guard fuse >= 0 else {
            return "/dev/fuse cannot be opened (\(String(cString: strerror(errno)))): this machine cannot mount FUSE"
        }
        close(fuse)
        return nil
    }

    /// Whether exFAT tests can run; prints why they are skipped when not (once).
    static let exfatAvailable: Bool = {
        guard let reason = exfatUnavailableReason else { return true }
        FileHandle.standardError.write(Data("SKIPPED exFAT tests: \(reason)\n".utf8))
        return false
    }()

    /// Whether case-folding tests can run; prints why they are skipped when not (once).
    static let caseFoldingAvailable: Bool = {
        guard let reason = caseFoldingUnavailableReason else { return true }
        FileHandle.standardError.write(Data("SKIPPED case-folding tests: \(reason)\n".utf8))
        return false
    }()

    /// The repository's `scripts/casefold-fs`, found from this file's place.
    static var caseFoldingScript: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/casefold-fs").path
    }

    /// Makes a new exFAT volume of `size` (sparse: it takes only what is written) and mounts it at `mountPoint`
    /// (created if missing); the image is `mountPoint + ".exfat"`.
    static func exfat(at mountPoint: String, size: String = "256M") throws -> FilesystemMount {
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let image = mountPoint + ".exfat"
        try check("truncate -s \(size) '\(image)' && mkfs.exfat '\(image)' >/dev/null", mountPoint)
        let attach = runCommand("losetup --find --show '\(image)'")
        let loop = attach.output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard attach.status == 0, loop.hasPrefix("/dev/") else {
            unlink(image)
            throw NoteSyncError(.io, path: image, "losetup failed: \(attach.output)", fix: "free a loop device")
        }
        let mount = FilesystemMount(path: mountPoint, kind: .exfat(image: image, loop: loop))
        do { try mount.mountExfat() } catch {
            mount.unmount()
            throw error
        }
        return mount
    }

    /// Mounts `backing` (created if missing) at `mountPoint` (created if missing) through `scripts/casefold-fs`,
    /// and waits until the mount is there.
    static func caseFolding(backing: String, mountPoint: String, normalizing: Bool = false) throws -> FilesystemMount {
        for folder in [backing, mountPoint] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        let log = mountPoint + ".log"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [caseFoldingScript] + (normalizing ? ["--normalize"] : []) + [backing, mountPoint]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try process.run()
        let mount = FilesystemMount(path: mountPoint, kind: .caseFolding(process: process, log: log))
        let up = eventually(15) { !process.isRunning || isFuse(mountPoint) }
        guard up, process.isRunning else {
            let message = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            mount.mounted = false
            mount.unmount()
            throw NoteSyncError(.io, path: mountPoint, "casefold-fs did not mount: \(message)", fix: "see its log")
        }
        return mount
    }

    /// Unmounts and mounts the exFAT volume again, as when a USB stick is pulled out and put back (its inode
    /// numbers are given anew).
    func remount() throws {
        guard case .exfat = kind else { return }
        try Self.check("umount '\(path)'", path)
        mounted = false
        try mountExfat()
    }

    /// Unmounts (lazily where busy) and frees what the mount used. Safe to call twice.
    func unmount() {
        if mounted {
            if runCommand("fusermount3 -u '\(path)' || umount '\(path)'").status != 0 {
                let lazy = runCommand("umount -l '\(path)'")
                if lazy.status != 0 { Issue.record("could not unmount \(path): \(lazy.output)") }
            }
            mounted = false
        }
        release()
    }

    deinit { unmount() }

    private func mountExfat() throws {
        guard case .exfat(_, let loop) = kind else { return }
        mounted = false
        // The daemon keeps the descriptors it started with, and Foundation's `Process` learns that a child ended
        // when the last copy of one of them closes: every one but its own output is closed before it starts.
        let closeInherited = #"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; "#
        try Self.check(
            closeInherited + "mount.exfat-fuse -o noatime '\(loop)' '\(path)' >'\(path).log' 2>&1 </dev/null", path)
        mounted = true
        guard eventually(15, { Self.isFuse(path) }) else {
            throw NoteSyncError(.io, path: path, "exFAT did not mount", fix: "see mount.exfat-fuse's output")
        }
    }

    private func release() {
        guard !released else { return }
        released = true
        switch kind {
        case .exfat(let image, let loop):
            runCommand("losetup -d '\(loop)'")
            unlink(image)
            unlink(path + ".log")
        case .caseFolding(let process, let log):
            if !eventually(10, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            unlink(log)
        }
    }

    private static func isFuse(_ path: String) -> Bool { (try? FilesystemKind(path: path))?.name == "fuse" }

    private static func check(_ command: String, _ path: String) throws {
        let result = runCommand(command)
        guard result.status == 0 else {
            throw NoteSyncError(.io, path: path, "\(command) failed: \(result.output)", fix: "see the output")
        }
    }
}
