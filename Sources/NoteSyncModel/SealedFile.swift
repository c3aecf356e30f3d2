import Crypto
import Foundation
import NoteSyncCrypto
import NoteSyncSupport

/// The self-validating container of every structured file notesync writes to the server.
///
/// Layout: one header line `notesync-<kind> <format> <length> <sha256>\n`, then exactly `length` bytes of JSON
/// whose SHA-256 is the header's digest. A torn file (short), a file with bytes appended, and a damaged
/// file are all detected before a byte of JSON is trusted.
///
/// On an encrypted server (docs/encryption.md) the format is 2 and the body is the JSON sealed with the server's
/// vault (``Vault/sealFile(_:kind:context:)``): the header's length and digest are those of the ciphertext, so a
/// torn or damaged file is still found without the key.
public enum SealedFile {
    /// What went wrong with a sealed file.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        case badHeader
        case wrongKind(String)
        case newerFormat(Int)
        case truncated(expected: Int, actual: Int)
        case checksumMismatch
        case malformed(String)
        case tooLarge(Int)
        /// Format 2 met without the key: only the header can be checked.
        case encrypted
        /// Format 1 on an encrypted server: no device with the key wrote it.
        case notEncrypted
        /// Format 2 that does not open with the server's key and this file's place.
        case undecryptable

        public var description: String {
            switch self {
            case .badHeader: return "no valid notesync header"
            case .wrongKind(let kind): return "is a \(DisplayName.escape(kind)) file, not the expected kind"
            case .newerFormat(let format): return "written in format \(format), newer than this build understands"
            case .truncated(let expected, let actual):
                return "torn: header promises \(expected) bytes of body, file has \(actual)"
            case .checksumMismatch: return "checksum mismatch: the file is damaged"
            case .malformed(let why): return "malformed content: \(DisplayName.escape(why))"
            case .tooLarge(let size): return "\(size) bytes, larger than any file notesync writes"
            case .encrypted: return "is encrypted, and this device has no key for it"
            case .notEncrypted: return "is not encrypted, on an encrypted server: no device with the server's key wrote it"
            case .undecryptable:
                return "does not open with this server's key: damaged, moved from another place, or from another server"
            }
        }
    }

    public static let format = 1
    /// The format of a file whose body is sealed with the server's vault.
    public static let encryptedFormat = 2

    public static func seal<T: Encodable>(_ value: T, kind: String) throws -> Data {
        // The body is encoded behind room for its header, and the header written into that room: a large entry's
        // JSON is never copied a second time behind its header.
        let room = headerRoom(kind: kind, format: format)
        var data = try encodeJSON(value, headerRoom: room)
        let bodyCount = data.count - room
        let digest = data.withUnsafeBytes { ContentDigest(of: UnsafeRawBufferPointer(rebasing: $0[room...])) }
        let header = Data(header(kind: kind, format: format, length: bodyCount, digest: digest).utf8)
        data.replaceSubrange(0..<room, with: header)
        return data
    }

    package static func header(kind: String, format: Int, length: Int, digest: ContentDigest) -> String {
        "notesync-\(kind) \(format) \(length) \(digest.hex)\n"
    }

    /// The most bytes a header of `kind` and `format` can take: a length of up to 20 digits.
    private static func headerRoom(kind: String, format: Int) -> Int {
        header(kind: kind, format: format, length: Int.max, digest: ContentDigest(of: Data())).utf8.count + 1
    }

    /// `value` as JSON sealed with `vault` (format 2), bound to `context` (the server, the kind, the file's place).
    public static func seal<T: Encodable>(_ value: T, kind: String, vault: Vault, context: String) throws -> Data {
        wrap(vault.sealFile(try encodeJSON(value), kind: kind, context: context), kind: kind, format: encryptedFormat)
    }

    /// `value` as the JSON of a sealed file: keys sorted, slashes as they are.
    ///
    /// A log entry of more than `chunkingAbove` changes is encoded change by change into the same bytes, because
    /// `JSONEncoder` builds a tree of the whole value first: for a large entry (a big folder renamed) that tree is a
    /// large part of the commit's peak memory, and building it a large part of a first sync's CPU. `changes` is the
    /// first key in sorted order, so the entry without its changes starts `{"changes":[]`, and the changes go between
    /// those brackets. Each change is written by ``RecordChange/appendJSON(to:)``: `JSONEncoder`'s bytes without its
    /// tree (SealedFileTests checks they are the same bytes).
    ///
    /// The JSON starts after `headerRoom` zero bytes, which ``seal(_:kind:)`` fills with the header.
    static func encodeJSON<T: Encodable>(
        _ value: T, chunkingAbove threshold: Int = 0, headerRoom: Int = 0
    ) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func whole() throws -> Data {
            let encoded = try encoder.encode(value)
            guard headerRoom > 0 else { return encoded }
            var body = Data(capacity: headerRoom + encoded.count)
            body.append(contentsOf: repeatElement(0, count: headerRoom))
            body.append(encoded)
            return body
        }
        guard let entry = value as? LogEntry, entry.changes.count > threshold,
            let pieces = try EntryPieces(entry, encoder: encoder)
        else { return try whole() }
        // Made at its size: grown by doubling, the buffer would end up to twice the JSON's size.
        var body = Data(capacity: headerRoom + pieces.size)
        body.append(contentsOf: repeatElement(0, count: headerRoom))
        pieces.write(piece: 1 << 16) { body.append(contentsOf: $0) }
        assert(body.count == headerRoom + pieces.size, "an entry's JSON is \(body.count) bytes, not the counted")
        return body
    }

    /// A plain entry whose JSON is at least this many bytes is sealed into a sink a piece at a time
    /// (``sealEntry(_:minimumBytes:into:)``): on a folder, never held whole.
    static let streamedEntryBytes = 1 << 20

    /// `entry` sealed (format 1) a piece at a time into the sink `makeSink` makes, when its JSON is of
    /// ``encodeJSON(_:chunkingAbove:headerRoom:)``'s change-by-change form and at least `minimumBytes` long: the
    /// file the finished sink staged (durable) and the digest of its bytes. Nil, and no sink made, otherwise: the
    /// caller seals it whole. A sink that fails is discarded before the error is thrown.
    ///
    /// The JSON goes after room for the header, hashed as it is written, and the header into that room (its length
    /// is known before the digest: 64 hex digits). The whole file's digest (the next entry's `prev`) is that of the
    /// header and the JSON made a second time: reading the temp back would fetch it again from a network share.
    ///
    /// Written in pieces to a temp file, a large entry's JSON is never held whole at the peak of the committing sync
    /// (a memory sink holds the file, as sealing whole would).
    package static func sealEntry(
        _ entry: LogEntry, minimumBytes: Int = streamedEntryBytes, into makeSink: () throws -> any StagingSink
    ) throws -> (staged: StagedFile, digest: ContentDigest)? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let pieces = try EntryPieces(entry, encoder: encoder, minimumBytes: minimumBytes),
            pieces.size >= minimumBytes
        else { return nil }
        let kind = "entry"
        let room = header(kind: kind, format: format, length: pieces.size, digest: ContentDigest(of: Data())).utf8.count
        let sink = try makeSink()
        do {
            var body = SHA256()
            var offset = Int64(room)
            try pieces.write(piece: FileIO.WriteFile.gather) { piece in
                body.update(bufferPointer: UnsafeRawBufferPointer(piece))
                try sink.write(Data(piece), at: offset)
                offset += Int64(piece.count)
            }
            let header = Data(
                header(kind: kind, format: format, length: pieces.size, digest: ContentDigest(body.finalize())).utf8)
            // Never written otherwise: a count that missed would make a file whose header lies (the sink is discarded).
            guard offset == Int64(room + pieces.size), header.count == room else {
                throw NoteSyncError(
                    .corrupt, "an entry's JSON (\(offset - Int64(room)) bytes) or header is not the size counted",
                    fix: "report this as a bug; nothing was written")
            }
            try sink.write(header, at: 0)
            var file = SHA256()
            file.update(data: header)
            pieces.write(piece: FileIO.WriteFile.gather) { file.update(bufferPointer: UnsafeRawBufferPointer($0)) }
            return (try sink.finish(), ContentDigest(file.finalize()))
        } catch {
            sink.discard()
            throw error
        }
    }

    /// The JSON of an entry written change by change: `changes` is the first key in sorted order, so the entry
    /// without its changes starts `{"changes":[]`, and the changes go between those brackets, each written by
    /// ``RecordChange/appendJSON(to:)`` (`JSONEncoder`'s bytes without its tree).
    private struct EntryPieces {
        let changes: [RecordChange]
        /// The shell's JSON after `{"changes":[]`.
        let rest: Data
        /// The bytes of the whole JSON.
        let size: Int

        static let prefix = Data(#"{"changes":[]"#.utf8)
        /// More than the rest of an entry's JSON takes (its commit id, device id, time, and five digests at most): an
        /// entry whose changes are that far under the threshold is under it.
        static let shellBound = 4096

        /// Nil when the shell does not start as expected, or when the JSON is surely shorter than `minimumBytes`:
        /// counted before the shell is encoded (an agent's entry of one change is not encoded twice), its changes and
        /// the most a shell with changes takes.
        init?(_ entry: LogEntry, encoder: JSONEncoder, minimumBytes: Int = 0) throws {
            // Its prefix, a comma between changes, the closing bracket, and the rest of the shell.
            var size = 12 + max(entry.changes.count - 1, 0) + 1
            for change in entry.changes { size += change.jsonSize }
            guard size + Self.shellBound >= minimumBytes else { return nil }
            var shell = entry
            shell.changes = []
            let outer = try encoder.encode(shell)
            guard outer.starts(with: Self.prefix) else { return nil }
            changes = entry.changes
            rest = outer.dropFirst(Self.prefix.count)
            self.size = size + rest.count
        }

        /// Hands the JSON to `emit` in order, in pieces of at least `piece` bytes (the last may be shorter).
        func write(piece: Int, _ emit: (UnsafeBufferPointer<UInt8>) throws -> Void) rethrows {
            var buffer: [UInt8] = []
            buffer.reserveCapacity(piece + 4096)
            buffer.append(contentsOf: #"{"changes":["#.utf8)
            for (index, item) in changes.enumerated() {
                if index > 0 { buffer.append(UInt8(ascii: ",")) }
                item.appendJSON(to: &buffer)
                if buffer.count >= piece {
                    try buffer.withUnsafeBufferPointer(emit)
                    buffer.removeAll(keepingCapacity: true)
                }
            }
            buffer.append(UInt8(ascii: "]"))
            buffer.append(contentsOf: rest)
            try buffer.withUnsafeBufferPointer(emit)
        }
    }

    /// `body` behind the header that checks it.
    public static func wrap(_ body: Data, kind: String, format: Int) -> Data {
        let header = Data(header(kind: kind, format: format, length: body.count, digest: ContentDigest(of: body)).utf8)
        var data = Data(capacity: header.count + body.count)
        data.append(header)
        data.append(body)
        return data
    }

    /// Opens a file of a server encrypted with `vault` (or, with no vault, a plain server's): a plain file on an
    /// encrypted server, or an encrypted one on a plain server, is refused, as is one sealed for another place.
    public static func open<T: Decodable>(
        _ data: Data, kind: String, as type: T.Type, vault: Vault?, context: String
    ) throws(Failure) -> T {
        guard let vault else { return try open(data, kind: kind, as: type) }
        let (fileFormat, sealed) = try verifyFormat(data, kind: kind)
        guard fileFormat == encryptedFormat else { throw .notEncrypted }
        let body: Data
        do { body = try vault.openFile(sealed, kind: kind, context: context) } catch { throw .undecryptable }
        return try decode(body, as: type)
    }

    public static func open<T: Decodable>(_ data: Data, kind: String, as type: T.Type) throws(Failure) -> T {
        // The body is decoded where it lies in `data`: a copy would add a large entry's whole size to the peak of the
        // device reading it.
        let (fileFormat, body) = try verifiedBody(data, kind: kind)
        guard fileFormat == format else { throw .encrypted }
        return try decode(data[body], as: type)
    }

    package static func decode<T: Decodable>(_ body: Data, as type: T.Type) throws(Failure) -> T {
        if T.self == LogEntry.self, let entry = LogEntry.decodeChangeByChange(body) { return entry as! T }
        do {
            return try JSONDecoder().decode(T.self, from: body)
        } catch {
            throw .malformed(String(describing: error).prefix(300).description)
        }
    }

    /// Checks header, length and checksum; returns the body (format 2: the ciphertext).
    public static func verify(_ data: Data, kind: String) throws(Failure) -> Data {
        try verifyFormat(data, kind: kind).body
    }

    /// Checks header, length and checksum; returns the file's format and its body.
    public static func verifyFormat(_ data: Data, kind: String) throws(Failure) -> (format: Int, body: Data) {
        let (fileFormat, body) = try verifiedBody(data, kind: kind)
        return (fileFormat, Data(data[body]))
    }

    /// Checks header, length and checksum; returns the file's format and where its body is in `data`.
    private static func verifiedBody(_ data: Data, kind: String) throws(Failure) -> (format: Int, body: Range<Data.Index>) {
        let header = try header(data, kind: kind)
        let body = data[(data.startIndex + header.size)...]
        guard body.count == header.length else { throw .truncated(expected: header.length, actual: body.count) }
        guard ContentDigest(of: body) == header.digest else { throw .checksumMismatch }
        return (header.format, body.startIndex..<body.endIndex)
    }

    /// A file's header line, at the start of `data` (the whole file, or its first bytes): its format, the length and
    /// digest it promises for the body, and its own size with its newline. Throws as ``verify(_:kind:)`` does for a
    /// header that is not one, of another kind, or of a newer format.
    package static func header(_ data: Data, kind: String) throws(Failure) -> (format: Int, length: Int, digest: ContentDigest, size: Int) {
        guard let newline = data.prefix(200).firstIndex(of: 0x0A) else { throw .badHeader }
        let header = String(decoding: data[data.startIndex..<newline], as: UTF8.self)
        let fields = header.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 4, fields[0].hasPrefix("notesync-"),
            let fileFormat = Int(fields[1]), let length = Int(fields[2]), length >= 0,
            let digest = ContentDigest(hex: String(fields[3]))
        else { throw .badHeader }
        guard fields[0] == "notesync-\(kind)" else { throw .wrongKind(String(fields[0])) }
        guard fileFormat <= encryptedFormat else { throw .newerFormat(fileFormat) }
        return (fileFormat, length, digest, data.distance(from: data.startIndex, to: newline) + 1)
    }
}
