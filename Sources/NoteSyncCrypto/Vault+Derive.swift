import Crypto
import Foundation
import NoteSyncSupport

/// HKDF-SHA256 with one 32-byte output (RFC 5869), the derivation of every file's and asset's key.
///
/// The same bytes as swift-crypto's `HKDF<SHA256>.deriveKey` (VaultTests checks the two agree), computed with two
/// HMACs over stack buffers: the generic one allocates and copies for each padded key block, which cost a first sync
/// of 10,000 texts about a quarter of a second of CPU on an encrypted server.
extension Vault {
    static func deriveKey32(inputKeyMaterial ikm: Data, salt: some DataProtocol, info: Data) -> SymmetricKey {
        // Extract: PRK = HMAC(salt, IKM). A salt over one block would be hashed first; ours are 16 bytes.
        let saltBytes = Array(salt)
        precondition(saltBytes.count <= 64, "an HKDF salt of \(saltBytes.count) bytes")
        let prk = ikm.withUnsafeBytes { ikm in saltBytes.withUnsafeBytes { hmacSHA256(key: $0, ikm, nil) } }
        // Expand, one block: OKM = HMAC(PRK, info || 0x01).
        let okm = prk.withUnsafeBytes { prk in
            info.withUnsafeBytes { info in
                withUnsafeBytes(of: UInt8(1)) { counter in hmacSHA256(key: prk, info, counter) }
            }
        }
        return okm.withUnsafeBytes { SymmetricKey(data: $0) }
    }

    /// HMAC-SHA256 of `first || second` under a key of at most one block (64 bytes).
    private static func hmacSHA256(
        key: UnsafeRawBufferPointer, _ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer?
    ) -> SHA256.Digest {
        var block = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &block) { pad in
            pad.copyMemory(from: key)
            for index in 0..<64 { pad[index] ^= 0x36 }
            var inner = SHA256()
            inner.update(bufferPointer: UnsafeRawBufferPointer(pad))
            inner.update(bufferPointer: first)
            if let second { inner.update(bufferPointer: second) }
            let innerDigest = inner.finalize()
            for index in 0..<64 { pad[index] ^= 0x36 ^ 0x5C }
            var outer = SHA256()
            outer.update(bufferPointer: UnsafeRawBufferPointer(pad))
            innerDigest.withUnsafeBytes { outer.update(bufferPointer: $0) }
            return outer.finalize()
        }
    }
}
