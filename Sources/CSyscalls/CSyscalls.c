#define _GNU_SOURCE
#include <malloc.h>
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
