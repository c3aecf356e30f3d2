import Testing

@testable import NoteSync

/// The cap on malloc's arenas (``MallocArenas``) is set unless the user's environment sets one of its own.
@Suite struct MallocArenasTests {
    @Test func aLimitOfTheUsersOwnIsLeftAlone() {
        #expect(!MallocArenas.limitToCores(environment: ["MALLOC_ARENA_MAX": "8"]))
        #expect(!MallocArenas.limitToCores(environment: ["GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=4"]))
    }

    @Test func otherwiseTheArenasAreCapped() {
        #expect(MallocArenas.limitToCores(environment: [:]))
        #expect(MallocArenas.limitToCores(environment: ["GLIBC_TUNABLES": "glibc.malloc.tcache_count=0", "PATH": "/usr/bin"]))
    }
}
