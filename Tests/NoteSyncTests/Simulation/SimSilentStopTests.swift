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

/// The rule *no device silently stops syncing* (SimServerOracle.swift, SimRunner's `judgeReport`): the oracle names
/// the devices a server fault affects, as the engine finds them, and the simulation judges their syncs by it.
@Suite(.simulationFolder) struct SimSilentStopTests {
    /// Devices synced with one server: alice wrote `count` entries, bob read the first.
    struct World {
        let scratch: SimScratch
        let server: String
        let alice: SimDevice
        let bob: SimDevice

        init(entries count: Int) throws {
            scratch = try SimScratch(in: SimRunner.baseDirectory)
            server = scratch.sub("server")
            try TestServer.create(server)
            alice = try SimDevice(index: 0, root: scratch.path, serverRoot: server)
            bob = try SimDevice(index: 1, root: scratch.path, serverRoot: server)
            for index in 1...count {
                try Data("note \(index)\n".utf8).write(to: URL(fileURLWithPath: alice.folder.root + "/n\(index).md"))
                _ = try alice.engine.sync(SyncHarness.syncOptions, only: nil)
                if index == 1 { _ = try bob.engine.sync(SyncHarness.syncOptions, only: nil) }
            }
        }

        func expected(_ device: SimDevice, quick: Bool = false) throws -> SimServerOracle.Expected? {
            try SimServerOracle.expected(serverRoot: server, device: device, quickEnd: quick)
        }

        func lose(_ seq: Int64) throws {
            try #require(unlink(ServerLayout(root: server).entryPath(seq)) == 0)
        }

        /// What a full sync of `device` throws, if it throws a `NoteSyncError`.
        func thrown(_ device: SimDevice) -> NoteSyncError.Kind? {
            do {
                _ = try device.engine.sync(SyncHarness.syncOptions, only: nil)
                return nil
            } catch {
                return (error as? NoteSyncError)?.kind
            }
        }
    }

    @Test func aHealthyServerAffectsNoDevice() throws {
        let world = try World(entries: 3)
        #expect(try world.expected(world.alice) == nil)
        #expect(try world.expected(world.bob) == nil)
        #expect(try world.expected(world.bob, quick: true) == nil)
    }

    /// Bob stops at the gap, and says so at once (a one-shot sync); alice read the lost entry and is past it.
    @Test func aGapAffectsTheDevicesBeforeIt() throws {
        let world = try World(entries: 3)
        try world.lose(2)
        #expect(try world.expected(world.bob)?.kinds == [.logGap])
        #expect(try world.expected(world.bob, quick: true)?.kinds == [.logGap])
        #expect(try world.expected(world.alice) == nil)
        #expect(world.thrown(world.bob) == .logGap)
        #expect(world.thrown(world.alice) == nil)
    }

    /// A partial sync looks for an entry after the empty slot in the next slot only (docs/server-format.md,
    /// `checkEnd(.quick)`): a gap of two slots is the full sync's to report.
    @Test func aWideGapIsAFullSyncsToReport() throws {
        let world = try World(entries: 4)
        try world.lose(2)
        try world.lose(3)
        #expect(try world.expected(world.bob)?.kinds == [.logGap])
        #expect(try world.expected(world.bob, quick: true) == nil)
        #expect(world.thrown(world.bob) == .logGap)
    }

    /// The last entry lost (or held back by a replicating tool): the server is behind alice, who read it.
    @Test func aServerBehindTheDeviceAffectsIt() throws {
        let world = try World(entries: 3)
        try world.lose(3)
        #expect(try world.expected(world.alice)?.kinds == [.serverMismatch])
        #expect(try world.expected(world.bob) == nil)
        #expect(world.thrown(world.alice) == .serverMismatch)
    }

    /// Another entry in the slot alice read last (a conflicted copy delivered, a restored copy that went on).
    @Test func anotherEntryInTheSlotReadAffectsTheDevice() throws {
        let world = try World(entries: 2)
        let layout = ServerLayout(root: world.server)
        let stash = world.scratch.sub("entry-2")
        try #require(rename(layout.entryPath(2), stash) == 0)
        try Data("bob 2\n".utf8).write(to: URL(fileURLWithPath: world.bob.folder.root + "/b.md"))
        _ = try world.bob.engine.sync(SyncHarness.syncOptions, only: nil)
        #expect(try world.expected(world.alice)?.kinds == [.serverMismatch])
        #expect(try world.expected(world.bob) == nil)
        #expect(world.thrown(world.alice) == .serverMismatch)
    }

    /// A new, empty server at the path: every device bound to the old one; a device never synced binds to it.
    @Test func aReplacedServerAffectsEveryBoundDevice() throws {
        let world = try World(entries: 2)
        try FileManager.default.removeItem(atPath: world.server)
        try TestServer.create(world.server)
        let carol = try SimDevice(index: 2, root: world.scratch.path, serverRoot: world.server)
        #expect(try world.expected(world.alice)?.kinds == [.serverMismatch])
        #expect(try world.expected(world.bob)?.kinds == [.serverMismatch])
        #expect(try world.expected(carol) == nil)
        #expect(world.thrown(world.bob) == .serverMismatch)
    }

    /// The simulation judges by it: each affected device's sync during these faults reported the fault (none
    /// finished, none reported another condition), and every device converged after the recovery.
    @Test func everyAffectedDeviceReportsTheFaultInTheSimulation() {
        let sync = SimSchedule.Action.sync(nil, full: true)
        let schedule = SimSchedule(
            deviceCount: 3, clockStep: 1_000_000_000,
            steps: [
                .init(0, .edit(.pool(0), .rewrite(lines: 2), .inPlace)), .init(0, sync), .init(1, sync),
                .init(0, .edit(.pool(1), .rewrite(lines: 2), .inPlace)), .init(0, sync),
                .init(0, .edit(.pool(2), .rewrite(lines: 2), .inPlace)), .init(0, sync),
                .init(0, .serverFault(.loseEntry(fromEnd: 1))),
                // bob and carol stop at the gap; alice read the lost entry and syncs on.
                .init(1, sync), .init(2, .dryRun), .init(2, sync), .init(0, sync),
                .init(0, .serverFault(.backup)),
                .init(0, .edit(.pool(3), .rewrite(lines: 2), .inPlace)), .init(0, sync),
                .init(0, .serverFault(.restoreBackup)),
                // The server is behind alice.
                .init(0, sync),
                .init(0, .serverFault(.replaceWithEmpty)),
                // Another server: every bound device.
                .init(0, sync), .init(1, sync), .init(2, .sync(nil, full: false))
            ])
        let (findings, figures) = SimRunner.run(schedule)
        #expect(findings.isEmpty, "\(findings)")
        // 8 syncs and dry runs during the faults, and the devices' first syncs of the recovery.
        #expect(figures.faultReports >= 8, "only \(figures.faultReports) reports")
    }
}
