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

/// A claim of a log slot that fails with an error other than "taken" is settled by reading the slot back: NFS and
/// sshfs can report a failure for a link or rename that the server carried out (the reply was lost).
///
/// The fault is made at `commit.entryWritten`, between writing the entry's temp file and publishing it: the hook
/// does what the server would have done (publishes the temp file itself, or not, or lets another device win the
/// slot) and then removes the temp file, so that the commit's own publish fails with `ENOENT`, an error that is
/// neither success nor "taken".
@Suite struct AmbiguousClaimTests {
    enum Server: String, CaseIterable, CustomStringConvertible, Sendable {
        /// The server published our entry; only the reply was lost.
        case publishedOurs
        /// The server did nothing.
        case publishedNothing
        /// Another device claimed the slot first; ours never landed.
        case anotherDeviceWon
        var description: String { rawValue }
    }

    @Test(
        .folderOnly("the lost reply is made with the temp file a folder publishes; a bucket's client settles its own"),
        arguments: PublishPrimitive.allCases, Server.allCases)
    func aFailedClaimIsSettledByReadingTheSlotBack(_ primitive: PublishPrimitive, _ server: Server) throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir, device: "dev-a", primitive: primitive)
        let other = try ServerStore(
            root: dir.sub("server"), device: "dev-b", primitive: primitive, logger: testLogger, vault: TestServer.vault)
        var state = ZoneState()
        let first = try name("first.md")
        let ours = try name("ours.md")
        let theirs = try name("theirs.md")
        guard
            case .committed = try store.commit(
                [.save(first, base: 0, text: try store.putAsset(Data("1".utf8)), modified: 1)],
                into: &state)
        else {
            Issue.record("the first commit must land")
            return
        }
        let change = RecordChange.save(ours, base: 0, text: try store.putAsset(Data("ours".utf8)), modified: 2)
        let theirText = try other.putAsset(Data("theirs".utf8))
        let layout = store.layout
        let faults = FaultCount()

        let hooks = FaultPoint.Hooks(hit: { point in
            // Only our own first claim is disturbed; the other device's commit inside the hook passes here too.
            guard point.description == "commit.entryWritten",
                faults.next() == 0
            else { return }
            let temps = try #require(try FileIO.list(layout.tmpDirectory)).filter { $0.hasPrefix("dev-a-") && $0.hasSuffix(".entry") }
            let temp = layout.tmpDirectory + "/" + (try #require(temps.first))
            #expect(temps.count == 1)
            switch server {
            case .publishedOurs:
                #expect(link(temp, layout.entryPath(2)) == 0)
            case .publishedNothing:
                break
            case .anotherDeviceWon:
                var otherState = ZoneState()
                try other.fetch(into: &otherState)
                guard
                    case .committed(let won) = try other.commit(
                        [.save(theirs, base: 0, text: theirText, modified: 3)],
                        into: &otherState)
                else {
                    Issue.record("the other device's commit must land")
                    return
                }
                #expect(won.seq == 2)
            }
            #expect(unlink(temp) == 0)
        })
        let outcome = Result { try FaultPoint.with(hooks) { try store.commit([change], into: &state) } }
        #expect(faults.next() >= 1, "the fault must really be injected")

        switch server {
        case .publishedOurs:
            guard case .success(.committed(let entry)) = outcome else {
                Issue.record("the read-back finds our commit id, so the commit landed: \(outcome)")
                return
            }
            #expect(entry.seq == 2 && state.token == 2 && state.tag(of: ours) == 2)
            #expect(try store.readSlot(2) == .entry(entry), "the slot holds our entry, the one the commit returned")
            #expect(try store.readSlot(3) == .missing, "the change is committed once, not claimed again")
        case .publishedNothing:
            #expect(throws: NoteSyncError.self) { try outcome.get() }
            #expect(state.token == 1 && state.tag(of: ours) == 0, "nothing is recorded as committed")
            #expect(try store.readSlot(2) == .missing)
        case .anotherDeviceWon:
            guard case .success(.committed(let entry)) = outcome else {
                Issue.record("another commit id in the slot means the slot was taken: fold it in, claim the next: \(outcome)")
                return
            }
            #expect(entry.seq == 3 && state.token == 3 && state.tag(of: theirs) == 2 && state.tag(of: ours) == 3)
            guard case .entry(let winner) = try store.readSlot(2) else {
                Issue.record("slot 2 holds the other device's entry")
                return
            }
            #expect(winner.device == "dev-b" && winner.commit != entry.commit)
        }
        #expect(try FileIO.list(layout.tmpDirectory) == [], "no temp file is left")
        let report = try ServerFsck(store: store).run(repair: false)
        #expect(report.isClean, "\(report.findings)")
    }

    /// How many times the fault point was reached, shared with the hook (which may run on any thread).
    final class FaultCount: Sendable {
        private let count = Mutex(0)

        /// Returns the count so far and adds one.
        func next() -> Int {
            count.withLock { value in
                defer { value += 1 }
                return value
            }
        }
    }
}
