// probe.c: the helper of probe.h. It is a copy of the process made before MPI_Init: one thread, no MPI,
// CUDA or NCCL state, no registered memory, so forking it for each check is safe where forking the run's
// own process would not be. It ignores the signals that end a job and leaves when its parent does (the end
// of its socket, or PR_SET_PDEATHSIG). Its worker runs the checks; it dies by the default action of a crash
// signal, even in a build with AddressSanitizer, so that a crash reads the same in every build, and the
// helper forks a fresh one for the next request.
#define _GNU_SOURCE
#include "core/probe.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

// The answer to one request.
typedef struct probe_reply {
    int rc;     // the check's status, or DS_ERR_INPUT when a signal ended the worker
    int signo;  // the signal that ended the worker, −status when it exited without a verdict, or 0
    ds_msg msg;
} probe_reply;

// This process's helper (a process-wide resource, like its pid): its socket, −1 when there is none, and the
// lock that keeps a request and its reply together.
static int helper_fd = -1;
// Seconds a check may take before SIGALRM ends its worker (a library caught in a loop by a crafted file):
// DSOLVE_PROBE_SECONDS, else 120 (a metadata check takes milliseconds, its chunk index pass more on a
// file of millions of chunks).
static unsigned probe_seconds = 120;
static pthread_mutex_t helper_lock = PTHREAD_MUTEX_INITIALIZER;

// Receives one packet of at most len bytes; its length, or ≤ 0 at the end of the socket.
static ssize_t receive(int fd, void *buf, size_t len)
{
    ssize_t n;
    while ((n = recv(fd, buf, len, 0)) < 0 && errno == EINTR)
        ;
    return n;
}

// The worker: runs fn on each request until its socket ends (or a check crashes it).
static _Noreturn void worker(int fd, probe_fn fn)
{
    static const int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGALRM};
    for (size_t i = 0; i < sizeof crash / sizeof crash[0]; i++)
        signal(crash[i], SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // No core file for a crash that the run reports as the input's exit 3: a crafted file could otherwise
    // leave one per rank, and a core_pattern pipe (apport, systemd-coredump) runs even under ulimit -c 0.
    prctl(PR_SET_DUMPABLE, 0);
    static char req[PROBE_REQ_MAX];
    ssize_t n;
    while ((n = receive(fd, req, sizeof req)) > 0) {
        probe_reply r = {0};
        alarm(probe_seconds);
        r.rc = fn(req, (size_t)n, &r.msg);
        alarm(0);
        if (send(fd, &r, sizeof r, MSG_NOSIGNAL) != (ssize_t)sizeof r)
            break;
    }
    _exit(0);
}

// The helper's current worker: one is forked when a request comes and none is alive, and serves
// requests until one ends it; a worker that survived a check carries no more than the run's own process
// will after running the same check.
typedef struct probe_worker {
    int fd;
    pid_t pid;
} probe_worker;

static void worker_start(probe_worker *w, probe_fn fn)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return;
    w->pid = fork();
    if (w->pid == 0) {
        close(sv[0]);
        worker(sv[1], fn);
    }
    close(sv[1]);
    if (w->pid < 0)
        close(sv[0]);
    else
        w->fd = sv[0];
}

// Passes req to the worker (forking one if need be) and returns its reply, or how it ended.
static probe_reply check(probe_worker *w, probe_fn fn, const char *req, size_t len)
{
    probe_reply r = {.rc = DS_ERR_RUNTIME};
    if (w->fd < 0)
        worker_start(w, fn);
    if (w->fd < 0)
        return r;
    if (send(w->fd, req, len, MSG_NOSIGNAL) == (ssize_t)len && receive(w->fd, &r, sizeof r) == (ssize_t)sizeof r)
        return r;
    close(w->fd);
    w->fd = -1;
    int st = 0;
    while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR)
        ;
    // A worker that exits with a non-zero status in the middle of a check was ended by what it met there
    // (a sanitizer's report ends it so, or the library calling exit): the input's doing, like a signal.
    if (WIFSIGNALED(st))
        r = (probe_reply){.rc = DS_ERR_INPUT, .signo = WTERMSIG(st)};
    else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
        r = (probe_reply){.rc = DS_ERR_INPUT, .signo = -WEXITSTATUS(st)};
    return r;
}

static _Noreturn void helper(int fd, probe_fn fn)
{
    static const int job_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE};
    for (size_t i = 0; i < sizeof job_signals / sizeof job_signals[0]; i++)
        signal(job_signals[i], SIG_IGN);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    probe_worker w = {.fd = -1};
    static char req[PROBE_REQ_MAX];
    ssize_t n;
    while ((n = receive(fd, req, sizeof req)) > 0) {
        probe_reply r = check(&w, fn, req, (size_t)n);
        if (send(fd, &r, sizeof r, MSG_NOSIGNAL) != (ssize_t)sizeof r)
            break;
    }
    _exit(0);
}

void probe_start(probe_fn fn)
{
    int sv[2];
    if (helper_fd >= 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return;
    const char *limit = getenv("DSOLVE_PROBE_SECONDS");
    if (limit && atoi(limit) > 0)
        probe_seconds = (unsigned)atoi(limit);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        helper(sv[1], fn);
    }
    close(sv[1]);
    if (pid < 0)
        close(sv[0]);
    else
        helper_fd = sv[0];
}

// One request and its reply; 0, or −1 when the helper is gone (its socket is then closed).
static int exchange(const void *req, size_t len, probe_reply *r)
{
    if (helper_fd < 0)
        return -1;
    ssize_t n = send(helper_fd, req, len, MSG_NOSIGNAL);
    if (n == (ssize_t)len)
        n = receive(helper_fd, r, sizeof *r);
    if (n == (ssize_t)sizeof *r)
        return 0;
    close(helper_fd);
    helper_fd = -1;
    return -1;
}

int probe_run(const void *req, size_t len, int *signo, ds_msg *msg)
{
    DS_ASSERT(len > 0 && len <= PROBE_REQ_MAX);
    *signo = 0;
    probe_reply r;
    pthread_mutex_lock(&helper_lock);
    int gone = exchange(req, len, &r);
    pthread_mutex_unlock(&helper_lock);
    if (gone)
        return PROBE_NONE;
    *signo = r.signo;
    if (r.rc != DS_OK && r.msg.text[0])
        ds_fail(msg, r.rc, "%s", r.msg.text);  // the check's own message
    return r.rc;
}

const char *probe_signal_name(int signo)
{
    static const struct { int signo; const char *name; } names[] = {
        {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGILL, "SIGILL"},
        {SIGABRT, "SIGABRT"}, {SIGSYS, "SIGSYS"}, {SIGKILL, "SIGKILL"}, {SIGXCPU, "SIGXCPU"},
        {SIGALRM, "no answer within the probe's time limit, DSOLVE_PROBE_SECONDS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].signo == signo)
            return names[i].name;
    static _Thread_local char buf[48];
    if (signo < 0)
        snprintf(buf, sizeof buf, "its process exited with status %d", -signo);
    else
        snprintf(buf, sizeof buf, "signal %d", signo);
    return buf;
}
