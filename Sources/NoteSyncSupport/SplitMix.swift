/// A small seeded generator (SplitMix64): the same seed gives the same choices, so a generated history, a shuffle
/// or a chaos run replays from its seed. Not for anything secret.
public struct SplitMix: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound` (0 when `bound` is below 1), by the remainder of ``next()``.
    public mutating func next(_ bound: Int) -> Int {
        Int(next() % UInt64(max(bound, 1)))
    }
}
