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

/// Exit codes, documented in `--help` and the README.
enum ExitCodes {
    static let ok: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 64
    static let offline: Int32 = 3
}

/// The entry point: malloc is set up before any thread allocates (``MallocTuning``), then the command line is parsed
/// and the command run. Every command but `watch` runs on the main thread, as a plain function: an `async` entry point
/// would start Swift's concurrency runtime for all of them, run the command on a thread of the global pool while the
/// main thread waits in `dispatch_main`, and park the main thread with `pthread_exit`, for which glibc loads
/// libgcc_s. `watch` (an ``AsyncParsableCommand``) runs as a task, the main thread serving the main queue.
/// The root command is async too (ArgumentParser asks that of a root with an async subcommand), but run alone it only
/// prints its help: that runs as a plain command. The command line is parsed synchronously, so a completion of an
/// argument must be a synchronous one (`.custom`, not `.customAsync`).
@main
enum NoteSyncMain {
    static func main() {
        MallocTuning.apply()
        var command: any ParsableCommand
        do {
            command = try NoteSyncCommand.parseAsRoot()
        } catch {
            NoteSyncCommand.exit(withError: error)
        }
        if let asyncCommand = command as? any AsyncParsableCommand, !(command is NoteSyncCommand) {
            let started = StartedCommand(command: asyncCommand)
            Task {
                var command = started.command
                do {
                    try await command.run()
                } catch {
                    NoteSyncCommand.exit(withError: error)
                }
                NoteSyncCommand.exit()
            }
            dispatchMain()
        }
        do {
            try command.run()
        } catch {
            NoteSyncCommand.exit(withError: error)
        }
    }

    /// The parsed async command, handed to the task that runs it (and to no other).
    private struct StartedCommand: @unchecked Sendable {
        let command: any AsyncParsableCommand
    }
}

struct NoteSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notesync",
        abstract: "Keep a folder of plain-text notes in sync through a shared server directory.",
        discussion: """
            Exit codes:
              0   success (fsck: the server is clean)
              1   failure, or fsck found problems; or a safety stop: the server at
                  the path is not this folder's server (another id), is behind this
                  device (restored from an older copy) or holds another log
                  (replaced, forked): see `notesync recover`; or a gap in the
                  server's log (an entry missing while later ones are there): see
                  `notesync server fsck --repair`; or a damaged server marker; or
                  a running agent that does not answer
              3   the server is unreachable (its folder, or the marker in it, is
                  missing: a share not mounted): local changes stay queued
              64  bad usage
            The same condition gives the same code in every command, run alone
            or served by a running agent.
            """,
        version: NoteSyncVersion.full,
        subcommands: [
            InitCommand.self, SyncCommand.self, DiffCommand.self, RecoverCommand.self, WatchCommand.self, StatusCommand.self,
            ConflictsCommand.self, ConfigCommand.self,
            HistoryCommand.self, RestoreCommand.self, ServerCommand.self, ServiceCommand.self,
            GenerateManualCommand.self
        ]
    )
}

/// Options every subcommand shares.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical (default: warning; info for watch).")
    var logLevel: Logger.Level?

    func makeLogger(_ label: String = "notesync", defaultLevel: Logger.Level = .warning) -> Logger {
        let level = logLevel ?? defaultLevel
        LoggingBootstrap.once(level: level)
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// Bootstraps swift-log exactly once per process.
enum LoggingBootstrap {
    private static let done: Void = {
        LoggingSystem.bootstrap { label in StreamLogHandler.standardError(label: label) }
    }()

    static func once(level: Logger.Level) { _ = done }
}

/// Runs `body`, printing a ``NoteSyncError`` the way users read it and mapping it to an exit code.
func reportingErrors(_ body: () throws -> Int32) throws {
    let code: Int32
    do {
        code = try body()
    } catch let error as NoteSyncError {
        FileHandle.standardError.write(Data("notesync: \(error)\n".utf8))
        code = ExitCodes.code(for: error)
    }
    if code != 0 { throw ExitCode(code) }
}

extension ExitCodes {
    /// The one mapping of errors to exit codes, for every command and for the agent's answers: 3 unreachable,
    /// 64 usage, 1 anything else.
    static func code(for error: NoteSyncError) -> Int32 { code(for: error.kind) }

    static func code(for kind: NoteSyncError.Kind) -> Int32 {
        switch kind {
        // No folder at the server path, or a folder without a server marker (the mount point of a share that is
        // not mounted): the server is away, as a sync treats it; changes stay queued.
        case .serverUnreachable, .notAServer: offline
        case .usage: usage
        // A damaged marker, another server, a server behind this device, a gap: the server is there, and
        // syncing is stopped until someone acts.
        default: failure
        }
    }

    /// The exit code of a sync that finished, run here or by the agent: 3 when it found the server away, 1 when
    /// it holds local deletes (not in a dry run), else 0.
    static func code(for report: SyncReport) -> Int32 {
        if report.offline { return offline }
        return report.stoppedShort ? failure : ok
    }
}

/// Where an `s3://` server's service is: the commands that name a server take it.
struct EndpointOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "For an s3:// server: the S3-compatible service's URL, e.g. http://127.0.0.1:8333 (default: "
                + "NOTESYNC_S3_ENDPOINT, else AWS S3).",
            valueName: "url"))
    var endpoint: String?
}
