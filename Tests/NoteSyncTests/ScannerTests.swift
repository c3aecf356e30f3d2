import Foundation
import Testing

@testable import NoteSync

/// The scan's own rules, apart from the sync around it.
@Suite struct ScannerTests {
    /// A warning names the path it is about as a value, not only in its text: the command line's JSON and the
    /// agent's log can say which note without parsing the message.
    @Test func warningsCarryTheirPath() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        try writeFile(root + "/sub/real.md", Data("real\n".utf8))
        #expect(symlink(root + "/sub/real.md", root + "/sub/link.md") == 0)
        #expect(mkfifo(root + "/pipe.md", 0o600) == 0)
        let scan = try Scanner(root: root, rules: .builtIn).scan(bases: [:], only: nil)
        let paths = scan.warnings.filter { $0.kind == .notANote }.compactMap(\.path).sorted()
        #expect(paths == ["pipe.md", "sub/link.md"], "\(scan.warnings)")
    }

    /// Two files whose names differ only in Unicode normalisation (ext4 keeps both) are one record: the first in
    /// byte order (NFD `e` + U+0301 sorts before NFC U+00E9) syncs, the other is skipped with a warning, in the
    /// root, in a subfolder (walked on another thread) and in a partial scan alike. A name without a twin is
    /// kept whatever its form.
    @Test func aNoteWithAUnicodeTwinIsSkippedWithAWarning() throws {
        let dir = try TempDirectory()
        let root = dir.sub("notes")
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        for folder in [root, root + "/sub"] {
            try writeFile(folder + "/caf\u{E9}.md", Data("composed\n".utf8))
            try writeFile(folder + "/cafe\u{301}.md", Data("decomposed\n".utf8))
            try writeFile(folder + "/plain.md", Data("plain\n".utf8))
        }
        try writeFile(root + "/sub/alone-e\u{301}.md", Data("alone\n".utf8))
        let scanner = Scanner(root: root, rules: .builtIn)

        for only in [nil, ["sub"]] as [[String]?] {
            let scan = try scanner.scan(bases: [:], only: only)
            let folders = only == nil ? ["", "sub/"] : ["sub/"]
            let expected = Set(
                try folders.flatMap { [try name($0 + "caf\u{E9}.md"), try name($0 + "plain.md")] }
                    + [try name("sub/alone-\u{E9}.md")])
            #expect(Set(scan.files.keys) == expected)
            for folder in folders {
                let file = try #require(scan.files[try name(folder + "caf\u{E9}.md")])
                #expect(file.path == folder + "cafe\u{301}.md")
                #expect(Array(file.path.utf8) == Array((folder + "cafe\u{301}.md").utf8))
                #expect(
                    scan.warnings.contains {
                        $0.kind == .unicodeTwin
                            && $0.message.contains(
                                "\"\(folder)caf\\u{E9}.md\" and \"\(folder)cafe\\u{301}.md\" are the same name in different Unicode forms")
                    })
            }
            #expect(scan.warnings.count == folders.count, "\(scan.warnings)")
            #expect(scan.files[try name("sub/alone-\u{E9}.md")]?.path == "sub/alone-e\u{301}.md")
        }
    }
}
