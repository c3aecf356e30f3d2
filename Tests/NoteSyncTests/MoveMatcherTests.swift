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

/// The tie rules of rename detection (``MoveMatcher``): deterministic, one partner each, text first.
@Suite struct MoveMatcherTests {
    private static func name(_ string: String) -> RecordName { RecordName(trusted: string)! }
    private static func digest(_ text: String) -> ContentDigest { ContentDigest(of: Data(text.utf8)) }
    private static func source(_ name: String, _ text: String, inode: UInt64? = nil) -> MoveMatcher.Source {
        MoveMatcher.Source(name: Self.name(name), digest: digest(text), size: Int64(text.utf8.count), inode: inode)
    }
    private static func target(_ name: String, _ text: String, inode: UInt64 = 0) -> MoveMatcher.Target {
        MoveMatcher.Target(name: Self.name(name), digest: digest(text), size: Int64(text.utf8.count), inode: inode)
    }
    private static func pairs(_ pairs: [MoveMatcher.Pair]) -> [String] { pairs.map { "\($0.from.string)>\($0.to.string)" } }

    @Test func theSameInodeGoesFirstThenTheLongestCommonPath() {
        let sources = [Self.source("a/x/n.md", "t", inode: 7), Self.source("a/y/n.md", "t", inode: 8), Self.source("q.md", "t")]
        let targets = [Self.target("b/y/n.md", "t", inode: 7), Self.target("b/x/n.md", "t"), Self.target("r.md", "t")]
        #expect(
            Self.pairs(MoveMatcher.match(sources: sources, targets: targets)) == ["a/x/n.md>b/y/n.md", "a/y/n.md>b/x/n.md", "q.md>r.md"])
    }

    @Test func textDecidesNotTheInodeAlone() {
        // ext4 gives a deleted file's inode to the next file made: a new note with another text is not the old one.
        let pairs = MoveMatcher.match(
            sources: [Self.source("old.md", "old", inode: 5)], targets: [Self.target("new.md", "other", inode: 5)])
        #expect(pairs.isEmpty)
    }

    @Test func aSimilarTextIsARenameWithAnEdit() {
        let old = (0..<10).map { "line \($0)\n" }.joined()
        let new = old + "added\n"
        let pairs = MoveMatcher.match(
            sources: [Self.source("x.md", old)], targets: [Self.target("y.md", new), Self.target("z.md", "unrelated\n")]
        ) { _, target in MoveMatcher.similarity(Data(old.utf8), Data((target.name.string == "y.md" ? new : "unrelated\n").utf8)) }
        #expect(Self.pairs(pairs) == ["x.md>y.md"])
    }

    @Test func similarityCountsSharedLines() {
        #expect(MoveMatcher.similarity(Data("a\nb\n".utf8), Data("a\nb\n".utf8)) == 1)
        #expect(MoveMatcher.similarity(Data("a\nb\n".utf8), Data("c\nd\n".utf8)) == 0)
        #expect(MoveMatcher.similarity(Data("a\nb\nc\nd\n".utf8), Data("a\nb\nc\nx\n".utf8)) == 0.75)
        #expect(MoveMatcher.similarity(Data(), Data()) == 1)
    }

    @Test func thousandsOfEmptyNotesPairByFileName() {
        let sources = (0..<100).map { Self.source("old/\($0).md", "") }
        let targets = (0..<100).map { Self.target("new/\($0).md", "") }
        let pairs = MoveMatcher.match(sources: sources, targets: targets)
        #expect(pairs.count == 100)
        #expect(pairs.allSatisfy { $0.from.string.dropFirst(4) == $0.to.string.dropFirst(4) })
    }

    /// The planner puts its steps in name order in place (``SyncEngine/sortByName(_:)``, following the cycles of the
    /// permutation): the same order, and the same steps, as sorting them, for any order they come in.
    @Test func stepsSortedInPlaceAreTheStepsSorted() async {
        await propertyCheck(count: 200, input: Gen.int(in: 0...10_000).array(of: 0...60)) { keys in
            var seen = Set<Int>()
            var steps = keys.filter { seen.insert($0).inserted }.map { key in
                Step(
                    name: Self.name("n\(key).md"), local: nil, base: nil, decision: key % 2 == 0 ? .nothing : .adopt(nil),
                    move: key % 3 == 0 ? MovePlan(source: Self.name("o\(key).md"), serverDevice: nil) : nil)
            }
            let expected = steps.sorted { $0.name < $1.name }
            Planner.sortByName(&steps)
            #expect(steps.map(\.name) == expected.map(\.name))
            #expect(steps.map(\.decision) == expected.map(\.decision))
            #expect(steps.map { $0.move?.source } == expected.map { $0.move?.source })
        }
    }

    /// The planner's names are sorted once, each kept once (``SyncEngine/sortUnique(_:)``): what a set of them, sorted,
    /// gives.
    @Test func namesSortedUniqueAreTheSetSorted() async {
        await propertyCheck(count: 200, input: Gen.int(in: 0...30).array(of: 0...60)) { keys in
            var names = keys.map { Self.name("n\($0).md") }
            let expected = Set(names).sorted()
            Planner.sortUnique(&names)
            #expect(names == expected)
        }
    }

    /// The names the moves cover (``SyncEngine/CoveredNames``): a flag beside each of the plan's names, a set for the
    /// rest; whatever is put in, it answers as a set of the same names, by name and by place, and counts them once.
    @Test func coveredNamesAnswerAsASet() async {
        let input = zip(Gen.int(in: 0...40).array(of: 0...30), Gen.int(in: 0...60).array(of: 0...40))
        await propertyCheck(count: 200, input: input) { planned, inserted in
            var names = planned.map { Self.name("n\($0).md") }
            Planner.sortUnique(&names)
            var covered = Planner.CoveredNames(names: names)
            var expected = Set<RecordName>()
            for key in inserted {
                let name = Self.name("n\(key).md")
                if key % 5 == 0 { covered.formUnion([name, name]) } else { covered.insert(name) }
                expected.insert(name)
            }
            #expect(covered.count == expected.count)
            #expect(covered.isEmpty == expected.isEmpty)
            for key in 0...60 {
                #expect(covered.contains(Self.name("n\(key).md")) == expected.contains(Self.name("n\(key).md")))
            }
            for (index, name) in names.enumerated() { #expect(covered.contains(at: index) == expected.contains(name)) }
        }
    }

    /// A commit puts its moves first, in place (``SyncEngine/putMovesFirst(_:)``): the moves in their order, then the
    /// other pushes in theirs, as filtering them into a new array did.
    @Test func movesPutFirstInPlaceKeepBothOrders() async {
        await propertyCheck(count: 200, input: Gen.int(in: 0...3).array(of: 0...40)) { kinds in
            var pushes = kinds.enumerated().map { index, kind in
                SyncEngine.Push(
                    name: Self.name("n\(index).md"), path: kind == 3 ? nil : "n\(index).md", base: Int64(index),
                    kind: .upload, moveFrom: kind == 0 ? Self.name("o\(index).md") : nil)
            }
            let expected = pushes.filter { $0.moveFrom != nil } + pushes.filter { $0.moveFrom == nil }
            SyncEngine.putMovesFirst(&pushes)
            #expect(pushes.map(\.name) == expected.map(\.name))
            #expect(pushes.map(\.moveFrom) == expected.map(\.moveFrom))
            #expect(pushes.map(\.path) == expected.map(\.path))
        }
    }

    /// A batch is read and staged in parts (``SyncEngine/partSize(_:)``): parts of moves, whose texts are held as read,
    /// are of ``AssetPack/lookupBatch``; the others, whose texts are held encoded, of ``SyncEngine/commitBatchSize``,
    /// the last moves among them. Cut as `prepareBatch` cuts it, a batch of moves then other pushes is covered once,
    /// in order.
    @Test func aBatchOfMovesIsReadInSmallerParts() {
        let moves = 1_300
        let pushes = (0..<(moves + 4_100)).map { index in
            SyncEngine.Push(
                name: Self.name("n\(index).md"), path: "n\(index).md", base: 0, kind: .upload,
                moveFrom: index < moves ? Self.name("o\(index).md") : nil)
        }
        var parts: [Range<Int>] = []
        var start = pushes.startIndex
        while start < pushes.endIndex {
            let end = min(start + SyncEngine.partSize(pushes[start...]), pushes.endIndex)
            parts.append(start..<end)
            start = end
        }
        #expect(AssetPack.lookupBatch < SyncEngine.commitBatchSize)
        #expect(parts.map(\.count) == [500, 500, 2_000, 2_000, 400])
        #expect(parts.first?.lowerBound == 0 && parts.last?.upperBound == pushes.count)
        #expect(zip(parts, parts.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
        // Fewer moves than a part's worth next: one part with the pushes after them, as before parts of moves.
        #expect(SyncEngine.partSize(pushes[801...]) == SyncEngine.commitBatchSize)
        #expect(SyncEngine.partSize(pushes[800...]) == AssetPack.lookupBatch)
        #expect(SyncEngine.partSize(pushes[0..<499]) == SyncEngine.commitBatchSize)
        #expect(SyncEngine.partSize(pushes[moves...]) == SyncEngine.commitBatchSize)
    }

    /// Random sources and targets over a few texts, inodes and folders: whatever the order they are given in, the
    /// same pairs; each name in at most one pair; every pair of one text (no similarity given); and no text left
    /// unpaired on both sides.
    @Test func theRulesAreDeterministicAndOneToOne() async {
        let texts = ["a", "b", "c", ""]
        let entry = zip(Gen.int(in: 0...3), Gen.int(in: 0...3), Gen.int(in: 0...5))
        let input = zip(entry.array(of: 0...8), entry.array(of: 0...8), Gen.int(in: 0...1000))
        await propertyCheck(count: 200, input: input) { sourceSpecs, targetSpecs, seed in
            let folders = ["", "p/", "q/r/"]
            let sources = Dictionary(
                sourceSpecs.enumerated().map { index, spec in
                    let name = "old/\(folders[spec.2 % 3])\(index % 4).md"
                    return (name, Self.source(name, texts[spec.0], inode: spec.1 == 0 ? nil : UInt64(spec.1)))
                }, uniquingKeysWith: { first, _ in first }
            ).values.map { $0 }
            let targets = Dictionary(
                targetSpecs.enumerated().map { index, spec in
                    let name = "new/\(folders[spec.2 % 3])\(index % 5).md"
                    return (name, Self.target(name, texts[spec.0], inode: UInt64(spec.1)))
                }, uniquingKeysWith: { first, _ in first }
            ).values.map { $0 }
            let pairs = MoveMatcher.match(sources: sources, targets: targets)
            var generator = SplitMix(seed: UInt64(seed))
            let shuffled = MoveMatcher.match(
                sources: sources.shuffled(using: &generator), targets: targets.shuffled(using: &generator))
            #expect(pairs == shuffled)
            #expect(Set(pairs.map(\.from)).count == pairs.count && Set(pairs.map(\.to)).count == pairs.count)
            let sourceText = Dictionary(uniqueKeysWithValues: sources.map { ($0.name, $0.digest) })
            let targetText = Dictionary(uniqueKeysWithValues: targets.map { ($0.name, $0.digest) })
            #expect(pairs.allSatisfy { sourceText[$0.from] == targetText[$0.to] })
            let unpairedSources = sources.filter { source in !pairs.contains { $0.from == source.name } }
            let unpairedTargets = targets.filter { target in !pairs.contains { $0.to == target.name } }
            #expect(Set(unpairedSources.map(\.digest)).isDisjoint(with: unpairedTargets.map(\.digest)))
        }
    }

    /// The matcher works on indices and flags: it answers as the code it replaced did (grouped by inode and text in
    /// dictionaries of arrays, with sets of the names each rule took; ``referenceMatch``), for random notes over a
    /// few texts, inodes and folders, with and without a similarity, given in name order or not; and for groups of
    /// one text large enough to be paired by file name.
    @Test func theMatcherAnswersAsTheGroupingCodeDid() {
        var generator = SplitMix(seed: 49)
        let texts = ["a", "b", "c", "", "a\nb\n", "a\nc\n"]
        let folders = ["", "p/", "q/r/", "s/"]
        var covered = (byInode: 0, byText: 0, bySimilarity: 0, byFileName: 0)
        for round in 0..<600 {
            let large = round % 50 == 49
            func spec(_ prefix: String) -> [(name: RecordName, text: String, inode: UInt64)] {
                var seen = Set<String>()
                return (0..<Int.random(in: large ? 70...100 : 0...12, using: &generator)).compactMap { _ in
                    let folder = folders[Int.random(in: 0..<folders.count, using: &generator)]
                    let name = "\(prefix)/\(folder)\(Int.random(in: 0...(large ? 200 : 9), using: &generator)).md"
                    guard seen.insert(name).inserted else { return nil }
                    let text = large ? "" : texts[Int.random(in: 0..<texts.count, using: &generator)]
                    return (Self.name(name), text, UInt64.random(in: 0...6, using: &generator))
                }
            }
            // In the large rounds the sources have no inode (notes of another device): every note is in one group.
            let sources = spec("old").map {
                MoveMatcher.Source(
                    name: $0.name, digest: Self.digest($0.text), size: Int64($0.text.utf8.count),
                    inode: $0.inode == 0 || large ? nil : $0.inode)
            }
            let targets = spec("new").map {
                MoveMatcher.Target(name: $0.name, digest: Self.digest($0.text), size: Int64($0.text.utf8.count), inode: $0.inode)
            }
            if large && sources.count * targets.count > 4096 { covered.byFileName += 1 }
            // A similarity that depends on both names only, so that both matchers see the same one.
            let similarity: (MoveMatcher.Source, MoveMatcher.Target) -> Double? = { source, target in
                var hasher = FNV()
                hasher.add(source.name.string)
                hasher.add(target.name.string)
                return hasher.value % 3 == 0 ? nil : Double(hasher.value % 100) / 100
            }
            for measure in [nil, similarity] {
                let expected = Self.referenceMatch(sources: sources, targets: targets, similarity: measure)
                #expect(Self.pairs(MoveMatcher.match(sources: sources, targets: targets, similarity: measure)) == Self.pairs(expected))
                let sorted = MoveMatcher.match(
                    sources: sources.sorted { $0.name < $1.name }, targets: targets.sorted { $0.name < $1.name }, similarity: measure)
                #expect(Self.pairs(sorted) == Self.pairs(expected))
                let sourceText = Dictionary(uniqueKeysWithValues: sources.map { ($0.name, $0.digest) })
                let targetText = Dictionary(uniqueKeysWithValues: targets.map { ($0.name, $0.digest) })
                let sourceInode = Dictionary(uniqueKeysWithValues: sources.map { ($0.name, $0.inode) })
                let targetInode = Dictionary(uniqueKeysWithValues: targets.map { ($0.name, $0.inode) })
                covered.byInode +=
                    expected.contains { sourceInode[$0.from]! == targetInode[$0.to] && sourceText[$0.from] == targetText[$0.to] } ? 1 : 0
                covered.byText += expected.contains { sourceText[$0.from] == targetText[$0.to] } ? 1 : 0
                covered.bySimilarity += expected.contains { sourceText[$0.from] != targetText[$0.to] } ? 1 : 0
            }
        }
        // The cases reach every rule.
        #expect(covered.byInode > 300 && covered.byText > 500 && covered.bySimilarity > 100)
        // Of the 12 large rounds, most have a group too large to score every pair: paired by file name.
        #expect(covered.byFileName >= 8)
    }

    /// A group too large to score every pair (thousands of empty notes) is paired by file name, each name's targets
    /// taken in order, then the rest in order: as the code that copied a bucket for each pair did
    /// (``referenceByFileName``).
    @Test func largeGroupsArePairedByFileNameAsBefore() {
        var generator = SplitMix(seed: 4096)
        for _ in 0..<40 {
            func names(_ prefix: String) -> [RecordName] {
                let folders = ["", "p/", "q/r/", "s/", "t/"]
                let picked = (0..<Int.random(in: 70...160, using: &generator)).map { _ in
                    "\(prefix)/\(folders[Int.random(in: 0..<folders.count, using: &generator)])\(Int.random(in: 0...60, using: &generator)).md"
                }
                return Set(picked).sorted().map(Self.name)
            }
            let sources = names("old")
            let targets = names("new")
            #expect(sources.count * targets.count > 4096)
            let pairs = MoveMatcher.pairByPath(sources, targets)
            #expect(Self.pairs(pairs) == Self.pairs(Self.referenceByFileName(sources, targets)))
            #expect(pairs.count == min(sources.count, targets.count))
            #expect(pairs.contains { $0.from.components.last == $0.to.components.last })
        }
    }

    /// ``MoveMatcher/pairByPath(_:_:)``'s path for large groups as it was.
    private static func referenceByFileName(_ sources: [RecordName], _ targets: [RecordName]) -> [MoveMatcher.Pair] {
        var pairs: [MoveMatcher.Pair] = []
        var left = Dictionary(grouping: targets) { $0.components.last.map(String.init) ?? "" }
        var rest: [RecordName] = []
        for source in sources {
            let key = source.components.last.map(String.init) ?? ""
            if var bucket = left[key], !bucket.isEmpty {
                pairs.append(MoveMatcher.Pair(from: source, to: bucket.removeFirst()))
                left[key] = bucket
            } else {
                rest.append(source)
            }
        }
        let remaining = left.values.joined().sorted()
        for (source, target) in zip(rest, remaining) { pairs.append(MoveMatcher.Pair(from: source, to: target)) }
        return pairs
    }

    /// An FNV-1a hash: the same for the same strings in every run.
    private struct FNV {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        mutating func add(_ string: String) {
            for byte in string.utf8 { value = (value ^ UInt64(byte)) &* 0x100_0000_01b3 }
            value = (value ^ 0xff) &* 0x100_0000_01b3
        }
    }

    /// The matcher as it was before it worked on indices: the rules' reference.
    private static func referenceMatch(
        sources: [MoveMatcher.Source], targets: [MoveMatcher.Target],
        similarity: ((MoveMatcher.Source, MoveMatcher.Target) -> Double?)?
    ) -> [MoveMatcher.Pair] {
        var sources = sources.sorted { $0.name < $1.name }
        var targets = targets.sorted { $0.name < $1.name }
        var pairs: [MoveMatcher.Pair] = []
        func take(_ taken: [MoveMatcher.Pair]) {
            pairs += taken
            let from = Set(taken.map(\.from))
            let to = Set(taken.map(\.to))
            sources.removeAll { from.contains($0.name) }
            targets.removeAll { to.contains($0.name) }
        }
        var byKey: [MoveMatcher.Pair] = []
        let targetsByInode = Dictionary(grouping: targets, by: \.inode)
        var used = Set<RecordName>()
        for source in sources {
            guard let inode = source.inode,
                let target = targetsByInode[inode]?.first(where: { $0.digest == source.digest && !used.contains($0.name) })
            else { continue }
            used.insert(target.name)
            byKey.append(MoveMatcher.Pair(from: source.name, to: target.name))
        }
        take(byKey)
        let targetsByDigest = Dictionary(grouping: targets, by: \.digest)
        var byText: [MoveMatcher.Pair] = []
        for (digest, group) in Dictionary(grouping: sources, by: \.digest).sorted(by: { $0.key.hex < $1.key.hex }) {
            guard let candidates = targetsByDigest[digest] else { continue }
            // Above 4,096 pairs the old code's own path by file name, not the current one's.
            byText +=
                group.count * candidates.count > 4096
                ? Self.referenceByFileName(group.map(\.name), candidates.map(\.name))
                : MoveMatcher.pairByPath(group.map(\.name), candidates.map(\.name))
        }
        take(byText)
        if let similarity, !sources.isEmpty, !targets.isEmpty, sources.count <= MoveMatcher.maxSimilarityCandidates,
            targets.count <= MoveMatcher.maxSimilarityCandidates
        {
            var scored: [(score: Double, sameInode: Bool, pair: MoveMatcher.Pair)] = []
            for source in sources {
                for target in targets where MoveMatcher.comparableSizes(source.size, target.size) {
                    guard let score = similarity(source, target), score >= MoveMatcher.minimumSimilarity else { continue }
                    scored.append((score, source.inode == target.inode, MoveMatcher.Pair(from: source.name, to: target.name)))
                }
            }
            scored.sort { a, b in
                if a.score != b.score { return a.score > b.score }
                if a.sameInode != b.sameInode { return a.sameInode }
                if a.pair.from != b.pair.from { return a.pair.from < b.pair.from }
                return a.pair.to < b.pair.to
            }
            var from = Set<RecordName>()
            var to = Set<RecordName>()
            var bySimilarity: [MoveMatcher.Pair] = []
            for candidate in scored where !from.contains(candidate.pair.from) && !to.contains(candidate.pair.to) {
                from.insert(candidate.pair.from)
                to.insert(candidate.pair.to)
                bySimilarity.append(candidate.pair)
            }
            take(bySimilarity)
        }
        return pairs.sorted { $0.from < $1.from }
    }

    /// The text each inode had, for notes gone from their names, in a sorted array: what the dictionary it replaced
    /// answered (the first gone note in name order wins an inode two recorded; an inode none recorded has none).
    @Test func goneFilesAnswerAsTheDictionaryDid() {
        var generator = SplitMix(seed: 48)
        for _ in 0..<200 {
            let gone = (0..<Int.random(in: 0...40, using: &generator)).map { index in
                (
                    name: Self.name("n\(Int.random(in: 0...30, using: &generator))-\(index).md"),
                    inode: UInt64.random(in: 1...20, using: &generator), digest: Self.digest("\(index)")
                )
            }
            var dictionary: [UInt64: ContentDigest] = [:]
            for file in gone.sorted(by: { $0.name < $1.name }).reversed() { dictionary[file.inode] = file.digest }
            let files = Planner.GoneFiles(gone)
            #expect(files.isEmpty == dictionary.isEmpty)
            for inode in UInt64(0)...21 { #expect(files.digest(ofInode: inode) == dictionary[inode]) }
        }
    }
}
