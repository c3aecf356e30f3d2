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

private func plain(_ old: String, _ new: String, context: Int = 3) -> String {
    UnifiedDiff.render(
        old: bytes(old), new: bytes(new), oldLabel: "old", newLabel: "new", context: context, color: false)
}

@Suite struct UnifiedDiffTests {
    @Test func smallDiffMatchesGNUDiff() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"
        let new = "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk"
        #expect(
            plain(old, new) == """
                --- old
                +++ new
                @@ -1,5 +1,5 @@
                 a
                -b
                +B
                 c
                 d
                 e
                @@ -8,3 +8,4 @@
                 h
                 i
                 j
                +k
                \\ No newline at end of file

                """)
    }

    @Test func identicalInputsGiveNothing() {
        #expect(plain("a\nb\n", "a\nb\n") == "")
        #expect(plain("", "") == "")
        let binary = Data([0, 1, 2, 0xFF])
        #expect(UnifiedDiff.render(old: binary, new: binary, oldLabel: "x", newLabel: "y", color: true) == "")
    }

    @Test func noNewlineMarkerOnBothSides() {
        #expect(
            plain("a\nb", "a\nc") == """
                --- old
                +++ new
                @@ -1,2 +1,2 @@
                 a
                -b
                \\ No newline at end of file
                +c
                \\ No newline at end of file

                """)
        #expect(
            plain("a\nb", "a\nb\n") == """
                --- old
                +++ new
                @@ -1,2 +1,2 @@
                 a
                -b
                \\ No newline at end of file
                +b

                """)
        #expect(
            plain("x\na\nb", "y\na\nb") == """
                --- old
                +++ new
                @@ -1,3 +1,3 @@
                -x
                +y
                 a
                 b
                \\ No newline at end of file

                """)
    }

    @Test func newAndDeletedNotes() {
        #expect(plain("", "a\nb\n") == "--- old\n+++ new\n@@ -0,0 +1,2 @@\n+a\n+b\n")
        #expect(plain("a\n", "") == "--- old\n+++ new\n@@ -1 +0,0 @@\n-a\n")
    }

    @Test func contextWidthIsRespected() {
        let old = (1...9).map { "\($0)\n" }.joined()
        let new = old.replacingOccurrences(of: "5\n", with: "five\n")
        #expect(plain(old, new, context: 0) == "--- old\n+++ new\n@@ -5 +5 @@\n-5\n+five\n")
        #expect(plain(old, new, context: 1) == "--- old\n+++ new\n@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 6\n")
        #expect(plain(old, new, context: -2) == plain(old, new, context: 0))
        #expect(plain(old, new, context: 100).hasPrefix("--- old\n+++ new\n@@ -1,9 +1,9 @@\n 1\n"))
    }

    @Test func nearbyChangesShareAHunk() {
        func edited(_ lines: [Int]) -> String {
            (1...20).map { lines.contains($0) ? "x\($0)\n" : "\($0)\n" }.joined()
        }
        let hunkCount = { (diff: String) in diff.split(separator: "\n").filter { $0.hasPrefix("@@") }.count }
        #expect(hunkCount(plain(edited([]), edited([3, 10]))) == 1)
        #expect(hunkCount(plain(edited([]), edited([3, 11]))) == 2)
        #expect(hunkCount(plain(edited([]), edited([3, 4]), context: 0)) == 1)
        #expect(hunkCount(plain(edited([]), edited([3, 5]), context: 0)) == 2)
    }

    @Test func colourOnlyWhenAsked() {
        let coloured = UnifiedDiff.render(
            old: bytes("a\nb\n"), new: bytes("a\nc\n"), oldLabel: "old", newLabel: "new", color: true)
        #expect(
            coloured == """
                \u{1B}[1m--- old\u{1B}[0m
                \u{1B}[1m+++ new\u{1B}[0m
                \u{1B}[36m@@ -1,2 +1,2 @@\u{1B}[0m
                 a
                \u{1B}[31m-b\u{1B}[0m
                \u{1B}[32m+c\u{1B}[0m

                """)
        #expect(!plain("a\nb\n", "a\nc\n").contains("\u{1B}"))
    }

    @Test(arguments: [false, true])
    func escapeSequencesInNamesAndContentNeverReachTheTerminal(color: Bool) {
        let hostile = "title \u{1B}]0;owned\u{07} \u{1B}[2J \u{9B}31m bell\u{07} del\u{7F} cr\r back\\slash\ttab\n"
        let rendered = UnifiedDiff.render(
            old: bytes("first\n"), new: bytes(hostile), oldLabel: "note\u{1B}[31m\ttab", newLabel: "line\nbreak",
            color: color)
        let withoutOwnColour = ["0", "1", "31", "32", "36"].reduce(rendered) {
            $0.replacingOccurrences(of: "\u{1B}[\($1)m", with: "")
        }
        #expect(!withoutOwnColour.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" && $0 != "\t" })
        #expect(!withoutOwnColour.unicodeScalars.contains { (0x7F...0x9F).contains($0.value) })
        #expect(rendered.contains("--- note\\u{1b}[31m\\u{9}tab"))
        #expect(rendered.contains("+++ line\\u{a}break"))
        #expect(
            rendered.contains(
                "+title \\u{1b}]0;owned\\u{7} \\u{1b}[2J \\u{9b}31m bell\\u{7} del\\u{7f} cr\\u{d} back\\slash\ttab"))
    }

    @Test func lineEndingChangeIsVisible() {
        #expect(plain("a\r\nb\r\n", "a\r\nb\n") == "--- old\n+++ new\n@@ -1,2 +1,2 @@\n a\\u{d}\n-b\\u{d}\n+b\n")
    }

    @Test func binaryContentIsSummarised() {
        let rendered = UnifiedDiff.render(
            old: bytes("text\n"), new: Data([0x00, 0x01, 0xFF]), oldLabel: "a\u{1B}", newLabel: "b", color: true)
        #expect(rendered == "Binary files a\\u{1b} and b differ (5 bytes, 3 bytes)\n")
        let invalidUTF8 = UnifiedDiff.render(
            old: Data([0xC3, 0x28]), new: bytes("x"), oldLabel: "a", newLabel: "b", color: false)
        #expect(invalidUTF8 == "Binary files a and b differ (2 bytes, 1 bytes)\n")
    }

    @Test func linesKeepTheirTerminators() {
        #expect(LineDiff.lines(of: bytes("a\r\nb\n\nc")) == [bytes("a\r\n"), bytes("b\n"), bytes("\n"), bytes("c")])
        #expect(LineDiff.lines(of: bytes("a\n")) == [bytes("a\n")])
        #expect(LineDiff.lines(of: Data()) == [])
        #expect(LineDiff.lines(of: bytes("\n\n")) == [bytes("\n"), bytes("\n")])
    }

    @Test func lineDiffHunks() {
        let diff = LineDiff(old: bytes("a\nb\nc\nd\n"), new: bytes("a\nB\nc\nd\ne\n"))
        #expect(
            diff.hunks == [
                .init(oldLines: 1..<2, newLines: 1..<2),
                .init(oldLines: 4..<4, newLines: 4..<5)
            ])
        #expect(LineDiff(old: bytes("a\n"), new: bytes("a\n")).hunks.isEmpty)
        #expect(LineDiff(old: bytes("a"), new: bytes("a\n")).hunks == [.init(oldLines: 0..<1, newLines: 0..<1)])
    }

    /// Unique lines make the shortest diff unique, so the output must equal GNU diff's byte for byte.
    @Test(.enabled(if: Support.hasDiff, "needs GNU diff"))
    func randomDiffsEqualGNUDiff() async {
        await propertyCheck(count: 60, input: Support.scenarioGenerator(sides: [.ours]), Gen.int(in: 0...4)) {
            scenario, context in
            for (old, new) in [(scenario.baseData, scenario.oursData), (scenario.oursData, scenario.baseData)] {
                let gnu = try Support.run(
                    Support.diffPath, ["-U", "\(context)", "--label", "old", "--label", "new", "old", "new"],
                    files: ["old": old, "new": new])
                let ours = UnifiedDiff.render(
                    old: old, new: new, oldLabel: "old", newLabel: "new", context: context, color: false)
                #expect(
                    ours == String(decoding: gnu.output, as: UTF8.self).replacingOccurrences(of: "\r", with: "\\u{d}"))
            }
        }
    }

    /// With repeated lines many shortest diffs exist; ours must be one: as short as
    /// `diff --minimal`, and its hunks must turn the old text into the new one.
    @Test(.enabled(if: Support.hasDiff, "needs GNU diff"))
    func randomDiffsAreShortestAndCorrect() async {
        await propertyCheck(count: 100, input: Support.smallAlphabetText, Support.smallAlphabetText) { old, new in
            let diff = LineDiff(old: old, new: new)
            let oldLines = LineDiff.lines(of: old)
            let newLines = LineDiff.lines(of: new)
            var rebuilt: [Data] = []
            var next = 0
            for hunk in diff.hunks {
                rebuilt += oldLines[next..<hunk.oldLines.lowerBound]
                rebuilt += newLines[hunk.newLines]
                next = hunk.oldLines.upperBound
            }
            rebuilt += oldLines[next...]
            #expect(rebuilt == newLines)

            let gnu = try Support.run(
                Support.diffPath, ["--minimal", "-U", "0", "--label", "old", "--label", "new", "old", "new"],
                files: ["old": old, "new": new])
            let gnuChanged = String(decoding: gnu.output, as: UTF8.self).split(separator: "\n").dropFirst(2)
                .filter { $0.hasPrefix("-") || $0.hasPrefix("+") }.count
            let changed = diff.hunks.reduce(0) { $0 + $1.oldLines.count + $1.newLines.count }
            #expect(changed == gnuChanged)
        }
    }

    @Test
    func unrelatedLargeTextsDiffQuickly() {
        let old = Support.lines((0..<5_000).map { "old line \($0) with some filler text to reach about 200 KB" })
        let new = Support.lines((0..<5_000).map { "new line \($0) with some filler text to reach about 200 KB" })
        let diff = LineDiff(old: old, new: new)
        #expect(diff.hunks == [.init(oldLines: 0..<5_000, newLines: 0..<5_000)])
    }
}
