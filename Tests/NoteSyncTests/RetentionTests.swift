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

/// Retention, gc and compaction at the store's level (docs/retention.md).
@Suite struct RetentionTests {
    static let second: Int64 = 1_000_000_000
    let now: Int64 = 1_790_000_000 * RetentionTests.second

    @discardableResult
    func save(_ store: ServerStore, _ state: inout ZoneState, _ note: String, _ text: String, at time: Int64) throws -> LogEntry {
        let name = try RecordName(validating: note)
        let outcome = try store.commit(
            [.save(name, base: state.tag(of: name), text: try store.putAsset(Data(text.utf8)), modified: time)],
            into: &state, time: time)
        guard case .committed(let entry) = outcome else { throw NoteSyncError(.conflict, "lost the race") }
        return entry
    }

    func delete(_ store: ServerStore, _ state: inout ZoneState, _ note: String, at time: Int64) throws {
        let name = try RecordName(validating: note)
        let outcome = try store.commit([.delete(name, base: state.tag(of: name), modified: time)], into: &state, time: time)
        guard case .committed = outcome else { throw NoteSyncError(.conflict, "lost the race") }
    }

    /// gc removes an asset only if it is older than its mark by the server's clock (a writer may have reused it
    /// since), and a bucket's times are whole seconds: an asset written in the mark's second stays. A test that
    /// counts what gc removes right after writing waits that second out on an object store.
    func waitOutTheSecondOfTheWrites(_ store: ServerStore) {
        if ServerAddress.isObjectStore(store.storage.root) { Thread.sleep(forTimeInterval: 1.1) }
    }

    func version(_ seq: Int64, ageSeconds: Int64, deleted: Bool = false) throws -> RecordVersion {
        RecordVersion(
            name: try name("a.md"), seq: seq, time: now - ageSeconds * Self.second,
            head: RecordHead(
                tag: seq, deleted: deleted, text: deleted ? nil : AssetRef(of: Data("v\(seq)".utf8)), modified: 0,
                version: 1, device: "d"))
    }

    @Test func durationsParseAndPrint() {
        #expect(RetentionPolicy.parseDuration("30d") == Int64(2_592_000))
        #expect(RetentionPolicy.parseDuration("1h") == 3600)
        #expect(RetentionPolicy.parseDuration("0") == 0)
        #expect(RetentionPolicy.parseDuration("90") == 90)
        #expect(RetentionPolicy.parseDuration("1y") == Int64(31_536_000))
        #expect(RetentionPolicy.parseDuration("-1h") == nil)
        #expect(RetentionPolicy.parseDuration("h") == nil)
        #expect(RetentionPolicy.parseDuration("1x") == nil)
        #expect(RetentionPolicy.format(365 * 86_400) == "1y")
        #expect(RetentionPolicy.format(86_400) == "1d")
        #expect(RetentionPolicy.format(90) == "90s")
    }

    /// Every version of the last hour; then one an hour; the head always; a device's base always.
    @Test func thePolicyKeepsBandsHeadsAndBases() throws {
        let policy = RetentionPolicy.default
        // Versions every 10 minutes for 5 hours, the newest 1 minute old.
        var versions: [RecordVersion] = []
        for step in 0..<30 { versions.append(try version(Int64(step + 1), ageSeconds: Int64(60 + (29 - step) * 600))) }
        let kept = ServerStore.kept(versions, policy: policy, now: now, deviceTokens: [])
        let seqs = Set(kept.map(\.seq))
        #expect(seqs.contains(30), "the head")
        // The last hour: ages 60…3,060 s (6 versions, seqs 25–30) all kept.
        #expect(Set(25...30).isSubset(of: seqs))
        // Older: one per clock hour at most.
        let older = kept.filter { now - $0.time >= 3600 * Self.second }
        let hours = older.map { $0.time / Self.second / 3600 }
        #expect(Set(hours).count == hours.count, "one version per hour: \(older.map(\.seq))")
        #expect(older.count >= 4 && older.count <= 6)
        // A device whose token is 3 keeps version 3.
        let withBase = ServerStore.kept(versions, policy: policy, now: now, deviceTokens: [3])
        #expect(withBase.contains { $0.seq == 3 })
        // A policy with every band off keeps the head only.
        let none = RetentionPolicy(all: 0, hourly: 0, daily: 0, weekly: 0)
        #expect(ServerStore.kept(versions, policy: none, now: now, deviceTokens: []).map(\.seq) == [30])
    }

    /// A delete is remembered for the horizon and until every registered device has read it.
    @Test func deletesAreRememberedUntilEveryDeviceHasSeenThem() throws {
        let none = RetentionPolicy(all: 0, hourly: 0, daily: 0, weekly: 0)
        let versions = [try version(1, ageSeconds: 900), try version(2, ageSeconds: 800, deleted: true)]
        #expect(ServerStore.kept(versions, policy: none, now: now, deviceTokens: [1]).map(\.seq) == [1, 2])
        #expect(ServerStore.kept(versions, policy: none, now: now, deviceTokens: [2, 5]).isEmpty)
        #expect(ServerStore.kept(versions, policy: .default, now: now, deviceTokens: [5]).map(\.seq) == [1, 2])
        let old = [try version(1, ageSeconds: 400 * 86_400), try version(2, ageSeconds: 366 * 86_400, deleted: true)]
        #expect(ServerStore.kept(old, policy: .default, now: now, deviceTokens: [5]).isEmpty)
        #expect(ServerStore.kept(old, policy: .default, now: now, deviceTokens: [1]).map(\.seq) == [1, 2])
    }

    /// A version a device made after its registered token is kept whatever the policy: a commit of a process killed
    /// before recording it, which the device must find in the snapshot to take it as its base (soak seed
    /// 3204859652964221605: without it a delete made since was undone by the device's push of the same text).
    @Test func aVersionMadeAfterItsDevicesTokenIsKept() throws {
        let none = RetentionPolicy(all: 0, hourly: 0, daily: 0, weekly: 0)
        let versions = [
            try version(1, ageSeconds: 900), try version(2, ageSeconds: 800), try version(3, ageSeconds: 700, deleted: true)
        ]
        // Version 2 is device d's ("d" made every version here); d registered at token 1: version 2 is unrecorded.
        #expect(ServerStore.kept(versions, policy: none, now: now, deviceTokens: [1], devices: [("d", 1)]).map(\.seq) == [1, 2, 3])
        // Once d's token has passed it, it goes as the policy says.
        #expect(ServerStore.kept(versions, policy: none, now: now, deviceTokens: [2], devices: [("d", 2)]).map(\.seq) == [2, 3])
        // Another device's token keeps nothing of d's.
        #expect(ServerStore.kept(versions, policy: none, now: now, deviceTokens: [1], devices: [("e", 1)]).map(\.seq) == [1, 3])
    }

    /// An hour of saves two hours ago: gc keeps about one an hour, removes the other texts and the log before the
    /// snapshot; the heads, `history` and fsck are intact.
    @Test func gcThinsOldHistoryAndCompactsTheLog() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        let start = now - 3 * 3600 * Self.second
        for step in 0..<120 {
            try save(
                store, &state, "a.md", "autosave \(step) " + String(repeating: "text ", count: 200),
                at: start + Int64(step) * 30 * Self.second)
        }
        try save(store, &state, "b.md", "recent", at: now - 60 * Self.second)
        let before = try store.listAssets().count
        #expect(before == 121)
        waitOutTheSecondOfTheWrites(store)
        let report = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        #expect(report.snapshot == 121)
        #expect(report.assetsRemoved >= 115, "\(report)")
        #expect(report.entriesRemoved == 120)
        let after = try store.listAssets().count
        #expect(after == before - report.assetsRemoved)
        #expect(ServerFiles(store).exists(store.layout.entryPath(121)), "the entry at the snapshot stays")
        // Heads and the kept history still read.
        let versions = try store.history(of: try name("a.md"))
        #expect(versions.count >= 2 && versions.count <= 4, "\(versions.map(\.seq))")
        for version in versions { _ = try store.readAsset(try #require(version.change.text)) }
        #expect(versions.last?.seq == 120)
        let fsck = try ServerFsck(store: store).run(repair: false)
        #expect(fsck.isClean, "\(fsck.findings)")
        // A new device reads the compacted log.
        var fresh = ZoneState()
        try store.fetch(into: &fresh)
        #expect(fresh.token == 121 && fresh.heads == state.heads)
        // A second gc with nothing new does nothing.
        let again = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        #expect(again.snapshot == nil && again.assetsRemoved == 0 && again.entriesRemoved == 0)
    }

    /// An idle server still thins: with nothing committed since the last snapshot, gc writes that snapshot again,
    /// thinner, when time has passed or the policy keeps less, and sweeps what it no longer keeps.
    @Test func anIdleServerThinsAsTimePassesAndWhenThePolicyChanges() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        let start = now - 50 * 60 * Self.second
        for step in 0..<40 { try save(store, &state, "a.md", "autosave \(step)", at: start + Int64(step) * 60 * Self.second) }
        // Within the first hour: every version is kept.
        let first = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        #expect(first.snapshot == 40 && first.assetsRemoved == 0 && first.versionsKept == 40, "\(first)")
        // Nothing new, nothing to thin: nothing is written.
        let listing = try ServerFiles(store).listing()
        let idle = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        #expect(idle.snapshot == nil && idle.assetsRemoved == 0)
        #expect(try ServerFiles(store).listing() == listing)
        // A policy that keeps nothing younger than an hour: a dry run says what goes and writes nothing.
        var noAll = RetentionPolicy.default
        noAll.all = 0
        let preview = try store.collectGarbage(grace: 0, dryRun: true, policy: noAll, now: now)
        #expect(preview.snapshot == 40 && preview.assetsRemoved >= 36, "\(preview)")
        #expect(try ServerFiles(store).listing() == listing)
        waitOutTheSecondOfTheWrites(store)  // (a dry run does not ask the clock)
        let thinned = try store.collectGarbage(grace: 0, dryRun: false, policy: noAll, now: now)
        #expect(thinned.snapshot == 40 && thinned.assetsRemoved == preview.assetsRemoved, "\(thinned)")
        #expect(try store.listAssets().count == 40 - thinned.assetsRemoved)
        // Two days later the default policy keeps one a day: the head.
        let later = try store.collectGarbage(grace: 0, dryRun: false, now: now + 2 * RetentionPolicy.day * Self.second)
        #expect(try store.listAssets().count == 1, "\(later)")
        let versions = try store.history(of: try name("a.md"))
        #expect(versions.map(\.seq) == [40])
        _ = try store.readAsset(try #require(versions.last?.change.text))
        let fsck = try ServerFsck(store: store).run(repair: false)
        #expect(fsck.isClean, "\(fsck.findings)")
        var fresh = ZoneState()
        try store.fetch(into: &fresh)
        #expect(fresh.token == 40 && fresh.heads == state.heads)
    }

    /// gc judges only a log it reads whole (soak seed 3338123424186726456: the entry a snapshot is anchored on was
    /// held back by a replicating tool, the log read empty, and gc removed every text). With the snapshot's entry
    /// missing, or a device ahead of the log, gc stops with the path and the fix and removes nothing; once the log
    /// reads whole again, it runs.
    @Test func gcStopsOnALogItCannotReadWhole() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        for step in 0..<6 { try save(store, &state, "n\(step % 2).md", "v\(step)", at: now - 3 * 3600 * Self.second) }
        _ = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        try save(store, &state, "n0.md", "v6", at: now)
        let assets = try store.listAssets().count
        // The anchor of snapshot 6 and the entry after it away (not delivered yet).
        let files = ServerFiles(store)
        var held: [Int64: Data] = [:]
        for seq: Int64 in [6, 7] { held[seq] = try files.take(store.layout.entryPath(seq)) }
        for dryRun in [true, false] {
            #expect {
                try store.collectGarbage(grace: 0, dryRun: dryRun, now: now + RetentionPolicy.day * Self.second)
            } throws: { error in
                let error = try #require(error as? NoteSyncError)
                return error.kind == .logGap && error.path == store.layout.entryPath(6) && error.fix != nil
            }
        }
        #expect(try store.listAssets().count == assets)
        for seq: Int64 in [6, 7] { try files.write(store.layout.entryPath(seq), try #require(held[seq])) }
        // A device that has read further than the log ends (entry 7 lost, a server restored from an older copy).
        try store.writeDeviceInfo(DeviceInfo(id: "dev-b", name: "b", lastSeen: now, token: 7))
        held[7] = try files.take(store.layout.entryPath(7))
        #expect {
            try store.collectGarbage(grace: 0, dryRun: false, now: now + RetentionPolicy.day * Self.second)
        } throws: { error in
            let error = try #require(error as? NoteSyncError)
            return error.kind == .serverMismatch && error.path == store.layout.devicesDirectory + "/dev-b.json"
        }
        #expect(try store.listAssets().count == assets)
        // The log whole again: gc runs, and every head reads.
        try files.write(store.layout.entryPath(7), try #require(held[7]))
        _ = try store.collectGarbage(grace: 0, dryRun: false, now: now + RetentionPolicy.day * Self.second)
        var fresh = ZoneState()
        try store.fetch(into: &fresh)
        for head in fresh.heads.values { _ = try store.readAsset(try #require(head.text)) }
        let fsck = try ServerFsck(store: store).run(repair: false)
        #expect(fsck.isClean, "\(fsck.findings)")
    }

    /// A device whose token is below the compaction point jumps to the snapshot, then reads on.
    @Test func aDeviceBehindTheCompactionJumpsToTheSnapshot() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        for step in 0..<10 { try save(store, &state, "n\(step % 3).md", "v\(step)", at: now - Int64(100 - step) * Self.second) }
        var behind = ZoneState()
        try store.fetch(into: &behind, limit: 4)
        #expect(behind.token == 4)
        _ = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        try save(store, &state, "n0.md", "after gc", at: now)
        try store.fetch(into: &behind)
        #expect(behind.token == 11)
        #expect(behind.heads == state.heads)
        // Its next commit continues the chain.
        try save(store, &behind, "n1.md", "from behind", at: now)
        var reader = ZoneState()
        try store.fetch(into: &reader)
        #expect(reader.token == 12)
    }

    /// A dry run reads and reports, and writes nothing anywhere.
    @Test func aDryRunWritesNothing() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        for step in 0..<20 { try save(store, &state, "a.md", "v\(step)", at: now - 5 * 3600 * Self.second + Int64(step) * Self.second) }
        let listing = try ServerFiles(store).listing()
        let report = try store.collectGarbage(grace: 0, dryRun: true, now: now)
        #expect(report.dryRun && report.snapshot == 20 && report.assetsRemoved == 19 && report.entriesRemoved == 19, "\(report)")
        #expect(try ServerFiles(store).listing() == listing)
    }

    /// With an earlier gc's mark still waiting, a dry run says what the real run then removes: each text, entry and
    /// snapshot counted once, not once per mark that names it.
    @Test func aDryRunCountsWhatAnEarlierMarkNamesOnce() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        for step in 0..<20 { try save(store, &state, "a.md", "v\(step)", at: now - 5 * 3600 * Self.second + Int64(step) * Self.second) }
        waitOutTheSecondOfTheWrites(store)
        let marked = try store.collectGarbage(grace: RetentionPolicy.day, dryRun: false, now: now)
        #expect(marked.assetsRemoved == 0 && marked.marksWaiting == 1, "\(marked)")
        let listing = try ServerFiles(store).listing()
        let preview = try store.collectGarbage(grace: 0, dryRun: true, now: now)
        #expect(try ServerFiles(store).listing() == listing)
        waitOutTheSecondOfTheWrites(store)
        let swept = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        #expect(swept.assetsRemoved == 19 && swept.entriesRemoved == 19, "\(swept)")
        #expect(
            preview.assetsRemoved == swept.assetsRemoved && preview.bytesRemoved == swept.bytesRemoved
                && preview.entriesRemoved == swept.entriesRemoved && preview.entryBytesRemoved == swept.entryBytesRemoved
                && preview.snapshotsRemoved == swept.snapshotsRemoved, "\(preview) against \(swept)")
    }

    /// gc stopped at each of its steps leaves a server that fsck finds clean and a new device reads whole; the next
    /// gc finishes the work.
    @Test(arguments: ["gc.snapshotWritten", "gc.marked", "gc.assetRemoved", "gc.entryRemoved", "gc.markSwept"])
    func gcKilledAtAnyPointLeavesAValidServer(point: String) throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        for step in 0..<30 {
            try save(store, &state, "n\(step % 4).md", "v\(step)", at: now - 3 * 3600 * Self.second + Int64(step) * 60 * Self.second)
        }
        waitOutTheSecondOfTheWrites(store)  // else no asset would be removed at all
        let hooks = FaultPoint.Hooks.once(at: point) { throw NoteSyncError(.io, "killed") }
        #expect(throws: NoteSyncError.self) {
            try FaultPoint.with(hooks) { _ = try store.collectGarbage(grace: 0, dryRun: false, now: now) }
        }
        func check() throws {
            let fsck = try ServerFsck(store: store).run(repair: false)
            #expect(fsck.findings.allSatisfy { $0.kind == .tempFile }, "\(point): \(fsck.findings)")
            var fresh = ZoneState()
            try store.fetch(into: &fresh)
            #expect(fresh.heads == state.heads)
            for head in fresh.heads.values { _ = try store.readAsset(try #require(head.text)) }
        }
        try check()
        _ = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        try check()
        #expect(try store.listAssets().count == 4)
    }

    /// gc stopped at each of its steps, and then the entry its snapshot stands on lost (a replicating tool, a
    /// backup put back): fsck takes the snapshot as lost, and no snapshot or entry left names a text that is gone.
    /// The sweep removed texts before the entries and older snapshots that still named them.
    @Test(arguments: ["gc.snapshotWritten", "gc.marked", "gc.entryRemoved", "gc.assetRemoved", "gc.markSwept"])
    func gcKilledThenItsSnapshotsEntryLostLeavesNoTextMissing(point: String) throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        for step in 0..<12 {
            try save(store, &state, "n\(step % 3).md", "v\(step)", at: now - 3 * 3600 * Self.second + Int64(step) * 60 * Self.second)
        }
        waitOutTheSecondOfTheWrites(store)
        let hooks = FaultPoint.Hooks.once(at: point) { throw NoteSyncError(.io, "killed") }
        #expect(throws: NoteSyncError.self) {
            try FaultPoint.with(hooks) { _ = try store.collectGarbage(grace: 0, dryRun: false, now: now) }
        }
        _ = try store.storage.remove(store.layout.entryPath(state.token))
        _ = try ServerFsck(store: store).run(repair: true, gapGraceSeconds: 0)
        let missing = try ServerFsck(store: store).run(repair: false).findings.filter { $0.kind == .missingAsset }
        #expect(missing.isEmpty, "\(point): \(missing)")
    }

    /// A writer that reuses a text touches it, and a mark older than the touch does not sweep it, though the
    /// writer's commit has not landed yet (nothing references the text when the sweep comes).
    @Test func aReusedTextIsNotSweptByAnOlderMark() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        let old = now - 3 * 3600 * Self.second
        try save(store, &state, "a.md", "first", at: old)
        try save(store, &state, "a.md", "second", at: old + Self.second)
        // Marked now, after the texts were written (first is history beyond the hour: unreferenced once thinned to
        // one an hour)…
        TestServer.waitForTheServersClock()
        let marking = try store.collectGarbage(grace: 3600, dryRun: false, now: Clock.nowNanoseconds())
        #expect(marking.assetsMarked == 1 && marking.assetsRemoved == 0, "\(marking)")
        // …then a device publishes "first" again (reused: touched), and the sweep comes after the grace period,
        // before the device commits.
        TestServer.waitForTheServersClock()
        let reused = try store.putAsset(Data("first".utf8))
        let sweep = try store.collectGarbage(grace: 3600, dryRun: false, now: Clock.nowNanoseconds() + 7200 * Self.second)
        #expect(sweep.assetsRemoved == 0, "\(sweep)")
        #expect(store.hasAsset(reused.sha256))
        try save(store, &state, "b.md", "first", at: Clock.nowNanoseconds())
        #expect(try ServerFsck(store: store).run(repair: false).isClean)
    }

    /// The policy lives in the server: set, read back, and the newest number wins.
    @Test func thePolicyIsStoredInTheServer() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        #expect(try store.retentionPolicy().policy == .default)
        try store.setRetentionPolicy(RetentionPolicy(all: 60, hourly: 0, daily: 86_400, weekly: 0))
        try store.setRetentionPolicy(RetentionPolicy(all: 120, hourly: 0, daily: 86_400, weekly: 0))
        let (policy, number) = try store.retentionPolicy()
        #expect(policy.all == 120 && number == 2)
        #expect(try ServerFsck(store: store).run(repair: false).isClean)
    }
}

/// The engine's side of gc: a text swept between its publish and the commit is put back.
@Suite struct RetentionEngineTests {
    /// gc (grace 0) runs just after a device published a new text and before its commit: the text is unreferenced
    /// then and is swept; the device finds it gone after its commit and puts it back.
    @Test func aTextSweptBeforeItsCommitIsPutBack() throws {
        let harness = try SyncHarness(deviceCount: 2)
        try harness.write(0, "a.md", Data("first\n".utf8))
        _ = try harness.sync(0)
        try harness.write(0, "a.md", Data("second, swept before its commit\n".utf8))
        let gc = try ServerStore(root: harness.serverRoot, device: "gc", logger: testLogger, vault: TestServer.vault)
        let swept = Mutex(0)
        let hooks = FaultPoint.Hooks.once(at: "assets.published") {
            // The mark is written after the text, as the server's clock tells: untouched since, the text is swept.
            TestServer.waitForTheServersClock()
            let report = try gc.collectGarbage(grace: 0, dryRun: false)
            swept.withLock { $0 = report.assetsRemoved }
        }
        _ = try FaultPoint.with(hooks) { try harness.sync(0) }
        #expect(swept.withLock { $0 } >= 1, "gc swept the text published for the commit")
        _ = try harness.sync(1)
        #expect(try harness.read(1, "a.md") == Data("second, swept before its commit\n".utf8))
        #expect(try ServerFsck(store: gc).run(repair: false).isClean)
    }
}

extension RetentionTests {
    /// gc compacts past a writer's token between its fetch and its commit: the commit finds the snapshot, folds it
    /// in, and claims the slot after the log's end (or reports the records that changed).
    @Test func aCommitAfterACompactionJumpsAndClaimsTheNextSlot() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var writer = ZoneState()
        try save(store, &writer, "a.md", "one", at: now - 100 * Self.second)
        var other = ZoneState()
        try store.fetch(into: &other)
        for step in 0..<5 { try save(store, &other, "b.md", "b\(step)", at: now - Int64(90 - step) * Self.second) }
        _ = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        #expect(!ServerFiles(store).exists(store.layout.entryPath(1)), "the writer's tip is gone")
        let entry = try save(store, &writer, "a.md", "two", at: now)
        #expect(entry.seq == 7)
        var expected = other.heads
        expected[try name("a.md")] = writer.heads[try name("a.md")]
        #expect(writer.heads == expected)
    }

    /// A snapshot whose entry has not arrived (a replicating tool delivers files in any order), on a log compacted
    /// up to it: a device new to the server (token 0) waits as at a gap, never taking slot 1 (which would fork the
    /// log under the snapshot); fsck waits for it through --gap-age, then sets the snapshot aside as lost.
    @Test func aSnapshotWhoseEntryHasNotArrivedIsAGap() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var writer = ZoneState()
        for step in 0..<4 { try save(store, &writer, "n\(step % 2).md", "v\(step)", at: now - Int64(90 - step) * Self.second) }
        _ = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        let files = ServerFiles(store)
        #expect(!files.exists(store.layout.entryPath(1)))
        var held = try files.take(store.layout.entryPath(4))
        for check: ServerStore.EndCheck in [.full, .quick] {
            var fresh = ZoneState()
            #expect {
                try store.fetch(into: &fresh, check: check)
            } throws: { error in
                let error = try #require(error as? NoteSyncError)
                return error.kind == .logGap && error.path == store.layout.entryPath(4) && error.fix != nil
            }
            #expect(fresh.token == 0)
        }
        // fsck waits for it while it is young.
        let young = try ServerFsck(store: store).run(repair: true, gapGraceSeconds: 3600)
        #expect(young.findings.contains { $0.path == store.layout.snapshotPath(4) && $0.repaired == nil })
        #expect(files.exists(store.layout.snapshotPath(4)))
        // Delivered: a new device jumps to the snapshot and reads the heads.
        try files.write(store.layout.entryPath(4), held)
        var fresh = ZoneState()
        try store.fetch(into: &fresh)
        #expect(fresh.token == 4 && fresh.heads == writer.heads)
        // Lost for good: fsck past --gap-age sets the snapshot aside, and the log reads as the server it now is.
        held = try files.take(store.layout.entryPath(4))
        let lost = try ServerFsck(store: store).run(repair: true, gapGraceSeconds: 0)
        #expect(lost.findings.contains { $0.path == store.layout.snapshotPath(4) && $0.repaired != nil })
        var after = ZoneState()
        try store.fetch(into: &after)
        #expect(after.token == 0)
        #expect {
            try store.fetch(into: &writer)
        } throws: { error in
            (error as? NoteSyncError)?.kind == .serverMismatch
        }
    }

    /// A server restored from an older copy, written to by others, then compacted past what a device had read: the
    /// entries that would show the logs differ are gone, but the snapshot links every entry it compacted, so the
    /// device finds that the entry it read last is not the one there and stops (`serverMismatch`: `notesync
    /// recover` keeps both texts) instead of taking another history's heads for successors of its bases. A device
    /// whose last entry is common to both lives jumps as usual, and the links carry over to the next snapshot.
    @Test func aCompactedLogOfARestoredServerIsNotTakenForTheLogThisDeviceRead() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var early = ZoneState()
        try save(store, &early, "todo.md", "written before the backup", at: now - 100 * Self.second)
        let files = ServerFiles(store)
        let backup = try files.contents()
        var ahead = early
        try save(store, &ahead, "todo.md", "written after the backup", at: now - 99 * Self.second)
        try save(store, &ahead, "other.md", "also after the backup", at: now - 98 * Self.second)

        try files.restore(backup)
        var others = ZoneState()
        try store.fetch(into: &others)
        for step in 0..<4 { try save(store, &others, "n\(step).md", "another life \(step)", at: now - Int64(90 - step) * Self.second) }
        _ = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        #expect(!files.exists(store.layout.entryPath(3)), "compacted")
        let snapshot = try store.readSnapshot(5)
        #expect(snapshot.linksFrom == 1 && snapshot.links?.count == 5 * 4)

        for check: ServerStore.EndCheck in [.full, .quick] {
            var device = ahead
            #expect {
                try store.fetch(into: &device, check: check)
            } throws: { error in
                let error = try #require(error as? NoteSyncError)
                return error.kind == .serverMismatch && error.fix?.contains("notesync recover") == true
            }
            #expect(device.token == 3, "nothing taken from the other history")
        }
        var behind = early
        try store.fetch(into: &behind)
        #expect(behind.token == 5 && behind.heads == others.heads)

        // The next snapshot continues the links of the last.
        try save(store, &others, "n9.md", "later", at: now - 50 * Self.second)
        _ = try store.collectGarbage(grace: 0, dryRun: false, now: now)
        #expect(try store.readSnapshot(6).links?.count == 6 * 4)
        var device = ahead
        #expect(throws: NoteSyncError.self) { try store.fetch(into: &device) }
        var commitAhead = ahead
        #expect(throws: NoteSyncError.self) {
            _ = try store.commit(
                [.save(try RecordName(validating: "x.md"), base: 0, text: try store.putAsset(Data("x".utf8)), modified: now)],
                into: &commitAhead)
        }
        behind = early
        try store.fetch(into: &behind)
        #expect(behind.token == 6)
    }
}
