import Crypto
import Foundation
import NoteSyncSupport
import _CryptoExtras

/// How a keys file turns a passphrase into the key that wraps the vault key: scrypt, its parameters and salt.
///
/// They come from the server, which may be hostile: ``validate()`` refuses, before any work, what would spend more
/// memory or time than the most this build ever writes (N = 2^20, r = 8, p = 1: 1 GiB).
public struct KDFParameters: Codable, Sendable, Equatable {
    /// The function: only `scrypt`.
    public var name: String
    /// scrypt's cost: N = 2^logN.
    public var logN: Int
    /// scrypt's block size.
    public var r: Int
    /// scrypt's parallelism.
    public var p: Int
    /// 16 to 64 random bytes, base64; written with 32.
    public var salt: String

    /// N = 2^17: 128 MiB and under a second in an optimized build, for a key wrap opened once per device.
    public static let defaultLogN = 17
    static let blockSize = 8
    static let parallelism = 1
    static let saltByteCount = 32

    static let logNRange = 10...20
    static let rRange = 1...16
    static let pRange = 1...4
    static let saltRange = 16...64
    /// scrypt's memory, 128 · r · N bytes, and its work, N · r · p, at most those of logN 20, r 8, p 1.
    static let maximumMemory = 1 << 30
    static let maximumWork = 1 << 23

    /// The logN new keys files are written with: NOTESYNC_SCRYPT_LOG_N (an integer in 10...20, for tests only) or
    /// ``defaultLogN``; a value out of range is ignored.
    package static var configuredLogN: Int {
        guard let text = ProcessInfo.processInfo.environment["NOTESYNC_SCRYPT_LOG_N"], let logN = Int(text),
            logNRange.contains(logN)
        else { return defaultLogN }
        return logN
    }

    /// Fresh parameters for a new wrap: scrypt with `logN`, r = 8, p = 1 and a new random salt.
    package static func scrypt(logN: Int) -> KDFParameters {
        KDFParameters(
            name: "scrypt", logN: logN, r: blockSize, p: parallelism,
            salt: Vault.randomBytes(saltByteCount).base64EncodedString())
    }

    /// Checks the parameters before anything is spent on them; returns the salt's bytes.
    ///
    /// Throws `.malformed` for another function than scrypt, logN outside 10...20, r outside 1...16, p outside 1...4,
    /// a salt that is not base64 of 16 to 64 bytes, a memory or work above that of logN 20, r 8, p 1, or what scrypt
    /// itself refuses (N ≥ 2^(16 r), so logN above 15 with r = 1).
    @discardableResult
    public func validate() throws(VaultFailure) -> Data {
        guard name == "scrypt" else { throw .malformed("unsupported key derivation \(name.prefix(40))") }
        // scrypt itself wants N < 2^(16 r): with r = 1, logN at most 15.
        guard Self.logNRange.contains(logN), Self.rRange.contains(r), Self.pRange.contains(p), logN < 16 * r else {
            throw .malformed("scrypt parameters out of range: logN \(logN), r \(r), p \(p)")
        }
        let rounds = 1 << logN
        guard 128 * r * rounds <= Self.maximumMemory, rounds * r * p <= Self.maximumWork else {
            throw .malformed("scrypt parameters too costly: logN \(logN), r \(r), p \(p)")
        }
        guard let bytes = Data(base64Encoded: salt), Self.saltRange.contains(bytes.count) else {
            throw .malformed("the scrypt salt is not base64 of 16 to 64 bytes")
        }
        return bytes
    }

    /// The key-encryption key of `passphrase`: scrypt of its UTF-8 bytes after Unicode NFC normalization (the same
    /// passphrase typed on two systems may arrive composed or decomposed), nothing trimmed.
    package func deriveKey(_ passphrase: String) throws(VaultFailure) -> SymmetricKey {
        let salt = try validate()
        // An Array, not Data: scrypt takes the address of the bytes, which an empty Data does not have.
        let bytes = Array(passphrase.precomposedStringWithCanonicalMapping.utf8)
        do {
            return try KDF.Scrypt.deriveKey(
                from: bytes, salt: salt, outputByteCount: Vault.keyByteCount, rounds: 1 << logN, blockSize: r,
                parallelism: p)
        } catch {
            throw .malformed("scrypt refused its parameters")
        }
    }
}
