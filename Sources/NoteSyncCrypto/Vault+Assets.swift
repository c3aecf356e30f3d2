import Crypto
import Foundation
import NoteSyncSupport

/// Assets on an encrypted server: their keyed names and their chunked sealing (docs/encryption.md, "Files").
extension Vault {
    /// An asset is sealed in chunks of this many bytes, so that neither sealing nor opening needs a second copy of a
    /// large text, and a cut or reordered asset is caught chunk by chunk.
    static let chunkSize = 65_536

    /// The name an asset is stored under: HMAC-SHA256 of the text's plain SHA-256 digest (its 32 bytes), keyed with
    /// HKDF(vault key, `notesync-e1 asset-name`).
    ///
    /// Equal texts still get equal names, so they deduplicate; without the key a name says nothing about the text,
    /// and the server cannot confirm a guessed one.
    public func assetName(_ digest: ContentDigest) -> ContentDigest {
        var mac = nameMAC
        let words = digest.words
        withUnsafeBytes(of: (words.0.bigEndian, words.1.bigEndian, words.2.bigEndian, words.3.bigEndian)) {
            mac.update(data: $0)
        }
        return ContentDigest(mac.finalize())
    }

    /// An asset's stored bytes: `salt(16)`, then `bytes` in chunks of 64 KiB (the last may be shorter; an empty input
    /// is one empty last chunk), each `ciphertext || tag` under ChaCha20-Poly1305.
    ///
    /// The key is HKDF-SHA256(vault key, salt, `notesync-e1 asset`); chunk i's nonce is i as 11 big-endian bytes then
    /// a last-chunk flag byte (1 on the last chunk, else 0); the associated data is the asset's name (its hex, UTF-8).
    /// So a chunk moved, an asset cut at a chunk boundary, and two assets swapped under each other's names all fail
    /// to open.
    public func sealAsset(_ bytes: Data, name: ContentDigest) -> Data {
        sealAsset(bytes, name: name, salt: Self.randomBytes(Self.saltByteCount))
    }

    /// ``sealAsset(_:name:)`` with the salt given: for known-answer tests, never for a real asset.
    package func sealAsset(_ bytes: Data, name: ContentDigest, salt: Data) -> Data {
        let key = assetKey(salt: salt)
        let context = Data(name.hex.utf8)
        let count = Self.chunkCount(bytes.count)
        var sealed = Data(capacity: Self.sealedAssetSize(bytes.count))
        sealed.append(salt)
        for index in 0..<count {
            let start = bytes.startIndex + index * Self.chunkSize
            let chunk = bytes[start..<min(start + Self.chunkSize, bytes.endIndex)]
            sealed.append(
                Self.seal(chunk, key: key, nonce: Self.chunkNonce(index, last: index == count - 1), context: context))
        }
        return sealed
    }

    /// The bytes of an asset ``sealAsset(_:name:)`` sealed under `name`.
    ///
    /// Throws `.authenticationFailed` for an asset that does not open (a damaged, cut, reordered or swapped chunk,
    /// another name, another key), `.malformed` for one whose length no sealing produces.
    public func openAsset(_ sealed: Data, name: ContentDigest) throws(VaultFailure) -> Data {
        guard sealed.count >= Self.saltByteCount + Self.tagByteCount else {
            throw .malformed("\(sealed.count) bytes, too short for a sealed asset")
        }
        let stride = Self.chunkSize + Self.tagByteCount
        let chunks = sealed.dropFirst(Self.saltByteCount)
        let count = (chunks.count + stride - 1) / stride
        let lastCount = chunks.count - (count - 1) * stride
        guard lastCount >= Self.tagByteCount, count == 1 || lastCount > Self.tagByteCount else {
            throw .malformed("a sealed asset of \(sealed.count) bytes ends inside a chunk")
        }
        let key = assetKey(salt: sealed.prefix(Self.saltByteCount))
        let context = Data(name.hex.utf8)
        var bytes = Data(capacity: chunks.count - count * Self.tagByteCount)
        for index in 0..<count {
            let start = chunks.startIndex + index * stride
            let chunk = chunks[start..<min(start + stride, chunks.endIndex)]
            bytes.append(
                try Self.open(chunk, key: key, nonce: Self.chunkNonce(index, last: index == count - 1), context: context))
        }
        return bytes
    }

    /// The size of ``sealAsset(_:name:)``'s output for `count` bytes: the salt, the bytes, and a tag per chunk.
    public static func sealedAssetSize(_ count: Int) -> Int {
        saltByteCount + count + tagByteCount * chunkCount(count)
    }

    /// How many chunks `count` bytes are sealed in: at least one, the empty last chunk of an empty asset.
    static func chunkCount(_ count: Int) -> Int {
        max(1, (count + chunkSize - 1) / chunkSize)
    }

    /// Chunk `index`'s nonce: the index as 11 big-endian bytes, then 1 on the last chunk and 0 on the others.
    static func chunkNonce(_ index: Int, last: Bool) -> Data {
        var nonce = Data(count: 3)
        withUnsafeBytes(of: UInt64(index).bigEndian) { nonce.append(contentsOf: $0) }
        nonce.append(last ? 1 : 0)
        return nonce
    }

    static let assetInfo = Data("\(scheme) asset".utf8)

    /// The key of one asset: HKDF-SHA256(vault key, its salt, `notesync-e1 asset`).
    func assetKey(salt: Data) -> SymmetricKey {
        Self.deriveKey32(inputKeyMaterial: keyBytes, salt: salt, info: Self.assetInfo)
    }
}
