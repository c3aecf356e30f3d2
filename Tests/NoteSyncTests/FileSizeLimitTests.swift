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

@Suite struct FileSizeLimitTests {
    @Test(arguments: [
        ("32M", Int64(32) << 20), ("500k", 500 << 10), ("2GiB", Int64(2) << 30), ("1.5g", Int64(3) << 29), ("4096", 4096),
        ("10 MB", Int64(10) << 20), ("12b", 12)
    ])
    func sizesParseInBinaryUnits(_ text: String, _ bytes: Int64) throws {
        #expect(try FileSizeLimit(parsing: text).bytes == bytes)
    }

    @Test func zeroOrNoneIsNoLimit() throws {
        for text in ["0", "none", "unlimited"] {
            let limit = try FileSizeLimit(parsing: text)
            #expect(limit.bytes == nil && limit.allows(Int64.max) && limit.stored == "0" && limit.description == "none")
        }
    }

    @Test func whatIsNotASizeIsRefused() {
        for text in ["", "lots", "-1M", "1X", "1e30G"] { #expect(throws: NoteSyncError.self) { try FileSizeLimit(parsing: text) } }
    }

    @Test func aLimitAllowsUpToItsSizeAndReadsBack() throws {
        let limit = try FileSizeLimit(parsing: "1M")
        #expect(limit.allows(1 << 20) && !limit.allows((1 << 20) + 1))
        #expect(try FileSizeLimit(parsing: limit.stored) == limit)
        #expect(FileSizeLimit.format(3 << 20) == "3 MiB" && FileSizeLimit.format(1536) == "1.5 KiB" && FileSizeLimit.format(7) == "7 bytes")
        #expect(FileSizeLimit.suggestion(for: (2 << 20) + 1) == "3M")
    }
}
