import Foundation
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// Fuzzes what an encrypted server hands a device to open: sealed file bodies, sealed assets, keys files and
/// recovery keys.
///
/// With a fixed vault (the bytes 0...31), each input is opened as a sealed file body and as a sealed asset (refused
/// with a clean ``VaultFailure`` or opened, never a crash), sealed both ways and opened back to itself, decoded as a
/// keys file and unlocked (its scrypt parameters refused before any work when out of bounds), and parsed as a
/// recovery key. The corpus holds bodies sealed with the fixed vault, so mutations start from files that open.
enum VaultFuzz {
    static let kind = "entry"
    static let context = "fuzz-server entry 1"
    static let serverID = "fuzz-server"
    static let passphrase = "fuzz"
    /// The recovery key of the corpus' keys files: the bytes 0x80...0x9F.
    static let recoveryText = "QCAY-FA4E-QWDI-PCEJ-RKFY-ZDMO-R6IJ-DEUT-SSKZ-NF4Y-TGNJ-XHE5-T2PQ"
    /// The text whose keyed name the corpus' assets are sealed under.
    static let assetText = Data("fuzz asset".utf8)
    /// scrypt runs in the check only up to this N · r · p (2 MiB of memory): the bounds of ``KDFParameters/validate()``
    /// are checked on every input, but a second of scrypt per input would starve the fuzzer.
    static let fuzzWork = 1 << 14

    static func check(_ input: Data) throws(FuzzViolation) {
        guard let vault = try? Vault(keyBytes: Data(0..<32)) else {
            throw FuzzViolation(message: "the fixed vault key is refused")
        }
        try checkFile(input, vault: vault)
        try checkAsset(input, vault: vault)
        try checkKeys(input)
        try checkRecoveryText(input)
    }

    /// The input as a sealed body, then sealed and opened back.
    static func checkFile(_ input: Data, vault: Vault) throws(FuzzViolation) {
        switch Result(catching: { () throws(VaultFailure) in try vault.openFile(input, kind: kind, context: context) }) {
        case .success(let plaintext):
            try FuzzViolation.require(
                input.count == 32 + padme(4 + plaintext.count), "a body of \(input.count) bytes opened to \(plaintext.count)")
        case .failure(let error):
            try checkRefusal(error, malformed: input.count < 36)
        }
        let sealed = vault.sealFile(input, kind: kind, context: context)
        try FuzzViolation.require(sealed.count == 32 + padme(4 + input.count), "a sealed body of \(sealed.count) bytes")
        try FuzzViolation.require(
            (try? vault.openFile(sealed, kind: kind, context: context)) == input, "a sealed body does not open to its input")
        var damaged = sealed
        damaged[input.count % sealed.count] ^= 1 << (input.count % 8)
        try FuzzViolation.require(
            (try? vault.openFile(damaged, kind: kind, context: context)) == nil, "a damaged sealed body opens")
        try FuzzViolation.require(
            (try? vault.openFile(sealed, kind: "snapshot", context: context)) == nil, "a sealed body opens as another kind")
    }

    /// The input as a sealed asset, then sealed and opened back.
    static func checkAsset(_ input: Data, vault: Vault) throws(FuzzViolation) {
        let name = vault.assetName(ContentDigest(of: assetText))
        switch Result(catching: { () throws(VaultFailure) in try vault.openAsset(input, name: name) }) {
        case .success(let bytes):
            try FuzzViolation.require(
                Vault.sealedAssetSize(bytes.count) == input.count, "an asset of \(input.count) bytes opened to \(bytes.count)")
        case .failure(let error):
            try checkRefusal(error, malformed: !isAssetSize(input.count))
        }
        let sealed = vault.sealAsset(input, name: name)
        try FuzzViolation.require(sealed.count == Vault.sealedAssetSize(input.count), "a sealed asset of \(sealed.count) bytes")
        try FuzzViolation.require((try? vault.openAsset(sealed, name: name)) == input, "a sealed asset does not open to its input")
        try FuzzViolation.require(
            (try? vault.openAsset(sealed, name: ContentDigest(of: input))) == nil, "a sealed asset opens under another name")
        try FuzzViolation.require((try? vault.openAsset(sealed.dropLast(), name: name)) == nil, "a cut sealed asset opens")
    }

    /// Whether some asset seals to `count` bytes: the salt, then full chunks, then a last chunk (the only one that may
    /// be empty).
    static func isAssetSize(_ count: Int) -> Bool {
        let chunks = max(1, (count - 16 + 65_551) / 65_552)
        let bytes = count - 16 - 16 * chunks
        return bytes >= 0 && Vault.sealedAssetSize(bytes) == count
    }

    /// A refused body is refused as malformed when no sealing has its size, else as not authentic (a wrong padding
    /// needs the key), and the refusal prints safely.
    static func checkRefusal(_ error: VaultFailure, malformed: Bool) throws(FuzzViolation) {
        let expected: VaultFailure = malformed ? .malformed("") : .authenticationFailed
        switch (error, expected) {
        case (.malformed, .malformed), (.authenticationFailed, .authenticationFailed): break
        default: throw FuzzViolation(message: "refused as \(error), expected \(expected)")
        }
        try FuzzViolation.require(
            FuzzViolation.isPrintable(error.description), "the refusal prints a control character: \(error.description)")
    }

    /// The input as a keys file: out-of-bounds parameters are refused as malformed before any scrypt, bounded ones
    /// unlock or are refused cleanly, and whatever unlocks is the fixed vault.
    static func checkKeys(_ input: Data) throws(FuzzViolation) {
        guard let keys = try? JSONDecoder().decode(VaultKeys.self, from: input) else { return }
        let kdf = keys.kdf
        let valid = (try? kdf.validate()) != nil
        let bounded =
            kdf.name == "scrypt" && (10...20).contains(kdf.logN) && (1...16).contains(kdf.r) && (1...4).contains(kdf.p)
            && kdf.logN < 16 * kdf.r
            && 128 * kdf.r << kdf.logN <= 1 << 30 && kdf.r * kdf.p << kdf.logN <= 1 << 23
            && (Data(base64Encoded: kdf.salt).map { (16...64).contains($0.count) } ?? false)
        try FuzzViolation.require(valid == bounded, "parameters \(kdf) validate: \(valid)")
        if let recovery = RecoveryKey(text: recoveryText) {
            try checkUnlock { () throws(VaultFailure) in try keys.unlock(recovery: recovery, serverID: serverID) }
        }
        if !valid {
            let refusal: VaultFailure?
            do {
                _ = try keys.unlock(passphrase: passphrase, serverID: serverID)
                refusal = nil
            } catch {
                refusal = error
            }
            guard case .malformed? = refusal else {
                throw FuzzViolation(message: "parameters \(kdf) out of bounds: \(refusal.map(\.description) ?? "unlocked")")
            }
        } else if kdf.r * kdf.p << kdf.logN <= fuzzWork {
            try checkUnlock { () throws(VaultFailure) in try keys.unlock(passphrase: passphrase, serverID: serverID) }
        }
    }

    /// An unlock gives the fixed vault, or a refusal that prints safely.
    static func checkUnlock(_ unlock: () throws(VaultFailure) -> Vault) throws(FuzzViolation) {
        switch Result(catching: unlock) {
        case .success(let vault):
            try FuzzViolation.require(vault.keyBytes == Data(0..<32), "a keys file unlocked to another vault")
        case .failure(let error):
            try FuzzViolation.require(
                FuzzViolation.isPrintable(error.description), "the refusal prints a control character: \(error.description)")
        }
    }

    /// The input as a typed recovery key: whatever parses prints as 13 groups and parses back to itself.
    static func checkRecoveryText(_ input: Data) throws(FuzzViolation) {
        guard let key = RecoveryKey(text: String(decoding: input, as: UTF8.self)) else { return }
        try FuzzViolation.require(key.bytes.count == 32, "a recovery key of \(key.bytes.count) bytes")
        try FuzzViolation.require(RecoveryKey(text: key.text) == key, "a recovery key does not read back its text")
        let letters = String(decoding: input, as: UTF8.self).uppercased().filter { $0.isLetter || $0.isNumber }
        try FuzzViolation.require(
            letters == key.text.filter { $0 != "-" }, "\(FuzzViolation.show(key.text)) from other characters")
    }
}
