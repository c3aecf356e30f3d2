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

/// The digest is held as four words and written as hex: both forms must say the same thing.
@Suite struct ContentDigestTests {
    @Test func theDigestOfAKnownTextIsItsSHA256() {
        #expect(ContentDigest(of: Data("abc".utf8)).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(ContentDigest.empty.hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func hexRoundTripsAndOrderFollowsTheBytes() throws {
        var generator = SystemRandomNumberGenerator()
        var digests: [ContentDigest] = []
        for _ in 0..<300 {
            let bytes = (0..<Int.random(in: 0..<64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let digest = ContentDigest(of: Data(bytes))
            let expected = SHA256.hash(data: Data(bytes)).map { String(format: "%02x", $0) }.joined()
            #expect(digest.hex == expected)
            let parsed = try #require(ContentDigest(hex: digest.hex))
            #expect(parsed == digest && parsed.hashValue == digest.hashValue)
            digests.append(digest)
        }
        // Edge words: all zero, all ones, a single bit in each word.
        for hex in [
            String(repeating: "0", count: 64), String(repeating: "f", count: 64),
            "8" + String(repeating: "0", count: 63), String(repeating: "0", count: 63) + "1"
        ] {
            #expect(ContentDigest(hex: hex)?.hex == hex)
            digests.append(try #require(ContentDigest(hex: hex)))
        }
        #expect(digests.sorted().map(\.hex) == digests.map(\.hex).sorted())
        #expect(Set(digests).count == Set(digests.map(\.hex)).count)
    }

    @Test func anythingButSixtyFourLowercaseHexDigitsIsRefused() {
        let good = ContentDigest(of: Data("x".utf8)).hex
        for bad in [
            "", String(good.dropLast()), good + "0", good.uppercased(), "g" + good.dropFirst(),
            String(good.dropLast()) + " ", String(good.dropLast()) + "\u{E9}", " " + good.dropFirst()
        ] {
            #expect(ContentDigest(hex: bad) == nil, "\(bad)")
        }
    }

    @Test func aDigestEncodesAsItsHex() throws {
        let digest = ContentDigest(of: Data("note".utf8))
        let data = try JSONEncoder().encode([digest])
        #expect(String(decoding: data, as: UTF8.self) == "[\"\(digest.hex)\"]")
        #expect(try JSONDecoder().decode([ContentDigest].self, from: data) == [digest])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([ContentDigest].self, from: Data("[\"ABC\"]".utf8)) }
    }
}
