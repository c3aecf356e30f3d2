import Foundation
import PropertyBased
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

/// ``RecordTable`` behaves as the `Dictionary` it replaces: every sequence of sets, updates and removals leaves the
/// same names with the same values, whatever collides in its index.
@Suite struct RecordTableTests {
    private static func name(_ index: Int) -> RecordName { RecordName(trusted: "notes/\(index).md")! }

    /// Checks every name of the pool, the count, the iteration, the keys and the values against the model.
    private static func agree(_ table: RecordTable<Int>, _ model: [RecordName: Int], pool: Int) -> Bool {
        guard table.count == model.count, table.isEmpty == model.isEmpty else { return false }
        for index in 0..<pool {
            let name = name(index)
            guard table[name] == model[name], table.keys.contains(name) == (model[name] != nil) else { return false }
        }
        var seen: [RecordName: Int] = [:]
        for (name, value) in table { seen[name] = value }
        return seen == model && Set(table.keys) == Set(model.keys) && table.values.sorted() == model.values.sorted()
    }

    /// Random operations on a small pool (names come back after their removal, buckets collide in an index of 8 to
    /// 64 buckets) and on a larger one (the index grows).
    @Test func randomOperationsMatchADictionary() async {
        let operation = zip(Gen.int(in: 0...3), Gen.int(in: 0...199), Gen.int(in: 0...1000))
        let input = zip(operation.array(of: 0...400), Gen.int(in: 0...1))
        await propertyCheck(count: 200, input: input) { operations, large in
            let pool = large == 1 ? 200 : 12
            var table = RecordTable<Int>()
            var model: [RecordName: Int] = [:]
            for (kind, index, value) in operations {
                let name = Self.name(index % pool)
                switch kind {
                case 0, 1:
                    #expect(table.updateValue(value, forKey: name) == model.updateValue(value, forKey: name))
                case 2:
                    #expect(table.removeValue(forKey: name) == model.removeValue(forKey: name))
                default:
                    table[name] = nil
                    model[name] = nil
                }
            }
            #expect(Self.agree(table, model, pool: pool))
        }
    }

    /// Ten thousand names in, then out in another order, with checks along the way.
    @Test func growsAndEmpties() {
        var table = RecordTable<Int>()
        var model: [RecordName: Int] = [:]
        for index in 0..<10_000 {
            table[Self.name(index)] = index
            model[Self.name(index)] = index
        }
        #expect(Self.agree(table, model, pool: 10_000))
        var generator = SplitMix(seed: 7)
        for index in (0..<10_000).shuffled(using: &generator) {
            #expect(table.removeValue(forKey: Self.name(index)) == index)
            model[Self.name(index)] = nil
            if index % 1000 == 0 { #expect(Self.agree(table, model, pool: 10_000)) }
        }
        #expect(table.isEmpty)
        #expect(Self.agree(table, model, pool: 10_000))
    }

    /// A copy is a value: changing one leaves the other as it was.
    @Test func copiesAreIndependent() {
        var table: RecordTable<Int> = [Self.name(1): 1, Self.name(2): 2]
        let copy = table
        table[Self.name(1)] = 10
        table[Self.name(3)] = 3
        table[Self.name(2)] = nil
        #expect(copy[Self.name(1)] == 1 && copy[Self.name(2)] == 2 && copy[Self.name(3)] == nil && copy.count == 2)
        #expect(table[Self.name(1)] == 10 && table[Self.name(2)] == nil && table[Self.name(3)] == 3 && table.count == 2)
    }

    /// Equality and the hash do not depend on the order the records went in.
    @Test func equalityAndHashIgnoreTheOrder() {
        var a = RecordTable<Int>()
        var b = RecordTable<Int>()
        for index in 0..<50 { a[Self.name(index)] = index }
        for index in (0..<50).reversed() { b[Self.name(index)] = index }
        b[Self.name(50)] = 50
        b[Self.name(50)] = nil
        #expect(a == b && a.hashValue == b.hashValue)
        b[Self.name(3)] = 4
        #expect(a != b)
    }

    /// The rows the agent holds for every note all its life: a field added or reordered carelessly costs its
    /// size, plus padding, 100,000 times over (docs/agent.md, "Memory").
    @Test func rowsStayCompact() {
        #expect(MemoryLayout<BaseRecord>.stride == 88)
        #expect(MemoryLayout<RecordHead>.stride == 112)
        // And what a first sync holds for each note it uploads.
        #expect(MemoryLayout<SyncEngine.Push>.stride == 56)
    }

    /// Asked with a hint (``RecordTable/storedName(_:hash:next:)``), in the table's order, in another order, or for
    /// names it lacks, the table answers as a lookup does, with its own string; the hint moves past each row found.
    @Test func aLookupFromTheNextRowAnswersAsTheIndexDoes() {
        var table = RecordTable<Int>()
        for index in 0..<200 where index % 3 != 0 { table[Self.name(index)] = index }
        table[Self.name(5)] = nil  // the last row moves into its place: the rows are no longer in order
        var random = SystemRandomNumberGenerator()
        let orders: [[Int]] = [
            Array(0..<220), Array((0..<220).reversed()), (0..<220).shuffled(using: &random),
            (0..<400).map { _ in Int.random(in: 0..<220, using: &random) }
        ]
        for order in orders {
            var next = 0
            var hits = 0
            for index in order {
                let asked = Self.name(index)
                let found = table.storedName(asked, hash: NameHash(asked), next: &next)
                #expect(found == table.storedName(asked), "\(asked)")
                if let found {
                    #expect(table.rowIndex(of: found).map { $0 + 1 } == next, "the hint is the row after \(asked)")
                    hits += 1
                }
            }
            #expect(hits == order.filter { $0 < 200 && $0 % 3 != 0 && $0 != 5 }.count)
        }
        // Asked in the order of its rows, each name is the row at the hint.
        var next = 0
        for (row, name) in table.keys.enumerated() {
            _ = table.storedName(name, hash: NameHash(name), next: &next)
            #expect(next == row + 1)
        }
    }

    /// A base stores "no fingerprint" as a size no file has. It reads back as `nil`, and
    /// ``StatFingerprint/unknown`` as itself: the move planner tells them apart (an unknown inode is not the file's).
    /// Neither matches a file, so either makes the next scan hash the note.
    @Test func baseWithoutFingerprintMatchesNoFile() {
        let file = StatFingerprint(size: 3, mtime: 4, ctime: 5, inode: 6)
        var base = BaseRecord(tag: 1, digest: .empty, size: 3, modified: 4, fingerprint: nil)
        #expect(base.fingerprint == nil && !base.matches(file) && !base.matches(.unknown))
        base.fingerprint = .unknown
        #expect(base.fingerprint == .unknown && !base.matches(file) && !base.matches(.unknown))
        base.fingerprint = file
        #expect(base.fingerprint == file && base.matches(file))
        base.fingerprint = nil
        #expect(base.fingerprint == nil && !base.matches(file))
    }

    /// Stored and loaded again, a base's fingerprint is what it was: none, unknown, or a file's.
    @Test func baseFingerprintsSurviveTheStateDatabase() throws {
        let state = try LocalState()
        let kinds: [StatFingerprint?] = [nil, .unknown, StatFingerprint(size: 3, mtime: 4, ctime: 5, inode: 6)]
        let names = try (0..<kinds.count).map { try RecordName(validating: "note\($0).md") }
        try state.update { batch in
            for (name, fingerprint) in zip(names, kinds) {
                try batch.setBase(name, BaseRecord(tag: 1, digest: .empty, size: 3, modified: 4, fingerprint: fingerprint))
            }
        }
        let loaded = try state.bases()
        #expect(loaded.count == kinds.count && names.map { loaded[$0]?.fingerprint } == kinds)
    }
}
