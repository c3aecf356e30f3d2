import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// `.notesync/vault-key`: the key of an encrypted server, kept by the notes folder that syncs with it, so that
/// neither a sync nor the agent ever asks for the passphrase again (docs/encryption.md). Mode 600, written by
/// `notesync init` (temp file, fsync, rename); the passphrase itself is never stored.
///
/// One line: `notesync-vault-key 1 <server id> <key, 64 hex digits>`.
public enum VaultKeyFile {
    /// The key kept at `path` and the server it is for, or nil when there is none. A file others can read, or one
    /// that does not parse, is an error naming it and the fix.
    public static func read(_ path: String) throws -> (serverID: String, vault: Vault)? {
        guard let info = FileIO.lstatInfo(path) else { return nil }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw NoteSyncError(
                .key, path: path, "is not a regular file",
                fix: "remove it, then run `notesync init` again with the server's passphrase")
        }
        if info.st_mode & 0o077 != 0 && keepsModes(path, info.st_mode) {
            throw NoteSyncError(
                .key, path: path, "holds the server's key and others may read it (mode \(String(info.st_mode & 0o777, radix: 8)))",
                fix: "chmod 600 \(path)")
        }
        let text = String(decoding: try FileIO.read(path, limit: 4096) ?? Data(), as: UTF8.self)
        let fields = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
        guard fields.count == 4, fields[0] == "notesync-vault-key", fields[1] == "1",
            let bytes = hexBytes(fields[3]),
            let vault = try? Vault(keyBytes: bytes)
        else {
            throw NoteSyncError(
                .key, path: path, "is not a key file notesync wrote (damaged)",
                fix: "remove it, then run `notesync init` again with the server's passphrase: it writes the key again")
        }
        return (String(fields[2]), vault)
    }

    /// Whether the filesystem of `path` keeps modes: `chmod(2)` to owner-only, then back to `mode`. On one that has
    /// none (vfat, exFAT, many FUSE and SMB mounts: chmod is accepted and changes nothing) the mode says nothing of
    /// who may read the key — the mount's options do — so an open mode there is no reason to refuse it, and the
    /// fix "chmod 600" could not be followed.
    static func keepsModes(_ path: String, _ mode: mode_t) -> Bool {
        guard chmod(path, 0o600) == 0, let after = FileIO.lstatInfo(path) else { return true }
        let kept = after.st_mode & 0o777 == 0o600
        if kept { chmod(path, mode & 0o7777) }
        return kept
    }

    /// Lowercase or uppercase hex digits as bytes; nil for anything else.
    package static func hexBytes(_ text: Substring) -> Data? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes = Data()
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x61...0x66: digit - 0x61 + 10
        case 0x41...0x46: digit - 0x41 + 10
        default: nil
        }
    }

    /// Keeps `vault`, the key of server `serverID`, at `path` (mode 600), replacing any key there.
    public static func write(_ vault: Vault, serverID: String, to path: String) throws {
        let hex = vault.keyBytes.map { String(format: "%02x", $0) }.joined()
        let temp = path + ".tmp-" + FileIO.randomToken()
        try FileIO.createAndSync(temp, Data("notesync-vault-key 1 \(serverID) \(hex)\n".utf8), mode: 0o600)
        if rename(temp, path) != 0 {
            unlink(temp)
            throw NoteSyncError.posix("rename", path: path, errno: errno)
        }
        try? FileIO.syncDirectory(FileIO.parent(of: path))
    }
}
