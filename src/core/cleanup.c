// cleanup.c: a fixed table of paths that the signal handler may read at any moment: a slot's path is
// written before its flag is set, and its flag cleared before the path is reused; unlink and raise are
// async-signal-safe.
#include "core/cleanup.h"

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
