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

/// The progress line of a long sync: on a pseudo-terminal, and never in `--json` output, with `--quiet`, or piped.
/// The first sync is made long on purpose: the process stops itself after its 20th publish to the server
/// (`NOTESYNC_TEST_STOP_AT`) and the driver lets it go on 1.5 s later, so it always runs longer than the second
/// after which the line shows.
@Suite(.serialized)
struct ProgressLineTests {
    /// A notes folder of 3,000 notes, initialised, never synced.
    static func folder(_ scratch: Scratch, _ name: String) throws -> String {
        let notes = scratch.path + "/" + name
        for index in 0..<3000 {
            let directory = notes + "/d\(index % 30)"
            if index < 30 { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
            try Data(String(repeating: "line \(index)\n", count: 40).utf8).write(to: URL(fileURLWithPath: directory + "/n\(index).md"))
        }
        let result = try notesync(
            ["init", "--notes", notes, "--server", scratch.path + "/server-" + name, "--create-server"], scratch: scratch.path)
        try #require(result.status == 0, "\(result.stderr)")
        return notes
    }

    /// Runs notesync on a pseudo-terminal (stdout and stderr both on it); continues it 1.5 s after it stops itself.
    /// Returns its exit code and everything it wrote to the terminal.
    static func onTerminal(_ arguments: [String], stopAt: String) throws -> (Int32, String) {
        let script = """
            import os, pty, sys, time, select, signal
            cmd = sys.argv[1:]
            pid, fd = pty.fork()
            if pid == 0:
                os.environ["TERM"] = "xterm"
                os.environ["NOTESYNC_TEST_STOP_AT"] = \"\(stopAt)\"
                os.execvp(cmd[0], cmd)
            out = b""
            def drain(t):
                global out
                r, _, _ = select.select([fd], [], [], t)
                if r:
                    try: data = os.read(fd, 65536)
                    except OSError: data = b""
                    out += data
                    return bool(data)
                return False
            deadline = time.time() + 120
            while time.time() < deadline:
                drain(0.02)
                p, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
                if p and os.WIFSTOPPED(status):
                    time.sleep(1.5); os.kill(pid, signal.SIGCONT); continue
                if p:
                    while drain(0.1): pass
                    sys.stdout.write(out.hex()); sys.exit(os.waitstatus_to_exitcode(status))
            os.kill(pid, 9); sys.exit(124)
            """
        let result = try runTool("/usr/bin/python3", ["-c", script, try notesyncBinary()] + arguments)
        let hex = Array(result.stdout.utf8)
        let bytes = stride(from: 0, to: hex.count - 1, by: 2).compactMap { offset in
            UInt8(String(decoding: hex[offset..<offset + 2], as: UTF8.self), radix: 16)
        }
        return (result.status, String(decoding: bytes, as: UTF8.self))
    }

    static let drawn = ["uploading:", "committing:", "scanning", "\u{1B}[K"]

    @Test func aLongFirstSyncShowsOneUpdatingLineOnATerminal() throws {
        let scratch = try Scratch("progress-tty")
        let notes = try Self.folder(scratch, "notes")
        let (status, output) = try Self.onTerminal(["sync", "--notes", notes], stopAt: "server.published:3")
        #expect(status == 0, "\(output)")
        // Drawn with a carriage return and cleared to the end of the line, named by its phase, with counts and bytes.
        #expect(output.contains("\r\u{1B}[K"), "\(output.prefix(2000))")
        // A slow machine may also draw the scan's line first; the stop after the third publish makes sure the
        // upload's or the commit's line is drawn too.
        let lines = output.split(separator: "\r").filter { $0.contains("notes,") }
        #expect(!lines.isEmpty, "no progress line: \(output.prefix(2000))")
        for line in lines { #expect(line.contains("/3,000 notes") && line.contains(" MB"), "\(line)") }
        let sending = lines.first { $0.contains("uploading:") || $0.contains("committing:") }
        #expect(sending != nil, "no upload or commit line: \(lines)")
        // Cleared before the report: the report's lines start clean.
        #expect(output.contains("synced: 3000 upload"), "\(output.suffix(500))")
        #expect(!output.contains("\u{1B}[Ksynced"))
    }

    @Test func jsonAndQuietShowNoProgressEvenOnATerminal() throws {
        let scratch = try Scratch("progress-json")
        for (name, flag) in [("json", "--json"), ("quiet", "--quiet")] {
            let notes = try Self.folder(scratch, name)
            let (status, output) = try Self.onTerminal(["sync", "--notes", notes, flag], stopAt: "server.published:2")
            #expect(status == 0, "\(output.prefix(500))")
            for text in Self.drawn { #expect(!output.contains(text), "\(flag) shows progress (\(text.debugDescription))") }
        }
    }

    @Test func pipedOutputHasNoProgress() throws {
        let scratch = try Scratch("progress-pipe")
        let notes = try Self.folder(scratch, "notes")
        let process = try NotesyncProcess(
            ["sync", "--notes", notes], scratch: scratch.path, environment: ["NOTESYNC_TEST_STOP_AT": "server.published:3"])
        var waited = 0
        while !processIsStopped(process.pid) && waited < 600 {
            usleep(50_000)
            waited += 1
        }
        #expect(processIsStopped(process.pid), "the sync did not reach its stop point")
        usleep(1_500_000)
        kill(process.pid, SIGCONT)
        let result = process.wait()
        #expect(result.status == 0, "\(result.stderr)")
        for text in Self.drawn { #expect(!result.stderr.contains(text), "piped stderr shows progress: \(result.stderr.prefix(500))") }
        #expect(result.stdout.contains("synced: 3000 upload"))
    }
}
