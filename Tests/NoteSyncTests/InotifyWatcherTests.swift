import Foundation
import Synchronization
import Testing

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// A running watcher whose events are collected in the background, so a test can wait for a condition.
final class WatchHarness: Sendable {
    let watcher: InotifyWatcher
    private let received = Mutex<[WatchEvent]>([])
    private let ended = Mutex(false)

    init(watcher: InotifyWatcher) {
        self.watcher = watcher
        Task { [self] in
            for await event in watcher.events { received.withLock { $0.append(event) } }
            ended.withLock { $0 = true }
        }
    }

    var events: [WatchEvent] { received.withLock { $0 } }
    var finished: Bool { ended.withLock { $0 } }
    /// Where the next event will land in ``events``.
    var mark: Int { received.withLock { $0.count } }

    /// Polls until `condition` holds for the events from `start` on, or `timeout` passes; whether it held.
    ///
    /// The timeout counts this task's own polls (one per 10 ms sleep), not wall-clock time: the task collecting
    /// events runs on the same cooperative pool (one thread per core), and while other tests hold every thread of
    /// it with blocking work, neither task runs. A wall-clock deadline would expire in that time, before the
    /// collector had a turn; counted polls only run out once both have had as many turns as the timeout allows.
    @discardableResult
    func wait(from start: Int = 0, timeout: Duration = .seconds(5), until condition: ([WatchEvent]) -> Bool) async -> Bool {
        let polls = Int(timeout.components.seconds) * 100 + Int(timeout.components.attoseconds / 10_000_000_000_000_000)
        for _ in 0...polls {
            let slice = received.withLock { Array($0[min(start, $0.count)...]) }
            if condition(slice) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        let slice = received.withLock { Array($0[min(start, $0.count)...]) }
        return condition(slice)
    }

    func wait(for event: WatchEvent, from start: Int = 0) async -> Bool {
        await wait(from: start) { $0.contains(event) }
    }

    /// Writes a new file in `directory` and waits for its event: the kernel queue is FIFO, so everything
    /// caused before the marker has been delivered by then. Returns the marker's name.
    func barrier(root: Int, directory: String, _ label: String = "marker") async throws -> String {
        let name = "\(label)-\(FileIO.randomToken(bytes: 4)).md"
        try writeFile(directory + "/" + name, Data("m".utf8))
        let seen = await wait(for: .changed(root: root, path: name))
        try #require(seen, "the marker \(name) was never reported")
        return name
    }

    func stopAndWait() async {
        watcher.stop()
        let ended = await wait(timeout: .seconds(10)) { _ in self.finished }
        #expect(ended, "the event stream did not finish after stop()")
    }
}

/// Runs `body` with a started watcher and always stops it: libinotifytools allows one watcher per process,
/// so a leaked one would fail every later test.
func withWatcher(
    limit: Int? = nil, roots: [(path: String, ignore: @Sendable (String, Bool) -> Bool)],
    _ body: (WatchHarness, [Int]) async throws -> Void
) async throws {
    let watcher = InotifyWatcher(logger: testLogger, watchLimitForTesting: limit)
    let harness = WatchHarness(watcher: watcher)
    do {
        let ids = try roots.map { try watcher.addRoot($0.path, ignore: $0.ignore) }
        try watcher.start()
        try await body(harness, ids)
    } catch {
        await harness.stopAndWait()
        throw error
    }
    await harness.stopAndWait()
}

let noIgnore: @Sendable (String, Bool) -> Bool = { _, _ in false }
let builtInIgnore: @Sendable (String, Bool) -> Bool = { IgnoreRules.builtIn.isIgnored($0, isDirectory: $1) }

/// The watches the kernel holds on the watcher's inotify descriptor (`/proc/self/fdinfo`).
func kernelWatchCount(_ watcher: InotifyWatcher) -> Int {
    guard let fd = watcher.descriptorForTesting,
        let text = try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8)
    else { return -1 }
    return text.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
}

func paths(_ events: [WatchEvent]) -> [String] {
    events.compactMap { event in
        switch event {
        case .changed(_, let path), .removed(_, let path), .directoryAppeared(_, let path), .directoryRemoved(_, let path):
            return path
        default:
            return nil
        }
    }
}

func makeDirectories(_ paths: String...) throws {
    for path in paths { try FileIO.makeDirectories(path) }
}

@Suite(.serialized)
struct InotifyWatcherTests {
    @Test func fileCreatedModifiedDeleted() async throws {
        let dir = try TempDirectory()
        try await withWatcher(roots: [(dir.path, noIgnore)]) { watch, ids in
            let root = ids[0]
            try writeFile(dir.sub("a.md"), Data("one".utf8))
            #expect(await watch.wait(for: .changed(root: root, path: "a.md")))

            let beforeAppend = watch.mark
            let handle = try #require(FileHandle(forWritingAtPath: dir.sub("a.md")))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(" two".utf8))
            try handle.close()
            #expect(await watch.wait(for: .changed(root: root, path: "a.md"), from: beforeAppend))

            let beforeDelete = watch.mark
            #expect(unlink(dir.sub("a.md")) == 0)
            #expect(await watch.wait(for: .removed(root: root, path: "a.md"), from: beforeDelete))
        }
    }

    @Test func fileRenamedWithinTree() async throws {
        let dir = try TempDirectory()
        try makeDirectories(dir.sub("sub"))
        try writeFile(dir.sub("a.md"), Data("a".utf8))
        try await withWatcher(roots: [(dir.path, noIgnore)]) { watch, ids in
            let root = ids[0]
            #expect(rename(dir.sub("a.md"), dir.sub("sub/b.md")) == 0)
            #expect(
                await watch.wait { $0.contains(.removed(root: root, path: "a.md")) && $0.contains(.changed(root: root, path: "sub/b.md")) })
            let events = watch.events
            let removed = try #require(events.firstIndex(of: .removed(root: root, path: "a.md")))
            let changed = try #require(events.firstIndex(of: .changed(root: root, path: "sub/b.md")))
            let renamed = try #require(events.firstIndex(of: .renamed(root: root, from: "a.md", to: "sub/b.md")))
            // The rename before the new name: a consumer never holds the new name without it (EventSettler.renamed).
            #expect(removed < renamed && renamed < changed, "\(events)")
        }
    }

    /// A folder renamed is reported as three events, its old name, the rename and its new name, in that order and
    /// not its notes one by one (a folder of 5,000 notes renamed was reported as 5,000 new notes before the rename,
    /// and the agent synced the new name alone); a note moved to an ignored name (vim's backup) is only removed.
    @Test func renamesAreReportedAsSuch() async throws {
        let dir = try TempDirectory()
        try makeDirectories(dir.sub("work/deep"))
        try writeFile(dir.sub("work/deep/n.md"), Data("n".utf8))
        for index in 0..<50 { try writeFile(dir.sub("work/n\(index).md"), Data("\(index)".utf8)) }
        try writeFile(dir.sub("note.md"), Data("old".utf8))
        try await withWatcher(roots: [(dir.path, builtInIgnore)]) { watch, ids in
            let root = ids[0]
            let start = watch.mark
            #expect(rename(dir.sub("work"), dir.sub("job")) == 0)
            #expect(await watch.wait { $0.contains(.renamed(root: root, from: "work", to: "job")) })
            _ = try await watch.barrier(root: root, directory: dir.path)
            let events = Array(watch.events[start...].filter { paths([$0]).allSatisfy { !$0.hasPrefix("marker-") } })
            #expect(
                events == [
                    .directoryRemoved(root: root, path: "work"), .renamed(root: root, from: "work", to: "job"),
                    .directoryAppeared(root: root, path: "job")
                ], "\(events)")
            // Its subfolder is watched at its new name.
            let before = watch.mark
            try writeFile(dir.sub("job/deep/m.md"), Data("m".utf8))
            #expect(await watch.wait(for: .changed(root: root, path: "job/deep/m.md"), from: before))
            #expect(rename(dir.sub("note.md"), dir.sub("note.md~")) == 0)
            _ = try await watch.barrier(root: root, directory: dir.path)
            #expect(watch.events.contains(.removed(root: root, path: "note.md")))
            #expect(!watch.events.contains { if case .renamed(_, "note.md", _) = $0 { true } else { false } })
        }
    }

    @Test func vimStyleSaveEndsWithTheNoteChanged() async throws {
        let dir = try TempDirectory()
        try writeFile(dir.sub("note.md"), Data("old".utf8))
        try await withWatcher(roots: [(dir.path, builtInIgnore)]) { watch, ids in
            let root = ids[0]
            #expect(rename(dir.sub("note.md"), dir.sub("note.md~")) == 0)
            try writeFile(dir.sub("note.md"), Data("new".utf8))
            #expect(unlink(dir.sub("note.md~")) == 0)
            _ = try await watch.barrier(root: root, directory: dir.path)
            let events = watch.events
            let removed = try #require(events.firstIndex(of: .removed(root: root, path: "note.md")))
            let lastForNote = try #require(events.lastIndex { paths([$0]) == ["note.md"] })
            #expect(removed < lastForNote)
            #expect(events[lastForNote] == .changed(root: root, path: "note.md"))
            #expect(!paths(events).contains("note.md~"), "the backup is ignored by the built-in rules")
        }
    }

    @Test func newDirectoryIsWatchedThenScanned() async throws {
        let dir = try TempDirectory()
        try await withWatcher(roots: [(dir.path, noIgnore)]) { watch, ids in
            let root = ids[0]
            // Paused, the watcher cannot add watches in time: only the scan after the watch can find these.
            watch.watcher.pause()
            try makeDirectories(dir.sub("new/deep"))
            try writeFile(dir.sub("new/deep/f.md"), Data("f".utf8))
            try writeFile(dir.sub("new/top.md"), Data("t".utf8))
            watch.watcher.resume()
            let expected: [WatchEvent] = [
                .directoryAppeared(root: root, path: "new"), .directoryAppeared(root: root, path: "new/deep"),
                .changed(root: root, path: "new/deep/f.md"), .changed(root: root, path: "new/top.md")
            ]
            #expect(await watch.wait { events in expected.allSatisfy(events.contains) })

            // And the new directories stay watched.
            let before = watch.mark
            try writeFile(dir.sub("new/deep/g.md"), Data("g".utf8))
            #expect(await watch.wait(for: .changed(root: root, path: "new/deep/g.md"), from: before))
            #expect(kernelWatchCount(watch.watcher) == 3)
        }
    }

    @Test func renamedDirectoryReportsNewPathsAllTheWayDown() async throws {
        let dir = try TempDirectory()
        try makeDirectories(dir.sub("a/x/y/z"))
        try await withWatcher(roots: [(dir.path, noIgnore)]) { watch, ids in
            let root = ids[0]
            // Twice: libinotifytools' own bookkeeping keeps stale names deep down after the second rename.
            for (from, to) in [("a", "b"), ("b", "c")] {
                let start = watch.mark
                #expect(rename(dir.sub(from), dir.sub(to)) == 0)
                // After the barrier the rename and the rescan of the renamed directory are done, so the next
                // file can only be reported through the watch map.
                _ = try await watch.barrier(root: root, directory: dir.path)
                #expect(watch.events[start...].contains(.directoryRemoved(root: root, path: from)))
                #expect(watch.events[start...].contains(.directoryAppeared(root: root, path: to)))

                let before = watch.mark
                try writeFile(dir.sub("\(to)/x/y/z/new-\(to).md"), Data("n".utf8))
                #expect(await watch.wait(for: .changed(root: root, path: "\(to)/x/y/z/new-\(to).md"), from: before))
                _ = try await watch.barrier(root: root, directory: dir.path)
                #expect(!paths(Array(watch.events[before...])).contains { $0.hasPrefix("\(from)/") })
            }
            #expect(kernelWatchCount(watch.watcher) == 5)
        }
    }

    @Test func directoryMovedOutIsForgotten() async throws {
        let dir = try TempDirectory()
        let notes = dir.sub("notes")
        try makeDirectories(notes + "/a/sub", dir.sub("outside"))
        try await withWatcher(roots: [(notes, noIgnore)]) { watch, ids in
            let root = ids[0]
            try writeFile(notes + "/a/sub/1.md", Data("1".utf8))
            #expect(await watch.wait(for: .changed(root: root, path: "a/sub/1.md")))
            #expect(kernelWatchCount(watch.watcher) == 3)

            #expect(rename(notes + "/a", dir.sub("outside/a")) == 0)
            try writeFile(dir.sub("outside/a/sub/2.md"), Data("2".utf8))
            _ = try await watch.barrier(root: root, directory: notes)
            #expect(watch.events.contains(.directoryRemoved(root: root, path: "a")))
            #expect(!paths(watch.events).contains { $0.hasSuffix("sub/2.md") }, "\(watch.events)")
            #expect(await watch.wait { _ in kernelWatchCount(watch.watcher) == 1 }, "watches of the moved-out tree are removed")
        }
    }

    @Test func deletedDirectoryIsForgottenAndItsNameReusable() async throws {
        let dir = try TempDirectory()
        try makeDirectories(dir.sub("a/b"))
        try writeFile(dir.sub("a/b/n.md"), Data("n".utf8))
        try await withWatcher(roots: [(dir.path, noIgnore)]) { watch, ids in
            let root = ids[0]
            try FileManager.default.removeItem(atPath: dir.sub("a"))
            #expect(
                await watch.wait {
                    $0.contains(.directoryRemoved(root: root, path: "a")) && $0.contains(.removed(root: root, path: "a/b/n.md"))
                })
            #expect(await watch.wait { _ in kernelWatchCount(watch.watcher) == 1 })

            // A directory of the same name is a new directory: it must be watched again.
            try makeDirectories(dir.sub("a/b"))
            _ = try await watch.barrier(root: root, directory: dir.path)
            let before = watch.mark
            try writeFile(dir.sub("a/b/again.md"), Data("x".utf8))
            #expect(await watch.wait(for: .changed(root: root, path: "a/b/again.md"), from: before))
        }
    }

    @Test func ignoredPathsAreNeitherWatchedNorReported() async throws {
        let dir = try TempDirectory()
        try makeDirectories(dir.sub(".notesync"), dir.sub("keep"))
        try await withWatcher(roots: [(dir.path, builtInIgnore)]) { watch, ids in
            let root = ids[0]
            try writeFile(dir.sub(".notesync/state.db"), Data("s".utf8))
            try makeDirectories(dir.sub(".notesync/sub"))
            try writeFile(dir.sub("keep/.note.md.swp"), Data("swap".utf8))
            try writeFile(dir.sub("keep/note.md~"), Data("backup".utf8))
            try writeFile(dir.sub("keep/note.md"), Data("note".utf8))
            #expect(await watch.wait(for: .changed(root: root, path: "keep/note.md")))
            _ = try await watch.barrier(root: root, directory: dir.path)
            let reported = paths(watch.events)
            #expect(!reported.contains { $0.hasPrefix(".notesync") || $0.hasSuffix(".swp") || $0.hasSuffix("~") })
            #expect(kernelWatchCount(watch.watcher) == 2, "the root and keep/, not .notesync/")
        }
    }

    @Test func secondRootAddedWhileRunningIsTaggedWithItsId() async throws {
        let dir = try TempDirectory()
        let notes = dir.sub("notes")
        let log = dir.sub("server/zones/notes/log")
        try makeDirectories(notes, log)
        try await withWatcher(roots: [(notes, noIgnore)]) { watch, ids in
            let notesRoot = ids[0]
            let logRoot = try watch.watcher.addRoot(log)
            #expect(logRoot != notesRoot)
            try makeDirectories(log + "/0001")
            try writeFile(log + "/0001/0000000001.entry", Data("e".utf8))
            try writeFile(notes + "/n.md", Data("n".utf8))
            #expect(
                await watch.wait { events in
                    events.contains(.changed(root: logRoot, path: "0001/0000000001.entry"))
                        && events.contains(.changed(root: notesRoot, path: "n.md"))
                })
            #expect(!watch.events.contains(.changed(root: notesRoot, path: "0001/0000000001.entry")))
            #expect(!watch.events.contains(.changed(root: logRoot, path: "n.md")))
        }
    }

    @Test func kernelQueueOverflowIsReported() async throws {
        let dir = try TempDirectory()
        let limitText = try String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8)
        let limit = try #require(Int(limitText.trimmingCharacters(in: .whitespacesAndNewlines)))
        try writeFile(dir.sub("x"), Data())
        try writeFile(dir.sub("y"), Data())
        try makeDirectories(dir.sub("old/deep"))
        try await withWatcher(roots: [(dir.path, noIgnore)]) { watch, ids in
            let root = ids[0]
            watch.watcher.pause()
            // Alternate two files: the kernel merges only identical consecutive events.
            for index in 0..<(limit + 1_000) {
                let fd = open(dir.sub(index % 2 == 0 ? "x" : "y"), O_WRONLY | O_CLOEXEC)
                try #require(fd >= 0)
                close(fd)
            }
            // The queue is full: these events are lost, and only the repair after the overflow can catch up.
            #expect(rename(dir.sub("old"), dir.sub("renamed")) == 0)
            try makeDirectories(dir.sub("made/while/full"))
            watch.watcher.resume()
            #expect(await watch.wait(timeout: .seconds(15)) { $0.contains(.overflow) })

            let before = watch.mark
            try writeFile(dir.sub("renamed/deep/r.md"), Data("r".utf8))
            try writeFile(dir.sub("made/while/full/m.md"), Data("m".utf8))
            #expect(
                await watch.wait(from: before) { events in
                    events.contains(.changed(root: root, path: "renamed/deep/r.md"))
                        && events.contains(.changed(root: root, path: "made/while/full/m.md"))
                })
            #expect(!paths(Array(watch.events[before...])).contains { $0.hasPrefix("old/") })
            #expect(kernelWatchCount(watch.watcher) == 6)
        }
    }

    @Test func watchLimitIsReportedWithTheFixAndWatchingGoesOn() async throws {
        let dir = try TempDirectory()
        try makeDirectories(dir.sub("d1"), dir.sub("d2"))
        try await withWatcher(limit: 2, roots: [(dir.path, noIgnore)]) { watch, ids in
            let root = ids[0]
            let message = await watch.wait { $0.contains { if case .watchLimitReached = $0 { true } else { false } } }
            #expect(message)
            let text = watch.events.compactMap { if case .watchLimitReached(let text) = $0 { text } else { nil } }.first ?? ""
            #expect(text.contains("sudo sysctl fs.inotify.max_user_watches=524288"))
            #expect(text.contains("/etc/sysctl.d/"))
            try writeFile(dir.sub("d1/still.md"), Data("s".utf8))
            #expect(await watch.wait(for: .changed(root: root, path: "d1/still.md")))
            #expect(kernelWatchCount(watch.watcher) == 2)
        }
    }

    @Test func namesThatAreNotUTF8AreSkipped() async throws {
        let dir = try TempDirectory()
        try await withWatcher(roots: [(dir.path, noIgnore)]) { watch, ids in
            let root = ids[0]
            let name: [UInt8] = Array(dir.path.utf8) + Array("/bad-".utf8) + [0xFF, 0xFE] + Array(".md".utf8) + [0]
            let fd = name.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644) }
            }
            try #require(fd >= 0)
            close(fd)
            let marker = try await watch.barrier(root: root, directory: dir.path)
            #expect(Set(paths(watch.events)) == [marker])
        }
    }

    @Test func rootRemovedIsReported() async throws {
        let dir = try TempDirectory()
        let notes = dir.sub("notes")
        try makeDirectories(notes + "/sub")
        try await withWatcher(roots: [(notes, noIgnore)]) { watch, ids in
            try FileManager.default.removeItem(atPath: notes)
            #expect(await watch.wait(for: .directoryRemoved(root: ids[0], path: "")))
            #expect(await watch.wait { _ in kernelWatchCount(watch.watcher) == 0 })
        }
    }

    /// A root removed and made again (a server folder replaced by a copy, a share mounted again) is watched again:
    /// its return is reported and the events in it arrive as before.
    @Test func aRootMadeAgainIsWatchedAgain() async throws {
        let dir = try TempDirectory()
        let log = dir.sub("log")
        try makeDirectories(log + "/sub")
        try await withWatcher(roots: [(log, noIgnore)]) { watch, ids in
            try FileManager.default.removeItem(atPath: log)
            #expect(await watch.wait(for: .directoryRemoved(root: ids[0], path: "")))
            let start = watch.events.count
            try makeDirectories(log + "/sub")
            #expect(await watch.wait(for: .directoryAppeared(root: ids[0], path: ""), from: start))
            try writeFile(log + "/sub/entry", Data("x".utf8))
            #expect(await watch.wait(for: .changed(root: ids[0], path: "sub/entry"), from: start))
        }
    }

    /// A root whose folder is moved away while another takes its path (`mv server server.old; cp -a …`): the watch
    /// does not follow the old folder; the new one is watched, and events in the old one are not reported.
    @Test func aRootReplacedByAnotherFolderFollowsThePath() async throws {
        let dir = try TempDirectory()
        let log = dir.sub("log")
        try makeDirectories(log)
        try await withWatcher(roots: [(log, noIgnore)]) { watch, ids in
            #expect(rename(log, dir.sub("log.old")) == 0)
            try makeDirectories(log)
            #expect(await watch.wait(for: .directoryAppeared(root: ids[0], path: "")))
            let start = watch.events.count
            try writeFile(dir.sub("log.old") + "/stale", Data("x".utf8))
            try writeFile(log + "/entry", Data("x".utf8))
            #expect(await watch.wait(for: .changed(root: ids[0], path: "entry"), from: start))
            #expect(!watch.events[start...].contains(.changed(root: ids[0], path: "stale")))
        }
    }

    @Test func oneWatcherPerProcessAndNoStaleEventsForTheNext() async throws {
        let first = try TempDirectory()
        let second = try TempDirectory()
        let watcherA = InotifyWatcher(logger: testLogger, watchLimitForTesting: nil, stopAfterEventsForTesting: 1)
        let harnessA = WatchHarness(watcher: watcherA)
        let watcherB = InotifyWatcher(logger: testLogger)
        let harnessB = WatchHarness(watcher: watcherB)
        try writeFile(first.sub("a-x"), Data())
        try writeFile(first.sub("a-y"), Data())
        try watcherA.addRoot(first.path)
        try watcherA.start()
        #expect(throws: NoteSyncError.self) { try watcherB.start() }

        // A stops after the first event of a big batch, so libinotifytools' static buffer still holds the rest.
        // Alternating two files keeps the kernel from merging the events.
        watcherA.pause()
        for index in 0..<14_000 {
            let fd = open(first.sub(index % 2 == 0 ? "a-x" : "a-y"), O_WRONLY | O_CLOEXEC)
            try #require(fd >= 0)
            close(fd)
        }
        watcherA.resume()
        #expect(await harnessA.wait { _ in harnessA.finished })
        #expect(harnessA.events.count == 1)

        let rootB = try watcherB.addRoot(second.path)
        try watcherB.start()
        let marker = try await harnessB.barrier(root: rootB, directory: second.path)
        let leftovers = paths(harnessB.events).filter { $0 != marker }
        #expect(leftovers.isEmpty, "\(leftovers.count) events left over from the first watcher, e.g. \(leftovers.prefix(3))")
        await harnessB.stopAndWait()
    }

    @Test func subtreePathsCompareBytes() {
        typealias Location = InotifyWatcher.Loop.Location
        let a = Location(root: 0, path: "a")
        #expect(Location(root: 0, path: "a").isWithin(a))
        #expect(Location(root: 0, path: "a/b/c").isWithin(a))
        #expect(!Location(root: 0, path: "ab").isWithin(a))
        #expect(!Location(root: 1, path: "a/b").isWithin(a))
        #expect(Location(root: 0, path: "x").isWithin(Location(root: 0, path: "")))
        // "é" precomposed and decomposed are equal Strings but different directories on Linux.
        let composed = Location(root: 0, path: "caf\u{E9}")
        let decomposed = Location(root: 0, path: "cafe\u{301}")
        #expect(composed != decomposed)
        #expect(!Location(root: 0, path: "cafe\u{301}/n.md").isWithin(composed))
        #expect(Location(root: 0, path: "a/b/c").moved(from: a, to: Location(root: 0, path: "z/y")) == Location(root: 0, path: "z/y/b/c"))
        #expect(a.moved(from: a, to: Location(root: 0, path: "b")) == Location(root: 0, path: "b"))
    }

    @Test func addRootRejectsMissingDirectoriesAndStoppedWatchers() async throws {
        let dir = try TempDirectory()
        try writeFile(dir.sub("file"), Data())
        let watcher = InotifyWatcher(logger: testLogger)
        #expect(throws: NoteSyncError.self) { try watcher.addRoot(dir.sub("missing")) }
        #expect(throws: NoteSyncError.self) { try watcher.addRoot(dir.sub("file")) }
        watcher.stop()
        #expect(throws: NoteSyncError.self) { try watcher.addRoot(dir.path) }
        #expect(throws: NoteSyncError.self) { try watcher.start() }
        var iterator = watcher.events.makeAsyncIterator()
        #expect(await iterator.next() == nil)
    }
}
