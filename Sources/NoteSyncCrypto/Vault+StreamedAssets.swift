import Crypto
import Foundation
import NoteSyncSupport

/// Assets sealed and opened a piece at a time (a big text: ``BigText``): the same bytes as
/// ``Vault/sealAsset(_:name:)`` and ``Vault/openAsset(_:name:)`` make of the whole, so every reader opens either.
extension Vault {
    /// Seals an asset of a size known in advance from the pieces of its bytes, in order.
    package struct AssetSealer {
        package let salt: Data
        private let key: SymmetricKey
        private let context: Data
        /// The bytes the asset has, and how many chunks they make.
        package let size: Int
        private let count: Int
        private var index = 0
        private var taken = 0
        private var pending = Data()

        package init(vault: Vault, name: ContentDigest, size: Int, salt: Data = Vault.randomBytes(Vault.saltByteCount)) {
            self.salt = salt
            self.key = vault.assetKey(salt: salt)
            self.context = Data(name.hex.utf8)
            self.size = size
            self.count = Vault.chunkCount(size)
        }

        /// The size of the sealed asset: the salt, then every chunk with its tag.
        package var sealedSize: Int { Vault.sealedAssetSize(size) }

        /// Takes the next bytes; `emit` gets each chunk sealed (ciphertext and tag), in order. The last chunk waits
        /// for ``finish(_:)``.
        package mutating func add(_ bytes: Data, _ emit: (Data) throws -> Void) rethrows {
            taken += bytes.count
            var rest = bytes[...]
            while !rest.isEmpty {
                // Not the last chunk: it is sealed once it is whole.
                guard index < count - 1 else {
                    pending.append(contentsOf: rest)
                    return
                }
                let wanted = Vault.chunkSize - pending.count
                if pending.isEmpty && rest.count >= Vault.chunkSize {
                    try emit(sealChunk(rest.prefix(Vault.chunkSize), last: false))
                    rest = rest.dropFirst(Vault.chunkSize)
                    continue
                }
                pending.append(contentsOf: rest.prefix(wanted))
                rest = rest.dropFirst(wanted)
                if pending.count == Vault.chunkSize {
                    try emit(sealChunk(pending, last: false))
                    pending.removeAll(keepingCapacity: true)
                }
            }
        }

        /// Seals the last chunk; throws when the bytes given were not the size announced (the file changed).
        package mutating func finish(_ emit: (Data) throws -> Void) throws {
            guard taken == size, index == count - 1 else {
                throw VaultFailure.malformed("an asset of \(size) bytes was given \(taken)")
            }
            try emit(sealChunk(pending, last: true))
            pending = Data()
        }

        private mutating func sealChunk(_ bytes: some DataProtocol, last: Bool) -> Data {
            defer { index += 1 }
            return Vault.seal(bytes, key: key, nonce: Vault.chunkNonce(index, last: last), context: context)
        }
    }

    /// Opens an asset sealed by ``sealAsset(_:name:)`` from the pieces of its sealed bytes, in order.
    package struct AssetOpener {
        private let vault: Vault
        private let context: Data
        /// The sealed size, and how many chunks it holds.
        private let sealedSize: Int
        private let count: Int
        private var key: SymmetricKey?
        private var index = 0
        private var taken = 0
        private var pending = Data()

        /// Throws `.malformed` for a size no sealing makes.
        package init(vault: Vault, name: ContentDigest, sealedSize: Int) throws(VaultFailure) {
            guard sealedSize >= Vault.saltByteCount + Vault.tagByteCount else {
                throw .malformed("\(sealedSize) bytes, too short for a sealed asset")
            }
            let stride = Vault.chunkSize + Vault.tagByteCount
            let chunks = sealedSize - Vault.saltByteCount
            count = (chunks + stride - 1) / stride
            let lastCount = chunks - (count - 1) * stride
            guard lastCount >= Vault.tagByteCount, count == 1 || lastCount > Vault.tagByteCount else {
                throw .malformed("a sealed asset of \(sealedSize) bytes ends inside a chunk")
            }
            self.vault = vault
            self.context = Data(name.hex.utf8)
            self.sealedSize = sealedSize
        }

        /// The bytes the asset opens to.
        package var openedSize: Int { sealedSize - Vault.saltByteCount - count * Vault.tagByteCount }

        /// Takes the next sealed bytes; `emit` gets each chunk opened, in order.
        package mutating func add(_ bytes: Data, _ emit: (Data) throws -> Void) throws {
            taken += bytes.count
            guard taken <= sealedSize else { throw VaultFailure.malformed("longer than its header says") }
            var rest = bytes[...]
            if key == nil {
                let wanted = Vault.saltByteCount - pending.count
                pending.append(contentsOf: rest.prefix(wanted))
                rest = rest.dropFirst(wanted)
                guard pending.count == Vault.saltByteCount else { return }
                key = vault.assetKey(salt: pending)
                pending.removeAll(keepingCapacity: true)
            }
            let stride = Vault.chunkSize + Vault.tagByteCount
            while !rest.isEmpty && index < count - 1 {
                if pending.isEmpty && rest.count >= stride {
                    try emit(openChunk(rest.prefix(stride), last: false))
                    rest = rest.dropFirst(stride)
                    continue
                }
                let wanted = stride - pending.count
                pending.append(contentsOf: rest.prefix(wanted))
                rest = rest.dropFirst(wanted)
                if pending.count == stride {
                    try emit(openChunk(pending, last: false))
                    pending.removeAll(keepingCapacity: true)
                }
            }
            pending.append(contentsOf: rest)
        }

        /// Opens the last chunk; throws when the asset was cut short.
        package mutating func finish(_ emit: (Data) throws -> Void) throws {
            guard taken == sealedSize, key != nil, index == count - 1 else {
                throw VaultFailure.malformed("a sealed asset cut short")
            }
            try emit(openChunk(pending, last: true))
            pending = Data()
        }

        private mutating func openChunk(_ bytes: some DataProtocol, last: Bool) throws(VaultFailure) -> Data {
            guard let key else { throw .malformed("no salt") }
            defer { index += 1 }
            return try Vault.open(bytes, key: key, nonce: Vault.chunkNonce(index, last: last), context: context)
        }
    }
}
