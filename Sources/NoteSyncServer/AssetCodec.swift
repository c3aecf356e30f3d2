import CDeflate
import CZlib
import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport
import Synchronization

/// How a format 3 server stores a note's text (docs/retention.md, "Compressed assets"): `NSZ1` and a zlib stream when
/// that saves at least an eighth, else the text itself. The file is still named by the SHA-256 of the text, so
/// deduplication and every digest in the log are unchanged; a reader checks the digest of what it decodes.
public enum AssetCodec {
    package static let magic = Data("NSZ1".utf8)
    /// Shorter texts are stored as they are: the header and zlib's framing would eat the gain.
    static let minimumSize = 256

    /// How hard libdeflate works. Level 1: on the benchmark's corpus, level 2 and zlib's level 6 store barely fewer
    /// bytes for one and a half to three times the CPU, and level 1's tables are smaller than level 2's
    /// (docs/benchmarks.md, "Why these settings"). What it writes is a zlib stream like any other, which zlib inflates.
    package static let level: Int32 = 1

    /// The bytes to store for `text`.
    public static func encode(_ text: Data) -> Data { encode(text, pool: nil) }

    /// The bytes to store for `text`, with a compressor of `pool` when given. `compact` for bytes that are held a
    /// while: the compressor writes into room for the worst case (the text's size and more), which stays allocated
    /// behind a shorter `count`; compact bytes are copied out at their size.
    package static func encode(_ text: Data, pool: CompressorPool?, compact: Bool = false) -> Data {
        guard text.count >= minimumSize else { return text }
        let compressor = pool?.take() ?? Compressor()
        defer { pool?.give(compressor) }
        let bound = libdeflate_zlib_compress_bound(compressor.pointer, text.count)
        var output = Data(count: magic.count + bound)
        let written = withExtendedLifetime(compressor) {
            output.withUnsafeMutableBytes { out -> Int in
                text.withUnsafeBytes { input -> Int in
                    libdeflate_zlib_compress(
                        compressor.pointer, input.baseAddress!, input.count, out.baseAddress!.advanced(by: magic.count),
                        bound)
                }
            }
        }
        guard written > 0, written + magic.count <= text.count - text.count / 8 else { return text }
        output.replaceSubrange(0..<magic.count, with: magic)
        output.count = magic.count + written
        return compact ? output.withUnsafeBytes { Data(bytes: $0.baseAddress!, count: $0.count) } : output
    }

    /// A libdeflate compressor and its tables (200 KB at level 1).
    package final class Compressor: @unchecked Sendable {
        let pointer: OpaquePointer

        package init() {
            guard let pointer = libdeflate_alloc_compressor(AssetCodec.level) else { fatalError("out of memory") }
            self.pointer = pointer
        }

        deinit { libdeflate_free_compressor(pointer) }
    }

    /// Compressors kept for the texts of one batch: making one costs about as much as compressing a short note. A
    /// compressor is used by one thread at a time; they are freed with the pool. A text encoded without a pool makes
    /// and frees its own, so an agent between edits holds no compressor's tables.
    package final class CompressorPool: Sendable {
        private let idle = Mutex<[Compressor]>([])

        package func take() -> Compressor { idle.withLock { $0.popLast() } ?? Compressor() }

        package func give(_ compressor: Compressor) { idle.withLock { $0.append(compressor) } }

        /// How many wait here.
        var idleCount: Int { idle.withLock { $0.count } }
    }

    /// The text stored in `file` for an asset of `size` bytes and digest `digest`, or nil when the file holds neither
    /// that text nor a stream that inflates to it (damaged, truncated, substituted, or longer than it says: never
    /// more than `size` bytes are inflated).
    public static func decode(_ file: Data, digest: ContentDigest, size: Int64) -> Data? {
        if file.starts(with: magic), let text = inflate(file.dropFirst(magic.count), size: size),
            ContentDigest(of: text) == digest
        {
            return text
        }
        // A text stored as it is (every asset formats 1 and 2 wrote, short or incompressible ones), even one that
        // happens to start with the magic.
        if Int64(file.count) == size, ContentDigest(of: file) == digest { return file }
        return nil
    }

    /// Inflates a zlib stream that must give exactly `size` bytes, nil when it does not. A note's size (up to
    /// ``oneShotLimit``) is inflated by libdeflate into a buffer of that size, about twice as fast as zlib; a bigger
    /// one by zlib, whose buffer grows as the output does. The buffer is the size the entry states before the stream
    /// has shown it: at most 64 MiB, and never more than 1,032 bytes for each byte of the stream.
    static func inflate(_ stream: Data, size: Int64) -> Data? {
        guard size >= 0 else { return nil }
        if size > oneShotLimit {
            guard let text = inflate(stream, limit: size), Int64(text.count) == size else { return nil }
            return text
        }
        // Deflate gives at most 1,032 bytes for each byte of stream: a larger size is a lie, and is never allocated.
        guard size <= Int64(stream.count) * 1032 + 1024 else { return nil }
        guard let decompressor = libdeflate_alloc_decompressor() else { return nil }
        defer { libdeflate_free_decompressor(decompressor) }
        var output = Data(count: Int(size))
        var consumed = 0
        var produced = 0
        let status = output.withUnsafeMutableBytes { out in
            stream.withUnsafeBytes { input in
                libdeflate_zlib_decompress_ex(
                    decompressor, input.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, input.count,
                    out.baseAddress ?? UnsafeMutableRawPointer(bitPattern: 1)!, out.count, &consumed, &produced)
            }
        }
        // The whole stream and nothing after it, its checksum right, and exactly the size.
        guard status == LIBDEFLATE_SUCCESS, consumed == stream.count, produced == Int(size) else { return nil }
        return output
    }

    /// Up to this size a text is inflated into a buffer of its stated size.
    static let oneShotLimit: Int64 = 64 << 20

    /// Inflates a zlib stream, refusing more than `limit` bytes of output. The buffer grows as the output does (a
    /// stated size is not trusted for an allocation).
    static func inflate(_ stream: Data, limit: Int64) -> Data? {
        guard limit >= 0 else { return nil }
        let cap = Int(clamping: min(limit, ServerStore.largestAssetSize)) + 1
        var output = Data(count: min(cap, max(stream.count * 4, 1 << 16)))
        var z = z_stream()
        guard inflateInit_(&z, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&z) }
        var produced = 0
        return stream.withUnsafeBytes { input -> Data? in
            z.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
            z.avail_in = uInt(input.count)
            while true {
                let status = output.withUnsafeMutableBytes { out -> Int32 in
                    z.next_out = out.baseAddress!.advanced(by: produced).assumingMemoryBound(to: Bytef.self)
                    z.avail_out = uInt(out.count - produced)
                    let status = CZlib.inflate(&z, Z_NO_FLUSH)
                    produced = out.count - Int(z.avail_out)
                    return status
                }
                if status == Z_STREAM_END {
                    // The whole stream, and no byte more than the limit (the spare byte catches a longer text).
                    guard z.avail_in == 0, produced <= Int(clamping: limit) else { return nil }
                    output.count = produced
                    return output
                }
                guard status == Z_OK || status == Z_BUF_ERROR else { return nil }
                if produced < output.count {
                    // No progress possible with room left: the stream is truncated.
                    if status == Z_BUF_ERROR || z.avail_in == 0 { return nil }
                    continue
                }
                guard output.count < cap else { return nil }
                output.count = min(cap, output.count * 2)
            }
        }
    }
}
