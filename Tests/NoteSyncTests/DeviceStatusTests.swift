import Foundation
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

/// A device's status file on the server (`devices/<id>.json`) stays true, and a sync that changed nothing writes
/// nothing to the server: no file, no folder, no object (on a share each write is a flush and a rename, and a
/// replicating tool's upload; in a bucket a billed request).
@Suite struct DeviceStatusTests {
    private static func status(_ harness: SyncHarness, _ device: Int) throws -> DeviceInfo? {
        let store = try ServerStore(
            root: harness.serverRoot, device: "checker", logger: testLogger, vault: TestServer.vault)
        return store.deviceInfo(harness.devices[device].id)
    }

    /// The paths written, added or removed between two listings.
    private static func changed(_ before: [String: StorageInfo], _ after: [String: StorageInfo]) -> [String] {
        Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
    }

    @Test func aSyncThatChangesNothingWritesNothingToTheServer() throws {
        let harness = try SyncHarness(deviceCount: 2)
        let files = try ServerFiles(root: harness.serverRoot)
        try harness.write(0, "a.md", Data("one\n".utf8))
        _ = try harness.sync(0)
        _ = try harness.sync(1)
        let token = try harness.serverState().token
        // The first sync after the harness's registration (lastSeen 0) wrote the file, with the token.
        #expect(try Self.status(harness, 0)?.token == token)

        // Each sync is a new engine, as each `notesync sync` is a new process.
        let before = try files.listing()
        for device in [0, 1, 0] { _ = try harness.sync(device) }
        #expect(try Self.changed(before, files.listing()) == [])

        // Another device's commit moves the token: the next sync says so in its file.
        try harness.write(1, "a.md", Data("two\n".utf8))
        _ = try harness.sync(1)
        _ = try harness.sync(0)
        let moved = try harness.serverState().token
        #expect(moved > token)
        #expect(try Self.status(harness, 0)?.token == moved)
        #expect(try Self.status(harness, 0)?.name == harness.devices[0].name)

        // A status file removed (by hand, or a server restored without it) is written again by a sync that changes
        // nothing else.
        let path = harness.serverRoot + "/devices/" + harness.devices[0].id + ".json"
        try files.remove(path)
        #expect(try Self.status(harness, 0) == nil)
        _ = try harness.sync(0)
        #expect(try Self.status(harness, 0)?.token == moved)
    }

    /// `lastSeen` (what `server usage` shows) stays within ``SyncEngine/deviceRefresh`` of the truth: a sync that
    /// changes nothing an hour after the file was written writes it again, with the same token.
    @Test func aFileAnHourOldIsWrittenAgain() throws {
        let harness = try SyncHarness(deviceCount: 1)
        try harness.write(0, "a.md", Data("one\n".utf8))
        _ = try harness.sync(0)
        let written = try #require(try Self.status(harness, 0))
        let soon = FaultPoint.Hooks(hit: { _ in }, now: { written.lastSeen + SyncEngine.deviceRefresh - 1_000_000_000 })
        _ = try FaultPoint.with(soon) { try harness.sync(0) }
        #expect(try Self.status(harness, 0) == written, "within the hour: not written")
        let later = written.lastSeen + SyncEngine.deviceRefresh + 1_000_000_000
        let hourLater = FaultPoint.Hooks(hit: { _ in }, now: { later })
        _ = try FaultPoint.with(hourLater) { try harness.sync(0) }
        let refreshed = try #require(try Self.status(harness, 0))
        #expect(refreshed.lastSeen == later)
        #expect(refreshed.token == written.token)
    }

    @Test func anEngineThatSyncsAgainWritesItsFileOnlyWhenTheTokenMoves() throws {
        let harness = try SyncHarness(deviceCount: 2)
        let files = try ServerFiles(root: harness.serverRoot)
        let device = harness.devices[0]
        // One engine for many syncs, as the agent keeps.
        let engine = SyncEngine(folder: device.folder, state: device.state, config: device.config, logger: testLogger)
        try harness.write(0, "a.md", Data("one\n".utf8))
        _ = try engine.sync(SyncHarness.syncOptions)
        let token = try harness.serverState().token
        #expect(try Self.status(harness, 0)?.token == token)
        let before = try files.listing()
        _ = try engine.sync(SyncHarness.syncOptions)
        _ = try engine.sync(SyncHarness.syncOptions, only: ["a.md"])
        #expect(try Self.changed(before, files.listing()) == [])

        try harness.write(1, "b.md", Data("from b\n".utf8))
        _ = try harness.sync(1)
        _ = try engine.sync(SyncHarness.syncOptions, only: [])
        #expect(try Self.status(harness, 0)?.token == harness.serverState().token)
        #expect(try harness.read(0, "b.md") == Data("from b\n".utf8))
    }
}
