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

struct ManualPageTests {
    static let dump = """
        {"serializationVersion": 0, "command": {"commandName": "notesync", "abstract": "Keep notes in sync.",
         "discussion": "Exit codes:\\n  0   success\\n  1   failure\\n.dot starts a line, a\\\\b -x",
         "arguments": [{"kind": "flag", "names": [{"kind": "long", "name": "version"}], "shouldDisplay": true,
                        "isOptional": true, "isRepeating": false, "abstract": "Show the version."}],
         "subcommands": [
           {"commandName": "sync", "superCommands": ["notesync"], "abstract": "Sync once.",
            "arguments": [
              {"kind": "option", "names": [{"kind": "long", "name": "notes"}], "valueName": "notes", "isOptional": true,
               "isRepeating": false, "shouldDisplay": true, "abstract": "The notes folder."},
              {"kind": "flag", "names": [{"kind": "short", "name": "q"}, {"kind": "long", "name": "quiet"}],
               "isOptional": true, "isRepeating": false, "shouldDisplay": true, "abstract": "No progress."},
              {"kind": "option", "names": [{"kind": "long", "name": "secret"}], "valueName": "x", "isOptional": true,
               "isRepeating": false, "shouldDisplay": false}]},
           {"commandName": "hidden", "superCommands": ["notesync"], "shouldDisplay": false},
           {"commandName": "help", "superCommands": ["notesync"]}]}}
        """

    @Test func aPagePerShownCommandNamedAsGitNamesThem() throws {
        let root = try ManualPage.command(fromDump: Data(Self.dump.utf8))
        let pages = ManualPage.pages(root, version: "9.9.9")
        #expect(pages.map(\.file) == ["notesync.1", "notesync-sync.1"])
        let sync = pages[1].text
        #expect(sync.hasPrefix(".TH \"NOTESYNC\\-SYNC\" 1 \"\" \"notesync 9.9.9\""))
        #expect(sync.contains("notesync\\-sync \\- Sync once."))
        #expect(sync.contains("[\\fB\\-\\-notes\\fR \\fI<notes>\\fR]"))
        #expect(sync.contains(".TP\n\\fB\\-q\\fR, \\fB\\-\\-quiet\\fR\nNo progress."))
        #expect(!sync.contains("secret"))
        #expect(sync.contains(".SH SEE ALSO\n\\fBnotesync\\fR(1)"))
    }

    @Test func helpTextBecomesSafeRoff() throws {
        let root = try ManualPage.command(fromDump: Data(Self.dump.utf8))
        let page = ManualPage.pages(root, version: "1").first!.text
        // The indented table is kept as it is; a line starting with a dot is text, not a request; backslashes and
        // hyphens are escaped.
        #expect(page.contains("Exit codes:\n.nf\n  0   success\n  1   failure\n.fi\n\\&.dot starts a line, a\\eb \\-x"))
        #expect(page.contains(".SH SUBCOMMANDS\n.TP\n\\fBnotesync\\-sync\\fR(1)\nSync once."))
        #expect(!page.contains("hidden") && !page.contains("notesync\\-help"))
    }
}
