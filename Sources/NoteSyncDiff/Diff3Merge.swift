import Foundation
import NoteSyncSupport

/// Three-way merge of a note's text, line by line, with the base as common ancestor.
///
/// Semantics are those of `git merge-file` (and GNU `diff3 -m`): each side is diffed against
/// the base; a change that only one side made is taken; the same change made by both sides is
/// taken once. Changes of the two sides that overlap **or touch** — no unchanged base line
/// between them, including two insertions at the same place — form a conflict unless both
/// sides produced identical lines for that whole region. Touching changes conflict on purpose: git does the
/// same, and a line edited next to another's edit often depends on it (a list item, a sentence
/// continued on the next line).
///
/// Lines are byte-exact (see `LineDiff`), so a merge keeps every line's terminator (`\r\n`
/// stays `\r\n`) and a missing final newline; changing how the last line ends is an edit of
/// that line. Text must be UTF-8 without NUL; anything else is binary and never merged.
public enum Diff3Merge {
    /// Merges `ours` and `theirs`, both derived from `base`.
    ///
    /// Trivial cases come first and need no text: equal sides, or one side equal to the base,
    /// resolve to the other side even for binary content, since nothing is combined. A new note
    /// on both sides is merged with an empty `base`.
    public static func merge(base: Data, ours: Data, theirs: Data) -> MergeResult {
        if ours == theirs || theirs == base {
            return .clean(ours)
        }
        if ours == base {
            return .clean(theirs)
        }
        let texts = [LineText(base), LineText(ours), LineText(theirs)]
        guard texts.allSatisfy(\.isText) else {
            return .binary
        }
        return ThreeWay(base: texts[0], ours: texts[1], theirs: texts[2]).merge()
    }
}

/// One merge in progress: the three texts, their interned lines, and the output built so far.
private struct ThreeWay {
    let base: LineText
    let ours: LineText
    let theirs: LineText
    let baseIDs: [Int]
    let oursIDs: [Int]
    let theirsIDs: [Int]

    var merged: [UInt8] = []
    /// Agreed bytes since the last conflict, flushed into `segments` at the next conflict.
    var agreed: [UInt8] = []
    var segments: [ConflictInfo.Segment] = []
    var regions: [ConflictInfo.Region] = []

    init(base: LineText, ours: LineText, theirs: LineText) {
        self.base = base
        self.ours = ours
        self.theirs = theirs
        let ids = LineText.interned([base, ours, theirs])
        baseIDs = ids[0]
        oursIDs = ids[1]
        theirsIDs = ids[2]
    }

    consuming func merge() -> MergeResult {
        let oursHunks = LineDiff(old: baseIDs, new: oursIDs).hunks
        let theirsHunks = LineDiff(old: baseIDs, new: theirsIDs).hunks
        var nextOurs = 0
        var nextTheirs = 0
        var baseLine = 0

        while nextOurs < oursHunks.count || nextTheirs < theirsHunks.count {
            let oursHunk = nextOurs < oursHunks.count ? oursHunks[nextOurs] : nil
            let theirsHunk = nextTheirs < theirsHunks.count ? theirsHunks[nextTheirs] : nil
            if let oursHunk, theirsHunk.map({ oursHunk.oldLines.upperBound < $0.oldLines.lowerBound }) ?? true {
                append(base[lines: baseLine..<oursHunk.oldLines.lowerBound])
                append(ours[lines: oursHunk.newLines])
                baseLine = oursHunk.oldLines.upperBound
                nextOurs += 1
                continue
            }
            if let theirsHunk, oursHunk.map({ theirsHunk.oldLines.upperBound < $0.oldLines.lowerBound }) ?? true {
                append(base[lines: baseLine..<theirsHunk.oldLines.lowerBound])
                append(theirs[lines: theirsHunk.newLines])
                baseLine = theirsHunk.oldLines.upperBound
                nextTheirs += 1
                continue
            }
            guard let oursHunk, let theirsHunk else { break }

            let start = min(oursHunk.oldLines.lowerBound, theirsHunk.oldLines.lowerBound)
            var end = max(oursHunk.oldLines.upperBound, theirsHunk.oldLines.upperBound)
            let firstOurs = nextOurs
            let firstTheirs = nextTheirs
            var grew = true
            while grew {
                grew = false
                while nextOurs < oursHunks.count, oursHunks[nextOurs].oldLines.lowerBound <= end {
                    end = max(end, oursHunks[nextOurs].oldLines.upperBound)
                    nextOurs += 1
                    grew = true
                }
                while nextTheirs < theirsHunks.count, theirsHunks[nextTheirs].oldLines.lowerBound <= end {
                    end = max(end, theirsHunks[nextTheirs].oldLines.upperBound)
                    nextTheirs += 1
                    grew = true
                }
            }
            let baseRange = start..<end
            let oursRange = Self.sideRange(of: baseRange, first: oursHunks[firstOurs], last: oursHunks[nextOurs - 1])
            let theirsRange = Self.sideRange(
                of: baseRange, first: theirsHunks[firstTheirs], last: theirsHunks[nextTheirs - 1])

            append(base[lines: baseLine..<start])
            if oursIDs[oursRange] == theirsIDs[theirsRange] {
                append(ours[lines: oursRange])
            } else {
                segments.append(.agreed(agreed))
                agreed = []
                segments.append(
                    .conflict(
                        base: Array(base[lines: baseRange]),
                        ours: Array(ours[lines: oursRange]),
                        theirs: Array(theirs[lines: theirsRange])))
                regions.append(
                    ConflictInfo.Region(baseLines: baseRange, oursLines: oursRange, theirsLines: theirsRange))
            }
            baseLine = end
        }
        append(base[lines: baseLine..<base.count])

        guard !regions.isEmpty else {
            return .clean(Data(merged))
        }
        segments.append(.agreed(agreed))
        return .conflict(ConflictInfo(regions: regions, segments: segments.filter { $0 != .agreed([]) }))
    }

    private mutating func append(_ bytes: ArraySlice<UInt8>) {
        merged.append(contentsOf: bytes)
        agreed.append(contentsOf: bytes)
    }

    /// The lines of one side that replace `baseRange`, given that side's first and last hunk inside it.
    ///
    /// Outside its hunks a side's lines match the base one to one, so the range extends from the
    /// hunks by the same number of lines as the base range does.
    private static func sideRange(of baseRange: Range<Int>, first: LineDiff.Hunk, last: LineDiff.Hunk) -> Range<Int> {
        let start = first.newLines.lowerBound - (first.oldLines.lowerBound - baseRange.lowerBound)
        let end = last.newLines.upperBound + (baseRange.upperBound - last.oldLines.upperBound)
        return start..<end
    }
}
