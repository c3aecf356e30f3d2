import Foundation
import Testing

@testable import NoteSync

/// What the local state must store along with the token (``ZoneState/unsaved``), and what a partial sync must
/// plan (``ZoneState/unplanned``).
@Suite struct ZoneStateTests {
    /// Alice commits with a stale view: bob's entry took the slot first and touched another note. The commit
    /// folds bob's entry in and claims the next slot; bob's head must be among the heads to store with the
    /// token, or the next process would start past bob's entry without its head and never pull bob's note
    /// (and later overwrite it on a stale base).
    @Test func aWinnerFoldedInDuringACommitIsStoredAndPlanned() throws {
        let dir = try TempDirectory()
        let alice = try makeServer(dir)
        let bob = try ServerStore(root: dir.sub("server"), device: "dev-b", logger: testLogger)

        var aliceZone = ZoneState()
        _ = try alice.commit(
            [.save(try name("a.md"), base: 0, text: try alice.putAsset(Data("a".utf8)), modified: 1)],
            into: &aliceZone)
        #expect(Set(aliceZone.takeUnsaved().keys) == [try name("a.md")])
        aliceZone.unplanned = []

        var bobZone = ZoneState()
        try bob.fetch(into: &bobZone)
        _ = try bob.commit(
            [.save(try name("b.md"), base: 0, text: try bob.putAsset(Data("b".utf8)), modified: 2)],
            into: &bobZone)

        // Alice has not fetched bob's entry: her commit loses slot 2, folds it in, and lands at 3.
        guard
            case .committed(let entry) = try alice.commit(
                [.save(try name("c.md"), base: 0, text: try alice.putAsset(Data("c".utf8)), modified: 3)], into: &aliceZone)
        else {
            Issue.record("the commit did not land")
            return
        }
        #expect(entry.seq == 3)
        let unsaved = aliceZone.takeUnsaved()
        #expect(Set(unsaved.keys) == [try name("b.md"), try name("c.md")])
        #expect(unsaved[try name("b.md")]?.tag == 2)
        #expect(aliceZone.unplanned.contains(try name("b.md")))
        #expect(aliceZone.takeUnsaved().isEmpty)
    }

    /// Equality is about the heads and the token, not about what is left to store or plan.
    @Test func bookkeepingIsNotPartOfEquality() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var zone = ZoneState()
        _ = try store.commit(
            [.save(try name("a.md"), base: 0, text: try store.putAsset(Data("a".utf8)), modified: 1)],
            into: &zone)
        var other = ZoneState()
        try store.fetch(into: &other)
        _ = other.takeUnsaved()
        #expect(zone == other)
    }
}
