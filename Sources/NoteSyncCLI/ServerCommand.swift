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

struct ServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "server",
        abstract: "Create and check server directories.",
        subcommands: [
            ServerInit.self, ServerFsckCommand.self, ServerUpgrade.self, ServerGC.self, ServerRetention.self, ServerDu.self,
            ServerPassphrase.self, ServerEncrypt.self
        ]
    )
}

struct ServerInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Make DIR a new notesync server (format \(ServerMarker.plainFormat), or \(ServerMarker.encryptedFormat) encrypted).",
        discussion: """
            DIR is created if missing. A non-empty folder that is not a server is refused. Only for the first \
            device of a new server: a notes folder is bound to its server's id at `notesync init` and never syncs \
            with a server made later in its place.
            With --encrypt, every file the server holds is encrypted (note texts, names, device names; \
            docs/encryption.md): a random key is wrapped with the passphrase (asked twice on the terminal, or \
            --passphrase-file, or NOTESYNC_PASSPHRASE) and with a recovery key, printed once: keep it somewhere \
            safe. Each device's `notesync init` asks for the passphrase once and keeps the key.
            With --private, DIR is made mode 0700 and everything written in it 0700 (folders) or 0600 (files): only \
            its owner can read the server. A setgid, group-writable DIR (chmod 2775) is shared by its group: \
            folders are made 2775 and files 0664 whatever each user's umask (docs/server-format.md, "Modes").
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The server directory: a local folder, an NFS/SMB/sshfs mount, or a replicated folder.")
    var directory: String
    @OptionGroup var location: EndpointOption
    @Flag(help: "Encrypt everything the server holds, with a passphrase (see the discussion).") var encrypt = false
    @Flag(name: .customLong("private"), help: "Make the server readable by its owner only (mode 0700).") var ownerOnly = false
    @OptionGroup var secret: PassphraseOptions

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let created = try ServerAdmin.create(
                root: directory, endpoint: location.endpoint, encrypt: encrypt, ownerOnly: ownerOnly, secrets: secret.secrets,
                logger: logger)
            print("created notesync server \(created.marker.id) in \(DisplayName.escape(directory))")
            if let recovery = created.recovery { Self.printRecovery(recovery) }
            return ExitCodes.ok
        }
    }

    /// The recovery key, shown once: it opens the server's key when the passphrase is lost.
    static func printRecovery(_ key: RecoveryKey) {
        print("the server is encrypted. Its recovery key opens it if the passphrase is lost; it is shown only now:")
        print("")
        print("    \(key.text)")
        print("")
        print("keep it away from the server (on paper, or in a password manager); give it in place of the passphrase")
    }
}

struct ServerEncrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Make DEST an encrypted copy of the plain server SRC, its history kept.",
        discussion: """
            A server is never encrypted in place (that would rewrite files the protocol never rewrites): DEST is a \
            new encrypted server (a new id, a new passphrase asked twice, a recovery key printed once) holding \
            every log entry of SRC in its slot, the snapshot a compacted log starts from with the history it \
            keeps, every text they reference and the retention policy, so `history` and `restore` go on working. \
            SRC is only read: stop the agents that sync with it first. Then, on each device, `notesync recover \
            --notes NOTES --server DEST` (it asks the passphrase, keeps every note and pushes what DEST lacks). \
            SRC stays as it was until you remove it.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The plain server to copy.") var source: String
    @Argument(help: "Where the encrypted copy goes: an empty or new folder, or an empty s3:// prefix.") var destination: String
    @OptionGroup var location: EndpointOption
    @OptionGroup var secret: PassphraseOptions

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let copy = try ServerAdmin.encryptedCopy(
                of: source, to: destination, endpoint: location.endpoint, secrets: secret.secrets, logger: logger)
            let report = copy.report
            print(
                "made encrypted server \(report.marker.id) in \(DisplayName.escape(copy.destination)): \(report.entries) log "
                    + "entries\(report.snapshot.map { " from the snapshot at \($0)" } ?? ""), \(report.texts) texts"
                    + (report.voided > 0 ? "; \(report.voided) damaged entries sealed void" : ""))
            ServerInit.printRecovery(copy.recovery)
            print("next, on each device: `notesync recover --notes NOTES --server \(copy.destination)`")
            return ExitCodes.ok
        }
    }
}

struct ServerPassphrase: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passphrase",
        abstract: "Change the passphrase of an encrypted server.",
        discussion: """
            Asks for the current passphrase (or the recovery key), then the new one twice; scripts give both with \
            --passphrase-file and --new-passphrase-file. The server's key is wrapped again under the new \
            passphrase: nothing is encrypted again and nothing is uploaded but one small file; the recovery key \
            stays valid. Devices keep syncing without asking (they keep the key, not the passphrase).
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The server directory.") var directory: String
    @OptionGroup var location: EndpointOption
    @OptionGroup var secret: PassphraseOptions
    @Option(help: ArgumentHelp("Read the new passphrase from this file.", valueName: "file")) var newPassphraseFile: String?

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            // Never NOTESYNC_PASSPHRASE for the new one: it holds the current one. (The option group is made here, so
            // its one field is set before it is read.)
            var options = PassphraseOptions()
            options.passphraseFile = newPassphraseFile
            let changed = try ServerAdmin.changePassphrase(
                root: directory, endpoint: location.endpoint, current: secret.secrets,
                fresh: { try options.newPassphrase(fromEnvironment: newPassphraseFile != nil) }, logger: logger)
            print(
                "the passphrase of server \(changed.serverID) is changed (key file \(changed.generation)); the recovery key is unchanged")
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
    @OptionGroup var secret: PassphraseOptions

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            if let serverID {
                guard repair else {
                    throw NoteSyncError(.usage, path: nil, "--server-id rewrites the marker: it needs --repair", fix: "add --repair")
                }
                try ServerAdmin.rewriteMarker(root: directory, endpoint: location.endpoint, id: serverID, logger: logger)
                print("wrote the server marker again with id \(serverID.lowercased())")
            }
            let report = try ServerAdmin.fsck(
                root: directory, endpoint: location.endpoint, repair: repair, tempAge: tempAge, gapAge: gapAge,
                secrets: secret.secrets, logger: logger)
            if report.withoutKey {
                print(
                    "checked without the key (no passphrase given): each file's integrity and the log's slots; give the "
                        + "passphrase (--passphrase-file, NOTESYNC_PASSPHRASE) to check what they hold")
            }
            for finding in report.findings { print(finding) }
            let open = report.findings.filter { $0.repaired == nil }.count
            print(
                "\(report.entries) entries (log at \(report.token)), \(report.snapshots) snapshots, "
                    + "\(report.assets) assets\(report.packs > 0 ? " (\(report.packs) packs)" : ""); \(report.findings.count) findings, \(open) unrepaired"
            )
            return report.isClean ? ExitCodes.ok : ExitCodes.failure
        }
    }
}

struct ServerUpgrade: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upgrade",
        abstract:
            "Move a server to format \(ServerMarker.plainFormat) (\(ServerMarker.encryptedFormat) encrypted), this build's newest.",
        discussion: """
            Format 2 hash-chains the log; format 3 adds compressed assets, the retention policy, `server gc` and \
            compaction (docs/retention.md); format 5 (6 encrypted, from 4) lets a first sync store its texts in \
            packs, a few files instead of one per note (docs/server-format.md). This build reads and writes format-1 and format-2 servers as they are \
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
            switch try ServerAdmin.upgrade(root: directory, endpoint: location.endpoint, logger: logger) {
            case .alreadyAt(let id, let format): print("server \(id) is already format \(format): nothing to do")
            case .upgraded(let id, let format): print("server \(id) is now format \(format)")
            }
            return ExitCodes.ok
        }
    }
}
