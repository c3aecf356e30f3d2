import Foundation
import Testing

@testable import NoteSync

/// malloc's settings (``MallocTuning``) are made unless the user's environment sets its own, and the mmap threshold
/// stays where it was set.
@Suite struct MallocTuningTests {
    @Test func settingsOfTheUsersOwnAreLeftAlone() {
        #expect(!MallocTuning.limitArenasToCores(environment: ["MALLOC_ARENA_MAX": "8"]))
        #expect(
            !MallocTuning.limitArenasToCores(environment: ["GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=4"]))
        #expect(!MallocTuning.fixMmapThreshold(environment: ["MALLOC_MMAP_THRESHOLD_": "65536"]))
        #expect(!MallocTuning.fixMmapThreshold(environment: ["GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"]))
    }

    @Test func otherwiseTheyAreMade() {
        #expect(MallocTuning.limitArenasToCores(environment: [:]))
        #expect(MallocTuning.limitArenasToCores(environment: ["GLIBC_TUNABLES": "glibc.malloc.tcache_count=0", "PATH": "/usr/bin"]))
        #expect(MallocTuning.fixMmapThreshold(environment: [:]))
        #expect(MallocTuning.fixMmapThreshold(environment: ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2"]))
    }

    /// Left to itself, glibc raises the threshold to the size of a mapped block when it is freed, and the next block
    /// of that size is made inside an arena. Fixed, every large block is mapped on its own (glibc marks such a chunk
    /// with bit 1, IS_MMAPPED, of the size word just before the block), and its pages go back when it is freed.
    @Test func aLargeBlockIsMappedAfterOneWasFreed() throws {
        #expect(MallocTuning.fixMmapThreshold(environment: [:]))
        func isMapped(_ block: UnsafeMutableRawPointer) -> Bool {
            block.load(fromByteOffset: -MemoryLayout<UInt>.size, as: UInt.self) & 2 != 0
        }
        for size in [4 << 20, 4 << 20, 1 << 20, 8 << 20] {
            let block = try #require(malloc(size))
            defer { free(block) }
            #expect(isMapped(block), "a block of \(size) bytes")
        }
    }
}
