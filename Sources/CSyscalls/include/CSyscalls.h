#ifndef NOTESYNC_CSYSCALLS_H
#define NOTESYNC_CSYSCALLS_H

#include <stddef.h>
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

/// The cores this process may run on: the CPUs of the calling thread's affinity mask (`taskset`, a cgroup's cpuset),
/// capped by a CPU quota where one is set at the cgroup root the process sees (v2 `cpu.max`, v1 `cpu.cfs_quota_us`
/// over `cpu.cfs_period_us`, rounded up; inside a container, its own). At least 1.
int ns_active_cores(void);

/// `cores` capped by the CPU quota the files at these paths set, as ``ns_active_cores`` reads them: `v2_max` (cgroup
/// v2's `cpu.max`: "QUOTA PERIOD", or "max PERIOD" for none) when it holds two values, else `v1_quota` over `v1_period`
/// (cgroup v1's `cpu.cfs_quota_us`, -1 for none, and `cpu.cfs_period_us`). The quota over the period, rounded up,
/// lowers `cores`, never raises it; a missing or unreadable file sets no cap. At least 1.
int ns_cores_capped_by_quota(int cores, const char *v2_max, const char *v1_quota, const char *v1_period);

/// Saves the calling thread's whole CPU affinity mask into `mask` (`size` bytes, at least a `cpu_set_t`: 128) and
/// returns how many CPUs it holds; -1 with errno set on failure. For tests, with the two below.
int ns_save_thread_affinity(void *mask, size_t size);

/// Restores a mask saved by `ns_save_thread_affinity`. Returns 0 or -1 with errno set.
int ns_restore_thread_affinity(const void *mask, size_t size);

/// Binds the calling thread to the first CPU of its affinity mask. Returns 0 or -1 with errno set.
int ns_bind_thread_to_first_cpu(void);

#endif
