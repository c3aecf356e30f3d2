import ArgumentParser
import Foundation
import NoteSync

struct ServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "server",
        abstract: "Create and check server directories.",
        subcommands: [
            ServerInit.self, ServerFsckCommand.self, ServerUpgrade.self, ServerGC.self, ServerRetention.self, ServerDu.self
        ]
    )
}

struct ServerInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Make DIR a new notesync server (format \(ServerMarker.currentFormat), zone \"notes\").",
        discussion: """
            DIR is created if missing. A non-empty folder that is not a server is refused. Only for the first \
            device of a new server: a notes folder is bound to its server's id at `notesync init` and never syncs \
            with a server made later in its place.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The server directory: a local folder, an NFS/SMB/sshfs mount, or a replicated folder.")
    var directory: String
    @OptionGroup var location: EndpointOption

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let marker = try ServerStore.create(root: directory, endpoint: location.endpoint, logger: logger)
            print("created notesync server \(marker.id) in \(DisplayName.escape(directory))")
            return ExitCodes.ok
        }
    }
}

struct ServerFsckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fsck",
        abstract: "Check every entry, snapshot and asset of a server; change nothing unless --repair.",
        discussion: """
            Reports torn or damaged entries, gaps in the log (an entry missing while later ones are there), \
            entries that do not continue the log before them (a broken chain: another history delivered late, a \
            fork), missing or corrupt assets, snapshots that do not match the log, symlinks, foreign files \
            (conflict copies that Dropbox or Syncthing made inside the server, other tools' temp files) and temp \
            files left by interrupted writers. Exit code 0 only when the server is clean, or every finding was \
            repaired.
            --repair sweeps temp files older than --temp-age and moves foreign files, symlinks and corrupt \
            assets into DIR/quarantine/. It seals each gap whose next entry is older than --gap-age with a void \
            entry: every device reads on past it, and a device that had synced the lost entry pushes its changes \
            again at its next full sync. An entry that breaks the chain is moved into DIR/quarantine/ with every \
            entry after it (after a gap: once older than --gap-age), so the log ends before it; the devices that \
            wrote them stop (exit 1) and push their notes again with `notesync recover`. Damaged entries stay: \
            their slot is claimed and every device skips it. With --server-id ID it first writes a damaged or \
            missing marker again.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The server directory.") var directory: String
    @OptionGroup var location: EndpointOption
    @Flag(help: "Sweep old temp files, quarantine foreign or corrupt files and broken chains, seal old gaps with void entries.")
    var repair = false
    @Option(help: "With --repair: sweep temp files at least this many seconds old.") var tempAge: Double = 3600
    @Option(
        help:
            "With --repair: seal a gap in the log (a missing entry with later ones present) with a void entry once the first entry after it is this many seconds old."
    )
    var gapAge: Double = 3600
    @Option(
        help:
            "With --repair: write a damaged, unusable or missing marker again with this server id (`notesync status` on a device shows it)."
    )
    var serverID: String?

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            if let serverID {
                guard repair else {
                    throw NoteSyncError(.usage, path: nil, "--server-id rewrites the marker: it needs --repair", fix: "add --repair")
                }
                try ServerStore.rewriteMarker(
                    root: ServerAddress.normalized(directory), endpoint: location.endpoint, id: serverID, logger: logger)
                print("wrote the server marker again with id \(serverID.lowercased())")
            }
            let store = try ServerStore(root: directory, endpoint: location.endpoint, device: "fsck", logger: logger)
            let report = try ServerFsck(store: store).run(repair: repair, tempGraceSeconds: tempAge, gapGraceSeconds: gapAge)
            for finding in report.findings { print(finding) }
            let open = report.findings.filter { $0.repaired == nil }.count
            print(
                "\(report.entries) entries (log at \(report.token)), \(report.snapshots) snapshots, "
                    + "\(report.assets) assets; \(report.findings.count) findings, \(open) unrepaired")
            return report.isClean ? ExitCodes.ok : ExitCodes.failure
        }
    }
}

struct ServerUpgrade: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upgrade",
        abstract: "Move a server of format 1 or 2 to format \(ServerMarker.currentFormat).",
        discussion: """
            Format 2 hash-chains the log; format 3 adds compressed assets, the retention policy, `server gc` and \
            compaction (docs/retention.md). This build reads and writes format-1 and format-2 servers as they are \
            (a format-1 server's entries carry the chain link, which format-1 builds ignore; nothing is \
            compressed and gc refuses to run). After the upgrade, builds that know only an older format read the \
            server and write nothing (they say to update). Only the marker is rewritten: no history is lost. \
            Update notesync on every device first.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The server directory.") var directory: String
    @OptionGroup var location: EndpointOption

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let store = try ServerStore(root: directory, endpoint: location.endpoint, device: "upgrade", logger: logger)
            if store.marker.format >= ServerMarker.currentFormat {
                print("server \(store.marker.id) is already format \(store.marker.format): nothing to do")
                return ExitCodes.ok
            }
            try store.upgradeMarker()
            print("server \(store.marker.id) is now format \(ServerMarker.currentFormat)")
            return ExitCodes.ok
        }
    }
}
