import ArgumentParser
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

/// `notesync generate-manual DIR` (hidden): writes the manual pages, made from the command definitions
/// (``ManualPage``), one per command. `scripts/install` runs it.
struct GenerateManualCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate-manual",
        abstract: "Write notesync's manual pages (notesync.1, notesync-sync.1, …) into a folder.",
        shouldDisplay: false
    )

    @Argument(help: "The folder to write the pages into (created if missing).") var directory: String

    func run() throws {
        try reportingErrors {
            // The definitions as swift-argument-parser dumps them, from this very binary.
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
            process.arguments = ["--experimental-dump-help"]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw NoteSyncError(.io, "`notesync --experimental-dump-help` failed (exit \(process.terminationStatus))")
            }
            let root = try ManualPage.command(fromDump: data)
            try FileIO.makeDirectories(NotesFolder(root: directory).root)
            for (file, text) in ManualPage.pages(root, version: NoteSyncVersion.string) {
                let path = NotesFolder(root: directory).root + "/" + file
                try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
                print(path)
            }
            return ExitCodes.ok
        }
    }
}
