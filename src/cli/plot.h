// plot.h: small SVG line plots (no library): series of points on linear or log axes, written to a
// temporary file and renamed when complete.
// provides: ds_series, plot_svg
#ifndef DS_PLOT_H
#define DS_PLOT_H

#include <stdint.h>

#include "core/err.h"

typedef struct ds_series {
    const char *label;
    const double *x, *y;  // n points; points with a non-finite (or, on a log axis, non-positive) value are skipped
    int64_t n;
    int points;  // 1: a dot per point (a scatter) instead of a line through them
} ds_series;

// Writes path: a title, axis labels, up to 6 series; logx/logy select log10 axes.
int plot_svg(const char *path, const char *title, const char *xlabel, const char *ylabel, int logx, int logy,
             const ds_series *series, int nseries, ds_msg *msg);

#endif
