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
import Testing

/// Big texts through real `notesync` processes, the streaming threshold lowered to 256 KiB
/// (`NOTESYNC_BIG_TEXT_BYTES`): on a folder server, an encrypted one, and a bucket (moto, SeaweedFS), a text over it
/// arrives whole, its edit too, and a sparse one stays sparse.
@Suite struct BigTextStreamTests {
    /// `count` bytes that do not compress.
    static func noise(_ count: Int, seed: UInt64) -> Data {
        var generator = SplitMix(seed: seed)
        var data = Data(count: count)
        data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
            for index in stride(from: 0, to: count, by: 8) {
                withUnsafeBytes(of: generator.next()) { word in
                    for offset in 0..<min(8, count - index) { buffer[index + offset] = word[offset] }
                }
            }
        }
        return data
    }

    static func roundTrip(_ devices: TwoDevices) throws {
        devices.environment["NOTESYNC_BIG_TEXT_BYTES"] = String(256 << 10)
        let text = noise(3 << 20, seed: 1)
        try text.write(to: URL(fileURLWithPath: devices.a + "/big.md"))
        let sparse = devices.a + "/disk.img"
        let fd = open(sparse, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        #expect(fd >= 0 && ftruncate(fd, 16 << 20) == 0 && pwrite(fd, "sparse", 6, 5 << 20) == 6)
        close(fd)
        try devices.write(devices.a, "small.md", "small\n")
        try devices.sync(devices.a)
        try devices.sync(devices.b)
        #expect(try devices.notes(devices.b) == (try devices.notes(devices.a)))
        let info = try #require(FileIO.lstatInfo(devices.b + "/disk.img"))
        #expect(info.st_size == 16 << 20 && Int64(info.st_blocks) * 512 < 1 << 20, "\(info.st_blocks) blocks")
        // An edit comes back over the note that is there.
        try (text + Data("edited\n".utf8)).write(to: URL(fileURLWithPath: devices.b + "/big.md"))
        try devices.sync(devices.b)
        try devices.sync(devices.a)
        #expect(try devices.notes(devices.a) == (try devices.notes(devices.b)))
        #expect(((try? FileIO.list(devices.a + "/.notesync/uploads")) ?? nil ?? []).isEmpty, "nothing left to send")
        let fsck = try devices.run(["server", "fsck", devices.server])
        #expect(fsck.status == 0, "\(fsck.stdout)\(fsck.stderr)")
    }

    @Test(arguments: [false, true])
    func aBigTextRoundTripsThroughAFolderServer(_ encrypted: Bool) throws {
        try Self.roundTrip(try TwoDevices("bigtext-folder", encrypted: encrypted))
    }

    @Test(.enabled(if: S3TestServer.available), arguments: S3TestServer.Kind.allCases)
    func aBigTextRoundTripsThroughABucket(_ kind: S3TestServer.Kind) throws {
        let s3 = try S3TestServer(kind, label: "bigtext")
        // Both ways on each service: SeaweedFS's server encrypted (SigV4 checked), moto's plain.
        try Self.roundTrip(try TwoDevices("bigtext-s3", s3: s3, encrypted: kind == .seaweedfs))
    }
}
