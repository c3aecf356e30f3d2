import Foundation
import Logging

/// Wall time per phase of a sync, and the largest resident memory after any lap of each phase, logged at debug
/// level (`--log-level debug`): where a slow or large sync spends it.
package struct PhaseTimer {
    private let clock = ContinuousClock()
    private var last: ContinuousClock.Instant
    private var laps: [(String, Duration, Int)] = []
    /// Reading /proc at every lap is for the debug log only: the agent's syncs skip it.
    private let measuresMemory: Bool

    package init(measuresMemory: Bool) {
        last = clock.now
        self.measuresMemory = measuresMemory
    }

    package mutating func lap(_ name: String) {
        let now = clock.now
        laps.append((name, now - last, measuresMemory ? Self.residentMegabytes() : 0))
        last = now
    }

    package var metadata: Logger.Metadata {
        var result: Logger.Metadata = [:]
        for (name, duration, resident) in laps {
            let milliseconds = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
            let previous = Double(result["ms." + name].map { "\($0)" } ?? "0") ?? 0
            result["ms." + name] = "\(Int((previous + milliseconds).rounded()))"
            let largest = Int(result["mb." + name].map { "\($0)" } ?? "0") ?? 0
            result["mb." + name] = "\(max(largest, resident))"
        }
        return result
    }

    /// The process's resident memory now, in MB (from /proc/self/statm; 0 where there is none).
    static func residentMegabytes() -> Int {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return 0 }
        let fields = String(decoding: buffer[0..<count], as: UTF8.self).split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return (pages * Int(sysconf(Int32(_SC_PAGESIZE)))) >> 20
    }
}
