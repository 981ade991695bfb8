// sort_host.h: the host scratch of a sort plan (samples, splitters, exchange counts), allocated with the
// plan (sort_plan.c) and used by the splitter and exchange steps (sort.c). Private to src/sort/.
// provides: sample, sort_host
#ifndef DS_SORT_HOST_H
#define DS_SORT_HOST_H

#include <stdint.h>

typedef struct sample {
    uint64_t key;
    int64_t tag;  // global position the sample stands for: offset of its rank + its sorted position
    int rank;
} sample;

typedef struct sort_host {
    uint64_t *mine, *all;  // [S], [p·S] sample keys
    sample *smp;           // [p·S]
    int64_t *n_all, *used, *pos_bnd;  // [p], [p], [p + 1]
    int *cnt, *dsp;                   // [p] allgatherv counts and displacements
    int64_t *sc, *sd, *rc, *rd, *scb, *sdb, *rcb, *rdb;  // [p] element and byte counts/displacements
    int64_t *s2, *r2;                 // [2p] (count, head) pairs of the exchange
    uint64_t *skey;                   // [p] splitters
    int64_t *stag, *lo, *hi, *roff, *rlen;  // [p]
} sort_host;

#endif
