import CZlib
import Crypto
import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// Decodes an asset's stored bytes (opened, on an encrypted server) into its text a piece at a time, as
/// ``AssetCodec/decode(_:digest:size:)`` does whole: the text itself when the stored bytes are its size, else an
/// `NSZ1` zlib stream inflated, never past the size the entry states; the text's digest checked at the end. Nothing
/// emitted counts until ``finish()`` says the digest matched.
struct AssetStreamDecoder {
    struct Mismatch: Error {}

    package let ref: AssetRef
    /// The size of the stored bytes, known before they come (a file's size, or what a sealed asset opens to).
    let storedSize: Int64
    private var head = Data()
    private var inflater: Inflater?
    private var decided = false
    private var hasher = SHA256()
    private var produced: Int64 = 0

    package init(ref: AssetRef, storedSize: Int64) {
        self.ref = ref
        self.storedSize = storedSize
    }

    /// Takes the next stored bytes; `emit` gets the text's next piece.
    package mutating func add(_ bytes: Data, _ emit: (Data) throws -> Void) throws {
        guard decided else {
            head.append(bytes)
            // The magic decides, so its four bytes (or the whole of a shorter file) come first.
            guard head.count >= AssetCodec.magic.count || Int64(head.count) == storedSize else { return }
            decided = true
            if storedSize != ref.size {
                guard storedSize < ref.size, head.starts(with: AssetCodec.magic) else { throw Mismatch() }
                inflater = try Inflater()
                let rest = head.dropFirst(AssetCodec.magic.count)
                head = Data()
                return try inflate(Data(rest), emit)
            }
            let first = head
            head = Data()
            return try pass(first, emit)
        }
        if inflater != nil { try inflate(bytes, emit) } else { try pass(bytes, emit) }
    }

    /// Checks that the text came whole, of its size and digest; throws ``Mismatch`` otherwise.
    package mutating func finish() throws {
        if !decided {
            // An empty stored file: only an empty text.
            guard head.isEmpty, storedSize == 0, ref.size == 0 else { throw Mismatch() }
            decided = true
        }
        if let inflater, !inflater.ended { throw Mismatch() }
        guard produced == ref.size, ContentDigest(hasher.finalize()) == ref.sha256 else { throw Mismatch() }
    }

    private mutating func pass(_ text: Data, _ emit: (Data) throws -> Void) throws {
        guard !text.isEmpty else { return }
        produced += Int64(text.count)
        guard produced <= ref.size else { throw Mismatch() }
        hasher.update(data: text)
        try emit(text)
    }

    private mutating func inflate(_ stream: Data, _ emit: (Data) throws -> Void) throws {
        guard let inflater else { throw Mismatch() }
        try inflater.add(stream) { try pass($0, emit) }
    }

    /// A zlib stream inflated as its bytes come (`inflate(3)`), 256 KiB of text at a time.
    final class Inflater {
        private var stream = z_stream()
        package private(set) var ended = false

        package init() throws {
            guard inflateInit_(&stream, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw Mismatch() }
        }

        deinit { inflateEnd(&stream) }

        package func add(_ input: Data, _ emit: (Data) throws -> Void) throws {
            guard !input.isEmpty else { return }
            // Nothing may follow the end of the stream.
            guard !ended else { throw Mismatch() }
            let room = 256 << 10
            var output = Data(count: room)
            try input.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
                stream.next_in = UnsafeMutablePointer(mutating: bytes.baseAddress?.assumingMemoryBound(to: Bytef.self))
                stream.avail_in = uInt(bytes.count)
                while true {
                    let status = output.withUnsafeMutableBytes { out -> Int32 in
                        stream.next_out = out.baseAddress?.assumingMemoryBound(to: Bytef.self)
                        stream.avail_out = uInt(room)
                        return CZlib.inflate(&stream, Z_NO_FLUSH)
                    }
                    let made = room - Int(stream.avail_out)
                    if made > 0 { try emit(output.prefix(made)) }
                    if status == Z_STREAM_END {
                        ended = true
                        guard stream.avail_in == 0 else { throw Mismatch() }
                        return
                    }
                    guard status == Z_OK || status == Z_BUF_ERROR else { throw Mismatch() }
                    // All input taken and room left over: the next piece carries on.
                    if stream.avail_in == 0 && stream.avail_out > 0 { return }
                    if status == Z_BUF_ERROR && made == 0 { throw Mismatch() }
                }
            }
            stream.next_in = nil
        }
    }
}
