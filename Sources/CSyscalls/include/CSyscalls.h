#ifndef NOTESYNC_CSYSCALLS_H
#define NOTESYNC_CSYSCALLS_H

#include <stdint.h>

/// renameat2(RENAME_NOREPLACE): publish `oldpath` as `newpath` only if `newpath` does not exist.
/// Returns 0 or -1 with errno set (EEXIST: taken; EINVAL/ENOSYS: unsupported by the filesystem).
int ns_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);

/// renameat2(RENAME_EXCHANGE): atomically swap two names. Returns 0 or -1 with errno set.
int ns_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);

/// statfs(2) f_type of the filesystem holding `path`, or 0 with errno set on failure.
int64_t ns_statfs_type(const char *path);

/// syncfs(2) of the filesystem holding `fd`.
int ns_syncfs(int fd);

/// mallopt(M_TOP_PAD, bytes): how much extra the heap grows by each time it must grow. Returns 1 on success.
int ns_malloc_top_pad(int bytes);

/// malloc_trim(0): hands the free pages of every malloc arena back to the system. Returns 1 if any was released.
int ns_malloc_trim(void);

/// mallopt(M_ARENA_MAX, arenas): at most that many malloc arenas (the main one included). Returns 1 on success.
int ns_malloc_arena_max(int arenas);

/// mallopt(M_MMAP_THRESHOLD, bytes): blocks of at least `bytes` are mapped on their own; setting it stops glibc
/// raising it as mapped blocks are freed. Returns 1 on success.
int ns_malloc_mmap_threshold(int bytes);

/// The git commit this build was made from (NOTESYNC_COMMIT at build time: see Package.swift), or "".
const char *ns_build_commit(void);

/// The cores this process may run on: the CPUs of its affinity mask (`taskset`, a cgroup's cpuset), capped by the
/// cgroup's CPU quota where one is set (v2 `cpu.max`, v1 `cpu.cfs_quota_us` over `cpu.cfs_period_us`, rounded up).
/// At least 1.
int ns_active_cores(void);

/// The calling thread's CPU affinity, its first 64 CPUs (bit n: CPU n); 0 with errno set on failure.
uint64_t ns_thread_affinity(void);

/// Binds the calling thread to the CPUs of `mask` (bit n: CPU n, the first 64). Returns 0 or -1 with errno set.
int ns_set_thread_affinity(uint64_t mask);

#endif
