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

private func rules(_ text: String) throws -> IgnoreRules {
    try IgnoreRules(userRules: text)
}

private func invalidPattern(_ text: String) -> IgnoreRules.InvalidPattern? {
    do {
        _ = try IgnoreRules(userRules: text)
        return nil
    } catch {
        return error as? IgnoreRules.InvalidPattern
    }
}

@Suite("Built-in ignore rules")
struct BuiltInIgnoreRulesTests {
    @Test(arguments: [
        ".note.md.swp", ".note.md.swo", ".note.md.swx", "4913", "5036", "5159", "note.md~", ".note.md.un~",
        ".#note.md", "#note.md#", ".goutputstream-ABC123", "#16441577", ".note.md.kate-swp",
        "note.md___jb_tmp___", "note.md___jb_old___", "note.md___jb_bak___", "storage.json.vsctmp",
        "sedAb3xYz", "sed4kQ9zP", "tmpmQQIxW", ".dat.nosync1a2b.Xy12Zq", ".~lock.note.odt#", "~$report.docx",
        ".stfolder", ".stignore", ".stversions", ".syncthing.note.md.tmp", "~syncthing~note.md.tmp",
        ".dropbox", ".dropbox.attr", ".dropbox.cache", ".note.md.~1a2b3c", ".owncloudsync.log",
        "._sync_1234abcd.db", ".sync_1234abcd.db-wal", "book.pdf.filepart", "book.pdf.crdownload",
        ".DS_Store", "._note.md", "Icon\r", "Thumbs.db", "thumbs.db", "ehthumbs.db", "desktop.ini",
        "Desktop.ini", ".directory", ".Trash-1000", ".nfs000000000012345600000001", ".fuse_hidden0000000100000002",
        ".git", ".hg", ".svn", ".jj", ".notesync", ".notesync-tmp-1f2e3d", "journal/2024/.note.md.swp",
        "journal/note.md~"
    ])
    func ignoresLitterFiles(_ name: String) {
        #expect(IgnoreRules.builtIn.isIgnored(name, isDirectory: false))
        #expect(IgnoreRules.builtIn.isIgnoredPath(name, isDirectory: false))
    }

    @Test(arguments: [
        ".git", ".hg", ".svn", ".jj", ".notesync", ".stversions", ".Trash-1000", "lost+found", "$RECYCLE.BIN",
        "System Volume Information", ".Spotlight-V100", ".fseventsd", "sub/.git"
    ])
    func ignoresLitterDirectories(_ name: String) {
        #expect(IgnoreRules.builtIn.isIgnored(name, isDirectory: true))
    }

    @Test(arguments: [
        "notes.md", "2024-plan.md", "2024", "4914", "04913", "1234567", "note.md.GiISPp", "note.md.save",
        "note.md.save.1", "chapter.part", "sedentary", "sedabcdef", "tmpfolder", "sed", "#note.md", "#1 priority.md",
        "#", ".notesyncignore", ".gitignore", ".bashrc", "README", "lost+found", "~notes.md", "café.md",
        "note.sync-conflict-20240101-120000-ABCDEFG.md", "foo (Miguel Mota's conflicted copy 2014-06-17).txt",
        "note (conflicted copy 2024-01-02 101112).md", "note (conflict laptop 2024-05-01 093000).md",
        "journal/2024/notes.md"
    ])
    func keepsNotes(_ name: String) {
        #expect(!IgnoreRules.builtIn.isIgnored(name, isDirectory: false))
        #expect(!IgnoreRules.builtIn.isIgnoredPath(name, isDirectory: false))
    }

    @Test func vimProbeIsAFileNeverADirectory() {
        #expect(!IgnoreRules.builtIn.isIgnored("4913", isDirectory: true))
        #expect(!IgnoreRules.builtIn.isIgnored("sedAb3xYz", isDirectory: true))
    }

    @Test func stateDirectoryAndEverythingInItIsIgnored() {
        #expect(IgnoreRules.builtIn.isIgnoredPath(".notesync/state.db", isDirectory: false))
        #expect(IgnoreRules.builtIn.isIgnoredPath(".notesync/trash/a.md", isDirectory: false))
        #expect(IgnoreRules.builtIn.isIgnored(".notesync", isDirectory: true))
        #expect(ReservedNames.isAgentOwned(ReservedNames.agentTempPrefix + "x"))
        #expect(!ReservedNames.isAgentOwned(IgnoreRules.fileName))
    }

    /// A folder that differs from the state directory only in case (or in what vfat and CIFS strip) is notesync's
    /// own on every device: on a case-folding folder it is the state directory, and on any other it could not be
    /// written on such a device, so it is never synced; `!` cannot bring it back, and the rule says why.
    @Test func otherSpellingsOfTheStateDirectoryAreIgnored() throws {
        let ignore = try rules("!.NoteSync/\n!*")
        for path in [".NoteSync/x.md", ".NOTESYNC/state.sqlite", "sub/.noteſync/x.md", ".notesync../x", "NOTESY~1/x"] {
            #expect(ignore.isIgnoredPath(path, isDirectory: false), "\(path)")
        }
        #expect(ignore.isIgnored(".Notesync-Tmp-abc", isDirectory: false))
        #expect(!ignore.isIgnoredPath(".NotesyncIgnore", isDirectory: false))
        #expect(!ignore.isIgnoredPath("Notesync/x.md", isDirectory: false))
        let rule = try #require(ignore.decidingRule(for: ".NoteSync/x.md", isDirectory: false))
        #expect(rule.description.contains("in any case"), "\(rule)")
    }

    @Test func userRulesCannotReincludeAgentNames() throws {
        let ignore = try rules("!.notesync\n!.notesync/\n!.notesync/**\n!.notesync-tmp-*\n!*")
        #expect(ignore.isIgnored(".notesync", isDirectory: true))
        #expect(ignore.isIgnoredPath(".notesync/state.db", isDirectory: false))
        #expect(ignore.isIgnored(".notesync-tmp-abc", isDirectory: false))
        #expect(ignore.isIgnored("sub/.notesync-tmp-abc", isDirectory: false))
    }

    @Test func userRulesCanReincludeOtherBuiltIns() throws {
        let ignore = try rules("!*~\n!.git/")
        #expect(!ignore.isIgnored("note.md~", isDirectory: false))
        #expect(!ignore.isIgnored(".git", isDirectory: true))
        #expect(ignore.isIgnored(".git", isDirectory: false))
        #expect(ignore.isIgnored(".note.md.swp", isDirectory: false))
    }

    @Test func everyBuiltInRuleSaysWhoMakesIt() {
        let builtIns = IgnoreRules.builtIn.rules
        #expect(builtIns.count > 40)
        for rule in builtIns {
            guard case .builtIn(let madeBy) = rule.origin else {
                Issue.record("\(rule) is not built-in")
                continue
            }
            #expect(!madeBy.isEmpty)
            #expect(!rule.isNegated)
        }
    }

    @Test func decidingRuleExplainsBuiltIns() throws {
        let rule = try #require(IgnoreRules.builtIn.decidingRule(for: "a/.note.md.swp", isDirectory: false))
        #expect(
            rule.description
                == "built-in rule `.*.sw?` (vim/neovim swap files and their .swx probe, nano lock files)")
        #expect(IgnoreRules.builtIn.decidingRule(for: "notes.md", isDirectory: false) == nil)
    }
}

@Suite("gitignore semantics of .notesyncignore")
struct UserIgnoreRulesTests {
    @Test func absentOrEmptyFileKeepsOnlyBuiltIns() throws {
        #expect(try IgnoreRules(userRules: nil) == IgnoreRules.builtIn)
        #expect(try rules("") == IgnoreRules.builtIn)
        #expect(try rules("# only a comment\n\n   \n") == IgnoreRules.builtIn)
    }

    @Test func nameWithoutSlashMatchesAtAnyDepth() throws {
        let ignore = try rules("build")
        #expect(ignore.isIgnored("build", isDirectory: true))
        #expect(ignore.isIgnored("build", isDirectory: false))
        #expect(ignore.isIgnored("a/b/build", isDirectory: false))
        #expect(!ignore.isIgnored("builder", isDirectory: false))
        #expect(!ignore.isIgnored("build/x.md", isDirectory: false))
        #expect(ignore.isIgnoredPath("build/x.md", isDirectory: false))
    }

    @Test func leadingSlashAnchorsToTheRoot() throws {
        let ignore = try rules("/todo.md")
        #expect(ignore.isIgnored("todo.md", isDirectory: false))
        #expect(!ignore.isIgnored("a/todo.md", isDirectory: false))
    }

    @Test func middleSlashAnchorsToTheRoot() throws {
        let ignore = try rules("doc/frotz")
        #expect(ignore.isIgnored("doc/frotz", isDirectory: false))
        #expect(ignore.isIgnored("doc/frotz", isDirectory: true))
        #expect(!ignore.isIgnored("a/doc/frotz", isDirectory: false))
    }

    @Test func trailingSlashMatchesDirectoriesOnly() throws {
        let ignore = try rules("drafts/\ndoc/frotz/")
        #expect(ignore.isIgnored("drafts", isDirectory: true))
        #expect(ignore.isIgnored("a/drafts", isDirectory: true))
        #expect(!ignore.isIgnored("drafts", isDirectory: false))
        #expect(ignore.isIgnoredPath("drafts/x.md", isDirectory: false))
        #expect(ignore.isIgnored("doc/frotz", isDirectory: true))
        #expect(!ignore.isIgnored("doc/frotz", isDirectory: false))
        #expect(!ignore.isIgnored("a/doc/frotz", isDirectory: true))
    }

    @Test func negationReincludesAndTheLastRuleWins() throws {
        let ignore = try rules("*.log\n!keep.log")
        #expect(ignore.isIgnored("a.log", isDirectory: false))
        #expect(!ignore.isIgnored("keep.log", isDirectory: false))
        #expect(!ignore.isIgnored("sub/keep.log", isDirectory: false))

        let reversed = try rules("!keep.log\n*.log")
        #expect(reversed.isIgnored("keep.log", isDirectory: false))
    }

    @Test func fileInsideIgnoredDirectoryCannotBeReincluded() throws {
        let ignore = try rules("build/\n!build/keep.md")
        #expect(ignore.isIgnoredPath("build/keep.md", isDirectory: false))
        #expect(ignore.isIgnoredPath("build/keep.md/x", isDirectory: false))

        let contentsOnly = try rules("build/*\n!build/keep.md")
        #expect(!contentsOnly.isIgnoredPath("build", isDirectory: true))
        #expect(!contentsOnly.isIgnoredPath("build/keep.md", isDirectory: false))
        #expect(contentsOnly.isIgnoredPath("build/other.md", isDirectory: false))
        #expect(contentsOnly.isIgnoredPath("build/sub/keep.md", isDirectory: false))
    }

    /// The example from gitignore(5): exclude everything except directory `foo/bar`.
    @Test func gitignoreManualExample() throws {
        let ignore = try rules("/*\n!/foo\n/foo/*\n!/foo/bar")
        #expect(!ignore.isIgnoredPath("foo/bar", isDirectory: true))
        #expect(!ignore.isIgnoredPath("foo/bar/note.md", isDirectory: false))
        #expect(ignore.isIgnoredPath("foo/baz", isDirectory: false))
        #expect(ignore.isIgnoredPath("other.md", isDirectory: false))
        #expect(ignore.isIgnoredPath("other/x.md", isDirectory: false))
    }

    @Test func leadingDoubleStarMatchesAtAnyDepth() throws {
        let ignore = try rules("**/foo\n**/logs/debug.log")
        #expect(ignore.isIgnored("foo", isDirectory: false))
        #expect(ignore.isIgnored("a/foo", isDirectory: false))
        #expect(ignore.isIgnored("a/b/foo", isDirectory: true))
        #expect(ignore.isIgnored("logs/debug.log", isDirectory: false))
        #expect(ignore.isIgnored("x/logs/debug.log", isDirectory: false))
        #expect(!ignore.isIgnored("logs/x/debug.log", isDirectory: false))
    }

    @Test func trailingDoubleStarMatchesEverythingInside() throws {
        let ignore = try rules("abc/**")
        #expect(ignore.isIgnored("abc/x", isDirectory: false))
        #expect(ignore.isIgnored("abc/x/y", isDirectory: false))
        #expect(!ignore.isIgnored("abc", isDirectory: true))
        #expect(!ignore.isIgnored("x/abc/y", isDirectory: false))
    }

    @Test func middleDoubleStarMatchesZeroOrMoreDirectories() throws {
        let ignore = try rules("a/**/b")
        #expect(ignore.isIgnored("a/b", isDirectory: false))
        #expect(ignore.isIgnored("a/x/b", isDirectory: false))
        #expect(ignore.isIgnored("a/x/y/b", isDirectory: false))
        #expect(!ignore.isIgnored("a/xb", isDirectory: false))
        #expect(!ignore.isIgnored("x/a/b", isDirectory: false))
    }

    @Test func otherDoubleStarsAreSingleStars() throws {
        let ignore = try rules("/a**b\nx**")
        #expect(ignore.isIgnored("axyb", isDirectory: false))
        #expect(ignore.isIgnored("ab", isDirectory: false))
        #expect(!ignore.isIgnored("ax/yb", isDirectory: false))
        #expect(ignore.isIgnored("d/xylophone", isDirectory: false))
    }

    @Test func starAndQuestionMarkStopAtSlash() throws {
        let ignore = try rules("/doc/*.md\nnote?.txt")
        #expect(ignore.isIgnored("doc/a.md", isDirectory: false))
        #expect(ignore.isIgnored("doc/.md", isDirectory: false))
        #expect(!ignore.isIgnored("doc/x/a.md", isDirectory: false))
        #expect(!ignore.isIgnoredPath("doc/x/a.md", isDirectory: false))
        #expect(ignore.isIgnored("note1.txt", isDirectory: false))
        #expect(ignore.isIgnored("noteé.txt", isDirectory: false))
        #expect(!ignore.isIgnored("note.txt", isDirectory: false))
        #expect(!ignore.isIgnored("note12.txt", isDirectory: false))
    }

    @Test func starMatchesLeadingDots() throws {
        let ignore = try rules("*.tmp")
        #expect(ignore.isIgnored(".hidden.tmp", isDirectory: false))
    }

    @Test(arguments: [
        ("[abc].md", "a.md", true), ("[abc].md", "d.md", false),
        ("[0-9][0-9].md", "42.md", true), ("[0-9][0-9].md", "4a.md", false),
        ("[!0-9]*.md", "x1.md", true), ("[!0-9]*.md", "1x.md", false),
        ("[^a]b", "cb", true), ("[^a]b", "ab", false),
        ("[]]x", "]x", true), ("[!]]x", "]x", false), ("[!]]x", "ax", true),
        ("[a-]z", "-z", true), ("[a-]z", "bz", false),
        ("[[:digit:]]*", "7up", true), ("[[:digit:]]*", "up", false),
        ("[[:upper:]]*", "Éclair", true), ("[[:space:]]x", " x", true),
        ("\\[x\\]", "[x]", true), ("[\\]]", "]", true),
        ("*.[Mm][Dd]", "a.MD", true), ("Notes.md", "notes.md", false)
    ])
    func characterClasses(pattern: String, name: String, ignored: Bool) throws {
        #expect(try rules(pattern).isIgnored(name, isDirectory: false) == ignored)
    }

    @Test func escapesAndComments() throws {
        let ignore = try rules("#comment\n\\#notes\n\\!important.md\nfoo #bar")
        #expect(!ignore.isIgnored("comment", isDirectory: false))
        #expect(!ignore.isIgnored("#comment", isDirectory: false))
        #expect(ignore.isIgnored("#notes", isDirectory: false))
        #expect(ignore.isIgnored("!important.md", isDirectory: false))
        #expect(!ignore.isIgnored("important.md", isDirectory: false))
        #expect(ignore.isIgnored("foo #bar", isDirectory: false))
    }

    @Test func trailingSpacesAreDroppedUnlessEscaped() throws {
        let ignore = try rules("foo   \nbar\\ \nbaz\\  \n qux")
        #expect(ignore.isIgnored("foo", isDirectory: false))
        #expect(!ignore.isIgnored("foo ", isDirectory: false))
        #expect(ignore.isIgnored("bar ", isDirectory: false))
        #expect(!ignore.isIgnored("bar", isDirectory: false))
        #expect(ignore.isIgnored("baz ", isDirectory: false))
        #expect(!ignore.isIgnored("baz  ", isDirectory: false))
        #expect(ignore.isIgnored(" qux", isDirectory: false))
        #expect(!ignore.isIgnored("qux", isDirectory: false))
    }

    @Test func crlfLinesAndByteOrderMark() throws {
        let ignore = try rules("\u{FEFF}a.md\r\nb.md\r\n")
        #expect(ignore.isIgnored("a.md", isDirectory: false))
        #expect(ignore.isIgnored("b.md", isDirectory: false))
    }

    @Test func patternsAndPathsCompareAsNFC() throws {
        let ignore = try rules("cafe\u{301}.md")
        #expect(ignore.isIgnored("caf\u{E9}.md", isDirectory: false))
        #expect(ignore.isIgnoredPath("dir/cafe\u{301}.md", isDirectory: false))
    }

    @Test func decidingRuleNamesTheLine() throws {
        let ignore = try rules("# drafts\n*.log\n!keep.log")
        let rule = try #require(ignore.decidingRule(for: "keep.log", isDirectory: false))
        #expect(rule.isNegated)
        #expect(rule.origin == .file(".notesyncignore", line: 3))
        #expect(rule.description == ".notesyncignore, line 3: `!keep.log`")
        let ancestor = try #require(try rules("logs/").decidingRule(for: "logs/a/b.md", isDirectory: false))
        #expect(ancestor.pattern == "logs/")
    }
}

@Suite("Invalid .notesyncignore patterns")
struct InvalidIgnorePatternTests {
    @Test func errorNamesFileLineProblemAndFix() throws {
        let error = try #require(invalidPattern("# notes\n*.log\n[abc\n"))
        #expect(error.source == ".notesyncignore")
        #expect(error.line == 3)
        #expect(error.pattern == "[abc")
        #expect(
            error.description == """
                .notesyncignore, line 3: invalid pattern `[abc`: a `[` is never closed. \
                Fix: close it with `]`, or write `\\[` for a literal bracket.
                """)
        #expect(error.localizedDescription == error.description)
    }

    @Test func errorUsesTheGivenSourceName() throws {
        do {
            _ = try IgnoreRules(userRules: "ok\n[", source: "/home/me/Notes/.notesyncignore")
            Issue.record("an unclosed bracket was accepted")
        } catch let error as IgnoreRules.InvalidPattern {
            #expect(error.description.hasPrefix("/home/me/Notes/.notesyncignore, line 2: "))
        }
    }

    @Test(arguments: [
        ("foo\\", "lone backslash"),
        ("!", "`!` alone"),
        ("/", "names no file"),
        ("!/", "names no file"),
        ("a//b", "empty path component"),
        ("../x", "`..` components"),
        ("./x", "`..` components"),
        ("[z-a]", "backwards"),
        ("[[:word:]]", "not a character class"),
        ("x[!", "never closed")
    ])
    func rejects(pattern: String, problem: String) throws {
        let error = try #require(invalidPattern(pattern))
        #expect(error.line == 1)
        #expect(error.problem.contains(problem))
        #expect(!error.fix.isEmpty)
    }

    @Test func controlCharactersInPatternsArePrintedEscaped() throws {
        let error = try #require(invalidPattern("a\u{1B}[31"))
        #expect(error.description.contains("`a\\u{1B}[31`"))
    }
}

@Suite("Conflict copies of other sync tools")
struct ForeignConflictCopyTests {
    @Test(arguments: [
        ("note.sync-conflict-20240101-120000-ABCDEFG.md", ForeignConflictCopy.Tool.syncthing, "note.md"),
        ("dir/note.sync-conflict-20231231-235959-7XQ4ZRA.txt", .syncthing, "dir/note.txt"),
        (".sync-conflict-20240101-120000-ABCDEFG.bashrc", .syncthing, ".bashrc"),
        ("README.sync-conflict-20240101-120000-ABCDEFG", .syncthing, "README"),
        ("note.sync-conflict-20150101-120000.md", .syncthing, "note.md"),
        ("foo (Miguel Mota's conflicted copy 2014-06-17).txt", .dropbox, "foo.txt"),
        ("foo (Miguel Mota's conflicted copy 2014-06-17 (1)).txt", .dropbox, "foo.txt"),
        ("a/b (notes) (Anna's Conflicted Copy 2020-02-29).md", .dropbox, "a/b (notes).md"),
        ("Report (Case Conflict).md", .dropbox, "Report.md"),
        ("Report (Case Conflict 1).md", .dropbox, "Report.md"),
        ("café (Unicode Encoding Conflict).md", .dropbox, "café.md"),
        ("Plans (Selective Sync Conflict)", .dropbox, "Plans"),
        ("note (conflicted copy 2024-01-02 101112).md", .nextcloud, "note.md"),
        ("note (conflicted copy alice 2024-01-02 101112).md", .nextcloud, "note.md"),
        ("Makefile (conflicted copy 2024-01-02 101112)", .nextcloud, "Makefile"),
        ("note_conflict-20130723-114633.md", .nextcloud, "note.md")
    ])
    func recognises(name: String, tool: ForeignConflictCopy.Tool, original: String) throws {
        #expect(ForeignConflictCopy.detect(name) == tool)
        let copy = try #require(ForeignConflictCopy(path: name))
        #expect(copy.originalPath == original)
    }

    @Test(arguments: [
        "note.md", "sync-conflict notes.md", "my conflicted copy.md", "note.sync-conflict-2024.md",
        "note_conflict-notes.md", "Case Conflict.md", "note (Case Conflict) draft.md",
        "note (conflict laptop 2024-05-01 093000).md", ".sync-conflict-20240101-120000-ABCDEFG",
        "foo (conflicted copy 2014-06-17x).txt", "(conflicted copy 2024-01-02 101112).md"
    ])
    func ignoresOtherNames(_ name: String) {
        #expect(ForeignConflictCopy.detect(name) == nil)
    }

    @Test func conflictCopiesAreNotIgnored() {
        for name in [
            "note.sync-conflict-20240101-120000-ABCDEFG.md", "note_conflict-20130723-114633.md",
            "foo (Miguel Mota's conflicted copy 2014-06-17).txt"
        ] {
            #expect(!IgnoreRules.builtIn.isIgnored(name, isDirectory: false))
        }
    }
}

@Suite("notesync's own conflict copy names")
struct ConflictCopyNameTests {
    private let may1 = Date(timeIntervalSince1970: 1_714_555_800)

    @Test(arguments: [
        ("a/b/c.md", "a/b/c (conflict laptop 2024-05-01 093000).md"),
        ("note.md", "note (conflict laptop 2024-05-01 093000).md"),
        ("README", "README (conflict laptop 2024-05-01 093000)"),
        (".bashrc", ".bashrc (conflict laptop 2024-05-01 093000)"),
        ("dir/.config.json", "dir/.config (conflict laptop 2024-05-01 093000).json"),
        ("archive.tar.gz", "archive.tar (conflict laptop 2024-05-01 093000).gz"),
        ("v1.2/notes", "v1.2/notes (conflict laptop 2024-05-01 093000)"),
        ("Mr. Smith notes", "Mr. Smith notes (conflict laptop 2024-05-01 093000)"),
        ("note.", "note. (conflict laptop 2024-05-01 093000)")
    ])
    func buildsNames(path: String, expected: String) {
        let name = ConflictCopyName.notesyncConflictName(for: path, device: "laptop", date: may1)
        #expect(name == expected)
        #expect(ConflictCopyName.isNotesyncConflictCopy(name))
    }

    @Test func usesUTC() {
        let newYearsEve = Date(timeIntervalSince1970: 1_704_067_199)
        #expect(ConflictCopyName.stamp(newYearsEve) == "2023-12-31 235959")
    }

    @Test func attemptCounterMakesADifferentName() {
        let second = ConflictCopyName.notesyncConflictName(for: "c.md", device: "laptop", date: may1, attempt: 2)
        #expect(second == "c (conflict laptop 2024-05-01 093000 2).md")
        #expect(ConflictCopyName.isNotesyncConflictCopy(second))
    }

    @Test(arguments: [
        ("Anna's laptop (work)/x\n", "Anna's laptop -work--x"),
        ("", "unknown device"),
        ("  \t ", "unknown device"),
        ("a:b*c?\u{202E}d", "a-b-c-d"),
        ("Cafe\u{301}", "Caf\u{E9}"),
        ("two\u{2028}lines", "two lines")
    ])
    func cleansDeviceNames(device: String, expected: String) {
        #expect(ConflictCopyName.cleanDevice(device) == expected)
        let name = ConflictCopyName.notesyncConflictName(for: "n.md", device: device, date: may1)
        #expect(ConflictCopyName.isNotesyncConflictCopy(name))
    }

    @Test(arguments: [
        "note.md", "note (conflict).md", "note (conflicted copy 2024-01-02 101112).md",
        " (conflict laptop 2024-05-01 093000).md", "note (conflict laptop 2024-05-01).md",
        "note (conflict 2024-05-01 093000).md", "note (conflict laptop 2024-05-01 093000) old.md",
        "note (conflict laptop 2024-05-01 093000 x).md"
    ])
    func rejectsOtherNames(_ name: String) {
        #expect(!ConflictCopyName.isNotesyncConflictCopy(name))
    }

    @Test(arguments: [
        String(repeating: "x", count: 300) + ".md",
        String(repeating: "é", count: 200) + ".md",
        String(repeating: "e\u{301}", count: 150),
        String(repeating: "👩‍👩‍👧‍👦", count: 40) + ".txt",
        "a." + String(repeating: "b", count: 300),
        "dir/sub/" + String(repeating: "日本", count: 100) + ".md"
    ])
    func longNamesAreTruncatedOnCharacterBoundaries(_ path: String) throws {
        let device = String(repeating: "device ", count: 30)
        let name = ConflictCopyName.notesyncConflictName(for: path, device: device, date: may1)
        let (directory, component) = splitLastComponent(name)
        #expect(directory == splitLastComponent(path).directory)
        #expect(component.utf8.count <= ConflictCopyName.maximumComponentBytes)
        #expect(component.utf8.count > ConflictCopyName.maximumComponentBytes - 25)
        #expect(String(validating: Array(component.utf8), as: UTF8.self) == component)
        #expect(ConflictCopyName.isNotesyncConflictCopy(name))
        let stem = try #require(component.range(of: " (conflict ")).lowerBound
        let original = splitLastComponent(path).name
        #expect(original.hasPrefix(component[..<stem]))
        #expect(original.count > component[..<stem].count)
    }

    @Test func keepsTheExtensionWhenTruncating() {
        let name = ConflictCopyName.notesyncConflictName(
            for: String(repeating: "x", count: 300) + ".md", device: "laptop", date: may1
        )
        #expect(name.hasSuffix(" (conflict laptop 2024-05-01 093000).md"))
        #expect(name.utf8.count == 255)
    }

    @Test func roundTripsAcrossNamesDevicesAndDates() {
        let paths = [
            "a.md", "x/y/z.txt", ".hidden", "no-ext", "a (conflict b 2020-01-01 000000).md", "…", "日記.md"
        ]
        let devices = ["laptop", "Anna's (work) PC", "", "x/y", "日本"]
        let dates = [Date(timeIntervalSince1970: 0), may1, Date(timeIntervalSince1970: 4_102_444_800)]
        for path in paths {
            for device in devices {
                for date in dates {
                    for attempt in [1, 2, 17] {
                        let name = ConflictCopyName.notesyncConflictName(
                            for: path, device: device, date: date, attempt: attempt
                        )
                        #expect(ConflictCopyName.isNotesyncConflictCopy(name), "\(name)")
                        #expect(ForeignConflictCopy.detect(name) == nil, "\(name)")
                        #expect(!IgnoreRules.builtIn.isIgnoredPath(name, isDirectory: false), "\(name)")
                    }
                }
            }
        }
    }
}
