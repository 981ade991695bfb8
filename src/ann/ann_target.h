// ann_target.h: the map from y to the network's two targets (ann.c's targets, and ann_stream.c's row
// sources, which apply it to each chunk as it is read): z = arctanh of y mapped into
// [−ANN_TARGET, ANN_TARGET] for the hidden fits, tc = (y − mid-range) / half-range for the output layer.
// With classes both are the labels. The same expressions in both places: the same bits.
// provides: ann_ymap, ann_ymap_make, ann_z_of, ann_tc_of
#ifndef DS_ANN_TARGET_H
#define DS_ANN_TARGET_H

#include <math.h>

#include "ann/ann_types.h"

typedef struct ann_ymap {
    int classes, map;           // map: y is mapped linearly (it leaves [−ANN_TARGET, ANN_TARGET])
    double glo, y_scale;        // z's map: y_scale·(y − glo) − ANN_TARGET
    double tc_shift, tc_scale;  // y = tc_scale·tc + tc_shift
    double tc_max;              // the largest |tc| of any row (1 with classes: one-hot targets)
} ann_ymap;

static inline double ann_tc_of(const ann_ymap *t, double y)
{
    return t->classes ? y : (y - t->tc_shift) / t->tc_scale;
}

// The map from y's global least and largest values (exact over the ranks, as a sum would not be: tc's
// shift is their midpoint, not y's mean, so that the targets are the same bits on any rank count); the
// model's y_scale and y_shift. Returns 0 when y is constant (nothing to fit).
static inline int ann_ymap_make(double glo, double ghi, int classes, ann_ymap *t, ann_model *m)
{
    *t = (ann_ymap){.classes = classes, .y_scale = 1, .tc_scale = 1, .tc_max = 1};
    m->y_scale = 1, m->y_shift = 0;
    if (classes)
        return 1;
    if (!(ghi > glo))
        return 0;
    t->map = glo < -ANN_TARGET || ghi > ANN_TARGET;
    t->glo = glo;
    if (t->map) {
        m->y_scale = t->y_scale = 2 * ANN_TARGET / (ghi - glo);
        m->y_shift = -ANN_TARGET - m->y_scale * glo;
    }
    t->tc_shift = 0.5 * glo + 0.5 * ghi;
    t->tc_scale = 0.5 * (ghi - glo);
    // Rounding keeps the map monotonic: the extremes of tc are those of y's (1 or a rounding more).
    t->tc_max = fmax(fabs(ann_tc_of(t, glo)), fabs(ann_tc_of(t, ghi)));
    return 1;
}

static inline double ann_z_of(const ann_ymap *t, double y)
{
    if (t->classes)
        return y;
    double u = t->map ? t->y_scale * (y - t->glo) - ANN_TARGET : y;
    u = u < -ANN_TARGET ? -ANN_TARGET : u > ANN_TARGET ? ANN_TARGET : u;
    return atanh(u);
}

#endif
