import Foundation
import NoteSyncCrypto
import NoteSyncSupport
import Synchronization

/// How far a long sync has got: counters the engine bumps once per batch (a hashed note, a batch of downloads, a
/// batch of uploads staged and committed), read by whoever shows them (the command line's progress line, drawn from
/// another thread). Set ``SyncOptions/progress`` to get them; nil (the default) costs a sync nothing.
public final class SyncProgress: Sendable {
    public enum Phase: Int, Sendable {
        case starting, scanning, downloading, uploading
    }

    /// One reading of the counters (taken field by field: a phase change may show half-made for one draw).
    public struct Snapshot: Sendable, Equatable {
        public var phase: Phase
        /// Notes done in the phase: scanned (hashed, or walked by `init`), downloaded, or staged on the server.
        public var done: Int
        /// Notes the phase has to do, or 0 while unknown (a folder being walked).
        public var total: Int
        public var bytes: Int64
        /// Uploads committed to the server's log (the uploading phase).
        public var committed: Int
        public var seconds: Double

        public init(phase: Phase, done: Int, total: Int, bytes: Int64, committed: Int = 0, seconds: Double) {
            self.phase = phase
            self.done = done
            self.total = total
            self.bytes = bytes
            self.committed = committed
            self.seconds = seconds
        }
    }

    private let phase = Atomic<Int>(Phase.starting.rawValue)
    private let done = Atomic<Int>(0)
    private let total = Atomic<Int>(0)
    private let bytes = Atomic<Int64>(0)
    private let committed = Atomic<Int>(0)
    private let phaseStart = Atomic<UInt64>(DispatchTime.now().uptimeNanoseconds)

    public init() {}

    /// A new phase, its counters from zero.
    public func enter(_ next: Phase, total count: Int = 0) {
        done.store(0, ordering: .relaxed)
        bytes.store(0, ordering: .relaxed)
        committed.store(0, ordering: .relaxed)
        total.store(count, ordering: .relaxed)
        phaseStart.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
        phase.store(next.rawValue, ordering: .releasing)
    }

    /// How many notes the phase has to do, once known.
    public func expect(_ count: Int) { total.store(count, ordering: .relaxed) }

    public func add(_ count: Int, bytes size: Int64 = 0) {
        done.add(count, ordering: .relaxed)
        if size != 0 { bytes.add(size, ordering: .relaxed) }
    }

    public func addCommitted(_ count: Int) { committed.add(count, ordering: .relaxed) }

    public var snapshot: Snapshot {
        let current = Phase(rawValue: phase.load(ordering: .acquiring)) ?? .starting
        let elapsed = DispatchTime.now().uptimeNanoseconds &- phaseStart.load(ordering: .relaxed)
        return Snapshot(
            phase: current, done: done.load(ordering: .relaxed), total: total.load(ordering: .relaxed),
            bytes: bytes.load(ordering: .relaxed), committed: committed.load(ordering: .relaxed),
            seconds: Double(elapsed) / 1e9)
    }

    /// The progress line: `uploading: 4,000/10,000 notes, 8.1 MB, 3.2 MB/s, 2,000 committed`.
    public static func line(_ snapshot: Snapshot) -> String {
        let counts = snapshot.total > 0 ? "\(grouped(snapshot.done))/\(grouped(snapshot.total))" : grouped(snapshot.done)
        var parts: [String]
        switch snapshot.phase {
        case .starting:
            return "starting…"
        case .scanning:
            guard snapshot.done > 0 || snapshot.total > 0 else { return "scanning the notes folder…" }
            parts = ["scanning: \(counts) notes"]
        case .downloading:
            parts = ["downloading: \(counts) notes"]
        case .uploading:
            if snapshot.total > 0 && snapshot.done >= snapshot.total && snapshot.committed < snapshot.total {
                parts = ["committing: \(grouped(snapshot.committed))/\(grouped(snapshot.total)) notes"]
            } else {
                parts = ["uploading: \(counts) notes"]
            }
        }
        if snapshot.bytes > 0 {
            parts.append(megabytes(Double(snapshot.bytes)))
            if snapshot.seconds > 0.2 { parts.append(megabytes(Double(snapshot.bytes) / snapshot.seconds) + "/s") }
        }
        if snapshot.phase == .uploading && snapshot.committed > 0 && snapshot.done < snapshot.total {
            parts.append("\(grouped(snapshot.committed)) committed")
        }
        return parts.joined(separator: ", ")
    }

    static func megabytes(_ bytes: Double) -> String { String(format: "%.1f MB", bytes / 1_000_000) }

    /// `12,345`.
    static func grouped(_ number: Int) -> String {
        var digits = String(number.magnitude)
        var out = ""
        while digits.count > 3 {
            out = "," + digits.suffix(3) + out
            digits.removeLast(3)
        }
        return (number < 0 ? "-" : "") + digits + out
    }
}
