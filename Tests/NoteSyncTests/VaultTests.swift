import Crypto
import Foundation
import Testing

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// The cryptographic core of the encrypted server (docs/encryption.md): sealed files, assets and their names, Padmé,
/// the recovery key and the keys file. Known answers come from an independent implementation (Python's
/// `cryptography` and `hashlib.scrypt`), so the formats are pinned, not only self-consistent.
@Suite struct VaultTests {
    /// The vault of the known answers: the bytes 0...31.
    static let knownVault = try! Vault(keyBytes: Data(0..<32))
    /// The salt of the known answers: the bytes 16...31.
    static let knownSalt = Data(16..<32)

    let vault = Vault.generate()

    /// `count` bytes that differ from one seed to another (SplitMix: not secret, only varied).
    static func bytes(_ count: Int, seed: UInt64 = 1) -> Data {
        var generator = SplitMix(seed: seed)
        return Data((0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
    }

    static func hex(_ text: String) -> Data {
        let digits = Array(text.utf8)
        return Data(
            stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
        )
    }

    static let sizes: [Int] =
        [0, 1, 2, 3, 4, 5, 12, 100, 129, 1000, 4096, 65_535, 65_536, 65_537, 3 * 65_536, 3 * 65_536 + 7]
        + (1...6).map { seed in
            var generator = SplitMix(seed: UInt64(seed))
            return generator.next(300_000)
        }

    // MARK: Structured files

    @Test(arguments: sizes)
    func filesRoundTrip(_ count: Int) throws {
        let plaintext = Self.bytes(count, seed: UInt64(count))
        let body = vault.sealFile(plaintext, kind: "entry", context: "srv entry 7")
        #expect(body.count == 16 + padme(4 + count) + 16)
        #expect(try vault.openFile(body, kind: "entry", context: "srv entry 7") == plaintext)
        // A slice with its parent's indices opens the same.
        let slice = (Data([0]) + body).dropFirst()
        #expect(try vault.openFile(slice, kind: "entry", context: "srv entry 7") == plaintext)
    }

    @Test func everyFlippedBitOfAFileFails() throws {
        let body = vault.sealFile(Data("a short note".utf8), kind: "entry", context: "srv entry 1")
        for bit in 0..<body.count * 8 {
            var damaged = body
            damaged[bit / 8] ^= 1 << (bit % 8)
            #expect(throws: VaultFailure.authenticationFailed) {
                try vault.openFile(damaged, kind: "entry", context: "srv entry 1")
            }
        }
    }

    @Test func aFileOpensOnlyWithItsKindPlaceServerAndKey() throws {
        let body = vault.sealFile(Data("{\"seq\":7}".utf8), kind: "entry", context: "srv-a entry 7")
        #expect(try vault.openFile(body, kind: "entry", context: "srv-a entry 7") == Data("{\"seq\":7}".utf8))
        let others = [
            ("snapshot", "srv-a entry 7", vault), ("entry", "srv-a entry 8", vault), ("entry", "srv-b entry 7", vault),
            ("entry", "", vault), ("entry", "srv-a entry 7", Vault.generate())
        ]
        for (kind, context, other) in others {
            #expect(throws: VaultFailure.authenticationFailed, "\(kind) \(context)") {
                try other.openFile(body, kind: kind, context: context)
            }
        }
    }

    @Test func cutAndExtendedFilesFail() throws {
        let body = vault.sealFile(Data("note".utf8), kind: "device", context: "d1")
        for length in 0..<body.count {
            #expect(throws: VaultFailure.self) { try vault.openFile(body.prefix(length), kind: "device", context: "d1") }
        }
        #expect(throws: VaultFailure.authenticationFailed) {
            try vault.openFile(body + Data([0]), kind: "device", context: "d1")
        }
        #expect(malformation { () throws(VaultFailure) in try vault.openFile(Data(count: 35), kind: "device", context: "d1") } != nil)
    }

    @Test func theSameFileSealedTwiceDiffers() throws {
        let plaintext = Data("the same entry".utf8)
        let one = vault.sealFile(plaintext, kind: "entry", context: "c")
        let two = vault.sealFile(plaintext, kind: "entry", context: "c")
        #expect(one != two)
        #expect(one.prefix(16) != two.prefix(16))
        #expect(try vault.openFile(one, kind: "entry", context: "c") == plaintext)
        #expect(try vault.openFile(two, kind: "entry", context: "c") == plaintext)
    }

    /// A body sealed right but padded otherwise (only a buggy writer with the key could make one) is malformed.
    @Test func badPaddingIsMalformed() throws {
        let key = vault.fileKey(salt: Self.knownSalt, kind: "entry")
        let paddings: [Data] = [
            Data([0, 0, 0, 9]) + Data("abc".utf8),  // longer than the plaintext
            Data([0, 0, 0, 2]) + Data("abcde".utf8) + Data(count: 1),  // not the Padmé size of 4 + 2
            Data([0, 0, 0, 5]) + Data("abcde".utf8) + Data([1])  // not zeros
        ]
        for padded in paddings {
            let body = Self.knownSalt + Vault.seal(padded, key: key, nonce: Vault.zeroNonce, context: Data("c".utf8))
            #expect(throws: VaultFailure.malformed("bad padding")) { try vault.openFile(body, kind: "entry", context: "c") }
        }
    }

    @Test func fileKnownAnswers() throws {
        let hello = Self.hex(
            "101112131415161718191a1b1c1d1e1f58349694c5916d709541a8e48837c5e2bd68606beff36f44e8a46748d9ae6eca")
        #expect(Self.knownVault.sealFile(Data("hello, notes".utf8), kind: "entry", context: "srv-1 entry 7", salt: Self.knownSalt) == hello)
        #expect(try Self.knownVault.openFile(hello, kind: "entry", context: "srv-1 entry 7") == Data("hello, notes".utf8))
        let empty = Self.hex("101112131415161718191a1b1c1d1e1f71ff74003832c99d454b6994c70d10c9352423a5")
        #expect(Self.knownVault.sealFile(Data(), kind: "snapshot", context: "", salt: Self.knownSalt) == empty)
        #expect(try Self.knownVault.openFile(empty, kind: "snapshot", context: "") == Data())
    }

    // MARK: Assets

    @Test(arguments: sizes)
    func assetsRoundTrip(_ count: Int) throws {
        let bytes = Self.bytes(count, seed: UInt64(count) + 99)
        let name = vault.assetName(ContentDigest(of: bytes))
        let sealed = vault.sealAsset(bytes, name: name)
        #expect(sealed.count == Vault.sealedAssetSize(count))
        #expect(try vault.openAsset(sealed, name: name) == bytes)
        let slice = (Data([0]) + sealed).dropFirst()
        #expect(try vault.openAsset(slice, name: name) == bytes)
        let sliceInput = (Data([0]) + bytes).dropFirst()
        #expect(try vault.openAsset(vault.sealAsset(sliceInput, name: name), name: name) == bytes)
    }

    @Test func sealedAssetSizes() {
        #expect(Vault.sealedAssetSize(0) == 32)
        #expect(Vault.sealedAssetSize(1) == 33)
        #expect(Vault.sealedAssetSize(65_536) == 16 + 65_536 + 16)
        #expect(Vault.sealedAssetSize(65_537) == 16 + 65_537 + 32)
        #expect(Vault.sealedAssetSize(3 * 65_536) == 16 + 3 * 65_536 + 48)
    }

    @Test func everyFlippedBitOfAnAssetFails() throws {
        let bytes = Data("a short text, sealed as an asset\n".utf8)
        let name = vault.assetName(ContentDigest(of: bytes))
        let sealed = vault.sealAsset(bytes, name: name)
        for bit in 0..<sealed.count * 8 {
            var damaged = sealed
            damaged[bit / 8] ^= 1 << (bit % 8)
            #expect(throws: VaultFailure.authenticationFailed) { try vault.openAsset(damaged, name: name) }
        }
        // In a long asset: the salt, each chunk's first and last ciphertext byte, and each tag.
        let long = Self.bytes(2 * 65_536 + 500)
        let longSealed = vault.sealAsset(long, name: name)
        let stride = 65_536 + 16
        var places = [0, 15]
        for chunk in 0..<3 {
            let start = 16 + chunk * stride
            let end = min(start + stride, longSealed.count)
            places += [start, end - 17, end - 16, end - 1]
        }
        for place in places {
            var damaged = longSealed
            damaged[place] ^= 0x80
            #expect(throws: VaultFailure.authenticationFailed) { try vault.openAsset(damaged, name: name) }
        }
    }

    @Test func anAssetOpensOnlyWithItsNameAndKey() throws {
        let bytes = Self.bytes(70_000)
        let name = vault.assetName(ContentDigest(of: bytes))
        let sealed = vault.sealAsset(bytes, name: name)
        let otherName = vault.assetName(ContentDigest(of: Data("other".utf8)))
        #expect(throws: VaultFailure.authenticationFailed) { try vault.openAsset(sealed, name: otherName) }
        #expect(throws: VaultFailure.authenticationFailed) { try Vault.generate().openAsset(sealed, name: name) }
        // A structured file's key does not open an asset, nor the reverse.
        #expect(throws: VaultFailure.self) { try vault.openFile(sealed, kind: "asset", context: name.hex) }
    }

    @Test func anAssetCutAtAChunkBoundaryFails() throws {
        let bytes = Self.bytes(3 * 65_536 + 100)
        let name = vault.assetName(ContentDigest(of: bytes))
        let sealed = vault.sealAsset(bytes, name: name)
        let stride = 65_536 + 16
        for chunks in 1...3 {
            #expect(throws: VaultFailure.authenticationFailed) {
                try vault.openAsset(sealed.prefix(16 + chunks * stride), name: name)
            }
        }
        // An asset of exactly three full chunks, cut after two.
        let full = Self.bytes(3 * 65_536)
        let fullSealed = vault.sealAsset(full, name: name)
        #expect(throws: VaultFailure.authenticationFailed) { try vault.openAsset(fullSealed.prefix(16 + 2 * stride), name: name) }
        // Cut inside a chunk, or so that the last chunk is shorter than a tag.
        #expect(throws: VaultFailure.authenticationFailed) { try vault.openAsset(sealed.prefix(16 + stride + 500), name: name) }
        #expect(throws: VaultFailure.self) { try vault.openAsset(sealed.prefix(16 + stride + 5), name: name) }
        #expect(throws: VaultFailure.self) { try vault.openAsset(sealed.prefix(20), name: name) }
        // A full chunk followed by an empty one is never written.
        #expect(throws: VaultFailure.self) { try vault.openAsset(fullSealed.prefix(16 + stride + 16), name: name) }
    }

    @Test func reorderedOrRepeatedChunksFail() throws {
        let bytes = Self.bytes(3 * 65_536 + 100)
        let name = vault.assetName(ContentDigest(of: bytes))
        let sealed = vault.sealAsset(bytes, name: name)
        let stride = 65_536 + 16
        let salt = sealed.prefix(16)
        let chunks = (0..<4).map { sealed[(16 + $0 * stride)..<min(16 + ($0 + 1) * stride, sealed.count)] }
        let orders = [[1, 0, 2, 3], [0, 2, 1, 3], [0, 0, 2, 3], [0, 1, 2, 2], [0, 1, 3]]
        for order in orders {
            var reordered = salt
            for index in order { reordered.append(chunks[index]) }
            #expect(throws: VaultFailure.authenticationFailed, "order \(order)") { try vault.openAsset(reordered, name: name) }
        }
    }

    @Test func swappedAssetsAndChunksFail() throws {
        let one = Self.bytes(100_000, seed: 1)
        let two = Self.bytes(100_000, seed: 2)
        let oneName = vault.assetName(ContentDigest(of: one))
        let twoName = vault.assetName(ContentDigest(of: two))
        let oneSealed = vault.sealAsset(one, name: oneName)
        let twoSealed = vault.sealAsset(two, name: twoName)
        // Stored under each other's names.
        #expect(throws: VaultFailure.authenticationFailed) { try vault.openAsset(oneSealed, name: twoName) }
        #expect(throws: VaultFailure.authenticationFailed) { try vault.openAsset(twoSealed, name: oneName) }
        // A chunk taken from another sealing of the same text under the same name (another salt, another key).
        let again = vault.sealAsset(one, name: oneName)
        let stride = 65_536 + 16
        var mixed = oneSealed.prefix(16 + stride)
        mixed.append(again.dropFirst(16 + stride))
        #expect(again != oneSealed)
        #expect(throws: VaultFailure.authenticationFailed) { try vault.openAsset(mixed, name: oneName) }
        var mixedTwo = oneSealed.prefix(16 + stride)
        mixedTwo.append(twoSealed.dropFirst(16 + stride))
        #expect(throws: VaultFailure.authenticationFailed) { try vault.openAsset(mixedTwo, name: oneName) }
    }

    @Test func assetNames() throws {
        let digest = ContentDigest(of: Data("a note".utf8))
        let other = ContentDigest(of: Data("another note".utf8))
        let same = try Vault(keyBytes: vault.keyBytes)
        #expect(vault.assetName(digest) == vault.assetName(digest))
        #expect(vault.assetName(digest) == same.assetName(digest))
        #expect(vault.assetName(digest) != vault.assetName(other))
        #expect(vault.assetName(digest) != Vault.generate().assetName(digest))
        #expect(vault.assetName(digest) != digest)
    }

    /// The lean HKDF and the kept name HMAC give swift-crypto's generic results, for salts of every size up to a
    /// block, varied infos and keys, and names computed from several threads at once.
    @Test func derivationsMatchTheGenericOnes() async throws {
        for seed in 1...200 {
            var generator = SplitMix(seed: UInt64(seed))
            let ikm = Self.bytes(32, seed: UInt64(seed))
            let salt = Self.bytes(Int(generator.next() % 65), seed: UInt64(seed) + 1000)
            let info = Self.bytes(Int(generator.next() % 40), seed: UInt64(seed) + 2000)
            let lean = Vault.deriveKey32(inputKeyMaterial: ikm, salt: salt, info: info)
            let generic = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: ikm), salt: salt, info: info, outputByteCount: 32)
            #expect(lean == generic, "seed \(seed)")
            let vault = try Vault(keyBytes: ikm)
            let digest = ContentDigest(of: info)
            let nameKey = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: ikm), info: Data("notesync-e1 asset-name".utf8), outputByteCount: 32)
            let expected = ContentDigest(HMAC<SHA256>.authenticationCode(for: digest.bytes, using: nameKey))
            #expect(vault.assetName(digest) == expected, "seed \(seed)")
        }
        let digests = (0..<64).map { ContentDigest(of: Self.bytes(8, seed: UInt64($0))) }
        let serial = digests.map(vault.assetName)
        let vault = vault
        let parallel = await withTaskGroup(of: (Int, ContentDigest).self) { group in
            for (index, digest) in digests.enumerated() { group.addTask { (index, vault.assetName(digest)) } }
            var names = [ContentDigest?](repeating: nil, count: digests.count)
            for await (index, name) in group { names[index] = name }
            return names
        }
        #expect(parallel == serial)
    }

    @Test func assetKnownAnswers() throws {
        let digest = ContentDigest(of: Data("hello, notes".utf8))
        #expect(digest.hex == "cf038292ddca18b2e7e9af73f04f3686923e8e8821bb70833bdbca7752773edd")
        #expect(digest.bytes == Self.hex(digest.hex))
        let name = Self.knownVault.assetName(digest)
        #expect(name.hex == "839495856c293c1409575b79a03414c33c0587dd2475fb0073969dccdc271544")
        let bytes = Data((0..<150_000).map { UInt8($0 % 251) })
        let sealed = Self.knownVault.sealAsset(bytes, name: name, salt: Self.knownSalt)
        #expect(sealed.count == 150_064)
        #expect(ContentDigest(of: sealed).hex == "7a5a5bbff8b5bb1ce997be070af7a9be32e6977d209724f7158840e04c3c7ec1")
        #expect(try Self.knownVault.openAsset(sealed, name: name) == bytes)
        let empty = Self.hex("101112131415161718191a1b1c1d1e1f739d7b553bdaf26fc312ae083e07dacd")
        #expect(Self.knownVault.sealAsset(Data(), name: name, salt: Self.knownSalt) == empty)
        #expect(try Self.knownVault.openAsset(empty, name: name) == Data())
    }

    // MARK: Keys

    @Test func vaultKeyBytes() throws {
        #expect(try Vault(keyBytes: vault.keyBytes).keyBytes == vault.keyBytes)
        #expect(vault.keyBytes.count == 32)
        #expect(vault.keyBytes != Vault.generate().keyBytes)
        for count in [0, 16, 31, 33, 64] {
            #expect(throws: VaultFailure.malformed("a vault key has 32 bytes, not \(count)")) {
                try Vault(keyBytes: Data(count: count))
            }
        }
    }

    // MARK: Padmé

    /// The paper's definition, step by step (Nikitin et al., PETS 2019, algorithm 1), with logarithms by loops.
    static func referencePadme(_ length: Int) -> Int {
        guard length >= 2 else { return length }
        func floorLog2(_ value: Int) -> Int {
            var exponent = 0
            while 1 << (exponent + 1) <= value { exponent += 1 }
            return exponent
        }
        let e = floorLog2(length)
        let s = floorLog2(e) + 1
        let lastBits = e - s
        let bitMask = (1 << lastBits) - 1
        return (length + bitMask) & ~bitMask
    }

    @Test func padmeFollowsThePaper() {
        var previous = 0
        for length in 0...100_000 {
            let padded = padme(length)
            guard padded == Self.referencePadme(length), padded >= length, padded >= previous,
                Double(padded) <= 1.12 * Double(length), padme(padded) == padded
            else {
                Issue.record("padme(\(length)) = \(padded), the paper's is \(Self.referencePadme(length))")
                return
            }
            previous = padded
        }
        let known: [Int: Int] = [
            0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 8: 8, 9: 10, 100: 104, 129: 144, 1000: 1024, 1025: 1088, 65_536: 65_536,
            65_537: 67_584, 100_000: 100_352, 1 << 30: 1 << 30, (1 << 30) + 1: (1 << 30) + (1 << 25)
        ]
        for (length, padded) in known {
            #expect(padme(length) == padded, "padme(\(length))")
        }
        // Beyond 256 bytes, at most 1/16 more.
        #expect((256...100_000).allSatisfy { padme($0) - $0 <= $0 / 16 })
    }

    // MARK: Recovery key

    @Test func recoveryKeyText() throws {
        let key = RecoveryKey.generate()
        let text = key.text
        #expect(text.count == 64)
        let groups = text.split(separator: "-", omittingEmptySubsequences: false)
        #expect(groups.count == 13)
        #expect(groups.allSatisfy { $0.count == 4 && $0.allSatisfy { "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".contains($0) } })
        #expect(RecoveryKey(text: text) == key)
        #expect(RecoveryKey(text: text.lowercased()) == key)
        #expect(RecoveryKey(text: text.replacingOccurrences(of: "-", with: "")) == key)
        #expect(RecoveryKey(text: text.replacingOccurrences(of: "-", with: " ")) == key)
        #expect(RecoveryKey(text: "  " + text.replacingOccurrences(of: "-", with: " - ") + "\n") == key)
        #expect(key != RecoveryKey.generate())
        #expect(key.bytes.count == 32)
    }

    @Test func recoveryKeyKnownAnswers() throws {
        let key = try #require(RecoveryKey(text: "QCAY-FA4E-QWDI-PCEJ-RKFY-ZDMO-R6IJ-DEUT-SSKZ-NF4Y-TGNJ-XHE5-T2PQ"))
        #expect(key.bytes == Data(0x80..<0xA0))
        #expect(RecoveryKey(bytes: Data(repeating: 0, count: 32)).text == Array(repeating: "AAAA", count: 13).joined(separator: "-"))
        #expect(
            RecoveryKey(bytes: Data(repeating: 0xFF, count: 32)).text == Array(repeating: "7777", count: 12).joined(separator: "-")
                + "-777Q")
    }

    @Test func recoveryKeyRefusesWrongText() {
        let text = RecoveryKey.generate().text
        let plain = text.replacingOccurrences(of: "-", with: "")
        let head = String(plain.dropLast())
        var wrong: [String] = ["", head, plain + "A", plain + "AAAA", plain + "=", "A" + plain.dropFirst(2) + "\u{0301}"]
        wrong += ["0", "1", "8", "=", "\u{C9}", "_", "\u{0}"].map { head + $0 }
        // The last character carries one bit: B (00001) and 7 (11111) have trailing bits no key has.
        wrong += ["B", "7"].map { head + $0 }
        for candidate in wrong {
            #expect(RecoveryKey(text: candidate) == nil, "\(candidate)")
        }
    }

    // MARK: Keys file

    static let serverID = "srv-1"

    func keys(_ passphrase: String = "correct horse", recovery: RecoveryKey = RecoveryKey.generate()) throws -> VaultKeys {
        try VaultKeys.make(
            vault: vault, passphrase: passphrase, recovery: recovery, serverID: Self.serverID, generation: 1, logN: 10)
    }

    @Test func keysUnlockWithThePassphraseAndTheRecoveryKey() throws {
        let recovery = RecoveryKey.generate()
        let keys = try keys(recovery: recovery)
        #expect(keys.generation == 1 && keys.kdf.name == "scrypt" && keys.kdf.logN == 10 && keys.kdf.r == 8 && keys.kdf.p == 1)
        #expect(Data(base64Encoded: keys.kdf.salt)?.count == 32)
        #expect(try keys.unlock(passphrase: "correct horse", serverID: Self.serverID).keyBytes == vault.keyBytes)
        #expect(try keys.unlock(recovery: recovery, serverID: Self.serverID).keyBytes == vault.keyBytes)
        #expect(throws: VaultFailure.wrongPassphrase) { try keys.unlock(passphrase: "correct horse ", serverID: Self.serverID) }
        #expect(throws: VaultFailure.wrongPassphrase) { try keys.unlock(passphrase: "Correct horse", serverID: Self.serverID) }
        #expect(throws: VaultFailure.wrongPassphrase) { try keys.unlock(passphrase: "", serverID: Self.serverID) }
        #expect(throws: VaultFailure.wrongPassphrase) { try keys.unlock(recovery: RecoveryKey.generate(), serverID: Self.serverID) }
        // The keys file of another server.
        #expect(throws: VaultFailure.wrongPassphrase) { try keys.unlock(passphrase: "correct horse", serverID: "srv-2") }
        #expect(throws: VaultFailure.wrongPassphrase) { try keys.unlock(recovery: recovery, serverID: "srv-2") }
        // Two wraps of the same key differ (new salt, new nonces).
        let again = try self.keys(recovery: recovery)
        #expect(again.kdf.salt != keys.kdf.salt && again.wrapped != keys.wrapped && again.recovery != keys.recovery)
    }

    @Test func passphrasesAreNormalizedNotTrimmed() throws {
        let composed = "caf\u{E9} au lait"
        let decomposed = "cafe\u{301} au lait"
        let keys = try keys(composed)
        #expect(try keys.unlock(passphrase: decomposed, serverID: Self.serverID).keyBytes == vault.keyBytes)
        #expect(throws: VaultFailure.wrongPassphrase) { try keys.unlock(passphrase: composed + "\n", serverID: Self.serverID) }
        let empty = try self.keys("")
        #expect(try empty.unlock(passphrase: "", serverID: Self.serverID).keyBytes == vault.keyBytes)
        #expect(throws: VaultFailure.wrongPassphrase) { try empty.unlock(passphrase: " ", serverID: Self.serverID) }
    }

    @Test func rewrappingChangesOnlyThePassphrase() throws {
        let recovery = RecoveryKey.generate()
        let keys = try keys("old passphrase", recovery: recovery)
        let next = try keys.rewrapped(vault: vault, passphrase: "new passphrase", serverID: Self.serverID, logN: 10)
        #expect(next.generation == 2)
        #expect(next.recovery == keys.recovery)
        #expect(next.kdf.salt != keys.kdf.salt)
        #expect(try next.unlock(passphrase: "new passphrase", serverID: Self.serverID).keyBytes == vault.keyBytes)
        #expect(throws: VaultFailure.wrongPassphrase) { try next.unlock(passphrase: "old passphrase", serverID: Self.serverID) }
        #expect(try next.unlock(recovery: recovery, serverID: Self.serverID).keyBytes == vault.keyBytes)
        var last = next
        last.generation = .max
        #expect(throws: VaultFailure.self) {
            try last.rewrapped(vault: vault, passphrase: "x", serverID: Self.serverID, logN: 10)
        }
    }

    @Test func hostileParametersAreRefusedBeforeAnyWork() throws {
        let keys = try keys("pass")
        let salt16 = Data(count: 16).base64EncodedString()
        let hostile: [(inout KDFParameters) -> Void] = [
            { $0.name = "argon2id" }, { $0.name = "" }, { $0.name = "Scrypt" },
            { $0.logN = 9 }, { $0.logN = 21 }, { $0.logN = 64 }, { $0.logN = -1 }, { $0.logN = .max }, { $0.logN = .min },
            { $0.r = 0 }, { $0.r = 17 }, { $0.r = -8 }, { $0.r = .max },
            { ($0.logN, $0.r) = (16, 1) }, { $0.p = 0 }, { $0.p = 5 }, { $0.p = .max },
            // Each within its range, together above logN 20, r 8, p 1's memory or work.
            { ($0.logN, $0.r) = (20, 16) }, { ($0.logN, $0.p) = (20, 2) }, { ($0.logN, $0.r, $0.p) = (19, 16, 2) },
            { $0.salt = Data(count: 15).base64EncodedString() }, { $0.salt = Data(count: 65).base64EncodedString() },
            { $0.salt = "" }, { $0.salt = "not base64!" }, { $0.salt = " " + salt16 }
        ]
        for change in hostile {
            var bad = keys
            change(&bad.kdf)
            #expect(throws: VaultFailure.self) { try bad.kdf.validate() }
            let why = malformation { () throws(VaultFailure) in try bad.unlock(passphrase: "pass", serverID: Self.serverID) }
            #expect(why.map(isPrintable) == true, "\(bad.kdf) is refused as malformed")
        }
        // At the limits, and the largest this build writes.
        for (logN, r, p) in [(10, 1, 1), (15, 1, 1), (20, 8, 1), (10, 16, 4), (16, 16, 4)] {
            var edge = keys.kdf
            (edge.logN, edge.r, edge.p) = (logN, r, p)
            #expect(throws: Never.self) { try edge.validate() }
        }
        var wide = keys.kdf
        wide.salt = Data(count: 64).base64EncodedString()
        #expect(throws: Never.self) { try wide.validate() }
        // Wraps that are not base64 of 60 bytes.
        for field in ["", "AAAA", Data(count: 59).base64EncodedString(), Data(count: 61).base64EncodedString(), "%%%"] {
            var bad = keys
            bad.wrapped = field
            bad.recovery = field
            #expect(throws: VaultFailure.malformed("the wrapped key is not base64 of 60 bytes")) {
                try bad.unlock(passphrase: "pass", serverID: Self.serverID)
            }
            #expect(throws: VaultFailure.malformed("the recovery key is not base64 of 60 bytes")) {
                try bad.unlock(recovery: RecoveryKey.generate(), serverID: Self.serverID)
            }
        }
    }

    @Test func keysFileJSON() throws {
        let keys = try keys()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = try encoder.encode(keys)
        #expect(try JSONDecoder().decode(VaultKeys.self, from: json) == keys)
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        #expect(Set(object.keys) == ["generation", "kdf", "wrapped", "recovery"])
        let kdf = try #require(object["kdf"] as? [String: Any])
        #expect(Set(kdf.keys) == ["name", "logN", "r", "p", "salt"])
        // Inside a plain sealed file of kind "keys", as the server stores it.
        let sealed = try SealedFile.seal(keys, kind: "keys")
        #expect(try SealedFile.open(sealed, kind: "keys", as: VaultKeys.self) == keys)
    }

    @Test func keysKnownAnswer() throws {
        let json = """
            {"generation": 3, "kdf": {"logN": 10, "name": "scrypt", "p": 1, "r": 8, "salt": "QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8="}, \
            "recovery": "sLGys7S1tre4ubq7xMusNDKJK0akqPdn4gbCHdBJkhuVo4QB6cUGSt8Z4VDaOyb8vwvwzNGZ+GeQBezw", \
            "wrapped": "oKGio6Slpqeoqaqr1JTOaIYMrl6ShfhFisn6TpuUM8fQKBwqOUhEd9+Ewp2FIdZZ8kR1YTZD/XJNk3lj"}
            """
        let keys = try JSONDecoder().decode(VaultKeys.self, from: Data(json.utf8))
        #expect(keys.generation == 3)
        // Written from the decomposed passphrase after NFC, so the composed one opens it.
        #expect(try keys.unlock(passphrase: "caf\u{E9} passphrase", serverID: "srv-1").keyBytes == Data(0..<32))
        #expect(try keys.unlock(recovery: RecoveryKey(bytes: Data(0x80..<0xA0)), serverID: "srv-1").keyBytes == Data(0..<32))
    }

    /// Once, the real parameters: N = 2^17 (or NOTESYNC_SCRYPT_LOG_N when the environment sets it).
    @Test func theDefaultParametersWork() throws {
        let recovery = RecoveryKey.generate()
        let keys = try VaultKeys.make(vault: vault, passphrase: "pass", recovery: recovery, serverID: "s", generation: 0)
        #expect(keys.kdf.logN == KDFParameters.configuredLogN)
        if ProcessInfo.processInfo.environment["NOTESYNC_SCRYPT_LOG_N"] == nil {
            #expect(keys.kdf.logN == 17)
        }
        #expect(try keys.unlock(passphrase: "pass", serverID: "s").keyBytes == vault.keyBytes)
    }

    @Test func failuresPrintShortAndClean() {
        let failures: [VaultFailure] = [.wrongPassphrase, .authenticationFailed, .malformed("bad\u{1B}[31m\n")]
        for failure in failures {
            #expect(isPrintable(failure.description))
            #expect(failure.description == failure.description.lowercased())
            #expect(failure.description.count < 80)
        }
    }
}

/// Whether a message can reach a terminal: no control character.
private func isPrintable(_ text: String) -> Bool {
    !text.unicodeScalars.contains { $0.properties.generalCategory == .control }
}

/// The reason of a `.malformed` refusal, or nil when `body` succeeds or fails otherwise.
private func malformation<T>(_ body: () throws(VaultFailure) -> T) -> String? {
    do {
        _ = try body()
        return nil
    } catch {
        guard case .malformed(let why) = error else { return nil }
        return why
    }
}
