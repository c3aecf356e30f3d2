#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include "CSyscalls.h"
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <linux/fs.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

int ns_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE);
}

int ns_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, RENAME_EXCHANGE);
}

int64_t ns_statfs_type(const char *path) {
    struct statfs s;
    if (statfs(path, &s) != 0) return 0;
    return (int64_t)s.f_type;
}

int ns_syncfs(int fd) {
    return syncfs(fd);
}

int ns_malloc_top_pad(int bytes) { return mallopt(M_TOP_PAD, bytes); }

int ns_malloc_trim(void) { return malloc_trim(0); }

int ns_malloc_arena_max(int arenas) { return mallopt(M_ARENA_MAX, arenas); }

int ns_malloc_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }

#ifndef NOTESYNC_COMMIT
#define NOTESYNC_COMMIT ""
#endif

const char *ns_build_commit(void) { return NOTESYNC_COMMIT; }

#include <sched.h>

/// The first two integers of a small file ("max" reads as -1), or 0 numbers read.
static int ns_read_numbers(const char *path, long long *first, long long *second) {
    char buffer[64];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t count = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (count <= 0) return 0;
    buffer[count] = 0;
    char *cursor = buffer;
    long long *slots[2] = {first, second};
    int found = 0;
    while (found < 2) {
        while (*cursor == ' ' || *cursor == '\n') cursor++;
        if (*cursor == 0) break;
        if (strncmp(cursor, "max", 3) == 0) {
            *slots[found++] = -1;
            cursor += 3;
            continue;
        }
        char *end;
        long long value = strtoll(cursor, &end, 10);
        if (end == cursor) break;
        *slots[found++] = value;
        cursor = end;
    }
    return found;
}

int ns_cores_capped_by_quota(int cores, const char *v2_max, const char *v1_quota, const char *v1_period) {
    long long quota = -1, period = 0, unused = 0;
    if (ns_read_numbers(v2_max, &quota, &period) != 2) {
        quota = -1;
        period = 0;
        if (ns_read_numbers(v1_quota, &quota, &unused) != 1 || ns_read_numbers(v1_period, &period, &unused) != 1) {
            quota = -1;
        }
    }
    if (quota > 0 && period > 0) {
        long long allowed = (quota + period - 1) / period;
        if (allowed < cores) cores = allowed < 1 ? 1 : (int)allowed;
    }
    return cores < 1 ? 1 : cores;
}

int ns_active_cores(void) {
    cpu_set_t set;
    int cores = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
    if (cores <= 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        cores = online > 0 ? (int)online : 1;
    }
    return ns_cores_capped_by_quota(
        cores, "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us");
}

int ns_save_thread_affinity(void *mask, size_t size) {
    if (size < sizeof(cpu_set_t)) {
        errno = EINVAL;
        return -1;
    }
    cpu_set_t *set = mask;
    if (sched_getaffinity(0, sizeof *set, set) != 0) return -1;
    return CPU_COUNT(set);
}

int ns_restore_thread_affinity(const void *mask, size_t size) {
    if (size < sizeof(cpu_set_t)) {
        errno = EINVAL;
        return -1;
    }
    return sched_setaffinity(0, sizeof(cpu_set_t), mask);
}

int ns_bind_thread_to_first_cpu(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &set)) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            return sched_setaffinity(0, sizeof one, &one);
        }
    }
    errno = EINVAL;
    return -1;
}
