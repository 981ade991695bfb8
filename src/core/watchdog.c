// watchdog.c: the per-rank watchdog thread (see watchdog.h).
#define _GNU_SOURCE

#include "core/watchdog.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct ds_watchdog {
    _Atomic double timeout_s;
    int rank, nranks, unlink_at_stop;
    _Atomic int64_t last_ns;          // monotonic time of the last beat
    _Atomic uint64_t beats;
    _Atomic(const char *) phase;
    atomic_int stop;
    pthread_t thread;
    char shm_name[64];
    _Atomic uint64_t *shared;  // [0]: reported flag; [1 + 2r]: rank r's beats + 1 (0: not on this node),
                               // [2 + 2r]: its pid
    size_t shared_bytes;
};

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// Removes the shared files of earlier jobs on this node whose processes are all gone (a job killed from
// outside leaves its file behind). Best effort: a file that cannot be read is left alone.
static void shared_sweep_stale(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "dsolve-wd-", 10) != 0)
            continue;
        char path[300];
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        uint64_t v[2], alive = 0, seen = 0;
        if (fread(v, sizeof v[0], 1, f) == 1)  // the reported flag
            while (fread(v, sizeof v[0], 2, f) == 2)
                if (v[0]) {
                    seen++;
                    alive += kill((pid_t)v[1], 0) == 0;
                }
        fclose(f);
        if (seen > 0 && alive == 0)
            unlink(path);
    }
    closedir(d);
}

// The node's shared beat counts, or NULL where /dev/shm cannot be used (then only this rank is seen).
static void shared_open(ds_watchdog *w, unsigned long long tag, int local_rank)
{
    snprintf(w->shm_name, sizeof w->shm_name, "/dsolve-wd-%llx", tag);
    w->shared_bytes = (size_t)(2 * w->nranks + 1) * sizeof(uint64_t);
    int fd = shm_open(w->shm_name, O_CREAT | O_RDWR, 0600);
    if (fd < 0)
        return;
    if (ftruncate(fd, (off_t)w->shared_bytes) == 0) {
        void *p = mmap(NULL, w->shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        w->shared = p == MAP_FAILED ? NULL : p;
    }
    close(fd);
    w->unlink_at_stop = local_rank == 0;
    if (local_rank == 0)
        shared_sweep_stale();
}

// The state of process pid as /proc shows it: 'R', 'S', 'D', 'T' (stopped), ...; 0 when it is gone.
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');  // "pid (comm) S ...": comm may hold spaces
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

// Which rank of this node is behind: one whose process is gone or stopped, else the lowest beat count.
static void find_behind(const ds_watchdog *w, char *buf, size_t len)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    int who = -1;
    for (int r = 0; r < w->nranks; r++) {
        const uint64_t c = atomic_load(&w->shared[1 + 2 * r]);
        const pid_t pid = (pid_t)atomic_load(&w->shared[2 + 2 * r]);
        if (c == 0 || r == w->rank)
            continue;  // not on this node, or this rank (which is running)
        const char st = proc_state(pid);
        if (st == 0 || st == 'Z' || st == 'X') {
            snprintf(buf, len, "rank %d (pid %d) is gone", r, (int)pid);
            return;
        }
        if (st == 'T' || st == 't') {
            snprintf(buf, len, "rank %d (pid %d) is stopped", r, (int)pid);
            return;
        }
        if (c < lo)
            lo = c, who = r;
        hi = c > hi ? c : hi;
    }
    const uint64_t mine = atomic_load(&w->shared[1 + 2 * w->rank]);
    if (who >= 0 && lo < hi && lo < mine)
        snprintf(buf, len, "rank %d is behind (%llu beats, its peers up to %llu)", who, (unsigned long long)(lo - 1),
                 (unsigned long long)(hi > mine ? hi - 1 : mine - 1));
    else
        snprintf(buf, len, "every rank of this node is running and level: the rank behind is on another node, "
                 "or one phase runs longer than the timeout");
}

// The line: this rank's phase, and which rank is behind.
static void report(ds_watchdog *w, double idle_s)
{
    char behind[200] = "the other ranks are not seen (no /dev/shm)";
    if (w->shared)
        find_behind(w, behind, sizeof behind);
    const char *phase = atomic_load(&w->phase);
    fprintf(stderr, "dsolve: no progress for %.0f s (--timeout %g) on rank %d, in %s; %s; ending the job\n", idle_s,
            atomic_load(&w->timeout_s), w->rank, phase ? phase : "start-up", behind);
    fflush(stderr);
}

static void *watch(void *arg)
{
    ds_watchdog *w = arg;
    while (!atomic_load(&w->stop)) {
        const double t = atomic_load(&w->timeout_s), poll = t / 10 < 0.2 ? t / 10 : 0.2;
        const struct timespec nap = {(time_t)poll, (long)((poll - (double)(time_t)poll) * 1e9)};
        nanosleep(&nap, NULL);
        const double idle = (double)(mono_ns() - atomic_load(&w->last_ns)) / 1e9;
        if (!(t > 0) || idle <= t || atomic_load(&w->stop))
            continue;
        uint64_t expected = 0;
        if (!w->shared || atomic_compare_exchange_strong(&w->shared[0], &expected, (uint64_t)w->rank + 1))
            report(w, idle);  // the first of the node to fire; the others leave without a word
        shm_unlink(w->shm_name);
        _exit(1);
    }
    return NULL;
}

ds_watchdog *watchdog_start(double timeout_s, unsigned long long tag, int rank, int nranks, int local_rank,
                            int local_size)
{
    (void)local_size;
    if (!(timeout_s > 0))
        return NULL;
    ds_watchdog *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->timeout_s = timeout_s;
    w->rank = rank;
    w->nranks = nranks;
    atomic_store(&w->last_ns, mono_ns());
    shared_open(w, tag, local_rank);
    if (w->shared) {
        atomic_store(&w->shared[2 + 2 * rank], (uint64_t)getpid());
        atomic_store(&w->shared[1 + 2 * rank], 1);
    }
    if (pthread_create(&w->thread, NULL, watch, w) != 0) {
        watchdog_stop(w);  // no thread: no deadline, as with --timeout 0
        return NULL;
    }
    return w;
}

void watchdog_set_timeout(ds_watchdog *w, double timeout_s)
{
    if (!w)
        return;
    atomic_store(&w->last_ns, mono_ns());
    atomic_store(&w->timeout_s, timeout_s > 0 ? timeout_s : 0.0);
}

void watchdog_beat(ds_watchdog *w, const char *phase)
{
    if (!w)
        return;
    atomic_store(&w->phase, phase);
    atomic_store(&w->last_ns, mono_ns());
    const uint64_t n = atomic_fetch_add(&w->beats, 1) + 1;
    if (w->shared)
        atomic_store(&w->shared[1 + 2 * w->rank], n + 1);
}

void watchdog_stop(ds_watchdog *w)
{
    if (!w)
        return;
    if (w->thread) {
        atomic_store(&w->stop, 1);
        pthread_join(w->thread, NULL);
    }
    if (w->shared)
        munmap((void *)w->shared, w->shared_bytes);
    if (w->unlink_at_stop)
        shm_unlink(w->shm_name);
    free(w);
}
