import Foundation

/// The self-validating container of every structured file notesync writes to the server.
///
/// Layout: one header line `notesync-<kind> <format> <length> <sha256>\n`, then exactly `length` bytes of JSON
/// whose SHA-256 is the header's digest. A torn file (short), a file with bytes appended, and a damaged
/// file are all detected before a byte of JSON is trusted.
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
            }
        }
    }

    public static let format = 1

    public static func seal<T: Encodable>(_ value: T, kind: String) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = try encoder.encode(value)
        var data = Data("notesync-\(kind) \(format) \(body.count) \(ContentDigest(of: body).hex)\n".utf8)
        data.append(body)
        return data
    }

    public static func open<T: Decodable>(_ data: Data, kind: String, as type: T.Type) throws(Failure) -> T {
        let body = try verify(data, kind: kind)
        do {
            return try JSONDecoder().decode(T.self, from: body)
        } catch {
            throw .malformed(String(describing: error).prefix(300).description)
        }
    }

    /// Checks header, length and checksum; returns the body.
    public static func verify(_ data: Data, kind: String) throws(Failure) -> Data {
        guard let newline = data.prefix(200).firstIndex(of: 0x0A) else { throw .badHeader }
        let header = String(decoding: data[data.startIndex..<newline], as: UTF8.self)
        let fields = header.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 4, fields[0].hasPrefix("notesync-"),
            let fileFormat = Int(fields[1]), let length = Int(fields[2]), length >= 0,
            let digest = ContentDigest(hex: String(fields[3]))
        else { throw .badHeader }
        guard fields[0] == "notesync-\(kind)" else { throw .wrongKind(String(fields[0])) }
        guard fileFormat <= format else { throw .newerFormat(fileFormat) }
        let body = data[data.index(after: newline)...]
        guard body.count == length else { throw .truncated(expected: length, actual: body.count) }
        guard ContentDigest(of: body) == digest else { throw .checksumMismatch }
        return Data(body)
    }
}
