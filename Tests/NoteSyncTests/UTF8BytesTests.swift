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

/// ``UTF8Bytes`` answers as the UTF-8 views do (`elementsEqual`, `lexicographicallyPrecedes`, `allSatisfy`), on
/// small strings (held inline), long ones, slices made strings, and names in NFC and NFD.
@Suite struct UTF8BytesTests {
    /// Strings made of pieces that share prefixes, differ only in normalisation or in one byte, and straddle the
    /// 15 bytes a small string holds inline.
    private static func strings(count: Int, seed: UInt64) -> [String] {
        var random = SplitMix(seed: seed)
        let pieces = ["", "a", "b", "/", "é", "e\u{301}", "z", "notes/", "2024-", "\u{7F}", "\u{80}", "日本", "😀", ".md"]
        return (0..<count).map { _ in
            var text = ""
            for _ in 0..<random.next(9) { text += pieces[random.next(pieces.count)] }
            // A string that is a slice of a longer one, as a path cut from its folder is.
            if random.next(4) == 0, let slash = text.firstIndex(of: "/") { return String(text[text.index(after: slash)...]) }
            return text
        }
    }

    @Test func answersAsTheViewsDo() {
        let all = Self.strings(count: 300, seed: 7) + ["", "a", "ab", "abcdefghijklmno", "abcdefghijklmnop", "é", "e\u{301}"]
        for a in all {
            #expect(UTF8Bytes.isASCII(a) == a.utf8.allSatisfy { $0 < 0x80 }, "\(Array(a.utf8))")
            for b in all {
                #expect(UTF8Bytes.equal(a, b) == a.utf8.elementsEqual(b.utf8), "\(Array(a.utf8)) \(Array(b.utf8))")
                #expect(
                    UTF8Bytes.precedes(a, b) == a.utf8.lexicographicallyPrecedes(b.utf8), "\(Array(a.utf8)) \(Array(b.utf8))")
            }
        }
    }

    /// The case the byte tests are for: `String`'s `==` holds an NFD name equal to its NFC twin; the bytes do not.
    @Test func anNFDNameIsNotItsNFCTwin() {
        let nfc = "caf\u{E9}.md"
        let nfd = "cafe\u{301}.md"
        #expect(nfc == nfd)
        #expect(!UTF8Bytes.equal(nfc, nfd))
        #expect(UTF8Bytes.precedes(nfd, nfc))  // "e" (0x65) before "é" (0xC3 0xA9)
        #expect(!UTF8Bytes.isASCII(nfd))
    }

    /// Record names sort by their bytes (`RecordName.<`), the same order on every device.
    @Test func recordNamesSortByBytes() throws {
        let names = try ["b.md", "a/b.md", "a.md", "a/ä.md", "a/z.md", "A.md", "a"].map { try RecordName(validating: $0) }
        #expect(names.sorted().map(\.string) == ["A.md", "a", "a.md", "a/b.md", "a/z.md", "a/ä.md", "b.md"])
    }
}
