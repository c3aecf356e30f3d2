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
        if !readOnly {
            folder.keepOtherToolsOut()
            folder.keepStatePrivate()
        }
        let state = try LocalState(path: folder.database, readOnly: readOnly)
        return (folder, state, try FolderConfig(state: state, folder: folder))
    }
}

/// Shell completion of a note argument (`history`, `restore`): the synced notes of the folder that `--notes` names
/// on the command line being completed, else of the notes folder enclosing the current directory, read from the
/// local state without writing anything. Names that start with `prefix`, sorted; none when there is no folder.
func completeNoteNames(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
    var folder: NotesFolder?
    if let notes = notesArgument(words) {
        folder = NotesFolder(root: notes)
    } else {
        folder = NotesFolder.enclosing(FileManager.default.currentDirectoryPath)
    }
    guard let folder, folder.isInitialized, let state = try? LocalState(path: folder.database, readOnly: true),
        let bases = try? state.bases()
    else { return [] }
    try? state.close()
    let word = unquotedWord(prefix)
    return bases.keys.map(\.string).filter { $0.hasPrefix(word) }.sorted()
}

/// The value of `--notes DIR` or `--notes=DIR` among shell words, unquoted, `~` expanded.
func notesArgument(_ words: [String]) -> String? {
    var value: String?
    for (index, word) in words.enumerated() {
        if word == "--notes", index + 1 < words.count {
            value = words[index + 1]
        } else if word.hasPrefix("--notes=") {
            value = String(word.dropFirst("--notes=".count))
        }
    }
    guard let value, !value.isEmpty else { return nil }
    let word = unquotedWord(value)
    if word == "~" || word.hasPrefix("~/") { return NSHomeDirectory() + word.dropFirst() }
    return word
}

/// A shell word as the shell passes it verbatim to a completion: quotes removed, backslash escapes undone.
func unquotedWord(_ word: String) -> String {
    var out = ""
    var quote: Character?
    var escaped = false
    for character in word {
        if escaped {
            out.append(character)
            escaped = false
        } else if character == "\\" && quote != "'" {
            escaped = true
        } else if let open = quote, character == open {
            quote = nil
        } else if quote == nil && (character == "'" || character == "\"") {
            quote = character
        } else {
            out.append(character)
        }
    }
    return out
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
