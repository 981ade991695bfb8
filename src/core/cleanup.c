// cleanup.c: a fixed table of paths that the signal handler may read at any moment: a slot's path is
// written before its flag is set, and its flag cleared before the path is reused; unlink and raise are
// async-signal-safe.
#include "core/cleanup.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CLEANUP_SLOTS 16
#define CLEANUP_PATH 4200

static char cleanup_paths[CLEANUP_SLOTS][CLEANUP_PATH];
static volatile sig_atomic_t cleanup_used[CLEANUP_SLOTS];

static void cleanup_on_signal(int sig)
{
    for (int i = 0; i < CLEANUP_SLOTS; i++)
        if (cleanup_used[i])
            unlink(cleanup_paths[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

static volatile sig_atomic_t cleanup_noted;

static void cleanup_note(int sig)
{
    cleanup_noted = sig;
}

void cleanup_defer(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = cleanup_note;
    sigfillset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

int cleanup_pending(void)
{
    return cleanup_noted;
}

void cleanup_install(void)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = cleanup_on_signal;
    sigfillset(&sa.sa_mask);  // one handler at a time
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

int cleanup_add(const char *path)
{
    for (int i = 0; i < CLEANUP_SLOTS; i++)
        if (!cleanup_used[i]) {
            snprintf(cleanup_paths[i], CLEANUP_PATH, "%s", path);
            cleanup_used[i] = 1;
            return 0;
        }
    return -1;
}

void cleanup_remove(const char *path)
{
    for (int i = 0; i < CLEANUP_SLOTS; i++)
        if (cleanup_used[i] && strcmp(cleanup_paths[i], path) == 0)
            cleanup_used[i] = 0;
}

// ---------------------------------------------------------------------------------------------------
// Crashes inside reads of a file's data

static const int crash_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static const char *const crash_names[] = {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"};
#define CRASH_SIGS ((int)(sizeof crash_sigs / sizeof crash_sigs[0]))
static struct sigaction crash_old[CRASH_SIGS];  // the handlers before the first scope
static _Thread_local const char *volatile crash_path;
static pthread_once_t crash_once = PTHREAD_ONCE_INIT;

static void say(const char *s)
{
    for (size_t n = strlen(s); n > 0;) {
        const ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0)
            return;
        s += w, n -= (size_t)w;
    }
}

static void crash_on_signal(int sig, siginfo_t *info, void *uc)
{
    int i = 0;
    while (i < CRASH_SIGS - 1 && crash_sigs[i] != sig)
        i++;
    const char *path = crash_path;
    if (path) {
        for (int k = 0; k < CLEANUP_SLOTS; k++)
            if (cleanup_used[k])
                unlink(cleanup_paths[k]);
        say("dsolve: "), say(path), say(": the HDF5 library crashed reading its data ("), say(crash_names[i]);
        say("): a damaged or crafted file\n");
        _exit(3);
    }
    const struct sigaction *o = &crash_old[i];
    if (o->sa_flags & SA_SIGINFO) {
        o->sa_sigaction(sig, info, uc);
    } else if (o->sa_handler == SIG_DFL) {
        signal(sig, SIG_DFL);  // a fault re-raises when the handler returns; a raised signal is delivered then
        raise(sig);
    } else if (o->sa_handler != SIG_IGN) {
        o->sa_handler(sig);
    }
}

static void crash_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = crash_on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigfillset(&sa.sa_mask);
    for (int i = 0; i < CRASH_SIGS; i++)
        sigaction(crash_sigs[i], &sa, &crash_old[i]);
}

void cleanup_crash_scope(const char *path)
{
    if (path)
        pthread_once(&crash_once, crash_install);
    crash_path = path;
}
