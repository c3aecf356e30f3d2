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

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync the notes folder with its server once, both ways.",
        discussion: """
            Scans the notes folder, fetches the server's changes, reconciles every note three ways (local, \
            last synced, server), applies and pushes. Edits on both sides are merged line by line; overlapping \
            edits keep both versions (the later edit keeps the name, the other becomes a conflict copy). \
            Deletes on the server move local notes to NOTES/.notesync/trash/.
            With --dry-run nothing is written anywhere: it prints what a sync would do, with diffs.
            Exit code 3 when the server cannot be reached: local changes stay queued for the next sync.
            Exit code 1 when local deletes would remove more than half of the notes: they are held, whole (none \
            is synced, every other change is); `--allow-mass-delete` lets them through (preview with `notesync \
            diff --allow-mass-delete`).
            While an agent runs on the folder, `sync` asks it to sync now (through .notesync/agent.sock) and \
            prints its report, with the exit code a sync alone would give. An agent that says nothing for 10 \
            seconds (stopped, or stuck) is reported (exit 1), and nothing is synced by the command itself.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var folderOptions: FolderOptions
    @Flag(help: "Show what a sync would do, as diffs; change nothing.") var dryRun = false
    @Flag(help: "Print the result as JSON.") var json = false
    @Flag(help: "Allow a sync that deletes more than half of the notes.") var allowMassDelete = false
    @Flag(name: .shortAndLong, help: "Show no progress line (a terminal shows one for work longer than a second).")
    var quiet = false

    func run() throws {
        try runSync(
            global: global, folderOptions: folderOptions, dryRun: dryRun, json: json,
            allowMassDelete: allowMassDelete, quiet: quiet)
    }
}

struct DiffCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Show what a sync would do, as unified diffs (same as `sync --dry-run`); change nothing.",
        discussion: """
            Exit codes as for `sync`. While an agent runs on the folder, it answers (it knows what changed).
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var folderOptions: FolderOptions
    @Flag(help: "Print the plan as JSON.") var json = false
    @Flag(help: "Show the deletes the mass-delete guard holds as a sync with --allow-mass-delete would make them.")
    var allowMassDelete = false
    @Flag(name: .shortAndLong, help: "Show no progress line (a terminal shows one for work longer than a second).")
    var quiet = false

    func run() throws {
        try runSync(
            global: global, folderOptions: folderOptions, dryRun: true, json: json, allowMassDelete: allowMassDelete,
            quiet: quiet)
    }
}

struct RecoverCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recover",
        abstract:
            "Sync again, from scratch, with the server now at the server path: after it was restored from an older copy, replaced, or on purpose moved to a new server.",
        discussion: """
            A sync stops (exit 1) when the server is not the one this notes folder synced with: another server id \
            at the path, a log that is behind this device (restored from an older backup) or that does not continue \
            the one it read (replaced, forked). `recover` forgets what this device knew of the server, binds the \
            notes folder to the server now at the path, and syncs as a first sync would with the notes it holds: \
            every note whose text the server lacks is pushed as a new commit after the server's current end, notes \
            the server has are pulled, and a note changed on both sides is merged or kept twice (a conflict copy). \
            It only adds: no note is deleted on any device for the sake of the recovery (deletes the server lost \
            are not made again). Run it with --dry-run first: it prints the same diff as `notesync diff`.

            To move a notes folder to a new server on purpose (an old share retired): point it there with \
            `notesync recover --server DIR`.

            While an agent runs on the folder, it makes the recovery on the command's behalf; only --server DIR \
            needs the agent stopped first. Exit code 3 when the server cannot be reached (its folder or marker \
            missing): run it again once the server is back.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var folderOptions: FolderOptions
    @Flag(help: "Show what the recovery would do, as diffs; change nothing.") var dryRun = false
    @Flag(help: "Print the result as JSON.") var json = false
    @Option(help: "Move the notes folder to this server directory (an existing notesync server).") var server: String?
    @OptionGroup var secret: PassphraseOptions
    @Flag(name: .shortAndLong, help: "Show no progress line (a terminal shows one for work longer than a second).")
    var quiet = false

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let (folder, state, folderConfig) = try folderOptions.open(readOnly: dryRun)
            let lock: FolderLock?
            do {
                lock = dryRun ? nil : try FolderLock(folder)
            } catch let error as NoteSyncError where error.kind == .locked && server == nil {
                // The agent running on the folder recovers, as it syncs on our behalf.
                guard let code = try askAgent(folder, AgentSocket.Request(recover: true), json: json) else { throw error }
                if code == ExitCodes.ok && !json {
                    print("recovered: this notes folder now syncs with server \(try state.meta(.serverID) ?? "?")")
                }
                return code
            } catch let error as NoteSyncError where error.kind == .locked {
                throw NoteSyncError(
                    .locked, path: folder.root,
                    "an agent (`notesync watch`) is running on this notes folder, and watches its present server",
                    fix: "stop the agent, run `notesync recover --server \(server ?? "DIR")` again, then start the agent")
            }
            defer { withExtendedLifetime(lock) {} }
            var recovery = FolderRecovery(folder: folder, state: state, config: folderConfig, server: server)
            recovery.secrets = secret.secrets
            recovery.dryRun = dryRun
            let options = SyncOptions(dryRun: dryRun, withDiffs: dryRun, colorDiffs: dryRun && stdoutIsTerminal && !json)
            var line: ProgressLine?
            let recovered = Result {
                try recovery.run(options, logger: logger) {
                    line = json ? nil : ProgressLine.start(quiet: quiet)
                    return line?.progress
                }
            }
            line?.finish()
            let (report, config) = try recovered.get()
            if json { try printJSON(report) } else { printReport(report) }
            // The server went away after the recovery began: it is not finished (the next sync or recover goes on).
            if report.offline { return ExitCodes.offline }
            if !dryRun && !json {
                print(
                    "recovered: this notes folder now syncs with server \(try state.meta(.serverID) ?? "?") at \(DisplayName.escape(config.server))"
                )
            }
            try state.close()
            return ExitCodes.ok
        }
    }
}

func runSync(
    global: GlobalOptions, folderOptions: FolderOptions, dryRun: Bool, json: Bool, allowMassDelete: Bool, quiet: Bool
) throws {
    let logger = global.makeLogger()
    OneShotProcess.growHeapInLargeSteps()
    try reportingErrors {
        let (folder, state, config) = try folderOptions.open(readOnly: dryRun)
        let colorDiffs = dryRun && stdoutIsTerminal && !json
        if dryRun,
            let code = try askAgent(
                folder,
                AgentSocket.Request(
                    allowMassDelete: allowMassDelete, dryRun: true,
                    colorDiffs: colorDiffs), json: json)
        {
            // The running agent knows what changed since its last sync: only that is read.
            return code
        }
        let lock: FolderLock?
        do {
            lock = dryRun ? nil : try FolderLock(folder)
        } catch let error as NoteSyncError where error.kind == .locked {
            // An agent holds the folder: it syncs now, on our behalf, and says what it did.
            guard let code = try askAgent(folder, AgentSocket.Request(allowMassDelete: allowMassDelete), json: json) else {
                guard allowMassDelete, AgentStatus.read(folder) != nil else { throw error }
                // An agent that does not answer (an older build): it lets the held deletes through at its next sync.
                try FileIO.createAndSync(folder.massDeleteApproval, Data(), mode: 0o600)
                print("the agent running on this folder makes the held deletes at its next sync (see `notesync status`)")
                return ExitCodes.ok
            }
            return code
        }
        defer { withExtendedLifetime(lock) {} }
        let engine = SyncEngine(folder: folder, state: state, config: config, logger: logger)
        engine.leavesMemoryToExit = true
        var options = SyncOptions(dryRun: dryRun, withDiffs: dryRun, colorDiffs: colorDiffs, allowMassDelete: allowMassDelete)
        // A line on a terminal while a long sync runs; nothing in JSON mode, piped, or with --quiet.
        let line = json ? nil : ProgressLine.start(quiet: quiet)
        options.progress = line?.progress
        let synced = Result { try engine.sync(options) }
        line?.finish()
        var report = try synced.get()
        if !report.offline,
            let store = try? SyncEngine.openServer(folder: folder, config: config, logger: logger)
        {
            report.warnings += ServerFsck.conflictCopies(in: store, near: report.token).map { SyncWarning(.foreignConflictCopy, $0) }
        }
        if json {
            try printJSON(report)
        } else {
            printReport(report)
        }
        try state.close()
        OneShotProcess.leaveToExit(engine)
        return ExitCodes.code(for: report)
    }
}

/// Has the agent running on `folder` serve `request` (``AgentSocket``), prints its report and returns the exit code
/// (the one a one-shot run would give); nil when no agent answers (none runs): the command then works on its own.
func askAgent(_ folder: NotesFolder, _ request: AgentSocket.Request, json: Bool) throws -> Int32? {
    guard let answer = try AgentSocket.requestSync(folder, request) else { return nil }
    let report = try answer.reportOrError(request.dryRun ? "dry run" : request.recover ? "recovery" : "sync")
    if json { try printJSON(report) } else { printReport(report) }
    return ExitCodes.code(for: report)
}

extension AgentSocket.Response {
    /// The agent's report, or the error its work ended with, of the kind the agent gave (so the exit code is the
    /// one the command gives when it runs alone).
    func reportOrError(_ what: String) throws -> SyncReport {
        if let report { return report }
        let kind = errorKind.flatMap(NoteSyncError.Kind.init(rawValue:)) ?? .io
        throw NoteSyncError(kind, "the agent's \(what) failed: \(error ?? "no reason given")")
    }
}

func printReport(_ report: SyncReport) {
    for warning in report.warnings { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
    if report.offline {
        print("server unreachable: \(report.offlineReason ?? "")")
        if report.dryRun {
            print(
                "dry run, nothing changed — a sync would queue \(report.pending) local change(s); they are pushed by "
                    + "the next sync that reaches the server")
        } else {
            print("\(report.pending) local change(s) queued; they are pushed by the next sync that reaches the server")
        }
        let queued = report.queued ?? []
        for item in queued.prefix(20) { print("  \(item)") }
        if queued.count > 20 { print("  … and \(queued.count - 20) more") }
        return
    }
    func label(_ kind: PlannedChange.Kind) -> String { kind == .move ? "renamed" : kind.rawValue }
    // The kinds are ASCII words: padded by count, not by NSString, whose padding shows in a first sync's CPU profile.
    func padded(_ kind: PlannedChange.Kind) -> String {
        let text = label(kind)
        return text + String(repeating: " ", count: max(0, 16 - text.utf8.count))
    }
    ReportLine.forEachLine(of: report.changes.lazy.filter { $0.kind != .adopt }) { line in
        switch line {
        case .change(let change):
            let name = change.from.map { "\($0) → \(change.name)" } ?? change.name
            var text = "\(padded(change.kind)) \(name)"
            if let detail = change.detail { text += "  (\(detail))" }
            print(text)
            if let diff = change.diff, !diff.isEmpty { print(diff, terminator: diff.hasSuffix("\n") ? "" : "\n") }
        case .folderMove(let from, let to, let count, let detail):
            var text = "\(padded(.move)) \(from)/ → \(to)/  (\(count) notes"
            if let detail { text += ", \(detail)" }
            print(text + ")")
        }
    }
    var counts: [PlannedChange.Kind: Int] = [:]
    for change in report.changes where change.kind != .adopt { counts[change.kind, default: 0] += 1 }
    let summary = counts.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.value) \(label($0.key))" }
    let prefix = report.dryRun ? "dry run, nothing changed — a sync would do: " : "synced: "
    print(prefix + (summary.isEmpty ? "nothing to do" : summary.joined(separator: ", ")) + " (server at \(report.token))")
    // Notes a change could not be made for (a text missing on the server, a name in the way, a full disk): "nothing
    // to do" alone would read as all in order.
    let left = Set(report.warnings.lazy.filter { $0.kind == .note || $0.kind == .failed }.compactMap(\.path))
    if !left.isEmpty {
        print(
            "not synced: \(left.count) note(s) left as they are (the warnings above say why; "
                + (report.dryRun ? "a sync would try them)" : "the next sync tries again)"))
    }
    if !report.conflictCopies.isEmpty {
        print("conflicts: \(report.conflictCopies.count) — both versions are kept; see `notesync conflicts`")
    }
}
