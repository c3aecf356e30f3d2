import Foundation
import NoteSyncSupport

/// Where a three-way merge failed, enough to show a dry run what the conflict is.
///
/// Holds the merged text around the conflicts too, so `markedText` can render the whole note
/// with `<<<<<<<` / `=======` / `>>>>>>>` markers for display. Markers are never written to a note.
public struct ConflictInfo: Sendable, Equatable {
    /// One conflicting region, as 0-based line ranges in each version.
    ///
    /// `baseLines` is empty when both sides inserted different lines at the same place. Regions
    /// are exact: unlike git's markers, conflicts a few lines apart are not joined into one.
    public struct Region: Sendable, Hashable {
        public var baseLines: Range<Int>
        public var oursLines: Range<Int>
        public var theirsLines: Range<Int>

        public init(baseLines: Range<Int>, oursLines: Range<Int>, theirsLines: Range<Int>) {
            self.baseLines = baseLines
            self.oursLines = oursLines
            self.theirsLines = theirsLines
        }
    }

    /// A piece of the merged text: either what both sides agree on or a conflict.
    package enum Segment: Sendable, Equatable {
        case agreed([UInt8])
        case conflict(base: [UInt8], ours: [UInt8], theirs: [UInt8])
    }

    /// The conflicts, in order; never empty.
    public let regions: [Region]
    package let segments: [Segment]

    /// The merged note with conflict markers, escaped for a terminal; for display only.
    ///
    /// Labels and content go through `DisplayName`, so neither a note's name nor its text can
    /// emit escape sequences; `\r` shows as `\u{d}`. With `baseLabel`, the ancestor's lines are
    /// shown too (diff3 style). Every line of the result ends with `\n`.
    public func markedText(
        oursLabel: String = "ours", theirsLabel: String = "theirs", baseLabel: String? = nil
    ) -> String {
        var out = ""
        for segment in segments {
            switch segment {
            case .agreed(let bytes):
                Self.appendLines(bytes, to: &out)
            case .conflict(let base, let ours, let theirs):
                out += "<<<<<<< " + DisplayName.escape(oursLabel) + "\n"
                Self.appendLines(ours, to: &out)
                if let baseLabel {
                    out += "||||||| " + DisplayName.escape(baseLabel) + "\n"
                    Self.appendLines(base, to: &out)
                }
                out += "=======\n"
                Self.appendLines(theirs, to: &out)
                out += ">>>>>>> " + DisplayName.escape(theirsLabel) + "\n"
            }
        }
        return out
    }

    private static func appendLines(_ bytes: [UInt8], to out: inout String) {
        let text = LineText(bytes: bytes)
        for index in 0..<text.count {
            let line = text.isTerminated(index) ? text[index].dropLast() : text[index]
            out += DisplayName.escapeContent(String(decoding: line, as: UTF8.self)) + "\n"
        }
    }
}
