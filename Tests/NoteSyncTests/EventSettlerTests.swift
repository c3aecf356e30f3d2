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

/// A clock's instant the test moves by hand.
struct FakeInstant: InstantProtocol {
    var offset: Duration

    static let zero = FakeInstant(offset: .zero)

    func advanced(by duration: Duration) -> FakeInstant { FakeInstant(offset: offset + duration) }
    func duration(to other: FakeInstant) -> Duration { other.offset - offset }
    static func < (a: FakeInstant, b: FakeInstant) -> Bool { a.offset < b.offset }
}

/// The agent's settling of watch events (EventSettler) and its retry backoff, on a fake clock.
@Suite struct EventSettlerTests {
    typealias Probe = EventSettler<FakeInstant>.Probe

    func settler() -> EventSettler<FakeInstant> {
        EventSettler(settle: .milliseconds(30), deleteSettle: .milliseconds(400), maxSettle: .seconds(3))
    }

    func at(_ milliseconds: Int) -> FakeInstant { .zero.advanced(by: .milliseconds(milliseconds)) }

    @Test func aPathSettlesOnceQuietForTheSettlePeriod() {
        var settler = settler()
        let file = Probe(isRegularFile: true, size: 10)
        settler.noted("a.md", at: at(0), size: 10)
        settler.noted("a.md", at: at(20), size: 10)
        #expect(settler.nextDeadline == at(50))
        #expect(settler.takeSettled(at: at(40)) { _ in file }.isEmpty, "20 ms quiet is not enough")
        #expect(settler.takeSettled(at: at(50)) { _ in file } == ["a.md"])
        #expect(settler.isEmpty && settler.nextDeadline == nil)
    }

    @Test func aMissingPathWaitsTheLongerDeleteDelay() {
        var settler = settler()
        settler.noted("gone.md", at: at(0), size: nil)
        #expect(settler.takeSettled(at: at(100)) { _ in nil }.isEmpty, "vim moves a note aside for a moment")
        // It came back (the save finished): new since it was looked at, so one quiet period more, then a change.
        #expect(settler.takeSettled(at: at(100)) { _ in Probe(isRegularFile: true, size: 5) }.isEmpty)
        #expect(settler.takeSettled(at: at(130)) { _ in Probe(isRegularFile: true, size: 5) } == ["gone.md"])
        settler.noted("really-gone.md", at: at(200), size: 3)
        #expect(settler.takeSettled(at: at(599)) { _ in nil }.isEmpty)
        #expect(settler.takeSettled(at: at(600)) { _ in nil } == ["really-gone.md"])
    }

    /// `printf … > .note.md.new && mv .note.md.new note.md` with the `mv` late (a loaded machine): the temp does not
    /// settle alone in the meantime; once renamed it goes with the note, at the note's own settle.
    @Test func aTempNamedAfterANoteWaitsForItsRename() {
        var settler = settler()
        let file = Probe(isRegularFile: true, size: 19)
        settler.noted("dir/.note.md.new", at: at(0), size: 19)
        #expect(settler.nextDeadline == at(400))
        #expect(settler.takeSettled(at: at(100)) { _ in file }.isEmpty, "the temp waits for its rename")
        settler.noted("dir/.note.md.new", at: at(150), size: nil)
        settler.noted("dir/note.md", at: at(150), size: 19)
        settler.linked("dir/.note.md.new", to: "dir/note.md")
        #expect(settler.nextDeadline == at(180))
        #expect(settler.takeSettled(at: at(180)) { $0 == "dir/note.md" ? file : nil } == ["dir/.note.md.new", "dir/note.md"])
        // Never renamed: it is a file like another, taken once quiet for the longer period.
        settler.noted(".draft.txt.bak", at: at(1000), size: 3)
        #expect(settler.takeSettled(at: at(1399)) { _ in Probe(isRegularFile: true, size: 3) }.isEmpty)
        #expect(settler.takeSettled(at: at(1400)) { _ in Probe(isRegularFile: true, size: 3) } == [".draft.txt.bak"])
    }

    @Test func onlyAHiddenNameWithAnExtensionAndASuffixReadsAsATemp() {
        for temp in [".note.md.new", "a/b/.note.md.tmp", ".n.md.Xy12Ab", ".a.b.c.d"] {
            #expect(EventSettler<FakeInstant>.looksLikeSiblingTemp(temp), "\(temp)")
        }
        let others = ["note.md", "note.md.new", ".todo.md", ".md", ".", "..", ".note.", ".note..new", "..md.new"]
        for other in others + [".note.md.", "dir.x/.todo.md", ".a/note.md", "a/.b"] {
            #expect(!EventSettler<FakeInstant>.looksLikeSiblingTemp(other), "\(other)")
        }
    }

    /// `mv a.md b.md`: the old name does not wait as a vanished note does; both names settle together, once the new
    /// one is quiet, so that one sync sees the rename.
    @Test func theTwoNamesOfARenameSettleTogether() {
        var settler = settler()
        let file = Probe(isRegularFile: true, size: 4)
        settler.noted("a.md", at: at(0), size: nil)
        settler.noted("b.md", at: at(0), size: 4)
        settler.linked("a.md", to: "b.md")
        #expect(settler.nextDeadline == at(30), "no delete delay")
        #expect(settler.takeSettled(at: at(20)) { $0 == "b.md" ? file : nil }.isEmpty)
        #expect(settler.takeSettled(at: at(30)) { $0 == "b.md" ? file : nil } == ["a.md", "b.md"])
        #expect(settler.isEmpty)
    }

    /// `mv proj archive` of a big folder, however the agent's batches split the watch's three events (`proj` gone,
    /// the rename, `archive` appeared; the rename is noted with both names): the first settled batch that holds
    /// either name holds both, so one sync sees every note gone and at its new name, never the deletes or the new
    /// notes alone.
    @Test(arguments: [0, 5, 25, 100, 350])
    func aFolderRenameSettlesWholeHoweverItsEventsAreBatched(gap: Int) {
        let folder = Probe(isRegularFile: false, size: 4096)
        let probe: (String) -> Probe? = { $0 == "archive" ? folder : nil }
        for appearedAfter in [0, 5, 25, 100, 500] {
            var settler = settler()
            var now = 0
            var batches: [[String]] = []
            func run(until end: Int) {
                while now < end {
                    now += 5
                    let taken = settler.takeSettled(at: at(now), probe: probe)
                    if !taken.isEmpty { batches.append(taken) }
                }
            }
            settler.noted("proj", at: at(0), size: nil)
            run(until: gap)
            settler.renamed("proj", to: "archive", at: at(now), fromSize: nil, toSize: 4096)
            run(until: gap + appearedAfter)
            settler.noted("archive", at: at(now), size: 4096)
            run(until: gap + appearedAfter + 1000)
            #expect(batches.first == ["archive", "proj"], "gap \(gap) ms, appeared \(appearedAfter) ms later: \(batches)")
            #expect(batches.dropFirst().allSatisfy { $0 == ["archive"] }, "\(batches)")
            #expect(settler.isEmpty)
        }
    }

    /// `a/b.md` saved, then `mv a a2` before the folder's rename settled: the note is gone from `a/` because it moved
    /// with its folder. It waits for the rename and goes with it, so that one sync sees the move; taken alone, its
    /// sync pushed a delete of a note nobody deleted (soak seed 3204859652964217760).
    @Test func aNoteInAFolderRenamedBeforeItSettledGoesWithTheRename() {
        var settler = settler()
        let folder = Probe(isRegularFile: false, size: 4096)
        let probe: (String) -> Probe? = { $0 == "a2" ? folder : nil }
        settler.noted("a/b.md", at: at(0), size: 10)
        settler.renamed("a", to: "a2", at: at(25), fromSize: nil, toSize: 4096)
        #expect(settler.takeSettled(at: at(30), probe: probe) == [], "the note waits for its folder's rename")
        #expect(settler.nextDeadline == at(55), "woken by the rename's deadline, not at once: \(String(describing: settler.nextDeadline))")
        #expect(settler.takeSettled(at: at(55), probe: probe) == ["a", "a/b.md", "a2"])
        #expect(settler.isEmpty)
        // A note deleted beside a folder renamed still waits for the deletes, as any delete.
        settler.noted("c.md", at: at(100), size: nil)
        settler.renamed("d", to: "e", at: at(100), fromSize: nil, toSize: 4096)
        let both: (String) -> Probe? = { $0 == "e" ? folder : nil }
        #expect(settler.takeSettled(at: at(130), probe: both) == ["d", "e"])
        #expect(settler.takeSettled(at: at(130 + 400), probe: both) == ["c.md"])
    }

    /// `mv a a2`, then `mv a2/b.md todo.md` before the folder's rename settled: the folder's partial sync would see
    /// `a/b.md` gone and nothing at `a2/b.md`, and push a delete. A rename out of (or into) a path taken goes with it,
    /// both its names, so the sync sees the move (soak seed 3204859652964227462).
    @Test func aRenameOutOfAFolderJustRenamedGoesWithTheFolder() {
        var settler = settler()
        let folder = Probe(isRegularFile: false, size: 4096)
        let file = Probe(isRegularFile: true, size: 10)
        let probe: (String) -> Probe? = { $0 == "a2" ? folder : $0 == "todo.md" ? file : nil }
        settler.renamed("a", to: "a2", at: at(0), fromSize: nil, toSize: 4096)
        settler.renamed("a2/b.md", to: "todo.md", at: at(10), fromSize: nil, toSize: 10)
        #expect(settler.takeSettled(at: at(30), probe: probe) == ["a", "a2", "a2/b.md", "todo.md"])
        #expect(settler.isEmpty)
        // Into a folder just renamed: `mv notes.md a2/notes.md` goes with `a2` too.
        settler.renamed("a", to: "a2", at: at(100), fromSize: nil, toSize: 4096)
        settler.renamed("notes.md", to: "a2/notes.md", at: at(110), fromSize: nil, toSize: 10)
        let into: (String) -> Probe? = { $0 == "a2" ? folder : $0 == "a2/notes.md" ? file : nil }
        #expect(settler.takeSettled(at: at(130), probe: into) == ["a", "a2", "a2/notes.md", "notes.md"])
    }

    /// `mv a a2`, then a note of it gone from `a2` with no rename the watch could pair (its new name seen as a new
    /// file): the folder's batch would read the note's absence as a delete before the deletes settled. It waits for
    /// them; the new file goes on its own, so the text is on the server before the delete.
    @Test func aFolderRenamedWaitsForTheDeletesOfNotesGoneFromIt() {
        var settler = settler()
        let folder = Probe(isRegularFile: false, size: 4096)
        let file = Probe(isRegularFile: true, size: 10)
        let probe: (String) -> Probe? = { $0 == "a2" ? folder : $0 == "todo.md" ? file : nil }
        settler.renamed("a", to: "a2", at: at(0), fromSize: nil, toSize: 4096)
        settler.noted("a2/b.md", at: at(10), size: nil)
        settler.noted("todo.md", at: at(10), size: 10)
        #expect(settler.takeSettled(at: at(45), probe: probe) == ["todo.md"])
        #expect(settler.nextDeadline == at(410), "\(String(describing: settler.nextDeadline))")
        #expect(settler.takeSettled(at: at(200), probe: probe) == [])
        #expect(settler.takeSettled(at: at(410), probe: probe) == ["a", "a2", "a2/b.md"])
        #expect(settler.isEmpty)
    }

    /// The watch reports a rename before its new name's own event: noted by the rename, the new name settles with the
    /// old, and the old one does not wait as a vanished note does.
    @Test func aRenameNotesBothNames() {
        var settler = settler()
        let file = Probe(isRegularFile: true, size: 4)
        settler.renamed("a.md", to: "b.md", at: at(0), fromSize: nil, toSize: 4)
        #expect(Set(settler.paths) == ["a.md", "b.md"])
        #expect(settler.nextDeadline == at(30), "no delete delay")
        #expect(settler.takeSettled(at: at(30)) { $0 == "b.md" ? file : nil } == ["a.md", "b.md"])
        settler.renamed("c.md", to: "c.md", at: at(40), fromSize: 4, toSize: 4)
        #expect(settler.isEmpty, "a rename onto itself is nothing")
    }

    /// A chain of renames (a → b → c) goes whole; a vanished note beside it still waits for the deletes.
    @Test func aChainOfRenamesGoesWholeAndDeletesStillWait() {
        var settler = settler()
        let file = Probe(isRegularFile: true, size: 4)
        settler.noted("a.md", at: at(0), size: nil)
        settler.noted("b.md", at: at(0), size: 4)
        settler.linked("a.md", to: "b.md")
        settler.noted("b.md", at: at(5), size: nil)
        settler.noted("c.md", at: at(5), size: 4)
        settler.linked("b.md", to: "c.md")
        settler.noted("gone.md", at: at(5), size: nil)
        let probe: (String) -> Probe? = { $0 == "c.md" ? file : nil }
        #expect(settler.takeSettled(at: at(35), probe: probe) == ["a.md", "b.md", "c.md"])
        #expect(settler.takeSettled(at: at(100), probe: probe).isEmpty, "a vanished note waits")
        #expect(settler.takeSettled(at: at(405), probe: probe) == ["gone.md"])
    }

    /// A rename to an ignored name (vim's `a.md` → `a.md~`) is no rename for the settler: the watch reports only the
    /// removal, which waits for the note to come back.
    @Test func aNoteMovedAsideWaitsAsBefore() {
        var settler = settler()
        settler.noted("a.md", at: at(0), size: nil)
        #expect(settler.takeSettled(at: at(100)) { _ in nil }.isEmpty)
        #expect(settler.takeSettled(at: at(120)) { _ in Probe(isRegularFile: true, size: 2) }.isEmpty)
        #expect(settler.takeSettled(at: at(150)) { _ in Probe(isRegularFile: true, size: 2) } == ["a.md"])
    }

    @Test func deletesThatTrickleInSettleTogetherOnceTheyStop() {
        var settler = settler()
        let file = Probe(isRegularFile: true, size: 1)
        // An `rm -r` that takes 2 s: a note goes every 50 ms, and a note is saved meanwhile.
        var gone: Set<String> = []
        var settled: [String] = []
        for step in 0..<40 {
            let name = "work/n\(step).md"
            gone.insert(name)
            settler.noted(name, at: at(step * 50), size: nil)
            if step == 10 { settler.noted("kept.md", at: at(step * 50), size: 1) }
            settled += settler.takeSettled(at: at(step * 50 + 25)) { gone.contains($0) ? nil : file }
        }
        #expect(settled == ["kept.md"], "a save settles on its own; no delete settles while others still come")
        #expect(settler.takeSettled(at: at(39 * 50 + 399)) { gone.contains($0) ? nil : file }.isEmpty)
        let all = settler.takeSettled(at: at(39 * 50 + 400)) { gone.contains($0) ? nil : file }
        #expect(all == gone.sorted(), "every delete of the burst, in one go")
    }

    @Test func theAgentSleepsUntilDeletesMaySettleAndAChurningPathHoldsThemBackAtMostAMinute() {
        var settler = settler()
        settler.noted("a.md", at: at(0), size: nil)
        settler.noted("b.md", at: at(100), size: nil)
        #expect(settler.nextDeadline == at(500), "not before the last delete has been quiet for the delete delay")
        // A path that vanishes every 300 ms for two minutes: the other delete goes after a minute all the same.
        var settled: [String] = []
        for step in 1...400 {
            settler.noted("lock.md", at: at(100 + step * 300), size: nil)
            settled += settler.takeSettled(at: at(100 + step * 300 + 1)) { _ in nil }.filter { $0 != "lock.md" }
            if !settled.isEmpty {
                #expect(100 + step * 300 + 1 >= 60_000, "released at \(100 + step * 300 + 1) ms")
                break
            }
        }
        #expect(settled == ["a.md", "b.md"])
    }

    @Test func aGrowingFileIsHeldUntilItStopsOrTheLongestWait() {
        var settler = settler()
        settler.noted("big.log", at: at(0), size: 100)
        var size: Int64 = 100
        var now = 0
        var settled: [String] = []
        // It grows between every look, without events (a writer that does not close): held, then let go at 3 s.
        while settled.isEmpty && now < 10_000 {
            now += 30
            size += 100
            settled = settler.takeSettled(at: at(now)) { _ in Probe(isRegularFile: true, size: size) }
        }
        #expect(settled == ["big.log"])
        #expect(now >= 3_000 && now < 3_100, "let go once maxSettle has passed: \(now) ms")

        settler.noted("small.md", at: at(0), size: 1)
        #expect(settler.takeSettled(at: at(30)) { _ in Probe(isRegularFile: true, size: 2) }.isEmpty, "grew since the event")
        #expect(settler.takeSettled(at: at(60)) { _ in Probe(isRegularFile: true, size: 2) } == ["small.md"], "then stopped")
    }

    @Test func flushingTakesEverythingAndCommandsTakeWhatTheyAskFor() {
        var settler = settler()
        settler.noted("a.md", at: at(0), size: 1)
        settler.noted("b.md", at: at(0), size: nil)
        settler.noted("c.md", at: at(0), size: 1)
        settler.remove(["c.md"])
        #expect(Set(settler.paths) == ["a.md", "b.md"])
        #expect(settler.takeSettled(at: at(1), flushing: true) { _ in nil } == ["a.md", "b.md"])
        #expect(settler.isEmpty)
    }

    @Test func theBackoffDoublesUpToItsMaximumAndResetsOnSuccess() {
        var backoff = Backoff(minimum: .milliseconds(500), maximum: .seconds(3))
        #expect(
            [backoff.failed(), backoff.failed(), backoff.failed(), backoff.failed(), backoff.failed()]
                == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(3), .seconds(3)])
        backoff.succeeded()
        #expect(backoff.failed() == .milliseconds(500))
    }

    @Test func watchModesSayWhatTheyAre() throws {
        #expect(ServerWatchMode.polling(every: .milliseconds(500)).description == "polling every 0.5 s")
        #expect(LocalWatchMode.periodicScans(reason: "inotify failed").description == "periodic scans (inotify failed)")
        let data = try JSONEncoder().encode(ServerWatchMode.polling(every: .seconds(1)))
        #expect(try JSONDecoder().decode(ServerWatchMode.self, from: data) == .polling(every: .seconds(1)))
    }
}
