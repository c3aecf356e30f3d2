import Crypto
import Foundation
import NoteSyncSupport

/// The keys file `keys/<generation>` of an encrypted server: the vault key wrapped under the passphrase and under the
/// recovery key (docs/encryption.md, "Keys").
///
/// JSON, binary fields in base64, kept inside a plain ``SealedFile`` of kind `keys` for its integrity. Each wrap is
/// ChaCha20-Poly1305 `combined` (a random 12-byte nonce, the 32 encrypted bytes, the 16-byte tag), with
/// `notesync-e1 keys <server id>` as associated data, so a keys file copied to another server does not open there.
public struct VaultKeys: Codable, Sendable, Equatable {
    /// The file's generation: a reader takes the highest; changing the passphrase publishes the next one.
    public var generation: Int64
    /// How the passphrase becomes the key of ``wrapped``.
    public var kdf: KDFParameters
    /// The vault key under the scrypt key of the passphrase.
    public var wrapped: String
    /// The vault key under the recovery key's bytes, used directly.
    public var recovery: String

    /// The combined size of a wrap: nonce, the 32-byte vault key, tag.
    static let wrapByteCount = 12 + Vault.keyByteCount + Vault.tagByteCount

    /// A new keys file for `vault`: a new scrypt salt, scrypt with N = 2^17, r = 8, p = 1 (NOTESYNC_SCRYPT_LOG_N, an
    /// integer in 10...20, sets logN for tests).
    public static func make(
        vault: Vault, passphrase: String, recovery: RecoveryKey, serverID: String, generation: Int64
    ) throws -> VaultKeys {
        try make(
            vault: vault, passphrase: passphrase, recovery: recovery, serverID: serverID, generation: generation,
            logN: KDFParameters.configuredLogN)
    }

    /// ``make(vault:passphrase:recovery:serverID:generation:)`` with scrypt's logN given.
    package static func make(
        vault: Vault, passphrase: String, recovery: RecoveryKey, serverID: String, generation: Int64, logN: Int
    ) throws -> VaultKeys {
        let kdf = KDFParameters.scrypt(logN: logN)
        return make(
            vault: vault, kdf: kdf, passphraseKey: try kdf.deriveKey(passphrase), recovery: recovery, serverID: serverID,
            generation: generation)
    }

    /// A new keys file for `vault` whose passphrase key `kdf` derived already (``ServerStore/NewVault``).
    package static func make(
        vault: Vault, kdf: KDFParameters, passphraseKey: SymmetricKey, recovery: RecoveryKey, serverID: String,
        generation: Int64
    ) -> VaultKeys {
        VaultKeys(
            generation: generation, kdf: kdf, wrapped: wrap(vault, under: passphraseKey, serverID: serverID),
            recovery: wrap(vault, under: SymmetricKey(data: recovery.bytes), serverID: serverID))
    }

    /// The next generation: the same vault key under a new passphrase (a new salt, today's parameters), the recovery
    /// wrap kept. `vault` is the one this file unlocked to.
    public func rewrapped(vault: Vault, passphrase: String, serverID: String) throws -> VaultKeys {
        try rewrapped(vault: vault, passphrase: passphrase, serverID: serverID, logN: KDFParameters.configuredLogN)
    }

    /// ``rewrapped(vault:passphrase:serverID:)`` with scrypt's logN given.
    package func rewrapped(vault: Vault, passphrase: String, serverID: String, logN: Int) throws -> VaultKeys {
        guard generation < Int64.max else { throw VaultFailure.malformed("no generation after \(generation)") }
        let kdf = KDFParameters.scrypt(logN: logN)
        return VaultKeys(
            generation: generation + 1, kdf: kdf,
            wrapped: Self.wrap(vault, under: try kdf.deriveKey(passphrase), serverID: serverID), recovery: recovery)
    }

    /// The vault key, opened with the passphrase.
    ///
    /// Parameters a hostile server could use to exhaust memory or time are refused as `.malformed` before scrypt runs
    /// (``KDFParameters/validate()``); a passphrase that does not open the wrap, or a file of another server, is
    /// `.wrongPassphrase`.
    public func unlock(passphrase: String, serverID: String) throws(VaultFailure) -> Vault {
        let sealed = try Self.decode(wrapped, field: "wrapped")
        return try Self.unwrap(sealed, under: kdf.deriveKey(passphrase), serverID: serverID)
    }

    /// The vault key, opened with the recovery key; `.wrongPassphrase` when it does not open.
    public func unlock(recovery key: RecoveryKey, serverID: String) throws(VaultFailure) -> Vault {
        let sealed = try Self.decode(recovery, field: "recovery")
        return try Self.unwrap(sealed, under: SymmetricKey(data: key.bytes), serverID: serverID)
    }

    /// The associated data of both wraps.
    package static func context(_ serverID: String) -> Data {
        Data("\(Vault.scheme) keys \(serverID)".utf8)
    }

    /// `vault`'s key sealed under `key` with a random nonce, as base64 of the combined box.
    package static func wrap(_ vault: Vault, under key: SymmetricKey, serverID: String) -> String {
        let nonce = Vault.randomBytes(12)
        var combined = nonce
        combined.append(Vault.seal(vault.keyBytes, key: key, nonce: nonce, context: context(serverID)))
        return combined.base64EncodedString()
    }

    /// A wrap's bytes, refused unless it is base64 of exactly a wrap's size.
    package static func decode(_ text: String, field: String) throws(VaultFailure) -> Data {
        guard let data = Data(base64Encoded: text), data.count == wrapByteCount else {
            throw .malformed("the \(field) key is not base64 of \(wrapByteCount) bytes")
        }
        return data
    }

    /// The vault inside a wrap, or `.wrongPassphrase` when `key` does not open it.
    static func unwrap(_ sealed: Data, under key: SymmetricKey, serverID: String) throws(VaultFailure) -> Vault {
        let nonce = sealed.prefix(12)
        let keyBytes: Data
        do {
            keyBytes = try Vault.open(sealed.dropFirst(12), key: key, nonce: Data(nonce), context: context(serverID))
        } catch {
            throw .wrongPassphrase
        }
        return try Vault(keyBytes: keyBytes)
    }
}
