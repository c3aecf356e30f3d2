import NoteSyncSupport

/// Why a sealed thing did not open: the one error of the encryption layer (docs/encryption.md, "Checks").
///
/// Descriptions are short, lowercase and printable, and never hold key material, so a caller can print them next to
/// the path of the file that failed.
public enum VaultFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The passphrase (or recovery key) does not open the keys file; so does a keys file of another server.
    case wrongPassphrase
    /// A sealed body does not open: damaged, swapped, replayed, or another server's.
    case authenticationFailed
    /// Too short, bad framing, bad padding, or parameters this build does not accept.
    case malformed(String)

    public var description: String {
        switch self {
        case .wrongPassphrase: return "wrong passphrase or recovery key"
        case .authenticationFailed: return "does not open: damaged, replaced, or sealed for another place"
        case .malformed(let why): return "malformed: \(DisplayName.escape(why))"
        }
    }
}
