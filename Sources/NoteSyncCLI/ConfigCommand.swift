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

/// `notesync config`: shows a notes folder's settings, and sets those given. They are kept in the local state (never
/// synced): each device has its own.
struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Show this notes folder's settings, or set them.",
        discussion: """
            --max-file-size: the largest note this device syncs (default \(FileSizeLimit.default); binary units: \
            500k, 32M, 2G; 0 for no limit). A bigger note is left out with a warning, here (not uploaded, never taken \
            as deleted) and from the server (not downloaded); every other note syncs, and `notesync status` lists \
            the notes left out. A note over 8 MiB is read, sent and written in pieces, so a raised limit costs a \
            sync no memory. The next sync (a running agent's too) uses the new value.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var folderOptions: FolderOptions
    @Option(help: ArgumentHelp("The largest note this device syncs (e.g. 32M, 2G; 0: no limit).", valueName: "size"))
    var maxFileSize: String?

    func run() throws {
        _ = global.makeLogger()
        try reportingErrors {
            let (_, state, config) = try folderOptions.open(readOnly: maxFileSize == nil)
            if let maxFileSize {
                let limit = try FileSizeLimit(parsing: maxFileSize)
                try state.setMeta([.maxFileSize: limit.stored])
            }
            let limit = try FileSizeLimit.stored(in: state)
            print("device:        \(config.deviceName)")
            print("server:        \(DisplayName.escape(config.server))")
            print("max-file-size: \(limit)" + (try state.meta(.maxFileSize) == nil ? " (the default)" : ""))
            return ExitCodes.ok
        }
    }
}
