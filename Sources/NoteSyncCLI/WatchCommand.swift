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
import ServiceLifecycle
import UnixSignals

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Run the agent: keep the notes folder and the server in sync until stopped.",
        discussion: """
            Local edits are seen through inotify and pushed once the file is quiet; other devices' commits \
            arrive through inotify on the server's log when the server is on a local filesystem, by polling \
            otherwise (--poll-interval; network filesystems cache attributes, so changes may show a little \
            later there). While the server is unreachable, changes stay queued and the agent retries by itself. \
            SIGTERM or SIGINT finishes the sync in flight and exits 0. `notesync status` shows what it is doing.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var folderOptions: FolderOptions
    @Option(help: "Seconds between polls of the server (default: 1 on network filesystems, 15 with inotify).")
    var pollInterval: Double?
    @Option(help: "Milliseconds a file must be quiet before it is synced.") var settleMs: Int = 20
    @Option(help: "Milliseconds a note must stay missing before its delete is synced.") var deleteSettleMs: Int = 400
    @Option(
        help:
            "Seconds a gap in the server's log (a missing entry with later ones present) is waited for before it is reported as an error; meanwhile nothing is pushed."
    )
    var gapGrace: Double = 600
    @Option(
        help:
            "Run `server gc` by itself this often when no other device did (a lease in the server says who did last): 1d, 12h, 0 to never."
    )
    var gcEvery: Duration = Duration(seconds: RetentionPolicy.day)
    @Option(
        help:
            "Seconds: a note saved again within this long of its last commit waits until it has passed (an editor's autosave makes one version per pace, not one per save); its last save is always committed. 0 commits every save."
    )
    var pace: Double = 5

    func run() async throws {
        let logger = global.makeLogger(defaultLevel: .info)
        let (folder, state, config): (NotesFolder, LocalState, FolderConfig)
        do {
            (folder, state, config) = try folderOptions.open()
        } catch let error as NoteSyncError {
            FileHandle.standardError.write(Data("notesync: \(error)\n".utf8))
            throw ExitCode(ExitCodes.code(for: error))
        }
        _ = state
        var options = AgentOptions()
        options.settle = .milliseconds(settleMs)
        options.deleteSettle = .milliseconds(deleteSettleMs)
        options.gapGrace = .milliseconds(Int(gapGrace * 1000))
        options.gcEvery = .seconds(gcEvery.seconds)
        options.pace = .milliseconds(Int(pace * 1000))
        if let pollInterval { options.pollInterval = .milliseconds(Int(pollInterval * 1000)) }
        let agent = SyncAgent(folder: folder, config: config, options: options, logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: agent, successTerminationBehavior: .gracefullyShutdownGroup)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        do {
            try await group.run()
        } catch let error as NoteSyncError {
            FileHandle.standardError.write(Data("notesync: \(error)\n".utf8))
            throw ExitCode(ExitCodes.code(for: error))
        }
    }
}
