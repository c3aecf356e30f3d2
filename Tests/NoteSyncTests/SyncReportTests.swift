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

/// A report holds one change per note a sync touched (100,000 for a first sync of as many notes), so a change
/// keeps its rare parts (detail, diff, old name) apart; what it says and what `--json` prints are unchanged.
@Suite struct SyncReportTests {
    @Test func aPlainChangeIsSmall() {
        #expect(MemoryLayout<PlannedChange>.stride == 32)
    }

    @Test func theRarePartsReadAndWriteAsFields() {
        var change = PlannedChange(kind: .download, name: "a.md")
        #expect(change.detail == nil && change.diff == nil && change.from == nil)
        let copy = change
        change.detail = "edited on the server, renamed here"
        #expect(change.detail == "edited on the server, renamed here" && change.from == nil)
        // Values, not references: the copy taken before is as it was.
        #expect(copy.detail == nil && copy != change)
        change.detail = nil
        #expect(change == copy && change.hashValue == copy.hashValue)
        let moved = PlannedChange(kind: .move, name: "b.md", diff: "-x\n+y\n", from: "a.md")
        #expect(moved.from == "a.md" && moved.diff == "-x\n+y\n" && moved.detail == nil)
    }

    /// The JSON has the same keys as before: the absent parts are left out, the present ones named as fields.
    @Test func jsonKeepsItsShape() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let plain = PlannedChange(kind: .upload, name: "a.md")
        #expect(String(decoding: try encoder.encode(plain), as: UTF8.self) == #"{"kind":"upload","name":"a.md"}"#)
        let full = PlannedChange(kind: .move, name: "b.md", detail: "d", diff: "x", from: "a.md")
        #expect(
            String(decoding: try encoder.encode(full), as: UTF8.self)
                == #"{"detail":"d","diff":"x","from":"a.md","kind":"move","name":"b.md"}"#)
        for change in [plain, full] {
            #expect(try JSONDecoder().decode(PlannedChange.self, from: try encoder.encode(change)) == change)
        }
    }
}
