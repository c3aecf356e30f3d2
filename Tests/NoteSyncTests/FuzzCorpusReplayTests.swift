import Foundation
import NoteSyncFuzz
import Testing

/// Replays every file of `Tests/FuzzCorpus/<target>/` (seeds, and in `crashes/` every input that once broke an
/// invariant) through the fuzz targets' own checking functions, without sanitizers, so a fixed crash stays fixed.
@Suite struct FuzzCorpusReplayTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("FuzzCorpus")

    @Test(arguments: FuzzTarget.allCases)
    func corpusPassesTheChecks(_ target: FuzzTarget) throws {
        let folder = Self.corpus.appendingPathComponent(target.rawValue)
        var files: [URL] = []
        if let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey]) {
            for case let file as URL in walker
            where try file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true {
                files.append(file)
            }
        }
        #expect(files.count >= 5, "Tests/FuzzCorpus/\(target.rawValue) holds the target's seeds")
        for file in files {
            let input = try Data(contentsOf: file)
            do {
                try target.check(input)
            } catch {
                Issue.record("\(target.rawValue)/\(file.path.dropFirst(folder.path.count + 1)): \(error)")
            }
        }
    }
}
