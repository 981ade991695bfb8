// par.c: the parallel for of par.h.
#include "core/par.h"

#include <pthread.h>

typedef struct par_part {
    par_fn fn;
    void *arg;
    int part;
    int64_t lo, hi;
} par_part;

static void *par_run(void *p)
{
    par_part *q = p;
    q->fn(q->arg, q->part, q->lo, q->hi);
    return NULL;
}

int par_for(int threads, int64_t n, int64_t min_part, par_fn fn, void *arg)
{
    int parts = threads < PAR_MAX_THREADS ? threads : PAR_MAX_THREADS;
    if (parts > n / min_part)
        parts = (int)(n / min_part);
    if (parts <= 1) {
        fn(arg, 0, 0, n);
        return 1;
    }
    pthread_t tid[PAR_MAX_THREADS];
    par_part part[PAR_MAX_THREADS];
    int started[PAR_MAX_THREADS];
    for (int t = 0; t < parts; t++) {
        part[t] = (par_part){fn, arg, t, n * t / parts, n * (t + 1) / parts};
        started[t] = pthread_create(&tid[t], NULL, par_run, &part[t]) == 0;
        if (!started[t])
            par_run(&part[t]);  // no thread to be had: do this part here
    }
    for (int t = 0; t < parts; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
    return parts;
}
