import Crypto
import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// fsck's check of an asset file too big to read whole (a big text, ``BigText``): read a piece at a time, as the sync
/// reads it, so that a check never holds it, and never takes a text it cannot read whole for damaged.
extension ServerFsck {
    /// Whether the asset file at `path` (of `size` bytes) holds the text it is stored as `name`: on a plain server its
    /// digest, as it is or inflated from `NSZ1`; on an `encrypted` one its header's digest of the body and, with the
    /// `vault`, chunks that open to a text whose keyed name it is.
    static func holdsStreamed(
        _ path: String, _ name: ContentDigest, size: Int64, in storage: any ServerStorage, vault: Vault?, encrypted: Bool
    ) throws -> Bool {
        var check = StreamedCheck(vault: vault, encrypted: encrypted, name: name)
        let limit = Int(clamping: min(size, ServerStore.largestAssetSize)) + 1
        do {
            let read = try storage.readPieces(path, limit: limit, pieceBytes: BigText.pieceBytes) { piece in
                try check.add(piece)
                return true
            }
            guard read == true else { return false }
            return try check.finish(size: size)
        } catch is AssetStreamDecoder.Mismatch {
            return false
        } catch is VaultFailure {
            return false
        } catch is SealedFile.Failure {
            return false
        }
    }

    /// The digests of a stored text as it streams: the bytes as they are, and inflated when they start with `NSZ1`;
    /// on an encrypted server after its header, through its chunks opened (without the key, only the header's digest).
    private struct StreamedCheck {
        let vault: Vault?
        let encrypted: Bool
        let name: ContentDigest
        private var header = Data()
        private var parsed: (format: Int, length: Int, digest: ContentDigest, size: Int)?
        private var body = SHA256()
        private var opener: Vault.AssetOpener?
        private var head = Data()
        private var seen = 0
        private var raw = SHA256()
        private var inflated: SHA256?
        private var inflater: AssetStreamDecoder.Inflater?

        init(vault: Vault?, encrypted: Bool, name: ContentDigest) {
            self.vault = vault
            self.encrypted = encrypted
            self.name = name
        }

        mutating func add(_ piece: Data) throws {
            guard encrypted else { return try text(piece) }
            var rest = piece[...]
            if parsed == nil {
                header.append(contentsOf: rest)
                guard header.prefix(200).contains(0x0A) || header.count >= 200 else { return }
                let found = try SealedFile.header(header, kind: "asset")
                guard found.format == SealedFile.encryptedFormat else { throw AssetStreamDecoder.Mismatch() }
                parsed = found
                if let vault { opener = try Vault.AssetOpener(vault: vault, name: name, sealedSize: found.length) }
                rest = header.dropFirst(found.size)
                header = Data()
            }
            let sealed = Data(rest)
            body.update(data: sealed)
            guard var current = opener else { return }
            opener = nil
            defer { opener = current }
            try current.add(sealed) { try text($0) }
        }

        /// Whether what came is the text `name` stands for (the file `size` bytes long).
        mutating func finish(size: Int64) throws -> Bool {
            if encrypted {
                guard let parsed, Int64(parsed.size + parsed.length) == size, ContentDigest(body.finalize()) == parsed.digest
                else { return false }
                guard let vault, var current = opener else { return true }
                opener = nil
                try current.finish { try text($0) }
                return matches { vault.assetName($0) }
            }
            return matches { $0 }
        }

        private func matches(_ named: (ContentDigest) -> ContentDigest) -> Bool {
            if named(ContentDigest(raw.finalize())) == name { return true }
            guard let inflated, inflater?.ended == true else { return false }
            return named(ContentDigest(inflated.finalize())) == name
        }

        /// Takes the next bytes of the stored text (opened, on an encrypted server).
        private mutating func text(_ bytes: Data) throws {
            raw.update(data: bytes)
            let before = seen
            seen += bytes.count
            guard before >= AssetCodec.magic.count else {
                head.append(bytes.prefix(AssetCodec.magic.count - before))
                guard head == AssetCodec.magic else { return }
                inflater = try AssetStreamDecoder.Inflater()
                inflated = SHA256()
                return try inflate(bytes.dropFirst(AssetCodec.magic.count - before))
            }
            try inflate(bytes)
        }

        private mutating func inflate(_ stream: Data) throws {
            guard let inflater, var hasher = inflated else { return }
            // A stream that does not inflate is not a compressed text: the bytes as they are may still be one.
            do { try inflater.add(Data(stream)) { hasher.update(data: $0) } } catch is AssetStreamDecoder.Mismatch {
                self.inflater = nil
                self.inflated = nil
                return
            }
            inflated = hasher
        }
    }
}
