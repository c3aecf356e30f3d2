import Foundation

/// Wall-clock time in nanoseconds since 1970, as records and entries store it.
public enum Clock {
    public static func nowNanoseconds() -> Int64 {
        if let simulated = FaultPoint.simulatedNow() { return simulated }
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}
