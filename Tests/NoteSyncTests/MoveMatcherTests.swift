import Foundation
import PropertyBased
import Testing

@testable import NoteSync

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
            let files = SyncEngine.GoneFiles(gone)
            #expect(files.isEmpty == dictionary.isEmpty)
            for inode in UInt64(0)...21 { #expect(files.digest(ofInode: inode) == dictionary[inode]) }
        }
    }
}
