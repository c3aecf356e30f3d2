import Foundation
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport
import PropertyBased
import Testing

private typealias Support = DiffTestSupport

private func bytes(_ text: String) -> Data { Support.bytes(text) }

/// A hand-written merge: `expected` is the clean result, or nil for a conflict.
struct Diff3MergeCase: Sendable, CustomTestStringConvertible {
    var name: String
    var base: String
    var ours: String
    var theirs: String
    var expected: String?

    var testDescription: String { name }
}

private let cleanCases: [Diff3MergeCase] = [
    Diff3MergeCase(
        name: "disjoint edits", base: "a\nb\nc\nd\ne\n", ours: "a\nB\nc\nd\ne\n", theirs: "a\nb\nc\nD\ne\n",
        expected: "a\nB\nc\nD\ne\n"),
    Diff3MergeCase(
        name: "identical edits", base: "a\nb\nc\n", ours: "a\nX\nc\n", theirs: "a\nX\nc\n", expected: "a\nX\nc\n"),
    Diff3MergeCase(
        name: "identical edit and a disjoint one", base: "a\nb\nc\nd\ne\n", ours: "a\nX\nc\nd\nE\n",
        theirs: "a\nX\nc\nd\ne\n", expected: "a\nX\nc\nd\nE\n"),
    Diff3MergeCase(
        name: "insert at start and append at end", base: "a\nb\nc\n", ours: "top\na\nb\nc\n",
        theirs: "a\nb\nc\nend\n", expected: "top\na\nb\nc\nend\n"),
    Diff3MergeCase(
        name: "both append at end and insert at start, crossed", base: "a\nb\nc\n", ours: "a\nb\nc\nend\n",
        theirs: "top\na\nb\nc\n", expected: "top\na\nb\nc\nend\n"),
    Diff3MergeCase(
        name: "same insertion at start on both sides", base: "a\nb\n", ours: "x\na\nb\n", theirs: "x\na\nb\n",
        expected: "x\na\nb\n"),
    Diff3MergeCase(
        name: "same append at end on both sides plus an edit", base: "a\nb\nc\n", ours: "A\nb\nc\nz\n",
        theirs: "a\nb\nc\nz\n", expected: "A\nb\nc\nz\n"),
    Diff3MergeCase(
        name: "disjoint deletions", base: "a\nb\nc\nd\ne\n", ours: "b\nc\nd\ne\n", theirs: "a\nb\nc\nd\n",
        expected: "b\nc\nd\n"),
    Diff3MergeCase(
        name: "same deletion on both sides", base: "a\nb\nc\n", ours: "a\nc\n", theirs: "a\nc\n", expected: "a\nc\n"),
    Diff3MergeCase(
        name: "deletion and a distant edit", base: "a\nb\nc\nd\ne\n", ours: "a\nc\nd\ne\n",
        theirs: "a\nb\nc\nd\nE\n", expected: "a\nc\nd\nE\n"),
    Diff3MergeCase(
        name: "one side deletes everything, other unchanged", base: "a\nb\n", ours: "", theirs: "a\nb\n",
        expected: ""),
    Diff3MergeCase(
        name: "CRLF kept exactly", base: "a\r\nb\r\nc\r\nd\r\ne\r\n", ours: "a\r\nB\r\nc\r\nd\r\ne\r\n",
        theirs: "a\r\nb\r\nc\r\nD\r\ne\r\n", expected: "a\r\nB\r\nc\r\nD\r\ne\r\n"),
    Diff3MergeCase(
        name: "one line's ending changed, a distant edit", base: "a\r\nb\r\nc\r\nd\r\n", ours: "a\nb\r\nc\r\nd\r\n",
        theirs: "a\r\nb\r\nc\r\nD\r\n", expected: "a\nb\r\nc\r\nD\r\n"),
    Diff3MergeCase(
        name: "missing final newline kept", base: "a\nb\nc", ours: "A\nb\nc", theirs: "a\nb\nC",
        expected: "A\nb\nC"),
    Diff3MergeCase(
        name: "one side adds the final newline", base: "a\nb\nc", ours: "A\nb\nc", theirs: "a\nb\nc\n",
        expected: "A\nb\nc\n"),
    Diff3MergeCase(
        name: "both sides add the final newline", base: "a\nb\nc", ours: "A\nb\nc\n", theirs: "a\nb\nc\n",
        expected: "A\nb\nc\n"),
    Diff3MergeCase(
        name: "one side drops the final newline", base: "a\nb\nc\n", ours: "a\nb\nc", theirs: "A\nb\nc\n",
        expected: "A\nb\nc"),
    Diff3MergeCase(name: "empty base, same new note", base: "", ours: "x\ny\n", theirs: "x\ny\n", expected: "x\ny\n"),
    Diff3MergeCase(name: "empty base, one side still empty", base: "", ours: "", theirs: "x\n", expected: "x\n")
]

private let conflictCases: [Diff3MergeCase] = [
    Diff3MergeCase(name: "same line edited differently", base: "a\nb\nc\n", ours: "a\nB1\nc\n", theirs: "a\nB2\nc\n"),
    Diff3MergeCase(
        name: "adjacent lines edited (as git)", base: "a\nb\nc\nd\n", ours: "a\nB\nc\nd\n", theirs: "a\nb\nC\nd\n"),
    Diff3MergeCase(name: "insertion touching an edit", base: "a\nb\nc\n", ours: "a\nb\nnew\nc\n", theirs: "a\nb\nC\n"),
    Diff3MergeCase(name: "different insertions at start", base: "a\nb\n", ours: "x\na\nb\n", theirs: "y\na\nb\n"),
    Diff3MergeCase(name: "different appends at end", base: "a\nb\n", ours: "a\nb\nx\n", theirs: "a\nb\ny\n"),
    Diff3MergeCase(name: "deletion against edit", base: "a\nb\nc\n", ours: "a\nc\n", theirs: "a\nB\nc\n"),
    Diff3MergeCase(name: "empty base, different new notes", base: "", ours: "x\n", theirs: "y\n"),
    Diff3MergeCase(name: "final newline added against an append", base: "a\nb", ours: "a\nb\n", theirs: "a\nb\nc\n"),
    Diff3MergeCase(
        name: "line ending changed against an edit", base: "a\r\nb\r\nc\r\n", ours: "a\r\nb\nc\r\n",
        theirs: "a\r\nB\r\nc\r\n")
]

@Suite struct Diff3MergeTests {
    @Test(arguments: cleanCases)
    func mergesCleanly(_ example: Diff3MergeCase) throws {
        let expected = try #require(example.expected)
        let result = Diff3Merge.merge(
            base: bytes(example.base), ours: bytes(example.ours), theirs: bytes(example.theirs))
        #expect(result == .clean(bytes(expected)))
        let swapped = Diff3Merge.merge(
            base: bytes(example.base), ours: bytes(example.theirs), theirs: bytes(example.ours))
        #expect(swapped == .clean(bytes(expected)))
    }

    @Test(arguments: conflictCases)
    func conflicts(_ example: Diff3MergeCase) {
        let result = Diff3Merge.merge(
            base: bytes(example.base), ours: bytes(example.ours), theirs: bytes(example.theirs))
        guard case .conflict(let info) = result else {
            Issue.record("expected a conflict, got \(result)")
            return
        }
        #expect(info.regions.count == 1)
    }

    @Test func conflictRegionsNameTheLinesOfEachVersion() throws {
        let sameLine = Diff3Merge.merge(
            base: bytes("a\nb\nc\n"), ours: bytes("a\nB1\nc\n"), theirs: bytes("a\nB2\nc\n"))
        #expect(try Self.info(sameLine).regions == [.init(baseLines: 1..<2, oursLines: 1..<2, theirsLines: 1..<2)])

        let adjacent = Diff3Merge.merge(
            base: bytes("a\nb\nc\nd\n"), ours: bytes("a\nB\nc\nd\n"), theirs: bytes("a\nb\nC\nd\n"))
        #expect(try Self.info(adjacent).regions == [.init(baseLines: 1..<3, oursLines: 1..<3, theirsLines: 1..<3)])

        let bothInsert = Diff3Merge.merge(base: bytes("a\n"), ours: bytes("x\ny\na\n"), theirs: bytes("z\na\n"))
        #expect(try Self.info(bothInsert).regions == [.init(baseLines: 0..<0, oursLines: 0..<2, theirsLines: 0..<1)])

        let twoConflicts = Diff3Merge.merge(
            base: bytes("a\nb\nc\nd\ne\n"), ours: bytes("A1\nb\nc\nd\nE1\n"), theirs: bytes("A2\nb\nC\nd\nE2\n"))
        #expect(
            try Self.info(twoConflicts).regions == [
                .init(baseLines: 0..<1, oursLines: 0..<1, theirsLines: 0..<1),
                .init(baseLines: 4..<5, oursLines: 4..<5, theirsLines: 4..<5)
            ])
    }

    @Test func markedTextShowsBothSidesInPlace() throws {
        let result = Diff3Merge.merge(
            base: bytes("a\nb\nc\nd\ne\n"), ours: bytes("a\nB1\nc\nd\nE\n"), theirs: bytes("a\nB2\nc\nd\ne\n"))
        let info = try Self.info(result)
        #expect(
            info.markedText() == """
                a
                <<<<<<< ours
                B1
                =======
                B2
                >>>>>>> theirs
                c
                d
                E

                """)
        #expect(
            info.markedText(oursLabel: "mine", theirsLabel: "server", baseLabel: "base") == """
                a
                <<<<<<< mine
                B1
                ||||||| base
                b
                =======
                B2
                >>>>>>> server
                c
                d
                E

                """)
    }

    @Test func markedTextEndsAnUnterminatedLineBeforeAMarker() throws {
        let result = Diff3Merge.merge(base: bytes("a\nb"), ours: bytes("a\nB1"), theirs: bytes("a\nB2"))
        #expect(try Self.info(result).markedText() == "a\n<<<<<<< ours\nB1\n=======\nB2\n>>>>>>> theirs\n")
    }

    @Test func markedTextEscapesControlCharacters() throws {
        let result = Diff3Merge.merge(
            base: bytes("a\n"), ours: bytes("\u{1B}[2J\tx\r\n"), theirs: bytes("\u{9B}31m\n"))
        let text = try Self.info(result).markedText(oursLabel: "n\u{1B}]0;pwn\u{07}", theirsLabel: "t\nx")
        #expect(
            !text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x9B || $0.value == 0x07 || $0 == "\r" })
        #expect(text.contains("\\u{1b}[2J\tx\\u{d}\n"))
        #expect(text.contains("\\u{9b}31m\n"))
        #expect(text.contains("<<<<<<< n\\u{1b}]0;pwn\\u{7}\n"))
        #expect(text.contains(">>>>>>> t\\u{a}x\n"))
    }

    @Test(
        arguments: [
            ("a\n", "a\n\u{FF}\n", "b\n"),
            ("a\n", "b\n", "a\n\0\n"),
            ("\u{FE}", "a\n", "b\n"),
            ("a\n", "\u{C3}\n", "\u{C3}\u{A9}\n")
        ] as [(String, String, String)])
    func binaryIsNeverMerged(_ inputs: (String, String, String)) {
        let latin1 = { (text: String) in Data(text.unicodeScalars.map { UInt8($0.value) }) }
        let result = Diff3Merge.merge(base: latin1(inputs.0), ours: latin1(inputs.1), theirs: latin1(inputs.2))
        #expect(result == .binary)
    }

    @Test func binaryWithNothingToCombineResolves() {
        let binary = Data([0x00, 0xFF, 0x0A, 0x01])
        let other = Data([0x00, 0xFE])
        #expect(Diff3Merge.merge(base: other, ours: binary, theirs: binary) == .clean(binary))
        #expect(Diff3Merge.merge(base: other, ours: other, theirs: binary) == .clean(binary))
        #expect(Diff3Merge.merge(base: other, ours: binary, theirs: other) == .clean(binary))
    }

    @Test
    func largeNoteWithDistantEditsMerges() throws {
        let base = (0..<10_000).map { "line \($0) of a long note, with some words to make it realistic" }
        var ours = base
        ours[100] = "ours edited line 100"
        ours.insert(contentsOf: ["ours inserted A", "ours inserted B"], at: 5_000)
        var theirs = base
        theirs[9_000] = "theirs edited line 9000"
        theirs.removeLast()
        var expected = base
        expected[9_000] = "theirs edited line 9000"
        expected.removeLast()
        expected[100] = "ours edited line 100"
        expected.insert(contentsOf: ["ours inserted A", "ours inserted B"], at: 5_000)

        let result = Diff3Merge.merge(
            base: Support.lines(base), ours: Support.lines(ours), theirs: Support.lines(theirs))
        #expect(result == .clean(Support.lines(expected)))

        theirs[5_000] = "theirs edited line 5000"
        let clash = Diff3Merge.merge(
            base: Support.lines(base), ours: Support.lines(ours), theirs: Support.lines(theirs))
        #expect(
            try Self.info(clash).regions == [
                .init(baseLines: 5_000..<5_001, oursLines: 5_000..<5_003, theirsLines: 5_000..<5_001)
            ])
    }

    @Test func randomEditsThatDoNotTouchMergeToBothSidesChanges() async {
        await propertyCheck(count: 300, input: Support.scenarioGenerator(sides: [.ours, .theirs, .both])) { scenario in
            #expect(
                Diff3Merge.merge(base: scenario.baseData, ours: scenario.oursData, theirs: scenario.theirsData)
                    == .clean(scenario.combinedData))
            #expect(
                Diff3Merge.merge(base: scenario.baseData, ours: scenario.theirsData, theirs: scenario.oursData)
                    == .clean(scenario.combinedData))
        }
    }

    @Test func randomClashesConflictExactlyWhereTheyAre() async {
        await propertyCheck(count: 300, input: Support.scenarioGenerator(sides: Support.Edit.Side.allCases)) {
            scenario in
            let result = Diff3Merge.merge(base: scenario.baseData, ours: scenario.oursData, theirs: scenario.theirsData)
            if scenario.conflicts.isEmpty {
                #expect(result == .clean(scenario.combinedData))
            } else if case .conflict(let info) = result {
                #expect(info.regions == scenario.conflicts)
            } else {
                Issue.record("expected conflicts at \(scenario.conflicts), got \(result)")
            }
        }
    }

    @Test func mergingWithItselfOrTheBaseGivesTheOtherSide() async {
        await propertyCheck(input: Support.smallAlphabetText, Support.smallAlphabetText) { base, side in
            #expect(Diff3Merge.merge(base: base, ours: side, theirs: side) == .clean(side))
            #expect(Diff3Merge.merge(base: base, ours: base, theirs: side) == .clean(side))
            #expect(Diff3Merge.merge(base: base, ours: side, theirs: base) == .clean(side))
        }
    }

    @Test func mergeIsSymmetric() async {
        await propertyCheck(
            count: 300, input: Support.smallAlphabetText, Support.smallAlphabetText, Support.smallAlphabetText
        ) {
            base, ours, theirs in
            let forward = Diff3Merge.merge(base: base, ours: ours, theirs: theirs)
            let backward = Diff3Merge.merge(base: base, ours: theirs, theirs: ours)
            switch (forward, backward) {
            case (.clean(let a), .clean(let b)):
                #expect(a == b)
            case (.conflict(let a), .conflict(let b)):
                #expect(a.regions.map(\.baseLines) == b.regions.map(\.baseLines))
                #expect(a.regions.map(\.oursLines) == b.regions.map(\.theirsLines))
            default:
                Issue.record("asymmetric: \(forward) against \(backward)")
            }
        }
    }

    @Test(.enabled(if: Support.hasGit, "needs git for git merge-file"))
    func agreesWithGitMergeFile() async throws {
        await propertyCheck(count: 40, input: Support.scenarioGenerator(sides: Support.Edit.Side.allCases)) {
            scenario in
            let git = try Support.run(
                Support.gitPath, ["merge-file", "-p", "ours", "base", "theirs"],
                files: ["base": scenario.baseData, "ours": scenario.oursData, "theirs": scenario.theirsData])
            let result = Diff3Merge.merge(base: scenario.baseData, ours: scenario.oursData, theirs: scenario.theirsData)
            switch result {
            case .clean(let merged):
                #expect(git.status == 0)
                #expect(merged == git.output)
            case .conflict(let info):
                // git joins conflicts that are at most three lines apart into one for display.
                #expect(git.status > 0)
                #expect(Int(git.status) <= info.regions.count)
            case .binary:
                Issue.record("text merged as binary")
            }
        }
    }

    private static func info(_ result: MergeResult) throws -> ConflictInfo {
        guard case .conflict(let info) = result else {
            throw MergeExpectation.notAConflict(result)
        }
        return info
    }

    private enum MergeExpectation: Error {
        case notAConflict(MergeResult)
    }
}
