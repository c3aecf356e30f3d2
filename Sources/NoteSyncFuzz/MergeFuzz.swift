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

/// Fuzzes `Diff3Merge` with an input split into `base NUL ours NUL theirs`.
///
/// Beyond "no crash", it checks the identities of a three-way merge, that swapping the sides swaps the result,
/// that a conflict's regions are well formed, and one merge whose answer is known: edits on either side of a
/// line that no version changes.
enum MergeFuzz {
    static func check(_ input: Data) throws(FuzzViolation) {
        let parts = FuzzTarget.parts(input, count: 3)
        let (base, ours, theirs) = (parts[0], parts[1], parts[2])
        let result = Diff3Merge.merge(base: base, ours: ours, theirs: theirs)
        try checkResult(result, base: base, ours: ours, theirs: theirs)

        try FuzzViolation.require(
            Diff3Merge.merge(base: base, ours: ours, theirs: ours) == .clean(ours),
            "merging a version with itself does not give it back")
        try FuzzViolation.require(
            Diff3Merge.merge(base: base, ours: base, theirs: theirs) == .clean(theirs),
            "merging with an unchanged ours does not give theirs")
        try FuzzViolation.require(
            Diff3Merge.merge(base: base, ours: ours, theirs: base) == .clean(ours),
            "merging with an unchanged theirs does not give ours")

        let swapped = Diff3Merge.merge(base: base, ours: theirs, theirs: ours)
        switch (result, swapped) {
        case (.clean(let merged), .clean(let other)):
            try FuzzViolation.require(merged == other, "swapping the sides gives another clean merge")
        case (.conflict(let info), .conflict(let other)):
            let mirrored = other.regions.map {
                ConflictInfo.Region(baseLines: $0.baseLines, oursLines: $0.theirsLines, theirsLines: $0.oursLines)
            }
            try FuzzViolation.require(info.regions == mirrored, "swapping the sides moves the conflicts")
        case (.binary, .binary):
            break
        default:
            throw FuzzViolation(message: "swapping the sides turns \(result) into \(swapped)")
        }

        try checkSeparatedEdits(base: base, ours: ours, theirs: theirs)
    }

    static func isText(_ data: Data) -> Bool {
        !data.contains(0) && String(validating: data, as: UTF8.self) != nil
    }

    static func checkResult(_ result: MergeResult, base: Data, ours: Data, theirs: Data) throws(FuzzViolation) {
        let lines = [base, ours, theirs].map(LineDiff.lines(of:))
        switch result {
        case .binary:
            try FuzzViolation.require(![base, ours, theirs].allSatisfy(isText), "text was called binary")
        case .clean(let merged):
            // A merge only combines whole lines of its inputs: a line that none has means lines were joined.
            let known = Set(lines.joined())
            for line in LineDiff.lines(of: merged) {
                try FuzzViolation.require(known.contains(line), "the merge made a line no version has: \(line)")
            }
            if [base, ours, theirs].allSatisfy(isText) {
                try FuzzViolation.require(isText(merged), "merging texts gave binary")
            }
        case .conflict(let info):
            try FuzzViolation.require(!info.regions.isEmpty, "a conflict without regions")
            try FuzzViolation.require([base, ours, theirs].allSatisfy(isText), "binary content was merged by line")
            var previousEnd = -1
            for region in info.regions {
                try FuzzViolation.require(
                    region.baseLines.upperBound <= lines[0].count && region.oursLines.upperBound <= lines[1].count
                        && region.theirsLines.upperBound <= lines[2].count && region.baseLines.lowerBound >= 0
                        && region.oursLines.lowerBound >= 0 && region.theirsLines.lowerBound >= 0,
                    "region \(region) is outside the texts")
                try FuzzViolation.require(
                    region.baseLines.lowerBound > previousEnd,
                    "region \(region) overlaps or touches the previous one")
                previousEnd = region.baseLines.upperBound
                try FuzzViolation.require(
                    lines[1][region.oursLines] != lines[2][region.theirsLines],
                    "region \(region) has the same lines on both sides")
            }
            let marked = info.markedText(oursLabel: "ours\u{1B}[2J", theirsLabel: "theirs\r", baseLabel: "base\u{85}")
            try FuzzViolation.require(marked.hasSuffix("\n"), "the marked text does not end with a newline")
            try FuzzViolation.require(
                FuzzViolation.isPrintable(marked, allowing: ["\n", "\t"]),
                "the marked text prints a control character")
        }
    }

    /// Ours edits the first half and theirs the second, with a line between them that no version has elsewhere;
    /// the halves cannot match each other (their lines start with different letters), so the merge must be
    /// clean and take both edits.
    static func checkSeparatedEdits(base: Data, ours: Data, theirs: Data) throws(FuzzViolation) {
        let separator = Data("s\n".utf8)
        let first = { (text: Data) in prefixLines(text, with: "a", terminated: true) }
        let second = { (text: Data) in prefixLines(text, with: "c", terminated: false) }
        let result = Diff3Merge.merge(
            base: first(base) + separator + second(base),
            ours: first(ours) + separator + second(base),
            theirs: first(base) + separator + second(theirs))
        let expected = first(ours) + separator + second(theirs)
        if [base, ours, theirs].allSatisfy(isText) {
            try FuzzViolation.require(
                result == .clean(expected),
                "edits on either side of an unchanged line gave \(result)")
        } else if result != .binary {
            try FuzzViolation.require(result == .clean(expected), "binary edits gave \(result)")
        }
    }

    /// `text` with `prefix` before every line; with `terminated`, a last line without newline gets one.
    static func prefixLines(_ text: Data, with prefix: Character, terminated: Bool) -> Data {
        var out = Data()
        for line in LineDiff.lines(of: text) {
            out.append(contentsOf: prefix.utf8)
            out.append(line)
        }
        if terminated, let last = out.last, last != 0x0A {
            out.append(0x0A)
        }
        return out
    }
}
