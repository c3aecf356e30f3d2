import CSyscalls
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

/// The tests' real filesystems behave as the folders they stand for: what the other suites rely on.
@Suite struct FilesystemMountTests {
    @Test(.enabled(if: FilesystemMount.exfatAvailable))
    func exfatLacksRenameFlagsLinksAndModes() throws {
        let scratch = try Scratch("exfat-mount")
        let mount = try FilesystemMount.exfat(at: scratch.path + "/stick")
        defer { mount.unmount() }
        let a = mount.path + "/a.md"
        let b = mount.path + "/b.md"
        try Data("a".utf8).write(to: URL(fileURLWithPath: a))
        try Data("b".utf8).write(to: URL(fileURLWithPath: b))
        #expect(ns_rename_noreplace(AT_FDCWD, a, AT_FDCWD, mount.path + "/c.md") != 0 && errno == EINVAL)
        #expect(ns_rename_exchange(AT_FDCWD, a, AT_FDCWD, b) != 0 && errno == EINVAL)
        #expect(link(a, mount.path + "/d.md") != 0 && errno == EPERM)
        #expect(rename(a, b) == 0)
        #expect(try String(contentsOfFile: b, encoding: .utf8) == "a")
        #expect(chmod(b, 0o600) == 0)
        #expect((FileIO.lstatInfo(b)?.st_mode ?? 0) & 0o777 == 0o777)
        var times = [timespec(tv_sec: 1_700_000_001, tv_nsec: 555_000_000), timespec(tv_sec: 1_700_000_001, tv_nsec: 555_000_000)]
        #expect(utimensat(AT_FDCWD, b, &times, 0) == 0)
        #expect(FileIO.lstatInfo(b).map { StatFingerprint($0).mtime } == 1_700_000_001_000_000_000)
        try mount.remount()
        #expect(try String(contentsOfFile: b, encoding: .utf8) == "a")
        #expect(FileIO.lstatInfo(b).map { StatFingerprint($0).mtime } == 1_700_000_001_000_000_000)
    }

    @Test(.enabled(if: FilesystemMount.caseFoldingAvailable))
    func caseFoldingFindsEveryCaseAndKeepsTheFirst() throws {
        let scratch = try Scratch("casefold-mount")
        let mount = try FilesystemMount.caseFolding(backing: scratch.path + "/backing", mountPoint: scratch.path + "/notes")
        defer { mount.unmount() }
        try Data("first".utf8).write(to: URL(fileURLWithPath: mount.path + "/Todo.md"))
        #expect(try String(contentsOfFile: mount.path + "/TODO.md", encoding: .utf8) == "first")
        let fd = open(mount.path + "/todo.md", O_WRONLY | O_CREAT | O_EXCL, 0o644)
        #expect(fd < 0 && errno == EEXIST)
        #expect(link(mount.path + "/Todo.md", mount.path + "/other.md") == 0)
        #expect(link(mount.path + "/other.md", mount.path + "/tODO.md") != 0 && errno == EEXIST)
        #expect(ns_rename_noreplace(AT_FDCWD, mount.path + "/other.md", AT_FDCWD, mount.path + "/x.md") != 0 && errno == EINVAL)
        #expect(rename(mount.path + "/todo.md", mount.path + "/TODO.md") == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: mount.path).sorted() == ["TODO.md", "other.md"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/backing").sorted() == ["TODO.md", "other.md"])
        #expect(chmod(mount.path + "/todo.md", 0o600) == 0)
        #expect((FileIO.lstatInfo(mount.path + "/Todo.md")?.st_mode ?? 0) & 0o777 == 0o600)
        #expect(unlink(mount.path + "/Todo.md") == 0)
        #expect(FileIO.lstatInfo(mount.path + "/TODO.md") == nil)
        // Without normalizing, NFC and NFD stay two names, as on vfat and exFAT.
        try Data("nfc".utf8).write(to: URL(fileURLWithPath: mount.path + "/caf\u{E9}.md"))
        try Data("nfd".utf8).write(to: URL(fileURLWithPath: mount.path + "/cafe\u{301}.md"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: mount.path).count == 3)
    }

    @Test(.enabled(if: FilesystemMount.caseFoldingAvailable))
    func caseFoldingWithNormalizingFoldsNfcAndNfd() throws {
        let scratch = try Scratch("casefold-nfd")
        let mount = try FilesystemMount.caseFolding(
            backing: scratch.path + "/backing", mountPoint: scratch.path + "/notes", normalizing: true)
        defer { mount.unmount() }
        try Data("nfc".utf8).write(to: URL(fileURLWithPath: mount.path + "/Caf\u{E9}.md"))
        #expect(try String(contentsOfFile: mount.path + "/cafe\u{301}.md", encoding: .utf8) == "nfc")
    }
}
