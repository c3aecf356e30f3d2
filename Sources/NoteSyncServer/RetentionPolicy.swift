import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// Which versions of a note the server keeps (docs/retention.md): every version younger than ``all``, then the
/// newest of each hour younger than ``hourly``, of each day younger than ``daily``, of each week younger than
/// ``weekly``. Heads and the versions devices hold as bases are always kept. Ages in seconds; 0 switches a band off.
/// One policy for every device: it is stored in the server (``ServerStore/retentionPolicy()``).
public struct RetentionPolicy: Codable, Sendable, Hashable, CustomStringConvertible {
    public var all: Int64
    public var hourly: Int64
    public var daily: Int64
    public var weekly: Int64

    public static let hour: Int64 = 3600
    public static let day: Int64 = 86_400
    public static let week: Int64 = 7 * 86_400

    /// Every version for an hour, one an hour for a day, one a day for 30 days, one a week for a year.
    public static let `default` = RetentionPolicy(all: hour, hourly: day, daily: 30 * day, weekly: 365 * day)

    public init(all: Int64, hourly: Int64, daily: Int64, weekly: Int64) {
        self.all = all
        self.hourly = hourly
        self.daily = daily
        self.weekly = weekly
    }

    /// The longest band: how long a delete is remembered at least (and until every registered device has seen it).
    public var horizon: Int64 { max(all, hourly, daily, weekly) }

    public var description: String {
        "all \(Self.format(all)), hourly \(Self.format(hourly)), daily \(Self.format(daily)), weekly \(Self.format(weekly))"
    }

    /// The bucket a version of this age falls in, as (band length, bucket number), or nil when no band keeps it.
    /// `.max` as band length means "every version" (younger than ``all``).
    package func bucket(age: Int64, time: Int64) -> (length: Int64, number: Int64)? {
        let seconds = time / 1_000_000_000
        if age < all { return (.max, 0) }
        if age < hourly { return (Self.hour, seconds / Self.hour) }
        if age < daily { return (Self.day, seconds / Self.day) }
        // Weeks aligned to Monday 00:00 UTC (1970-01-01 was a Thursday).
        if age < weekly { return (Self.week, (seconds + 3 * Self.day) / Self.week) }
        return nil
    }

    // MARK: Durations

    /// Parses `30d`, `1h`, `90m`, `45s`, `2w`, `1y` (365 days) or `0`; a bare number is seconds.
    public static func parseDuration(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard !trimmed.isEmpty else { return nil }
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": hour, "d": day, "w": week, "y": 365 * day]
        var number = Substring(trimmed)
        var unit: Int64 = 1
        if let last = trimmed.last, let scale = units[last] {
            unit = scale
            number = trimmed.dropLast()
        }
        guard !number.isEmpty, number.allSatisfy(\.isASCII), number.allSatisfy(\.isNumber),
            let value = Int64(number), value <= Int64.max / unit
        else { return nil }
        return value * unit
    }

    /// The shortest exact form: `365d` prints as `1y`, `86400` as `1d`, `0` as `0`.
    public static func format(_ seconds: Int64) -> String {
        if seconds == 0 { return "0" }
        for (unit, length) in [("y", 365 * day), ("w", week), ("d", day), ("h", hour), ("m", 60 as Int64)]
        where seconds % length == 0 {
            return "\(seconds / length)\(unit)"
        }
        return "\(seconds)s"
    }
}

extension ServerStore {
    /// The policy in force: the highest-numbered readable file in `retention/`, or the default when there is none.
    /// Returns the number of that file too (0 for the default).
    public func retentionPolicy() throws -> (policy: RetentionPolicy, number: Int64) {
        let numbers = (try storage.list(layout.retentionDirectory) ?? []).compactMap { ServerLayout.sequence(ofFileName: $0) }
        for number in numbers.sorted(by: >) {
            let path = layout.retentionPath(number)
            do {
                guard let data = try storage.read(path, limit: 1 << 16) else { continue }
                return (try open(data, kind: "policy", place: String(number), as: RetentionPolicy.self), number)
            } catch {
                logger.error("server.retention.damaged", metadata: ["server.path": "\(path)", "reason": "\(error)"])
            }
        }
        return (.default, 0)
    }

    /// Puts `policy` in force for every device: publishes it as the next file of `retention/` (no-replace; a
    /// concurrent change takes the next number).
    public func setRetentionPolicy(_ policy: RetentionPolicy) throws {
        try requireWritable()
        try requireRetention("set a retention policy")
        try storage.makeDirectory(layout.retentionDirectory)
        var number = try retentionPolicy().number
        for _ in 0..<64 {
            number += 1
            while storage.info(layout.retentionPath(number)) != nil { number += 1 }
            let data = try seal(policy, kind: "policy", place: String(number))
            if try publish(data, as: layout.retentionPath(number), suffix: "policy") == .published {
                try storage.syncDirectory(layout.retentionDirectory)
                return
            }
        }
        throw NoteSyncError(.io, path: layout.retentionDirectory, "could not publish the policy", fix: "try again")
    }

    /// Throws unless this server is format 3 or later (gc, compaction and the policy need it).
    func requireRetention(_ what: String) throws {
        guard hasRetention else {
            throw NoteSyncError(
                .usage, path: layout.marker,
                "is a format \(marker.format) server: only format 3 servers can \(what)",
                fix: "update notesync on every device, then run `notesync server upgrade \(layout.root)`")
        }
    }
}
