import ArgumentParser
import Foundation
import Logging
import NoteSync

/// `--notes DIR`, defaulting to the notes folder that encloses the current directory (as git does).
struct FolderOptions: ParsableArguments {
    @Option(name: .long, help: "The notes folder (default: the one enclosing the current directory).")
    var notes: String?

    func folder() throws -> NotesFolder {
        if let notes {
            let folder = NotesFolder(root: notes)
            guard folder.isInitialized else {
                throw NoteSyncError(
                    .notInitialized, path: folder.root, "is not a notesync notes folder",
                    fix: "run `notesync init --notes \(folder.root) --server DIR`")
            }
            return folder
        }
        guard let folder = NotesFolder.enclosing(FileManager.default.currentDirectoryPath) else {
            throw NoteSyncError(
                .notInitialized, path: FileManager.default.currentDirectoryPath,
                "is not inside a notesync notes folder",
                fix: "cd into your notes folder, pass --notes DIR, or run `notesync init`")
        }
        return folder
    }

    /// Opens the folder's state and configuration; `readOnly` writes nothing (dry runs, status).
    func open(readOnly: Bool = false) throws -> (NotesFolder, LocalState, FolderConfig) {
        let folder = try folder()
        if !readOnly { folder.keepOtherToolsOut() }
        let state = try LocalState(path: folder.database, readOnly: readOnly)
        return (folder, state, try FolderConfig(state: state, folder: folder))
    }
}

/// True when standard output is a terminal (colour only then).
var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

func formatTime(_ nanoseconds: Int64) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
    return formatter.string(from: Date(timeIntervalSince1970: Double(nanoseconds) / 1e9))
}

func printJSON<T: Encodable>(_ value: T) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}
