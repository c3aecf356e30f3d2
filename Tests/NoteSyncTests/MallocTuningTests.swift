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

/// malloc's settings (``MallocTuning``) are made unless the user's environment sets its own.
///
/// What the fixed mmap threshold does is not checked here: glibc keeps the threshold to itself, and whether a large
/// block is mapped on its own depends on the free space already in the arena (in a test process that has run
/// hundreds of syncs, there is plenty). Its effect is measured on an idle agent (docs/agent.md, Memory).
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

    /// The policy's moments (``MemoryPolicy``): a phase is large from ``MemoryPolicy/largePhase`` items, and a long
    /// phase hands back once per ``MemoryPolicy/stride`` items, counted from the last hand-back.
    @Test func memoryGoesBackAfterLargePhasesAndOncePerStride() {
        #expect(!MemoryPolicy.isLarge(MemoryPolicy.largePhase - 1))
        #expect(MemoryPolicy.isLarge(MemoryPolicy.largePhase))
        var pacer = MemoryPolicy.Pacer()
        let stride = MemoryPolicy.stride
        let counts = [0, stride - 1, stride, stride + 1, 2 * stride - 1, 2 * stride + 7, 3 * stride, 3 * stride + 7]
        let handedBack = counts.map { pacer.handled($0) }
        #expect(handedBack == [false, false, true, false, false, true, false, true])
    }
}
