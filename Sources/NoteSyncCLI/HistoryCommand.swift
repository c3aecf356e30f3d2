import ArgumentParser
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

struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract:
            "List every version of a note still in the server's log, following its renames back (restore one with "
            + "`notesync restore`)."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var folderOptions: FolderOptions
    @Argument(help: "The note, relative to the notes folder.", completion: .custom(completeNoteNames)) var note: String

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let (folder, state, config) = try folderOptions.open(readOnly: true)
            let name = try recordName(note, folder: folder)
            let store = try SyncEngine.openServer(folder: folder, config: config, logger: logger)
            let versions = try store.history(of: name)
            if versions.isEmpty { print("no versions of \(name) on the server") }
            let current = try state.bases()[name]?.tag
            for version in versions {
                let (seq, change) = (version.seq, version.change)
                let device = store.deviceName(version.entry.device)
                var what = change.op == .delete ? "deleted" : "saved \(change.text?.size ?? 0) bytes"
                // The delete of a move is no delete of the note: it went on under its new name.
                if change.op == .delete, let to = change.movedTo { what = "renamed to \(DisplayName.escape(to))" }
                if let from = change.movedFrom {
                    what = "renamed from \(DisplayName.escape(from)), " + what
                } else if change.name != name.string {
                    what += " as \(DisplayName.escape(change.name))"
                }
                let mark = seq == current ? "  <- synced here" : ""
                print("version \(seq)  \(formatTime(change.modified))  \(device)  \(what)\(mark)")
            }
            return ExitCodes.ok
        }
    }
}

struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Bring back an earlier version of a note (see `notesync history`), then sync it.",
        discussion: """
            The current text is not lost: a sync first pushes it to the server's history; if it cannot (the note \
            changed on both sides), the current text is kept as a conflict copy beside the note. With the server \
            unreachable nothing is restored (exit 3): restore once it is back. A deleted note can be restored too. \
            While an agent runs on the folder, it restores on the command's behalf.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var folderOptions: FolderOptions
    @Argument(help: "The note, relative to the notes folder.", completion: .custom(completeNoteNames)) var note: String
    @Option(help: "The version number `notesync history` shows.") var version: Int64

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let (folder, state, config) = try folderOptions.open()
            let name = try recordName(note, folder: folder)
            let result: SyncEngine.RestoreResult
            do {
                let lock = try FolderLock(folder)
                defer { withExtendedLifetime(lock) {} }
                result = try SyncEngine(folder: folder, state: state, config: config, logger: logger).restore(name, version: version)
            } catch let error as NoteSyncError where error.kind == .locked {
                // An agent holds the folder: it restores on our behalf, through its socket.
                let request = AgentSocket.Request(restore: .init(note: name.string, version: version))
                guard let answer = try AgentSocket.requestSync(folder, request) else { throw error }
                result = SyncEngine.RestoreResult(report: try answer.reportOrError("restore"), keptAs: answer.keptAs)
            }
            print("restored version \(version) of \(name)")
            if let copy = result.keptAs { print("its current text was not on the server yet: kept as \(copy)") }
            printReport(result.report)
            return result.report.offline ? ExitCodes.offline : ExitCodes.ok
        }
    }
}

/// Turns a note argument (relative to the notes folder, or a path to the file) into a record name.
func recordName(_ argument: String, folder: NotesFolder) throws -> RecordName {
    var path = argument
    let absolute = NotesFolder(root: argument).root
    if absolute.hasPrefix(folder.root + "/") { path = String(absolute.dropFirst(folder.root.count + 1)) }
    do { return try RecordName(validating: RecordName.nfc(path)) } catch {
        throw NoteSyncError(.usage, path: argument, error.reason, fix: "give the note's path inside \(folder.root)")
    }
}
