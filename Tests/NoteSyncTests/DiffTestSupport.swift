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

/// Helpers shared by the diff and merge tests: text building, external tools, random scenarios.
enum DiffTestSupport {
    static func bytes(_ text: String) -> Data { Data(text.utf8) }

    static func lines(_ lines: [String], eol: String = "\n") -> Data {
        Data(lines.map { $0 + eol }.joined().utf8)
    }

    static let diffPath = "/usr/bin/diff"
    static let gitPath = "/usr/bin/git"
    static var hasDiff: Bool { FileManager.default.isExecutableFile(atPath: diffPath) }
    static var hasGit: Bool { FileManager.default.isExecutableFile(atPath: gitPath) }

    /// Runs a tool on files made from `inputs` in a fresh temporary folder; returns its status and stdout.
    static func run(_ tool: String, _ arguments: [String], files inputs: [String: Data]) throws -> (
        status: Int32, output: Data
    ) {
        let folder = try TempDirectory("notesync-diff")
        defer { withExtendedLifetime(folder) {} }
        for (name, data) in inputs {
            try writeFile(folder.sub(name), data)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: folder.path)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    /// One edit of a random merge scenario, placed after `gap` unchanged base lines.
    struct Edit: Sendable {
        enum Side: Int, Sendable, CaseIterable {
            case ours, theirs, both
            /// Both sides edit the same place differently: a conflict.
            case clash
        }

        var gap: Int
        var deleteCount: Int
        var insertCount: Int
        var side: Side
    }

    /// A base of unique lines and edits that never touch each other (at least one unchanged base
    /// line between any two), so every diff is unambiguous and the merge result is known.
    struct Scenario: Sendable, CustomStringConvertible {
        var base: [String] = []
        var ours: [String] = []
        var theirs: [String] = []
        /// Both sides' edits applied to the base; what a clean merge must give.
        var combined: [String] = []
        var conflicts: [ConflictInfo.Region] = []
        var eol = "\n"

        var baseData: Data { DiffTestSupport.lines(base, eol: eol) }
        var oursData: Data { DiffTestSupport.lines(ours, eol: eol) }
        var theirsData: Data { DiffTestSupport.lines(theirs, eol: eol) }
        var combinedData: Data { DiffTestSupport.lines(combined, eol: eol) }

        var description: String {
            "base \(base) ours \(ours) theirs \(theirs) eol \(eol.debugDescription)"
        }

        init(baseCount: Int, edits: [Edit], crlf: Bool) {
            eol = crlf ? "\r\n" : "\n"
            base = (0..<baseCount).map { "line \($0)" }
            var position = 0
            var fresh = 0
            func freshLines(_ side: String, _ count: Int) -> [String] {
                defer { fresh += count }
                return (fresh..<fresh + count).map { "\(side) \($0)" }
            }
            for (index, edit) in edits.enumerated() {
                let start = position + (index == 0 ? edit.gap : max(edit.gap, 1))
                guard start <= baseCount else { break }
                let kept = base[position..<start]
                ours += kept
                theirs += kept
                combined += kept
                let deleteCount = min(edit.deleteCount, baseCount - start)
                let insertCount = deleteCount == 0 ? max(edit.insertCount, 1) : edit.insertCount
                let removed = Array(base[start..<start + deleteCount])
                switch edit.side {
                case .ours:
                    let added = freshLines("ours", insertCount)
                    ours += added
                    theirs += removed
                    combined += added
                case .theirs:
                    let added = freshLines("theirs", insertCount)
                    ours += removed
                    theirs += added
                    combined += added
                case .both:
                    let added = freshLines("both", insertCount)
                    ours += added
                    theirs += added
                    combined += added
                case .clash:
                    let oursStart = ours.count
                    let theirsStart = theirs.count
                    ours += freshLines("ours", insertCount)
                    theirs += freshLines("theirs", max(insertCount, 1))
                    combined += removed
                    conflicts.append(
                        ConflictInfo.Region(
                            baseLines: start..<start + deleteCount,
                            oursLines: oursStart..<ours.count,
                            theirsLines: theirsStart..<theirs.count))
                }
                position = start + deleteCount
            }
            let rest = base[position...]
            ours += rest
            theirs += rest
            combined += rest
        }
    }

    static func editGenerator(sides: [Edit.Side]) -> Generator<Edit, some Sequence & SendableMetatype> {
        zip(Gen.int(in: 0...3), Gen.int(in: 0...3), Gen.int(in: 0...3), Gen<Edit.Side?>.element(of: sides))
            .map { Edit(gap: $0.0, deleteCount: $0.1, insertCount: $0.2, side: $0.3 ?? .ours) }
    }

    static func scenarioGenerator(sides: [Edit.Side]) -> Generator<Scenario, some Sequence & SendableMetatype> {
        zip(Gen.int(in: 0...24), editGenerator(sides: sides).array(of: 0...8), Gen.bool)
            .map { Scenario(baseCount: $0.0, edits: $0.1, crlf: $0.2) }
    }

    /// Short texts over a three-line alphabet, so that diffs are ambiguous and lines repeat.
    static let smallAlphabetText: Generator<Data, some Sequence & SendableMetatype> =
        zip(Gen.int(in: 0...2).array(of: 0...10), Gen.bool)
        .map { values, finalNewline in
            let text = values.map { "\($0)\n" }.joined()
            return Data((finalNewline || text.isEmpty ? text : String(text.dropLast())).utf8)
        }
}
