import Foundation
import Logging
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport
import Testing

/// A folder renamed under two real agents is committed as moves, however the agent receives the watch's events.
@Suite struct AgentFolderMoveTests {
    /// Every change in the server's log, in order.
    private static func allChanges(_ server: String) throws -> [RecordChange] {
        let store = try ServerStore(root: server, device: "checker", logger: .init(label: "t"))
        var changes: [RecordChange] = []
        var seq: Int64 = 1
        while true {
            switch try store.readSlot(seq) {
            case .missing: return changes
            case .damaged: break
            case .entry(let entry): changes += entry.changes
            }
            seq += 1
        }
    }

    /// `mv proj archive` on A while B edits `proj/n01.md`, each event reaching the agents 30 ms late
    /// (`NOTESYNC_TEST_WATCH_LAG_MS`), longer than the 20 ms settle: every event of the rename comes in a batch of
    /// its own, as the events of a big folder's rename may (docs/agent.md, Settling). Both devices end with `archive/`
    /// holding every note and B's edit, no `proj/`, the log holds moves only (no note uploaded anew, no delete), B's
    /// trash stays empty, and the history of a note says where it came from. A new name synced before its rename
    /// is known makes new notes and deletes, and the delete of the edited note loses to the edit, back at `proj/`.
    @Test func aFolderRenamedWhileTheOtherDeviceEditsArrivesAsMovesWithTheEdit() throws {
        let t = try TwoDevices("agent-folder-move")
        let count = 40
        let names = (0..<count).map { String(format: "n%02d.md", $0) }
        for (index, name) in names.enumerated() { try t.write(t.a, "proj/" + name, "note \(index)\nline two\nline three\n") }
        try t.sync(t.a)
        try t.sync(t.b)
        t.environment[WatchLag.environmentVariable] = "30"
        let agents = try TwoAgents(devices: t)
        defer { agents.stop() }

        #expect(rename(t.a + "/proj", t.a + "/archive") == 0)
        let edited = "note 1\nline two by bob\nline three\n"
        try t.write(t.b, "proj/n01.md", edited)

        let arrived = eventually(60) {
            [t.a, t.b].allSatisfy { folder in
                guard let notes = try? t.notes(folder) else { return false }
                return notes.count == count && notes.keys.allSatisfy { $0.hasPrefix("archive/") }
                    && notes["archive/n01.md"] == Data(edited.utf8)
            }
        }
        let shown = { (folder: String) in (try? t.notes(folder).keys.sorted().prefix(5)).map { "\(Array($0))" } ?? "?" }
        #expect(arrived, "A: \(shown(t.a)), B: \(shown(t.b))\n\(agents.logs())")
        #expect(FileIO.lstatInfo(t.a + "/proj") == nil && FileIO.lstatInfo(t.b + "/proj") == nil)

        let changes = try Self.allChanges(t.server)
        let deletes = changes.filter { $0.op == .delete && $0.movedTo == nil }
        #expect(deletes.isEmpty, "deletes committed: \(deletes.map(\.name).prefix(5))")
        let saved = Set(changes.filter { $0.name.hasPrefix("archive/") && $0.movedFrom == nil && $0.op != .delete }.map(\.name))
        let moved = Set(changes.compactMap(\.movedFrom))
        #expect(moved == Set(names.map { "proj/" + $0 }), "\(moved.count) of \(count) notes moved")
        #expect(saved.isSubset(of: ["archive/n01.md"]), "notes uploaded anew: \(saved.sorted().prefix(5))")
        #expect(FileIO.lstatInfo(t.b + "/.notesync/trash") == nil, "nothing went to B's trash")
        #expect(try t.expectOK(["conflicts", "--notes", t.a]).stdout.contains("no conflict"))
        let history = try t.expectOK(["history", "--notes", t.b, "archive/n05.md"]).stdout
        #expect(history.contains("renamed from proj/n05.md"), "\(history)")
    }
}
