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

@Suite struct RecordNameTests {
    @Test(arguments: [
        "note.md", "work/plan.md", "a/b/c/d.txt", "café.md", "日本語/メモ.md", ".hidden", "a b (1).md",
        String(repeating: "x", count: 255), ".notesyncignore", "sub/.NotesyncIgnore", "notesync/x.md", ".notesync-tmp",
        "notesy~1.md", "notesy~", "NOTES~1/x", "n.md", "N"
    ])
    func acceptsOrdinaryNames(_ text: String) throws {
        #expect(try RecordName(validating: text).string == text)
    }

    @Test(arguments: [
        ("", "empty"), ("/etc/passwd", "absolute"), ("../escape.md", ".."), ("a/../../b", ".."), ("a/./b", "\".\""),
        ("a//b", "empty path component"), ("a/", "empty path component"), ("nul\u{0}byte", "NUL"),
        ("bell\u{7}", "control"), ("esc\u{1B}[31mred", "control"), ("del\u{7F}", "control"), ("c1\u{85}", "control"),
        ("new\nline", "control"), (String(repeating: "x", count: 256), "255 bytes"),
        (String(repeating: "é", count: 128), "255 bytes"), ("cafe\u{301}.md", "NFC"),
        (".notesync/state.db", "state or temp"), ("sub/.notesync-tmp-1", "state or temp"), ("bad\u{FFFD}.md", "UTF-8"),
        // Spellings a case-folding, dot-stripping or short-name folder takes for notesync's own.
        (".Notesync/state.sqlite", "state or temp"), (".NOTESYNC/evil.md", "state or temp"),
        (".note\u{17F}ync/x.md", "state or temp"), (".notesync./x.md", "state or temp"), (".notesync /x", "state or temp"),
        ("a/.NoteSync-TMP-x.md", "state or temp"), ("\u{200B}.notesync/x", "state or temp"), ("NOTESY~1/x", "state or temp"),
        ("d/notesy~12", "state or temp")
    ])
    func refusesHostileNames(_ text: String, _ reason: String) {
        #expect(throws: RecordName.NameError.self) { try RecordName(validating: text) }
        do {
            _ = try RecordName(validating: text)
        } catch {
            #expect(error.reason.contains(reason), "\(error.reason) should mention \(reason)")
            #expect(!error.description.contains("\u{1B}"), "escape sequences never reach the terminal")
        }
    }

    /// Foundation on Linux normalizes with older Unicode tables than `String ==` uses: both spellings of these
    /// Unicode 16 letters passed its NFC check, yet were one `RecordName`.
    @Test(arguments: [
        ("\u{16D67}\u{16D67}.md", "\u{16D68}.md"), ("\u{105D2}\u{307}/x.md", "\u{105C9}/x.md"),
        ("cafe\u{301}.md", "caf\u{E9}.md")
    ])
    func oneSpellingPerName(_ decomposed: String, _ composed: String) throws {
        #expect(throws: RecordName.NameError.self) { try RecordName(validating: decomposed) }
        #expect(try RecordName(validating: composed).string.utf8.elementsEqual(composed.utf8))
        #expect(RecordName.nfc(decomposed).utf8.elementsEqual(composed.utf8))
    }

    @Test func displayEscapesControlCharacters() {
        #expect(DisplayName.escape("a\u{1B}[2Jb\n") == "a\\u{1b}[2Jb\\u{a}")
        #expect(DisplayName.escape("plain/ok.md") == "plain/ok.md")
        #expect(DisplayName.escape("café/naïve 日本.md") == "café/naïve 日本.md")
        // Each kind of scalar that is escaped, alone in a name (a name with nothing to escape is returned as it is).
        #expect(DisplayName.escape("a\\b") == "a\\\\b")
        #expect(DisplayName.escape("tab\there") == "tab\\u{9}here")
        #expect(DisplayName.escape("del\u{7F}") == "del\\u{7f}")
        #expect(DisplayName.escape("c1\u{85}") == "c1\\u{85}")
        #expect(DisplayName.escape("ls\u{2028}ps\u{2029}") == "ls\\u{2028}ps\\u{2029}")
    }

    /// The only scalars whose NFC holds an ASCII character are the three ``RecordName/mayHaveUnicodeTwin(_:)``
    /// names: an ASCII name without `K`, a backtick or `;` has no Unicode twin, and a partial scan lists no folder
    /// for it.
    @Test func onlyThreeScalarsNormaliseToASCII() {
        var found: [UInt32] = []
        for value in UInt32(0x80)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            if RecordName.nfc(String(Character(scalar))).utf8.contains(where: { $0 < 0x80 }) { found.append(value) }
        }
        #expect(found == [0x37E, 0x1FEF, 0x212A])
        #expect(RecordName.mayHaveUnicodeTwin("K.md") && RecordName.mayHaveUnicodeTwin("a;b") && RecordName.mayHaveUnicodeTwin("`"))
        #expect(!RecordName.mayHaveUnicodeTwin("notes/plan-k.md"))
    }
}
