import Foundation
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

/// Temp names next to a note say which note they belong to, fit in a file name, and stay agent-owned (ignored).
@Suite struct AgentTempNameTests {
    @Test(arguments: [
        "note.md", "a/b/README", "x", "dir/ünïcödé (conflict bob 2033-01-01 000000).md",
        "long/" + String(repeating: "é", count: 127)
    ])
    func aTempNameLeadsBackToItsNote(_ note: String) throws {
        let fileName = note.split(separator: "/").last ?? ""
        let temp = AgentTempName.make(for: fileName)
        #expect(temp.utf8.count <= 255)
        #expect(try IgnoreRules(userRules: nil).isIgnored(temp, isDirectory: false))
        let directory = note.contains("/") ? String(note[...note.lastIndex(of: "/")!]) : ""
        let back = try #require(AgentTempName.note(ofTemp: directory + temp))
        #expect(note.hasPrefix(back), "\(back) is not (a prefix of) \(note)")
        #expect(back.utf8.count >= directory.utf8.count + min(fileName.utf8.count, 200))
    }

    @Test func otherNamesLeadNowhere() {
        #expect(AgentTempName.note(ofTemp: "a/.notesync-tmp-0123456789abcdef") == nil)
        #expect(AgentTempName.note(ofTemp: ".notesync-tmp-status-0123") == nil)
        #expect(AgentTempName.note(ofTemp: "note.md") == nil)
    }
}
