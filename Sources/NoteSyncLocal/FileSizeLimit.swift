import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// The largest note a notes folder syncs (`max-file-size`, kept in the local state's meta): a bigger file is left
/// out of the sync with a warning, here (never uploaded, never taken as deleted) and from the server (never
/// downloaded), and every other note syncs. It keeps what was not meant to sync off the server; it does not bound
/// memory: a text over ``BigText/threshold`` goes in pieces.
public struct FileSizeLimit: Sendable, Hashable, CustomStringConvertible {
    /// The largest size synced, in bytes; nil: no limit.
    public var bytes: Int64?

    public init(bytes: Int64?) { self.bytes = bytes }

    /// A folder's limit when none is set: what a notes folder is expected to hold, a file bigger than it most likely
    /// not a note (a disk image, a video). Raising it costs a sync no memory (``BigText``).
    public static let `default` = FileSizeLimit(bytes: 32 << 20)

    /// The largest note merged line by line: a three-way merge holds about thirteen times its texts' size. Above it
    /// both edits are kept, one as a conflict copy, as for a binary note.
    public static let mergeBytes: Int64 = 4 << 20

    public func allows(_ size: Int64) -> Bool { bytes.map { size <= $0 } ?? true }

    /// The limit kept in `state` (``MetaKey/maxFileSize``), or the default.
    public static func stored(in state: LocalState) throws -> FileSizeLimit {
        guard let text = try state.meta(.maxFileSize) else { return .default }
        return (try? FileSizeLimit(parsing: text)) ?? .default
    }

    /// What ``MetaKey/maxFileSize`` holds for this limit: bytes, "0" for none.
    public var stored: String { String(bytes ?? 0) }

    /// Reads a size as a user writes it: `32M`, `1.5G`, `500k`, `2GiB`, a number of bytes, or `0`/`none`/`unlimited`
    /// for no limit. Units are binary (k = 1024).
    public init(parsing text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if ["0", "none", "unlimited", "off"].contains(trimmed) {
            self.bytes = nil
            return
        }
        var number = trimmed
        var scale: Double = 1
        for (index, unit) in ["k", "m", "g", "t"].enumerated() {
            guard let suffix = [unit + "ib", unit + "b", unit].first(where: { trimmed.hasSuffix($0) }) else { continue }
            number = String(trimmed.dropLast(suffix.count)).trimmingCharacters(in: .whitespaces)
            scale = Double(Int64(1) << (10 * (index + 1)))
            break
        }
        if scale == 1, trimmed.hasSuffix("b") { number = String(trimmed.dropLast()) }
        guard let value = Double(number), value.isFinite, value > 0, value * scale < 0x1p62 else {
            throw NoteSyncError(
                .usage, path: text, "is not a file size",
                fix: "give a size such as 32M, 500k or 2G (binary units), or 0 for no limit")
        }
        self.bytes = Int64((value * scale).rounded(.up))
    }

    /// The limit as a user reads it: `32 MiB`, `1536 KiB`, `none`.
    public var description: String {
        guard let bytes else { return "none" }
        return Self.format(bytes)
    }

    /// A limit, as typed, that lets a note of `size` bytes sync: the size rounded up to whole MiB (GiB above 4 GiB).
    public static func suggestion(for size: Int64) -> String {
        if size > 4 << 30 { return "\((size + (1 << 30) - 1) >> 30)G" }
        return "\(max(1, (size + (1 << 20) - 1) >> 20))M"
    }

    /// A size in the largest binary unit that divides it (`32 MiB`), else in bytes.
    public static func format(_ bytes: Int64) -> String {
        for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] where bytes >= Int64(1) << shift {
            if bytes % (Int64(1) << shift) == 0 { return "\(bytes >> shift) \(unit)" }
            let value = Double(bytes) / Double(Int64(1) << shift)
            return String(format: "%.1f \(unit)", value)
        }
        return "\(bytes) bytes"
    }
}
