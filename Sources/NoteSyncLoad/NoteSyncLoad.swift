import ArgumentParser
import Logging

/// `notesync-load`: the load generators of the tests and the benchmark, a test-support executable that the user's
/// `notesync` does not contain. It uses the library's public surface only, as any other client would.
///
/// - `commit-load`: many writers committing at once to one server (the concurrency tests, ConcurrentCommitTests,
///   S3Tests, SshfsTests).
/// - `history-load`: a server's history written in simulated time, then gc (scripts/benchlib/server_life.py).
@main
struct NoteSyncLoad: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notesync-load",
        abstract: "Load generators for notesync's tests and benchmark (not for users).",
        subcommands: [CommitLoad.self, HistoryLoad.self]
    )
}

/// The log level, as `notesync --log-level` takes it; logs go to standard error.
struct LoadOptions: ParsableArguments {
    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical (default: warning).")
    var logLevel: Logger.Level?

    func makeLogger() -> Logger {
        let level = logLevel ?? .warning
        _ = LoadOptions.bootstrap
        var logger = Logger(label: "notesync-load")
        logger.logLevel = level
        return logger
    }

    private static let bootstrap: Void = LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
