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

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the server, its reachability, the change token, pending changes, conflicts and the last sync.",
        discussion: """
            Exit code 1 when syncing is stopped by the server ("SYNC STOPPED"): another server at the path, a \
            server behind this device or holding another log (see `notesync recover`), a gap in its log (see \
            `notesync server fsck --repair`), or a damaged server marker (its fix names the command). Exit code 3 \
            when the server cannot be reached (its folder or marker missing: a share not mounted), as for every \
            command (the rest of the status is printed all the same).
            The agent line says whether a running agent is online, OFFLINE (retrying by itself) or SYNC STOPPED \
            (its last sync failed; the last error says why).
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var folderOptions: FolderOptions
    @Flag(help: "Print as JSON.") var json = false

    struct Status: Codable {
        var notes: String
        var server: String
        var device: String
        var deviceID: String
        var reachable: Bool
        var serverError: String?
        /// The server is there but syncing is stopped: not this folder's server, behind it, a gap in its log, a
        /// damaged marker.
        var serverProblem = false
        var token: Int64
        var serverToken: Int64?
        var pending: [String]
        var conflicts: [String]
        /// Notes the server holds in a version this folder does not have (a local change of them may be queued
        /// too): the last sync could not write or merge them here (``waitingNotes(_:zone:folder:)``).
        var waiting: [String] = []
        /// Notes that are one file with another note here (the folder does not tell case apart): each waits, named with
        /// the note whose file it is (``SyncEngine/caseWaiting(_:)``), until one of them is renamed elsewhere.
        var oneFileWith: [String: String] = [:]
        /// The largest note this device syncs (`notesync config --max-file-size`), and the notes the last syncs left
        /// out for being bigger, here or on the server.
        var maxFileSize: String = FileSizeLimit.default.description
        var tooBig: [String] = []
        /// The notes folder's filesystem and the steps that keep local writes safe it lacks, as the last sync probed
        /// them (``FolderGuarantees``); nil before the first sync.
        var filesystem: String?
        var filesystemLacks: [String]?
        var lastSync: String?
        var lastError: String?
        /// Local deletes the mass-delete guard holds.
        var heldDeletes: Int?
        var agent: AgentStatus?
    }

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let (folder, state, config) = try folderOptions.open(readOnly: true)
            let stored = try state.zoneState()
            var status = try localStatus(folder, state, config, zone: stored)
            try checkServer(&status, folder: folder, config: config, zone: stored, logger: logger)
            let code = status.serverProblem ? ExitCodes.failure : status.reachable ? ExitCodes.ok : ExitCodes.offline
            if json {
                try printJSON(status)
                return code
            }
            printText(status, serverID: config.serverID)
            return code
        }
    }

    /// What the folder's state (`stored`: its zone) and the agent's status file say, without the server.
    private func localStatus(
        _ folder: NotesFolder, _ state: LocalState, _ config: FolderConfig, zone stored: ZoneState
    ) throws -> Status {
        let outbox = try state.outbox()
        var status = Status(
            notes: folder.root, server: config.server, device: config.deviceName, deviceID: config.deviceID,
            reachable: false, token: stored.token,
            pending: outbox.values.sorted { $0.name < $1.name }.map { "\($0.op.rawValue) \($0.name)" },
            conflicts: try openConflicts(folder, state).map(\.copy.description),
            lastSync: try state.lastSync().map(formatTime),
            lastError: try state.meta(.lastError))
        let pairs = try SyncEngine.caseWaiting(state)
        for (name, owner) in pairs { status.oneFileWith[name.description] = owner.description }
        status.waiting = try waitingNotes(state, zone: stored, folder: folder).filter { pairs[$0] == nil }.map(\.description)
        status.heldDeletes = try state.meta(.heldDeletes).flatMap { Int($0) }
        status.maxFileSize = try FileSizeLimit.stored(in: state).description
        status.tooBig = (try state.meta(.tooBig) ?? "").split(separator: "\n").map(String.init)
        if let lacks = try SyncEngine.folderLacks(state) { (status.filesystem, status.filesystemLacks) = lacks }
        status.agent = AgentStatus.read(folder)
        if let held = status.agent?.heldDeletes { status.heldDeletes = held }
        if let agent = status.agent {
            status.lastSync = agent.lastSync.map(formatTime) ?? status.lastSync
            status.lastError = agent.lastError
        }
        return status
    }

    /// Whether the server can be read, and its token (`stored`, the zone as the state holds it, fetched into).
    private func checkServer(
        _ status: inout Status, folder: NotesFolder, config: FolderConfig, zone stored: ZoneState, logger: Logger
    ) throws {
        do {
            let store = try SyncEngine.openServer(folder: folder, config: config, logger: logger)
            var zone = stored
            try store.fetch(into: &zone)
            status.reachable = true
            status.serverToken = zone.token
        } catch let error as NoteSyncError {
            // The code any command gives for the same condition.
            status.serverError = error.description
            status.serverProblem = ExitCodes.code(for: error) != ExitCodes.offline
            status.reachable = status.serverProblem
        }
    }

    /// The status in words, a line a thing.
    private func printText(_ status: Status, serverID: String?) {
        print("notes:     \(DisplayName.escape(status.notes))  (device \"\(status.device)\", id \(status.deviceID))")
        if let id = serverID { print("server id: \(id)") }
        print(
            "server:    \(DisplayName.escape(status.server))  "
                + (status.serverProblem
                    ? "SYNC STOPPED: \(status.serverError ?? "")"
                    : status.reachable ? "reachable" : "UNREACHABLE: \(status.serverError ?? "")"))
        let behind = (status.serverToken ?? status.token) - status.token
        print("token:     \(status.token)" + (behind > 0 ? "  (\(behind) newer entries on the server)" : ""))
        print("pending:   \(status.pending.count) local change(s) not yet on the server")
        for item in status.pending.prefix(20) { print("           \(item)") }
        if status.pending.count > 20 {
            print("           … and \(status.pending.count - 20) more (`notesync diff` shows what a sync would do)")
        }
        if !status.waiting.isEmpty {
            print(
                "waiting:   \(status.waiting.count) note(s) the server has that the last sync could not bring here "
                    + "(its warnings say why; each sync tries again)")
            for name in status.waiting.prefix(20) { print("           \(name)") }
            if status.waiting.count > 20 { print("           … and \(status.waiting.count - 20) more") }
        }
        if !status.oneFileWith.isEmpty {
            print(
                "one file:  \(status.oneFileWith.count) note(s) wait: each is one file with another note in this "
                    + "folder, which does not tell case apart (rename one of them on a device whose folder does)")
            for (name, owner) in status.oneFileWith.sorted(by: { $0.key < $1.key }).prefix(20) {
                print("           \(name)  (one file with \(owner))")
            }
            if status.oneFileWith.count > 20 { print("           … and \(status.oneFileWith.count - 20) more") }
        }
        if !status.tooBig.isEmpty {
            print(
                "too big:   \(status.tooBig.count) note(s) over max-file-size (\(status.maxFileSize)) left out of the "
                    + "sync, here or on the server; every other note syncs (`notesync config --max-file-size SIZE` "
                    + "raises the limit)")
            for name in status.tooBig.prefix(20) { print("           \(name)") }
            if status.tooBig.count > 20 { print("           … and \(status.tooBig.count - 20) more") }
        }
        if let filesystem = status.filesystem, let lacks = status.filesystemLacks, !lacks.isEmpty {
            print(
                "folder:    \(filesystem), without \(lacks.joined(separator: ", "))"
                    + (lacks.contains("hard links") && lacks.contains("rename-without-replace")
                        ? ": a save made in the instant a pulled version is put in place can be overwritten" : ""))
        }
        print("conflicts: \(status.conflicts.count)" + (status.conflicts.isEmpty ? "" : "  (see `notesync conflicts`)"))
        if let held = status.heldDeletes {
            print(
                "deletes:   \(held) local deletes HELD by the mass-delete guard, none synced: put the notes back, or "
                    + "preview with `notesync diff --allow-mass-delete` and run `notesync sync --allow-mass-delete`")
        }
        if let agent = status.agent {
            print(
                "agent:     running (pid \(agent.pid)), \(agentState(agent))"
                    + "; local changes via \(agent.localWatch), server changes via \(agent.serverWatch)")
        } else {
            print("agent:     not running")
        }
        print("last sync: \(status.lastSync ?? "never")")
        // Said once: a stopped server's error is on the server line already.
        if let error = status.lastError, error != status.serverError { print("last error: \(error)") }
    }
}

/// The notes the server holds in a version this folder does not have (the head at the state's token is not the
/// note's base: another text, a delete, or a note never written here), and no rule of the ignore list leaving them
/// out: the last sync could not write them here, nor merge them with a local change (a text missing or damaged on
/// the server, a folder or name in the way, a full disk; its warnings said which), and the next sync tries again.
/// Nothing before a first sync (no heads yet), nothing after a sync that wrote everything.
func waitingNotes(_ state: LocalState, zone: ZoneState, folder: NotesFolder) throws
    -> [RecordName]
{
    guard !zone.heads.isEmpty else { return [] }
    let bases = try state.bases(sharingNamesWith: zone.heads)
    let rules = try folder.ignoreRules()
    var waiting: [RecordName] = []
    for (name, head) in zone.heads {
        let base = bases[name]
        let behind = head.deleted ? base.map { $0.tag != head.tag } ?? false : base?.tag != head.tag
        if behind && head.version <= RecordChange.currentVersion && !rules.isIgnoredPath(name.string, isDirectory: false) {
            waiting.append(name)
        }
    }
    return waiting.sorted()
}

/// What the agent's last sync came to: online, offline (the server away; it retries), or stopped by an error
/// (another server, a gap, a damaged marker, a full disk; it retries, and `last error` says why).
func agentState(_ agent: AgentStatus) -> String {
    if agent.online { return "online" }
    guard let kind = agent.lastErrorKind.flatMap(NoteSyncError.Kind.init(rawValue:)), ExitCodes.code(for: kind) != ExitCodes.offline
    else { return "OFFLINE, retrying" }
    return "SYNC STOPPED (its last sync failed, see the last error), retrying"
}

struct ConflictsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List conflict copies that still exist: compare each with its original, keep what you want, delete the copy."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var folderOptions: FolderOptions

    func run() throws {
        _ = global.makeLogger()
        try reportingErrors {
            let (folder, state, _) = try folderOptions.open(readOnly: true)
            let open = try openConflicts(folder, state)
            if open.isEmpty { print("no conflicts") }
            for (copy, record) in open {
                if let record {
                    print(
                        "\(copy)\n    the version of \(record.original) from \"\(DisplayName.escape(record.device))\", kept on \(formatTime(record.time))"
                    )
                } else {
                    print("\(copy)")
                }
            }
            return ExitCodes.ok
        }
    }
}

/// Conflict copies that still exist in the notes folder: made here (with details) or synced from another device.
func openConflicts(_ folder: NotesFolder, _ state: LocalState) throws -> [(copy: RecordName, record: ConflictRecord?)] {
    let records = Dictionary(try state.conflicts().map { ($0.copy, $0) }, uniquingKeysWith: { _, last in last })
    var names = Set(records.keys)
    names.formUnion(try state.bases().keys.filter { ConflictCopyName.isNotesyncConflictCopy($0.string) })
    return names.sorted().filter { FileIO.lstatInfo(folder.root + "/" + $0.string) != nil }.map { ($0, records[$0]) }
}
