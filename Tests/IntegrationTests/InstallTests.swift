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
import Testing

/// The repository's root (scripts/install lives there).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// Runs a program to completion; its output in files, so a full pipe never blocks it.
@discardableResult
func runTool(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: String? = nil
) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let out = NSTemporaryDirectory() + "/notesync-tool-\(UUID().uuidString)"
    _ = FileManager.default.createFile(atPath: out + ".out", contents: nil)
    _ = FileManager.default.createFile(atPath: out + ".err", contents: nil)
    defer {
        unlink(out + ".out")
        unlink(out + ".err")
    }
    process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out + ".out"))
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: out + ".err"))
    process.standardInput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return ProcessResult(
        status: process.terminationStatus, stdout: (try? String(contentsOfFile: out + ".out", encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOfFile: out + ".err", encoding: .utf8)) ?? "")
}

/// What the bash completion script offers for `notesync WORDS…` (the last word being completed), as bash would ask.
func bashCompletions(script: String, words: [String], path: String, directory: String? = nil) throws -> [String] {
    let program = """
        source "$1"; shift
        COMP_WORDS=(notesync "$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
        COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
        _notesync notesync "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf '%s\\n' "${COMPREPLY[@]}"
        """
    let result = try runTool(
        "/bin/bash", ["-c", program, "bash", script] + words, environment: ["PATH": path], directory: directory)
    #expect(result.status == 0, "bash: \(result.stderr)")
    return result.stdout.split(separator: "\n").map(String.init)
}

@Suite(.serialized)
struct InstallTests {
    /// scripts/install into a temp prefix (with the binary under test: building release again would take minutes),
    /// then the installed binary, every man page, the bash completion of a subcommand and of note names, and
    /// `--uninstall`, which leaves nothing under the prefix.
    @Test func installsRunsAndUninstallsLeavingNothing() throws {
        let scratch = try Scratch("install")
        let prefix = scratch.path + "/prefix"
        let install = try runTool("/bin/bash", [repositoryRoot + "/scripts/install", "--prefix", prefix, "--binary", try notesyncBinary()])
        try #require(install.status == 0, "scripts/install: \(install.stdout) \(install.stderr)")

        // The installed binary runs and names its version and commit.
        let bin = prefix + "/bin/notesync"
        let version = try runTool(bin, ["--version"])
        #expect(version.status == 0)
        #expect(version.stdout.hasPrefix(NoteSyncVersion.string + " ("), "\(version.stdout)")
        #expect(version.stdout.contains("commit"), "\(version.stdout)")

        // A page per command, each rendering without a warning and naming its command's options.
        let manDirectory = prefix + "/share/man/man1"
        let pages = Set(try FileManager.default.contentsOfDirectory(atPath: manDirectory))
        let expected: [String: [String]] = [
            "notesync.1": ["SUBCOMMANDS", "notesync-sync", "--version"],
            "notesync-init.1": [
                "--notes", "--server", "--device-name", "--create-server", "--encrypt", "--passphrase-file", "--quiet",
                "--max-file-size"
            ],
            "notesync-config.1": ["--notes", "--max-file-size"],
            "notesync-sync.1": ["--notes", "--dry-run", "--json", "--allow-mass-delete", "--quiet"],
            "notesync-diff.1": ["--json", "--allow-mass-delete"],
            "notesync-recover.1": ["--server", "--dry-run"],
            "notesync-watch.1": ["--poll-interval", "--gap-grace"],
            "notesync-status.1": ["--notes", "--json"],
            "notesync-conflicts.1": ["--notes"],
            "notesync-history.1": ["<note>", "--notes"],
            "notesync-restore.1": ["<note>", "--version"],
            "notesync-server.1": ["notesync-server-fsck"],
            "notesync-server-init.1": ["<", "--encrypt", "--private"],
            "notesync-server-fsck.1": ["--repair", "--temp-age", "--gap-age", "--server-id", "--passphrase-file"],
            "notesync-server-upgrade.1": ["<"],
            "notesync-server-gc.1": ["--dry-run", "--grace"],
            "notesync-server-retention.1": ["--all", "--hourly", "--daily", "--weekly"],
            "notesync-server-du.1": ["--json"],
            "notesync-server-passphrase.1": ["--passphrase-file", "--new-passphrase-file"],
            "notesync-server-encrypt.1": ["<", "recover"],
            "notesync-service.1": ["notesync-service-install", "systemd"],
            "notesync-service-install.1": ["--notes"],
            "notesync-service-uninstall.1": ["--notes"],
            "notesync-service-status.1": ["--notes"]
        ]
        #expect(pages == Set(expected.keys), "\(pages.sorted())")
        for (page, words) in expected where pages.contains(page) {
            let rendered = try runTool(
                "/usr/bin/man", ["-l", "--warnings=all", manDirectory + "/" + page],
                environment: ["MANWIDTH": "100", "LANG": "C.UTF-8", "MANPAGER": "cat"])
            #expect(rendered.status == 0, "\(page): \(rendered.stderr)")
            #expect(rendered.stderr.isEmpty, "\(page) warns: \(rendered.stderr)")
            #expect(rendered.stdout.contains("NAME") && rendered.stdout.contains("SYNOPSIS"), "\(page)")
            for word in words { #expect(rendered.stdout.contains(word), "\(page) lacks \(word):\n\(rendered.stdout)") }
        }

        // Completions: bash completes a subcommand, and the notes of a folder for `history` and `restore`.
        let bash = prefix + "/share/bash-completion/completions/notesync"
        let path = prefix + "/bin:/usr/bin:/bin"
        #expect(try bashCompletions(script: bash, words: ["sy"], path: path) == ["sync"])
        #expect(try bashCompletions(script: bash, words: ["service", "st"], path: path) == ["status"])
        let notes = scratch.path + "/notes"
        try FileManager.default.createDirectory(atPath: notes + "/sub", withIntermediateDirectories: true)
        try Data("a\n".utf8).write(to: URL(fileURLWithPath: notes + "/alpha.md"))
        try Data("b\n".utf8).write(to: URL(fileURLWithPath: notes + "/sub/beta note.md"))
        #expect(try runTool(bin, ["init", "--notes", notes, "--server", scratch.path + "/server", "--create-server"]).status == 0)
        #expect(try runTool(bin, ["sync", "--notes", notes]).status == 0)
        #expect(try bashCompletions(script: bash, words: ["history", "--notes", notes, ""], path: path) == ["alpha.md", "sub/beta note.md"])
        #expect(try bashCompletions(script: bash, words: ["restore", "su"], path: path, directory: notes + "/sub") == ["sub/beta note.md"])
        #expect(try bashCompletions(script: bash, words: ["history", ""], path: path, directory: scratch.path).isEmpty)
        for file in ["share/zsh/site-functions/_notesync", "share/fish/vendor_completions.d/notesync.fish"] {
            let text = try String(contentsOfFile: prefix + "/" + file, encoding: .utf8)
            #expect(text.contains("---completion history"), "\(file) lacks the note completion")
        }

        // Installing again replaces the files in place; uninstalling removes every one, and the folders it made.
        let again = try runTool("/bin/bash", [repositoryRoot + "/scripts/install", "--prefix", prefix, "--binary", try notesyncBinary()])
        #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
        let uninstall = try runTool("/bin/bash", [repositoryRoot + "/scripts/install", "--prefix", prefix, "--uninstall"])
        #expect(uninstall.status == 0, "\(uninstall.stdout) \(uninstall.stderr)")
        let left = FileManager.default.enumerator(atPath: prefix).map { $0.allObjects.compactMap { $0 as? String } } ?? []
        #expect(left.isEmpty, "left under the prefix: \(left)")
    }

    /// A plain `swift build` names no commit; a build with NOTESYNC_COMMIT (scripts/install, scripts/run) does.
    @Test func versionNamesTheCommitOrSaysItIsUnknown() throws {
        let result = try runTool(try notesyncBinary(), ["--version"])
        #expect(result.status == 0)
        let line = result.stdout.trimmingCharacters(in: .newlines)
        let commit = /0\.\d+\.\d+ \((commit [0-9a-zA-Z._+-]+|unknown commit)\)/
        #expect(line.wholeMatch(of: commit) != nil, "\(line)")
    }

    /// What the user sees of `--uninstall` under a prefix where nothing was installed.
    @Test func uninstallWithoutAnInstallSaysSo() throws {
        let scratch = try Scratch("uninstall")
        let result = try runTool("/bin/bash", [repositoryRoot + "/scripts/install", "--prefix", scratch.path, "--uninstall"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("nothing to uninstall"), "\(result.stderr)")
    }
}
