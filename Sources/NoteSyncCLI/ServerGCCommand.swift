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

/// A duration option: `30d`, `1h`, `90m`, `2w`, `1y`, `0`, or seconds.
struct Duration: ExpressibleByArgument {
    var seconds: Int64
    init?(argument: String) {
        guard let seconds = RetentionPolicy.parseDuration(argument) else { return nil }
        self.seconds = seconds
    }
    init(seconds: Int64) { self.seconds = seconds }
    static var defaultCompletionKind: CompletionKind { .default }
}

extension Duration: CustomStringConvertible {
    /// As an option takes it (`1d`, `12h`, `90m`, or seconds): what `--help` shows as a default.
    var description: String {
        for (unit, length) in [("d", Int64(86_400)), ("h", 3_600), ("m", 60)] where seconds != 0 && seconds % length == 0 {
            return "\(seconds / length)\(unit)"
        }
        return "\(seconds)"
    }
}

struct ServerGC: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Thin the server's history by its retention policy and remove what nothing needs.",
        discussion: """
            Reads the log to its end, keeps the versions the policy keeps (`notesync server retention DIR`), \
            publishes a snapshot there and a mark of every text nothing kept references; then removes what every \
            mark older than --grace marked and is still unneeded (texts, and the log entries and snapshots before the \
            newest snapshot). No lock: devices go on syncing meanwhile, and a writer puts back a text it finds \
            removed. Killed at any point, the server stays valid. A device offline for longer than the grace period \
            reconciles against the snapshot. --dry-run prints what would go and writes nothing. Format 3 servers \
            only (`notesync server upgrade`). See docs/retention.md.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The server directory.") var directory: String
    @OptionGroup var location: EndpointOption
    @OptionGroup var secret: PassphraseOptions
    @Flag(help: "Print what would be compacted and removed; write nothing.") var dryRun = false
    @Option(help: "Remove only what was marked at least this long ago (24h, 1h, 0 for tests and single-device servers).")
    var grace: Duration = Duration(seconds: RetentionPolicy.day)
    @Flag(help: "Print as JSON.") var json = false

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let store = try secret.open(directory, endpoint: location.endpoint, device: "gc", logger: logger)
            let report = try store.collectGarbage(grace: grace.seconds, dryRun: dryRun)
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                print(String(decoding: try encoder.encode(report), as: UTF8.self))
                return ExitCodes.ok
            }
            let would = dryRun ? "would " : ""
            print("policy: \(report.policy)")
            print(
                "log read to entry \(report.end); \(report.versionsKept) versions kept, \(report.versionsDropped) dropped"
                    + (report.tombstonesDropped > 0 ? ", \(report.tombstonesDropped) deletes forgotten" : ""))
            if let snapshot = report.snapshot { print("\(would)compact the log at entry \(snapshot) (snapshot \(snapshot))") }
            print("\(would)mark \(report.assetsMarked) texts no kept version references (\(ByteFormat.string(report.bytesMarked)))")
            print(
                "\(dryRun ? "would remove" : "removed") \(report.assetsRemoved) texts (\(ByteFormat.string(report.bytesRemoved))), "
                    + "\(report.entriesRemoved) log entries (\(ByteFormat.string(report.entryBytesRemoved))), "
                    + "\(report.snapshotsRemoved) snapshots"
                    + (report.packsRemoved + report.packsRewritten > 0
                        ? "; \(report.packsRemoved) packs \(dryRun ? "would go" : "removed"), \(report.packsRewritten) "
                            + "\(dryRun ? "would be " : "")rewritten (their texts still needed published one by one)"
                        : "")
                    + (report.marksWaiting > 0 ? "; \(report.marksWaiting) marks wait for their grace period" : ""))
            return ExitCodes.ok
        }
    }
}

struct ServerRetention: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retention",
        abstract: "Show or set the server's retention policy (one for every device).",
        discussion: """
            A version is kept while younger than --all; then the newest of each hour while younger than --hourly, \
            of each day while younger than --daily, of each week while younger than --weekly. Every note's current \
            version and every device's last synced version are always kept; a delete is remembered at least as long \
            as the longest band and until every device has seen it. Durations: 45s, 90m, 1h, 30d, 2w, 1y, or 0 to \
            switch a band off. Default: --all 1h --hourly 1d --daily 30d --weekly 1y. Applied by `notesync server gc`.
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The server directory.") var directory: String
    @OptionGroup var location: EndpointOption
    @OptionGroup var secret: PassphraseOptions
    @Option(help: "Keep every version younger than this.") var all: Duration?
    @Option(help: "Keep one version an hour for versions younger than this.") var hourly: Duration?
    @Option(help: "Keep one version a day for versions younger than this.") var daily: Duration?
    @Option(help: "Keep one version a week for versions younger than this.") var weekly: Duration?

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let store = try secret.open(directory, endpoint: location.endpoint, device: "retention", logger: logger)
            var policy = store.hasRetention ? try store.retentionPolicy().policy : RetentionPolicy.default
            if all != nil || hourly != nil || daily != nil || weekly != nil {
                if let all { policy.all = all.seconds }
                if let hourly { policy.hourly = hourly.seconds }
                if let daily { policy.daily = daily.seconds }
                if let weekly { policy.weekly = weekly.seconds }
                try store.setRetentionPolicy(policy)
                print("retention set: \(policy)")
            } else {
                print(
                    "retention: \(policy)"
                        + (store.hasRetention ? "" : " (format \(store.marker.format): not applied until `notesync server upgrade`)"))
            }
            print("deletes are remembered for \(RetentionPolicy.format(policy.horizon)) and until every device has seen them")
            return ExitCodes.ok
        }
    }
}

struct ServerDu: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "du",
        abstract: "Show what the server holds: live texts, history by age, log, snapshots, devices.",
        discussion: "Reads the server; writes nothing. Bytes are as stored (compressed where the server compresses)."
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The server directory.") var directory: String
    @OptionGroup var location: EndpointOption
    @OptionGroup var secret: PassphraseOptions
    @Flag(help: "Print as JSON.") var json = false

    func run() throws {
        let logger = global.makeLogger()
        try reportingErrors {
            let store = try secret.open(directory, endpoint: location.endpoint, device: "du", logger: logger)
            let usage = try store.usage()
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                print(String(decoding: try encoder.encode(usage), as: UTF8.self))
                return ExitCodes.ok
            }
            func line(_ label: String, _ count: Int, _ bytes: Int64) {
                print(label.padding(toLength: 26, withPad: " ", startingAt: 0) + "\(count)".leftPadded(9) + "  " + ByteFormat.string(bytes))
            }
            print("policy: \(usage.policy)")
            line("live texts", usage.liveAssets, usage.liveBytes)
            for band in usage.history { line("history, \(band.band)", band.versions, band.bytes) }
            line("unreferenced texts", usage.unreferencedAssets, usage.unreferencedBytes)
            line("log entries (end \(usage.logEnd))", usage.entries, usage.entryBytes)
            line("snapshots", usage.snapshots, usage.snapshotBytes)
            line("total", usage.assets + usage.entries + usage.snapshots, usage.assetBytes + usage.entryBytes + usage.snapshotBytes)
            if usage.marks > 0 { print("gc marks waiting: \(usage.marks)") }
            for device in usage.devices {
                let seen = Date(timeIntervalSince1970: Double(device.lastSeen) / 1e9)
                print("device \(device.id) (\(device.name)): last seen \(ISO8601DateFormatter().string(from: seen)), token \(device.token)")
            }
            return ExitCodes.ok
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}

/// Byte counts as people read them: 512 B, 3.1 KB, 185.2 MB (powers of 1,000).
enum ByteFormat {
    static func string(_ bytes: Int64) -> String {
        if bytes < 1000 { return "\(bytes) B" }
        var value = Double(bytes)
        for unit in ["KB", "MB", "GB", "TB"] {
            value /= 1000
            if value < 1000 || unit == "TB" { return String(format: "%.1f %@", value, unit) }
        }
        return "\(bytes) B"
    }
}
