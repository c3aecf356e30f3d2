import Foundation
import GRDB
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
        let bob = try ServerStore(root: alice.layout.root, device: "dev-b", logger: testLogger, vault: TestServer.vault)

        var aliceZone = ZoneState()
        _ = try alice.commit(
            [.save(try name("a.md"), base: 0, text: try alice.putAsset(Data("a".utf8)), modified: 1)],
            into: &aliceZone)
        #expect(Set(aliceZone.takeUnsaved().map(\.name)) == [try name("a.md")])
        // Her own commit was planned by the sync that made it: read again, an autosaved note would skip its pace.
        #expect(aliceZone.unplanned.isEmpty)

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
        #expect(Set(unsaved.map(\.name)) == [try name("b.md"), try name("c.md")])
        #expect(unsaved.first { $0.name == (try? name("b.md")) }?.head?.tag == 2)
        #expect(aliceZone.unplanned == [try name("b.md")])
        #expect(aliceZone.takeUnsaved().isEmpty)
    }

    /// An entry of many new names makes room for them at once: a rename of 600 of 1,000 notes leaves 1,600 heads
    /// (the old names as tombstones) in rows grown to about that, not doubled to 2,048; small entries after it still
    /// grow the rows geometrically, and every head is the one folded in.
    @Test func anEntryOfManyNewNamesMakesRoomForThemAtOnce() throws {
        var zone = ZoneState()
        let text = AssetRef(of: Data("t".utf8))
        var entry = LogEntry(
            seq: 1, commit: "1", device: "a", time: 0,
            changes: (0..<1000).map { .save(RecordName(trusted: "n\($0).md")!, base: 0, text: text, modified: 1) })
        entry.digest = ContentDigest(of: Data("1".utf8))
        zone.apply(entry)
        var moves: [RecordChange] = []
        for index in 0..<600 {
            moves += RecordChange.move(
                from: RecordName(trusted: "n\(index).md")!, fromBase: 1, to: RecordName(trusted: "m\(index).md")!, toBase: 0,
                text: text, modified: 2, time: 2)
        }
        var rename = LogEntry(seq: 2, commit: "2", device: "a", time: 0, changes: moves)
        rename.digest = ContentDigest(of: Data("2".utf8))
        let before = zone.heads.capacity
        zone.apply(rename)
        #expect(zone.heads.count == 1600)
        #expect(zone.heads.capacity >= 1600 && zone.heads.capacity < 2048 && zone.heads.capacity > before)
        #expect(zone.heads[RecordName(trusted: "n5.md")!]?.deleted == true && zone.heads[RecordName(trusted: "m5.md")!]?.tag == 2)
        let grown = zone.heads.capacity
        for seq in Int64(3)..<Int64(3 + 2000) {
            let save = RecordChange.save(RecordName(trusted: "x\(seq).md")!, base: 0, text: text, modified: 1)
            var one = LogEntry(seq: seq, commit: "\(seq)", device: "a", time: 0, changes: [save])
            one.digest = ContentDigest(of: Data("\(seq)".utf8))
            zone.apply(one)
        }
        #expect(zone.heads.count == 3600 && zone.heads.capacity >= 3600 && zone.heads.capacity > grown)
    }

    /// The moves of an entry, read into a ``RecordTable`` to save memory, are those a dictionary gave (the rule every
    /// device must apply alike): random entries over a few names made of both halves of moves (in either order),
    /// halves alone, and plain saves and deletes, so that links share names (the last link that names a name
    /// counts) and some names are invalid.
    @Test func theMovesOfAnEntryAreThoseADictionaryGave() {
        var random = SplitMix(seed: 48)
        let pool = ["a.md", "b.md", "c/d.md", "e.md", "../bad", ""]
        let text = AssetRef(of: Data("t".utf8))
        var linked = 0
        var relinked = 0
        for _ in 0..<1000 {
            var changes: [RecordChange] = []
            for _ in 0..<Int.random(in: 1...10, using: &random) {
                let from = pool.randomElement(using: &random)!
                let to = pool.randomElement(using: &random)!
                let delete = RecordChange(name: from, base: 1, op: .delete, text: nil, modified: 1, movedTo: to)
                let save = RecordChange(name: to, base: 1, op: .save, text: text, modified: 1, movedFrom: from)
                switch Int.random(in: 0..<5, using: &random) {
                case 0: changes += [delete, save]
                case 1: changes += [save, delete]
                case 2: changes.append(save)
                case 3: changes.append(delete)
                default:
                    changes.append(
                        Bool.random(using: &random)
                            ? RecordChange(name: from, base: 1, op: .save, text: text, modified: 1)
                            : RecordChange(name: from, base: 1, op: .delete, text: nil, modified: 1))
                }
            }
            let entry = LogEntry(seq: 1, commit: "1", device: "a", time: 0, changes: changes)
            let moves = ZoneState.moves(in: entry)
            let (expected, overwritten) = Self.dictionaryMoves(entry)
            if !expected.isEmpty { linked += 1 }
            if overwritten { relinked += 1 }
            #expect(moves.count == expected.count, "\(changes)")
            for name in pool.compactMap({ try? RecordName(validating: $0) }) {
                #expect(moves[name] == expected[name], "\(name) in \(changes)")
            }
        }
        // The entries made are the cases that matter: many with moves, and some where a later link takes a name.
        #expect(linked > 400 && relinked > 100, "\(linked) entries with moves, \(relinked) with a name linked twice")
    }

    /// The fold asks each change for the other half of its move (``ZoneState/MoveLinks``): found in the changes sorted
    /// by name when every name is in NFC and none comes twice, else from ``ZoneState/moves(in:)``'s table. Either way,
    /// for every change, the name the table gives its name: random entries over names ASCII and not (one in NFC, one
    /// the same name in Unicode but not in bytes, not in NFC), half of them with each name once.
    @Test func theMoveOfEachChangeIsTheTables() {
        var random = SplitMix(seed: 49)
        let pool = ["a.md", "b.md", "c/d.md", "e.md", "f.md", "g/h.md", "../bad", "", "caf\u{E9}.md", "cafe\u{301}.md"]
        let text = AssetRef(of: Data("t".utf8))
        var byIndex = 0
        var linkedByIndex = 0
        for _ in 0..<2000 {
            var changes: [RecordChange] = []
            for _ in 0..<Int.random(in: 1...8, using: &random) {
                let from = pool.randomElement(using: &random)!
                let to = pool.randomElement(using: &random)!
                let delete = RecordChange(name: from, base: 1, op: .delete, text: nil, modified: 1, movedTo: to)
                let save = RecordChange(name: to, base: 1, op: .save, text: text, modified: 1, movedFrom: from)
                switch Int.random(in: 0..<6, using: &random) {
                case 0: changes += [delete, save]
                case 1: changes += [save, delete]
                case 2: changes.append(save)
                case 3: changes.append(delete)
                case 4:
                    // A save that names a move's target, as only a delete should: never half of a move.
                    changes += [RecordChange(name: from, base: 1, op: .save, text: text, modified: 1, movedTo: to), save]
                default: changes.append(RecordChange(name: from, base: 1, op: .save, text: text, modified: 1))
                }
            }
            if Bool.random(using: &random) {
                var seen = Set<String>()
                changes = changes.filter { seen.insert(Array($0.name.utf8).description).inserted }
            }
            let entry = LogEntry(seq: 1, commit: "1", device: "a", time: 0, changes: changes)
            let table = ZoneState.moves(in: entry)
            let links = ZoneState.MoveLinks(entry)
            let unique = Set(changes.map { Array($0.name.utf8) }).count == changes.count
            let nfc = changes.allSatisfy { change in
                [change.name, change.movedFrom ?? "", change.movedTo ?? ""].allSatisfy(RecordName.isNFC)
            }
            let qualifies = unique && nfc && changes.contains(where: { $0.movedFrom != nil })
            #expect(links.isByIndex == qualifies, "\(changes)")
            if links.isByIndex {
                byIndex += 1
                if !table.isEmpty { linkedByIndex += 1 }
            }
            for (index, change) in changes.enumerated() {
                guard let name = try? RecordName(validating: change.name) else { continue }
                #expect(links.moved(at: index, name: name) == table[name], "\(index) in \(changes)")
            }
        }
        #expect(byIndex > 250 && linkedByIndex > 100, "\(byIndex) entries found by index, \(linkedByIndex) with moves")
    }

    /// What `ZoneState.moves(in:)` was, with a dictionary: the reference its table must agree with; and whether a
    /// later link replaced an earlier one's name.
    private static func dictionaryMoves(_ entry: LogEntry) -> ([RecordName: RecordName], overwritten: Bool) {
        var deletes: [String: String] = [:]
        for change in entry.changes where change.op == .delete {
            if let to = change.movedTo { deletes[change.name] = to }
        }
        var moves: [RecordName: RecordName] = [:]
        var overwritten = false
        for change in entry.changes where change.op == .save {
            guard let from = change.movedFrom, from != change.name, deletes[from] == change.name,
                let fromName = try? RecordName(validating: from), let toName = try? RecordName(validating: change.name)
            else { continue }
            if moves.updateValue(fromName, forKey: toName) != nil { overwritten = true }
            if moves.updateValue(toName, forKey: fromName) != nil { overwritten = true }
        }
        return (moves, overwritten)
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

    /// What a device keeps between processes of the chain and of a head's line: the digests of the entries before
    /// the token (what its next commit names as `earlier`) and a head's `unverifiedSince` (what keeps an older base
    /// from being taken as its ancestor). Lost, a restarted device would commit without the links fsck checks, or
    /// pull a head over a version it may not hold.
    @Test func theChainAndAHeadsUncheckedLinkSurviveARestart() throws {
        let state = try LocalState()
        var zone = ZoneState()
        let note = try name("a.md")
        let one = AssetRef(of: Data("one".utf8))
        var entries = [
            LogEntry(seq: 1, commit: "1", device: "a", time: 0, changes: [.save(note, base: 0, text: one, modified: 1)]),
            LogEntry(seq: 2, commit: "2", device: "v", time: 0, changes: [], void: VoidSeal(reason: "lost", lost: nil)),
            LogEntry(seq: 3, commit: "3", device: "c", time: 0, changes: [.save(note, base: 2, text: one, modified: 3)])
        ]
        for index in entries.indices {
            entries[index].digest = ContentDigest(of: Data("entry \(index)".utf8))
            zone.apply(entries[index])
        }
        #expect(zone.heads[note]?.unverifiedSince == 3 && zone.earlier == [entries[1].digest, entries[0].digest])
        let changed = zone.takeUnsaved()
        try state.update { try $0.setZone(token: zone.token, chain: zone.chain, earlier: zone.earlier, changed: changed) }

        let reloaded = try state.zoneState()
        #expect(reloaded.token == 3 && reloaded.chain == zone.chain && reloaded.earlier == zone.earlier)
        #expect(reloaded.heads[note]?.unverifiedSince == 3)
    }
    /// Loaded after the heads, a base whose note has a head holds the head's name string, not a copy; a base without a
    /// head keeps its own. The records are the same as loaded alone.
    @Test func basesShareTheirNamesWithTheHeads() throws {
        let state = try LocalState()
        var zone = ZoneState()
        // Longer than 15 bytes: a name Swift keeps on the heap, where sharing saves memory.
        let synced = try (0..<20).map { try name("folder-with-a-long-name/note number \($0).md") }
        let local = try name("folder-with-a-long-name/only here, never pushed.md")
        let text = AssetRef(of: Data("text".utf8))
        zone.apply(
            LogEntry(
                seq: 1, commit: "1", device: "a", time: 0,
                changes: synced.map { .save($0, base: 0, text: text, modified: 1) }))
        let changed = zone.takeUnsaved()
        try state.update { batch in
            try batch.setZone(token: zone.token, chain: zone.chain, earlier: zone.earlier, changed: changed)
            for note in synced + [local] {
                try batch.setBase(note, BaseRecord(tag: 1, digest: text.sha256, size: text.size, modified: 1, fingerprint: nil))
            }
        }
        let heads = try state.zoneState().heads
        let shared = try state.bases(sharingNamesWith: heads)
        #expect(shared == (try state.bases()))
        func storage(_ name: RecordName) -> UnsafeRawPointer? {
            var string = name.string
            return string.withUTF8 { UnsafeRawPointer($0.baseAddress) }
        }
        for note in synced {
            let headKey = try #require(heads.storedName(note))
            let baseKey = try #require(shared.storedName(note))
            #expect(storage(baseKey) == storage(headKey), "\(note) is held once")
        }
        let alone = try state.bases()
        let aloneKey = try #require(alone.storedName(synced[0]))
        #expect(storage(aloneKey) != storage(heads.storedName(synced[0])!), "loaded alone, a copy")
        #expect(shared[local] != nil)
    }

    /// A move's heads name each other: the other half's name shares the head's own string, both when the entry is
    /// folded in (the save's name moved from is a head already) and when the heads are loaded again (each `moved`
    /// read from its row), so a renamed folder's names are not held twice by every later sync.
    @Test func aMovesHeadsShareTheNamesTheyGiveEachOther() throws {
        func storage(_ name: RecordName?) -> UnsafeRawPointer? {
            guard var string = name?.string else { return nil }
            return string.withUTF8 { UnsafeRawPointer($0.baseAddress) }
        }
        // Longer than 15 bytes, and made anew from their bytes each time: no two share a string by chance.
        func fresh(_ string: String) -> RecordName { RecordName(trusted: String(decoding: Array(string.utf8), as: UTF8.self))! }
        let old = (0..<30).map { "a folder with a long name/note number \($0).md" }
        let new = (0..<30).map { "a renamed folder, long too/note number \($0).md" }
        let text = AssetRef(of: Data("t".utf8))
        var zone = ZoneState()
        var first = LogEntry(
            seq: 1, commit: "1", device: "a", time: 0, changes: old.map { .save(fresh($0), base: 0, text: text, modified: 1) })
        first.digest = ContentDigest(of: Data("1".utf8))
        zone.apply(first)
        var moves: [RecordChange] = []
        // Each name a string of its own, as an entry read from the server has them, and half of the moves with the
        // save before the delete: the fold shares the names in either order.
        for (index, (from, to)) in zip(old, new).enumerated() {
            var move = RecordChange.move(from: fresh(from), fromBase: 1, to: fresh(to), toBase: 0, text: text, modified: 2, time: 2)
            move[0].name = fresh(from).string
            move[0].movedTo = fresh(to).string
            move[1].name = fresh(to).string
            move[1].movedFrom = fresh(from).string
            moves += index % 2 == 0 ? move : move.reversed()
        }
        var rename = LogEntry(seq: 2, commit: "2", device: "b", time: 0, changes: moves)
        rename.digest = ContentDigest(of: Data("2".utf8))
        zone.apply(rename)
        for (from, to) in zip(old, new).map({ (fresh($0), fresh($1)) }) {
            let tombstone = try #require(zone.heads[from])
            let save = try #require(zone.heads[to])
            #expect(tombstone.movedTo == to && save.movedFrom == from)
            #expect(storage(save.movedFrom) == storage(zone.heads.storedName(from)), "\(from) is held once")
            #expect(storage(tombstone.movedTo) == storage(zone.heads.storedName(to)), "\(to) is held once")
        }

        let state = try LocalState()
        let changed = zone.takeUnsaved()
        try state.update { batch in
            try batch.setZone(token: zone.token, chain: zone.chain, earlier: zone.earlier, changed: changed)
        }
        let loaded = try state.zoneState()
        #expect(loaded.heads == zone.heads)
        for (from, to) in zip(old, new).map({ (fresh($0), fresh($1)) }) {
            let tombstone = try #require(loaded.heads[from])
            let save = try #require(loaded.heads[to])
            #expect(tombstone.movedTo == to && save.movedFrom == from)
            #expect(storage(tombstone.movedTo) == storage(loaded.heads.storedName(to)), "\(to) is held once")
            #expect(storage(save.movedFrom) == storage(loaded.heads.storedName(from)), "\(from) is held once")
        }
        // Heads decoded from a snapshot (each name a string of its own) share them as the snapshot gives its state,
        // and a device that jumps to that state keeps them shared.
        let decoded = try JSONDecoder().decode(Snapshot.self, from: JSONEncoder().encode(Snapshot(state: zone, device: "a")))
        var jumped = ZoneState()
        jumped.jump(to: decoded.state)
        #expect(jumped.heads == zone.heads)
        for (from, to) in zip(old, new).map({ (fresh($0), fresh($1)) }) {
            let tombstone = try #require(jumped.heads[from])
            let save = try #require(jumped.heads[to])
            #expect(storage(tombstone.movedTo) == storage(jumped.heads.storedName(to)), "\(to) is held once")
            #expect(storage(save.movedFrom) == storage(jumped.heads.storedName(from)), "\(from) is held once")
        }
        // A name moved to that has no head of its own (a link whose other half is not known here) keeps its own.
        var lone = RecordTable<RecordHead>()
        let away = fresh("a name that no head in this table has.md")
        lone[fresh("a tombstone with a long name here.md")] = RecordHead(
            tag: 3, deleted: true, text: nil, modified: 3, version: 1, device: "a", moved: away)
        lone.shareMovedNames()
        #expect(lone.values[0].movedTo == away && storage(lone.values[0].movedTo) == storage(away))
        // Its other half, added as a string of its own, is shared by both, as is the tombstone's name.
        let there = fresh("a tombstone with a long name here.md")
        lone[fresh("a name that no head in this table has.md")] = RecordHead(
            tag: 1, deleted: false, text: text, modified: 3, version: 1, device: "a", moved: there)
        #expect(storage(lone.values[0].movedTo) != storage(lone.storedName(away)))
        lone.shareMovedNames()
        #expect(lone.values[0].movedTo == away && lone.values[1].movedFrom == there)
        #expect(storage(lone.values[0].movedTo) == storage(lone.storedName(away)))
        #expect(storage(lone.values[1].movedFrom) == storage(lone.storedName(there)))
    }

    /// Schema v5 stores the bases and heads without rowids, in name order. A database of an earlier build, its rows
    /// in no order, reads the same before it is migrated (a dry run opens it read-only) and after; the migration keeps
    /// every column (no fingerprint, a move's other name, an unverified line), and the bases share the heads' names.
    @Test func theBasesAndHeadsOfAnEarlierBuildReadTheSameMigrated() throws {
        let directory = try TempDirectory("state-v4")
        let path = directory.sub("state.sqlite")
        let names = try (0..<300).map { try name("folder-with-a-long-name/note \(String($0, radix: 7)).md") }
        let text = AssetRef(of: Data("text".utf8))
        do {
            let queue = try DatabaseQueue(path: path)
            try LocalState.migrator.migrate(queue, upTo: "v4")
            try queue.write { db in
                // Heads and bases written in two other orders, as syncs did (a set's order, then replaced rows).
                for (index, note) in names.enumerated().reversed() {
                    try db.execute(
                        sql: "INSERT INTO head VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        arguments: [
                            note.string, index + 1, index % 5 == 0, index % 5 == 0 ? nil : text.sha256.hex,
                            index % 5 == 0 ? nil : text.size, index, 1, index % 2 == 0 ? "a" : "b", index % 7,
                            index % 11 == 0 ? names[0].string : nil
                        ])
                }
                for (index, note) in names.enumerated().shuffled() where index % 5 != 0 {
                    let fingerprint: [Int?] = index % 3 == 0 ? [nil, nil, nil, nil] : [4, index, index + 1, index + 2]
                    let row: [(any DatabaseValueConvertible)?] = [note.string, index + 1, text.sha256.hex, text.size, index] + fingerprint
                    try db.execute(sql: "INSERT INTO base VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", arguments: StatementArguments(row))
                }
                try db.execute(
                    sql: "INSERT INTO base VALUES ('local only.md', 1, ?, 4, 1, NULL, NULL, NULL, NULL)", arguments: [text.sha256.hex])
            }
            try queue.close()
        }
        let readOnly = try LocalState(path: path, readOnly: true)
        let earlierHeads = try readOnly.zoneState().heads
        let earlierBases = try readOnly.bases(sharingNamesWith: earlierHeads)
        #expect(earlierHeads.count == 300 && earlierBases.count == 241)
        #expect(earlierBases == (try readOnly.bases()))
        try readOnly.close()

        let migrated = try LocalState(path: path)
        let heads = try migrated.zoneState().heads
        let bases = try migrated.bases(sharingNamesWith: heads)
        #expect(heads == earlierHeads && bases == earlierBases)
        #expect(heads[names[11]]?.moved == names[0] && heads[names[7]]?.unverifiedSince == 0 && heads[names[8]]?.unverifiedSince == 1)
        #expect(
            bases[names[3]]?.fingerprint == nil && bases[names[4]]?.fingerprint == StatFingerprint(size: 4, mtime: 4, ctime: 5, inode: 6))
        func storage(_ name: RecordName) -> UnsafeRawPointer? {
            var string = name.string
            return string.withUTF8 { UnsafeRawPointer($0.baseAddress) }
        }
        for note in names.indices.filter({ $0 % 5 != 0 }).map({ names[$0] }) {
            #expect(storage(try #require(bases.storedName(note))) == storage(try #require(heads.storedName(note))))
        }
        // Stored in name order now: the order a sync reads them in.
        #expect(Array(heads.keys) == names.sorted { $0.string.utf8.lexicographicallyPrecedes($1.string.utf8) })
        let schema = try migrated.read { db in
            try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE name IN ('base', 'head')")
        }
        #expect(schema.count == 2 && schema.allSatisfy { $0.hasSuffix("WITHOUT ROWID") })
        // Written again, a row replaces its earlier self.
        try migrated.update { batch in
            try batch.setBase(names[1], BaseRecord(tag: 9, digest: text.sha256, size: text.size, modified: 9, fingerprint: nil))
        }
        #expect(try migrated.bases()[names[1]]?.tag == 9 && (try migrated.bases()).count == 241)
    }

    /// Two head rows of one name (decomposed and precomposed: names are stored in NFC, so only damaged data has
    /// both) load as one head, the later row's, even when the earlier row's name moved to was waiting to be looked
    /// up after the load.
    @Test func aDamagedStateWithOneNameTwiceLoadsTheLaterRow() throws {
        let directory = try TempDirectory("state-twice")
        let path = directory.sub("state.sqlite")
        try LocalState(path: path).close()
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            // In byte order: "a.md", "e\u{301}.md" (0x65), "z.md", "\u{E9}.md" (0xC3), "\u{F6}.md" (0xC3 0xB6). The
            // winning row's name moved to waits as well, its bytes after the cancelled one's.
            let rows: [(String, Int, String?)] = [
                ("a.md", 1, nil), ("e\u{301}.md", 2, "z.md"), ("z.md", 3, "e\u{301}.md"), ("\u{E9}.md", 4, "\u{F6}.md"),
                ("\u{F6}.md", 5, "\u{E9}.md")
            ]
            for (name, tag, moved) in rows {
                try db.execute(
                    sql: "INSERT INTO head VALUES (?, ?, 0, NULL, NULL, 1, 1, 'a', 0, ?)", arguments: [name, tag, moved])
            }
        }
        try queue.close()
        let heads = try LocalState(path: path).zoneState().heads
        let note = try RecordName(validating: "\u{E9}.md")
        let other = try RecordName(validating: "\u{F6}.md")
        #expect(heads.count == 4)
        #expect(heads[note]?.tag == 4 && heads[note]?.moved == other)
        #expect(heads[try RecordName(validating: "z.md")]?.moved == note && heads[other]?.moved == note)
    }
}

/// The pending-writes record: one row per write in the state database, and the JSON value in `meta` that earlier
/// builds kept (still read, before the rows, whatever a name holds).
@Suite struct PendingWritesRecordTests {
    private static func writes() throws -> [PendingWrite] {
        // Every name a record can have (control characters cannot be in one: RecordNameTests).
        let names = ["a.md", "dir/say \"hi\".md", "back\\slash.md", "é/日本語 🗒.md", "{\"name\":1}.md", "\\u0041.md"]
        var writes: [PendingWrite] = []
        for (index, string) in names.enumerated() {
            let head = RecordHead(
                tag: Int64(index + 1), deleted: false, text: AssetRef(of: Data(string.utf8)),
                modified: Int64(index) * 1_000_000_007, version: 1, device: "d")
            writes.append(try #require(PendingWrite(RecordName(validating: string), head)))
        }
        return writes
    }

    @Test func theRowsReadBackAfterAnEarlierBuildsRecord() throws {
        let writes = try Self.writes()
        let state = try LocalState()
        #expect(try state.pendingWrites() == [])
        let earlier = String(decoding: try JSONEncoder().encode(Array(writes.prefix(2))), as: UTF8.self)
        try state.update { batch in
            try batch.setMeta(.pendingWrites, earlier)
            for write in writes.dropFirst(2) { try batch.addPendingWrite(write) }
            // The same name twice (a killed sync's write, then the next one's): both are kept, in order.
            try batch.addPendingWrite(writes[0])
        }
        #expect(try state.pendingWrites() == writes + [writes[0]])
        try state.update { try $0.clearPendingWrites() }
        #expect(try state.pendingWrites() == [])
        #expect(try state.meta(.pendingWrites) == nil)
    }

    /// A dry run opens the database read-only and never migrates it: on a database an earlier build wrote (no
    /// `pendingWrite` table yet) the record is its `meta` value alone, and the dry run goes on.
    @Test func aDatabaseOfAnEarlierBuildIsReadWithoutItsTable() throws {
        let writes = try Self.writes()
        let directory = try TempDirectory("pending-v3")
        let path = directory.sub("state.sqlite")
        do {
            let queue = try DatabaseQueue(path: path)
            try LocalState.migrator.migrate(queue, upTo: "v3")
            let earlier = String(decoding: try JSONEncoder().encode(writes), as: UTF8.self)
            try queue.write { db in
                try db.execute(sql: "INSERT INTO meta(key, value) VALUES (?, ?)", arguments: [MetaKey.pendingWrites.rawValue, earlier])
            }
        }
        let readOnly = try LocalState(path: path, readOnly: true)
        #expect(try readOnly.pendingWrites() == writes)
        try readOnly.close()
        // A sync's read-write open migrates it; the earlier value is still read until a sync clears it.
        let migrated = try LocalState(path: path)
        try migrated.update { try $0.addPendingWrite(writes[0]) }
        #expect(try migrated.pendingWrites() == writes + [writes[0]])
    }

    @Test func anUnreadableEarlierRecordOnlyLosesItsOwnWrites() throws {
        let writes = try Self.writes()
        let state = try LocalState()
        try state.update { batch in
            try batch.setMeta(.pendingWrites, "[{\"name\":")
            try batch.addPendingWrite(writes[1])
        }
        #expect(try state.pendingWrites() == [writes[1]])
        #expect(PendingWrite.decodeList("") == [])
    }
}

/// A sync killed after it wrote pulled notes and before it recorded their bases: the versions it wrote are in the
/// state database's rows, and the next sync takes each as the base of its note, then clears them.
@Suite struct PendingWritesRecoveryTests {
    @Test func aSyncKilledAfterWritingNotesLeavesRowsTheNextSyncAdopts() throws {
        let harness = try SyncHarness(deviceCount: 2)
        for index in 0..<3 { try harness.write(0, "n\(index).md", Data("note \(index)\n".utf8)) }
        _ = try harness.sync(0)
        let heads = try harness.serverState().heads
        // The last note written, the process dies (an error of the simulation's kind: the engine does not catch it
        // as a note it could not write).
        let writes = Mutex(0)
        let hooks = FaultPoint.Hooks(hit: { point in
            guard point.description == "apply.renamedIn" else { return }
            let count = writes.withLock { count in
                count += 1
                return count
            }
            guard count == 3 else { return }
            throw SimulatedCrash(point: "apply.renamedIn")
        })
        #expect(throws: SimulatedCrash.self) { _ = try FaultPoint.with(hooks) { try harness.sync(1) } }
        let state = harness.devices[1].state
        let recorded = try state.pendingWrites()
        #expect(Set(recorded.map(\.name.string)) == ["n0.md", "n1.md", "n2.md"])
        for write in recorded {
            let head = try #require(heads[write.name])
            #expect(write.tag == head.tag && write.text == head.text && write.modified == head.modified)
        }
        #expect(try state.bases().isEmpty, "killed before any base was recorded")

        _ = try harness.sync(1)
        #expect(try state.pendingWrites() == [])
        let bases = try state.bases()
        for index in 0..<3 {
            let name = try RecordName(validating: "n\(index).md")
            #expect(bases[name]?.tag == heads[name]?.tag)
            #expect(try harness.read(1, "n\(index).md") == Data("note \(index)\n".utf8))
        }
    }
}

/// What a damaged entry's bytes still say, for the warning's fix (``DamagedEntry``): the writer's id and the note
/// names, whole ones only, escaped, at most five and a count of the rest.
@Suite struct DamagedEntryHintTests {
    @Test func theBytesNameTheWriterAndTheNotes() {
        let names = ["a.md", #"sub/q\"uote.md"#, #"bell\u0007.md"#, "d.md", "e.md", "f.md", "g.md"]
        let json =
            #"{"changes":["# + names.map { #"{"base":0,"name":""# + $0 + #"","op":"save"}"# }.joined(separator: ",")
            + #"],"commit":"c","device":"2895cb3bfdb224de","seq":3}"#
        let whole = Data(json.utf8)
        #expect(DamagedEntry.writerID(in: whole) == "2895cb3bfdb224de")
        #expect(
            DamagedEntry.noteNames(in: whole) == ["a.md", #"sub/q"uote.md"#, DisplayName.escape("bell\u{7}.md"), "d.md", "e.md", "2 more"])
        // Torn inside the second name and before the device: only what is whole.
        let cut = json.utf8.distance(from: json.utf8.startIndex, to: json.range(of: "q\\")!.lowerBound.samePosition(in: json.utf8)!)
        let torn = Data(json.utf8.prefix(cut))
        #expect(DamagedEntry.writerID(in: torn) == nil)
        #expect(DamagedEntry.noteNames(in: torn) == ["a.md"])
        // A device field torn in its middle names nobody.
        #expect(DamagedEntry.writerID(in: Data(#"{"device":"2895cb"#.utf8)) == nil)
        #expect(DamagedEntry.writerID(in: Data(#"{"device":"not-hex"}"#.utf8)) == nil)
    }
}
