// stats.h: small statistics of repeated timings.
// provides: ds_median
#ifndef DS_STATS_H
#define DS_STATS_H

// The median of v[0 .. n−1] (n ≥ 1); v is left as it was. NaN when n < 1 or out of memory.
double ds_median(const double *v, int n);

#endif
