import Crypto
import Foundation
import NoteSyncSupport

/// The vault key of an encrypted server, and the sealing of every file under it (docs/encryption.md).
///
/// Every sealed file and asset starts with 16 random bytes of salt from which its own key is derived with
/// HKDF-SHA256, as age does: the devices that share the vault key never share a nonce counter (borg's warning), so a
/// fixed nonce under a key used once is safe. Each use has its own HKDF label (`notesync-e1 file <kind>`,
/// `notesync-e1 asset`, `notesync-e1 asset-name`), so no key opens what another was made for.
public struct Vault: Sendable {
    /// The scheme an encrypted server's marker names, and the prefix of every HKDF label.
    public static let scheme = "notesync-e1"

    static let keyByteCount = 32
    static let saltByteCount = 16
    static let tagByteCount = 16
    /// A sealed file's plaintext starts with its length (4 bytes, big-endian), so the padding after it can go.
    static let lengthByteCount = 4

    /// The 32 bytes every other key is derived from, for the device's local state (never for the server: it holds only
    /// wraps of them). Held as `Data`, which is `Sendable` (swift-crypto's `SymmetricKey` is not, on Linux).
    public let keyBytes: Data
    /// HMAC-SHA256 keyed with the key of the assets' names (HKDF of the vault key, `notesync-e1 asset-name`, no salt),
    /// before any data: each name copies it, so the key is derived and its two padded blocks hashed once per vault,
    /// not once per name (a first sync names every text several times).
    /// A value type whose hash states are copied on write, so sharing it between threads is safe.
    nonisolated(unsafe) let nameMAC: HMAC<SHA256>

    /// A new vault key: 32 bytes from the system's secure generator (`server init --encrypt`).
    public static func generate() -> Vault {
        Vault(key: SymmetricKey(size: .bits256))
    }

    /// The vault of a key kept in a device's local state; refuses anything but 32 bytes.
    public init(keyBytes: Data) throws(VaultFailure) {
        guard keyBytes.count == Self.keyByteCount else {
            throw .malformed("a vault key has 32 bytes, not \(keyBytes.count)")
        }
        self.init(key: SymmetricKey(data: keyBytes))
    }

    package init(key: SymmetricKey) {
        keyBytes = key.withUnsafeBytes { Data($0) }
        nameMAC = HMAC<SHA256>(
            key: HKDF<SHA256>.deriveKey(
                inputKeyMaterial: key, info: Data("\(Self.scheme) asset-name".utf8), outputByteCount: Self.keyByteCount))
    }

    /// The sealed body of a structured file (a log entry, a snapshot, a device file, a gc mark…).
    ///
    /// Layout: `salt(16) || ChaCha20-Poly1305 ciphertext || tag(16)`, with no nonce stored: the key is
    /// HKDF-SHA256(vault key, salt, `notesync-e1 file <kind>`), used for this one file, so the nonce is all zeros.
    /// The plaintext is the length (4 bytes, big-endian), the bytes, then zeros up to the Padmé size of both, so the
    /// size says little about the content. `context` is the associated data: it must name the file's place
    /// unambiguously (the server id and the slot), so that a file copied to another place, or another server, fails to
    /// open.
    public func sealFile(_ plaintext: Data, kind: String, context: String) -> Data {
        sealFile(plaintext, kind: kind, context: context, salt: Self.randomBytes(Self.saltByteCount))
    }

    /// ``sealFile(_:kind:context:)`` with the salt given: for known-answer tests, never for a real file.
    package func sealFile(_ plaintext: Data, kind: String, context: String, salt: Data) -> Data {
        precondition(plaintext.count <= UInt32.max, "a structured file of \(plaintext.count) bytes")
        let length = Self.lengthByteCount + plaintext.count
        var padded = Data(capacity: padme(length))
        withUnsafeBytes(of: UInt32(plaintext.count).bigEndian) { padded.append(contentsOf: $0) }
        padded.append(plaintext)
        padded.count = padme(length)
        var body = Data(capacity: Self.saltByteCount + padded.count + Self.tagByteCount)
        body.append(salt)
        body.append(
            Self.seal(padded, key: fileKey(salt: salt, kind: kind), nonce: Self.zeroNonce, context: Data(context.utf8)))
        return body
    }

    /// The plaintext of a body ``sealFile(_:kind:context:)`` made with the same kind and context.
    ///
    /// Throws `.authenticationFailed` for a body that does not open (damaged, of another kind, place, server or key),
    /// `.malformed` for one too short to be sealed or whose padding is not the one the sealing writes.
    public func openFile(_ body: Data, kind: String, context: String) throws(VaultFailure) -> Data {
        guard body.count >= Self.saltByteCount + Self.lengthByteCount + Self.tagByteCount else {
            throw .malformed("\(body.count) bytes, too short for a sealed file")
        }
        let salt = body.prefix(Self.saltByteCount)
        let padded = try Self.open(
            body.dropFirst(Self.saltByteCount), key: fileKey(salt: salt, kind: kind), nonce: Self.zeroNonce,
            context: Data(context.utf8))
        let length = padded.prefix(Self.lengthByteCount).reduce(0) { $0 << 8 | Int($1) }
        guard length <= padded.count - Self.lengthByteCount, padme(Self.lengthByteCount + length) == padded.count,
            padded.dropFirst(Self.lengthByteCount + length).allSatisfy({ $0 == 0 })
        else { throw .malformed("bad padding") }
        return Data(padded.dropFirst(Self.lengthByteCount).prefix(length))
    }

    /// The key of one structured file: HKDF-SHA256(vault key, its salt, `notesync-e1 file <kind>`).
    func fileKey(salt: Data, kind: String) -> SymmetricKey {
        Self.deriveKey32(inputKeyMaterial: keyBytes, salt: salt, info: Data("\(Self.scheme) file \(kind)".utf8))
    }

    /// The nonce of a structured file, whose key seals nothing else.
    static let zeroNonce = Data(count: 12)

    /// `ciphertext || tag` of `plaintext` under ChaCha20-Poly1305 (the nonce is the caller's to store or rebuild).
    package static func seal(_ plaintext: some DataProtocol, key: SymmetricKey, nonce: Data, context: Data) -> Data {
        do {
            let box = try ChaChaPoly.seal(plaintext, using: key, nonce: ChaChaPoly.Nonce(data: nonce), authenticating: context)
            return box.combined.dropFirst(nonce.count)
        } catch {
            // Only a key or nonce of the wrong size is refused, and both sizes are constants here.
            preconditionFailure("ChaChaPoly refused a 32-byte key and a 12-byte nonce: \(error)")
        }
    }

    /// The plaintext of `ciphertext || tag`, or `.authenticationFailed`.
    package static func open(_ sealed: some DataProtocol, key: SymmetricKey, nonce: Data, context: Data) throws(VaultFailure) -> Data {
        do {
            var combined = Data(capacity: nonce.count + sealed.count)
            combined.append(nonce)
            combined.append(contentsOf: sealed)
            return try ChaChaPoly.open(ChaChaPoly.SealedBox(combined: combined), using: key, authenticating: context)
        } catch {
            throw .authenticationFailed
        }
    }

    /// `count` bytes from the system's secure generator (getrandom(2) on Linux): salts and keys.
    static func randomBytes(_ count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        var data = Data(capacity: count + 8)
        while data.count < count {
            withUnsafeBytes(of: generator.next()) { data.append(contentsOf: $0) }
        }
        return data.prefix(count)
    }
}
