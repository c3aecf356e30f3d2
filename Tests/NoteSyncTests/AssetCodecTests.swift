import CZlib
import Foundation
import PropertyBased
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

/// Compressed assets (format 3): stored compressed where that pays, always named and checked by the text's digest.
@Suite struct AssetCodecTests {
    static let prose = Data(
        (0..<400).map { "Line \($0 % 37) of the meeting notes: we agreed to ship the sync agent on Friday.\n" }.joined().utf8)

    func decode(_ file: Data, _ text: Data) -> Data? {
        AssetCodec.decode(file, digest: ContentDigest(of: text), size: Int64(text.count))
    }

    @Test func proseIsStoredCompressedAndReadBack() {
        let file = AssetCodec.encode(Self.prose)
        #expect(file.starts(with: AssetCodec.magic))
        #expect(file.count < Self.prose.count / 4, "\(file.count) of \(Self.prose.count)")
        #expect(decode(file, Self.prose) == Self.prose)
    }

    @Test func shortOrIncompressibleTextIsStoredAsItIs() {
        let short = Data("a short note\n".utf8)
        #expect(AssetCodec.encode(short) == short)
        var generator = SystemRandomNumberGenerator()
        let noise = Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) })
        #expect(AssetCodec.encode(noise) == noise)
        #expect(decode(noise, noise) == noise)
    }

    @Test func aTextThatStartsWithTheMagicIsReadAsItIs() {
        let text = Data("NSZ1 is how this note begins\n".utf8)
        #expect(decode(text, text) == text)
    }

    @Test func damageAndLiesAreRefused() {
        var file = AssetCodec.encode(Self.prose)
        #expect(decode(file.prefix(file.count - 10), Self.prose) == nil, "truncated")
        file[file.count / 2] ^= 0x40
        #expect(decode(file, Self.prose) == nil, "a flipped bit")
        // A stream that inflates to more than the entry says (a bomb, or a lie): refused without inflating it all.
        let bomb = AssetCodec.encode(Data(repeating: 0x61, count: 50_000_000))
        #expect(bomb.count < 100_000)
        #expect(AssetCodec.decode(bomb, digest: ContentDigest(of: Data("x".utf8)), size: 1000) == nil)
        #expect(AssetCodec.inflate(bomb.dropFirst(4), limit: 1000) == nil)
    }

    /// Builds before libdeflate wrote zlib's own streams (level 6); they read as before. Each stream is inflated by
    /// zlib, whoever wrote it.
    @Test func aStreamZlibWroteIsRead() throws {
        var bound = compressBound(uLong(Self.prose.count))
        var stream = Data(count: Int(bound))
        let status = stream.withUnsafeMutableBytes { out in
            Self.prose.withUnsafeBytes { input in
                compress2(
                    out.baseAddress!.assumingMemoryBound(to: Bytef.self), &bound,
                    input.baseAddress!.assumingMemoryBound(to: Bytef.self), uLong(input.count), 6)
            }
        }
        try #require(status == Z_OK)
        stream.count = Int(bound)
        #expect(decode(AssetCodec.magic + stream, Self.prose) == Self.prose)
    }

    /// A batch's compressors are reused between its texts and go with its pool; a text encoded alone makes and frees
    /// its own (an idle agent holds no compressor's tables).
    @Test func aBatchReusesItsCompressors() {
        let texts = (0..<64).map { Self.prose + Data("\($0)\n".utf8) }
        let pool = AssetCodec.CompressorPool()
        for text in texts.prefix(8) { _ = AssetCodec.encode(text, pool: pool) }
        #expect(pool.idleCount == 1, "one after the other, the texts share one compressor")
        let encoded = Parallel.values(texts.count) { AssetCodec.encode(texts[$0], pool: pool) }
        #expect((1...Parallel.cores * 4).contains(pool.idleCount))
        for (file, text) in zip(encoded, texts) {
            #expect(decode(file, text) == text)
            #expect(file == AssetCodec.encode(text), "a reused compressor writes what a fresh one does")
        }
    }

    /// A stream is inflated to exactly the size its entry states: more or less is refused, and so is a byte after the
    /// stream or a size no stream of that length can give (never allocated).
    @Test func aStreamGivesExactlyItsSize() {
        let stream = AssetCodec.encode(Self.prose).dropFirst(AssetCodec.magic.count)
        let size = Int64(Self.prose.count)
        #expect(AssetCodec.inflate(stream, size: size) == Self.prose)
        #expect(AssetCodec.inflate(stream, size: size - 1) == nil)
        #expect(AssetCodec.inflate(stream, size: size + 1) == nil)
        #expect(AssetCodec.inflate(stream + Data([0]), size: size) == nil)
        #expect(AssetCodec.inflate(stream.prefix(12), size: AssetCodec.oneShotLimit) == nil)
        #expect(AssetCodec.inflate(stream, size: -1) == nil)
        #expect(AssetCodec.inflate(stream.dropLast(), size: size) == nil, "a byte short")
        #expect(AssetCodec.inflate(stream, size: .max) == nil)
        #expect(AssetCodec.decode(AssetCodec.encode(Self.prose), digest: ContentDigest(of: Self.prose), size: .max) == nil)
        // The stream of an empty text; and a stream that needs a preset dictionary, which no asset has.
        #expect(AssetCodec.inflate(Data([0x78, 0x9C, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]), size: 0) == Data())
        #expect(AssetCodec.inflate(Data([0x78, 0xBB, 0, 0, 0, 1, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]), size: 0) == nil)
        // Past the one-shot limit zlib inflates it, its buffer growing with the output.
        let big = Data(repeating: 0x62, count: Int(AssetCodec.oneShotLimit) + 10)
        let file = AssetCodec.encode(big)
        #expect(file.count < 200_000)
        #expect(decode(file, big) == big)
        #expect(decode(file, big.dropLast()) == nil)
    }

    @Test func decodeInvertsEncode() async {
        await propertyCheck(input: Gen.int(in: 0...3000)) { length in
            let text = Data((0..<length).map { UInt8(truncatingIfNeeded: ($0 * 7 + $0 / 13) % 61 + 32) })
            #expect(self.decode(AssetCodec.encode(text), text) == text)
        }
    }

    /// A format 3 server stores texts compressed and reads them back; a format 2 server stores them as they are.
    @Test(.plainOnly("reads the stored bytes of plain and compressed assets and makes a format 2 server"))
    func theServerFormatDecides() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let ref = try store.putAsset(Self.prose)
        let files = ServerFiles(store)
        let onDisk = try #require(try files.read(store.assetPath(ref.sha256)))
        #expect(onDisk.starts(with: AssetCodec.magic) && onDisk.count < Self.prose.count / 4)
        #expect(try store.readAsset(ref) == Self.prose)
        // An entry that states a size no note has is refused, not a crash.
        #expect(throws: NoteSyncError.self) { try store.readAsset(AssetRef(sha256: ref.sha256, size: .max)) }
        let staged = try store.putAssets([Self.prose + Data("x\n".utf8)])
        #expect(try store.readAsset(staged[0]) == Self.prose + Data("x\n".utf8))
        #expect(try ServerFsck(store: store).run(repair: false).isClean)
        // A damaged compressed asset is found by a read and by fsck.
        var damaged = onDisk
        damaged[damaged.count - 8] ^= 0xFF
        try files.write(store.assetPath(ref.sha256), damaged)
        #expect(throws: NoteSyncError.self) { try store.readAsset(ref) }
        #expect(try ServerFsck(store: store).run(repair: false).findings.contains { $0.kind == .corruptAsset })

        let old = try TempDirectory()
        let root = try TestServer.root(old)
        try TestServer.create(root)
        let marker = ServerLayout(root: root).marker
        let oldFiles = try ServerFiles(root: root)
        let text = String(decoding: try #require(try oldFiles.read(marker)), as: UTF8.self)
        try oldFiles.write(
            marker, Data(text.replacingOccurrences(of: "\"format\" : \(ServerMarker.plainFormat)", with: "\"format\" : 2").utf8))
        let formatTwo = try ServerStore(root: root, device: "dev-a", logger: testLogger, vault: TestServer.vault)
        let plain = try formatTwo.putAsset(Self.prose)
        #expect(try oldFiles.read(formatTwo.assetPath(plain.sha256)) == Self.prose)
    }
}
