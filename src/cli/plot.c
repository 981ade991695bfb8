// plot.c: SVG line plots (see plot.h). Ticks at powers of ten on log axes, at 5 even steps on linear.
#include "cli/plot.h"

#include <errno.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/ctx.h"

enum { W = 760, H = 440, ML = 80, MR = 210, MT = 40, MB = 60 };  // size and margins, pixels

static const char *plot_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

typedef struct axis {
    double lo, hi;
    int log;
} axis;

static int plot_usable(double v, int log) { return isfinite(v) && (!log || v > 0); }

static double axis_pos(const axis *a, double v)
{
    double t = a->log ? log10(v) : v;
    return a->hi > a->lo ? (t - a->lo) / (a->hi - a->lo) : 0.5;
}

// The range of the usable values on one axis, in axis units (log10 on a log axis), widened to whole
// decades on log axes and never empty.
static axis plot_axis(const ds_series *s, int ns, int use_y, int log)
{
    axis a = {INFINITY, -INFINITY, log};
    for (int k = 0; k < ns; k++)
        for (int64_t i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!plot_usable(x, 0) || !plot_usable(y, 0) || (use_y ? !plot_usable(y, log) : !plot_usable(x, log)))
                continue;
            double v = use_y ? y : x;
            v = log ? log10(v) : v;
            a.lo = fmin(a.lo, v);
            a.hi = fmax(a.hi, v);
        }
    if (!(a.lo <= a.hi))
        a.lo = 0, a.hi = 1;
    if (log)
        a.lo = floor(a.lo), a.hi = ceil(a.hi);
    if (a.hi - a.lo < 1e-12)
        a.lo -= 0.5, a.hi += 0.5;
    return a;
}

static void plot_ticks(FILE *f, const axis *a, int vertical)
{
    int steps = a->log ? (int)(a->hi - a->lo) : 5;
    int every = steps > 10 ? (steps + 9) / 10 : 1;
    for (int i = 0; i <= steps; i += every) {
        double t = a->lo + (a->hi - a->lo) * i / (steps > 0 ? steps : 1);
        double p = (t - a->lo) / (a->hi - a->lo);
        char label[32];
        if (a->log)
            snprintf(label, sizeof label, "1e%d", (int)lround(t));
        else
            snprintf(label, sizeof label, "%.4g", t);
        if (vertical) {
            double y = MT + (1 - p) * (H - MT - MB);
            fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>\n", ML, y, W - MR, y);
            fprintf(f, "<text x='%d' y='%.1f' text-anchor='end' font-size='12'>%s</text>\n", ML - 6, y + 4, label);
        } else {
            double x = ML + p * (W - ML - MR);
            fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#ddd'/>\n", x, MT, x, H - MB);
            fprintf(f, "<text x='%.1f' y='%d' text-anchor='middle' font-size='12'>%s</text>\n", x, H - MB + 18, label);
        }
    }
}

static void plot_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
}

static void plot_series(FILE *f, const ds_series *s, int k, const axis *ax, const axis *ay)
{
    const char *color = plot_colors[k % 6];
    if (!s->points)
        fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='", color);
    else
        fprintf(f, "<g fill='%s' fill-opacity='0.5'>\n", color);
    for (int64_t i = 0; i < s->n; i++) {
        if (!plot_usable(s->x[i], ax->log) || !plot_usable(s->y[i], ay->log))
            continue;
        double px = ML + axis_pos(ax, s->x[i]) * (W - ML - MR), py = MT + (1 - axis_pos(ay, s->y[i])) * (H - MT - MB);
        fprintf(f, s->points ? "<circle cx='%.1f' cy='%.1f' r='2'/>\n" : "%.1f,%.1f ", px, py);
    }
    fputs(s->points ? "</g>\n" : "'/>\n", f);
    fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='%s' stroke-width='2'/>\n", W - MR + 12,
            MT + 14 + 20 * k, W - MR + 32, MT + 14 + 20 * k, color);
    fprintf(f, "<text x='%d' y='%d' font-size='12'>", W - MR + 38, MT + 18 + 20 * k);
    plot_text(f, s->label);
    fputs("</text>\n", f);
}

int plot_svg(const char *path, const char *title, const char *xlabel, const char *ylabel, int logx, int logy,
             const ds_series *series, int nseries, ds_msg *msg)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.part.%llx", path, ctx_process_tag());  // as h5io_part_name
    cleanup_add(tmp);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        cleanup_remove(tmp);
        return ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot write the plot", path);
    }
    axis ax = plot_axis(series, nseries, 0, logx), ay = plot_axis(series, nseries, 1, logy);
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif'>\n", W, H);
    fprintf(f, "<rect width='100%%' height='100%%' fill='white'/>\n<text x='%d' y='24' font-size='15'>", ML);
    plot_text(f, title);
    fputs("</text>\n", f);
    plot_ticks(f, &ax, 0);
    plot_ticks(f, &ay, 1);
    fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#333'/>\n", ML, MT, W - ML - MR,
            H - MT - MB);
    fprintf(f, "<text x='%d' y='%d' text-anchor='middle' font-size='13'>", (ML + W - MR) / 2, H - 16);
    plot_text(f, xlabel);
    fprintf(f, "</text>\n<text x='18' y='%d' text-anchor='middle' font-size='13' transform='rotate(-90 18 %d)'>",
            (MT + H - MB) / 2, (MT + H - MB) / 2);
    plot_text(f, ylabel);
    fputs("</text>\n", f);
    for (int k = 0; k < nseries; k++)
        plot_series(f, &series[k], k, &ax, &ay);
    fputs("</svg>\n", f);
    int bad = ferror(f) ? errno : 0;
    if (fclose(f) != 0 && !bad)
        bad = errno;
    if (!bad && rename(tmp, path) != 0)
        bad = errno;
    cleanup_remove(tmp);
    if (bad) {
        remove(tmp);
        return ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot write the plot: %s", path, strerror(bad));
    }
    return DS_OK;
}
