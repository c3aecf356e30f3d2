/// An invariant that a fuzz input broke: which one, and the values that broke it.
public struct FuzzViolation: Error, Sendable, CustomStringConvertible {
    public let message: String

    public var description: String { message }

    /// Throws `message` unless `condition` holds.
    static func require(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzViolation) {
        if !condition {
            throw FuzzViolation(message: message())
        }
    }

    /// `text` for a violation message: quoted and escaped, with its scalars in hex when it is not plain ASCII.
    static func show(_ text: String) -> String {
        let quoted = String(reflecting: text)
        guard !text.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 && $0.value != 0x7F }) else {
            return quoted
        }
        let scalars = text.unicodeScalars.prefix(64).map { "U+" + String($0.value, radix: 16, uppercase: true) }
        return quoted + " [" + scalars.joined(separator: " ") + "]"
    }

    /// Whether `text` can reach a terminal safely: no C0/C1 control character, DEL, or line/paragraph separator,
    /// except those in `allowed`.
    ///
    /// Scalar by scalar: Foundation's `replacingOccurrences` and `contains` do not see a `\n` that is followed by
    /// a combining mark.
    static func isPrintable(_ text: String, allowing allowed: Set<Unicode.Scalar> = []) -> Bool {
        !text.unicodeScalars.contains { scalar in
            (scalar.properties.generalCategory == .control || scalar.value == 0x2028 || scalar.value == 0x2029)
                && !allowed.contains(scalar)
        }
    }
}
