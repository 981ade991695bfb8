// enospc.c: a full disk, for the write-fault tests (LD_PRELOAD). Once DSOLVE_ENOSPC_AFTER bytes have been
// written to files whose path contains DSOLVE_ENOSPC_MATCH (default ".part": dsolve's temporary outputs),
// every further write(2), pwrite(2) or writev(2) to such a file fails with ENOSPC, as on a disk that filled
// up; so does fclose(3) of a stream whose buffered bytes take it past the limit (stdio's own writes call
// the C library's write from within, out of this shim's reach, and report a full disk at the flush).
// Other files (the launcher's, the terminal) are left alone. Only for the tests: not linked into dsolve.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_llong written;

// Whether a write of n bytes to fd finds the disk full (and counts it when it does not).
static int disk_full(int fd, size_t n)
{
    const char *after = getenv("DSOLVE_ENOSPC_AFTER"), *match = getenv("DSOLVE_ENOSPC_MATCH");
    if (!after)
        return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t len = readlink(link, path, sizeof path - 1);
    if (len < 0)
        return 0;
    path[len] = '\0';
    if (!strstr(path, match ? match : ".part"))
        return 0;
    if (atomic_fetch_add(&written, (long long)n) + (long long)n > atoll(after)) {
        errno = ENOSPC;
        return 1;
    }
    return 0;
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

ssize_t write(int fd, const void *buf, size_t n)
{
    if (disk_full(fd, n))
        return -1;
    return REAL("write", ssize_t (*)(int, const void *, size_t))(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (disk_full(fd, n))
        return -1;
    return REAL("pwrite", ssize_t (*)(int, const void *, size_t, off_t))(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    if (disk_full(fd, n))
        return -1;
    return REAL("pwrite64", ssize_t (*)(int, const void *, size_t, off_t))(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++)
        n += iov[i].iov_len;
    if (disk_full(fd, n))
        return -1;
    return REAL("writev", ssize_t (*)(int, const struct iovec *, int))(fd, iov, cnt);
}

int fclose(FILE *f)
{
    const int fd = fileno(f);
    const long size = fd >= 0 ? ftell(f) : -1;
    const int full = size > 0 && disk_full(fd, (size_t)size);
    const int rc = REAL("fclose", int (*)(FILE *))(f);
    if (!full)
        return rc;
    errno = ENOSPC;
    return EOF;
}
