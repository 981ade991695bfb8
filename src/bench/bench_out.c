// bench_out.c: `dsolve bench`'s output: the table (nccl-tests style: '#' headers with units, a
// correctness column, an OK/FAILED footer), CSV, the --json object (core/json.h's writer), the crossover
// and the SVG plot.
// provides: bench_dtype, bench_out_header, bench_out_row, bench_out_footer, bench_out_csv, bench_out_json,
//           bench_crossover, bench_out_svg
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/plot.h"
#include "core/json.h"

double bench_crossover(const bench_row *rows, int n)
{
    double from = NAN;
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        if (!isfinite(r->cpu_s) || !isfinite(r->gpu_s))
            continue;
        if (r->gpu_s < r->cpu_s) {
            if (isnan(from))
                from = (double)r->size;
        } else {
            from = NAN;  // the CPU wins again here: the GPU has not won for good yet
        }
    }
    return from;
}

const char *bench_dtype(const bench_run *b, const bench_case *c)
{
    return c->dtype ? c->dtype : b->f32 ? "f32" : "f64";
}

static void describe_run(const bench_run *b, const bench_case *cs, char *buf, size_t len)
{
    const ds_ctx *c = &b->cpu;
    int used = snprintf(buf, len, "%s, %d rank%s (%s scaling), CPU: OpenBLAS %d thread%s per rank; ", bench_dtype(b, cs),
                        c->nranks, c->nranks > 1 ? "s" : "", b->weak ? "weak" : "strong", b->threads,
                        b->threads > 1 ? "s" : "");
    if (b->have_gpu)
        snprintf(buf + used, len - (size_t)used, "GPU: %d x %s", c->nranks, b->gpu.device_name);
    else
        snprintf(buf + used, len - (size_t)used, "GPU: none, CPU only (%s)", b->gpu_note);
}

static void put_val(FILE *f, double v, double scale, int width)
{
    if (isfinite(v) && fabs(v * scale) >= 1e5 && fabs(v * scale) < 1e12)
        fprintf(f, " %*.0f", width, v * scale);
    else if (isfinite(v))
        fprintf(f, " %*.4g", width, v * scale);
    else
        fprintf(f, " %*s", width, "-");
}

void bench_out_header(const bench_run *b, const bench_case *c, FILE *f)
{
    char run[512];
    describe_run(b, c, run, sizeof run);
    fprintf(f, "# dsolve bench %s: %s\n", c->name, run);
    fprintf(f, "# median of %d calls after %d warm-up; %s\n", b->repeat, b->warmup,
            b->include_transfer ? "GPU time includes host<->device copies"
            : c->timing         ? c->timing
                                : "GPU time by device events, data resident");
    if (c->ref_label[0] && b->have_gpu)
        fprintf(f, "# ref: %s\n", c->ref_label);
    fprintf(f, "#\n# %10s %22s %9s %10s %9s %10s %8s %9s %10s %7s %9s %9s %8s %9s %7s %7s %9s %9s %7s %7s %7s\n", c->size_label,
            "shape", "cpu_time", "cpu_rate", "gpu_time", "gpu_rate", "speedup", "ref_time", "ref_rate", "of_ref",
            "bcast", "peer", "vs_peer", "max_err", "tol", "#wrong", "rss_peak", "gpu_mem", "cpu_use", "gpu_use",
            "wall");
    fprintf(f, "# %10s %22s %9s %10s %9s %10s %8s %9s %10s %7s %9s %9s %8s %9s %7s %7s %9s %9s %7s %7s %7s\n", "", "", "(ms)",
            c->unit, "(ms)", c->unit, "(x)", "(ms)", c->unit, "(%)", "(ms)", "(ms)", "(x)", "", "", "", "(MiB)",
            "(MiB)", "(%)", "(%)", "(s)");
}

void bench_out_row(const bench_run *b, const bench_case *c, const bench_row *r, FILE *f)
{
    fprintf(f, "  %10lld %22s", (long long)r->size, r->shape);
    put_val(f, r->cpu_s, 1e3, 9);
    put_val(f, r->cpu_rate, 1, 10);
    put_val(f, r->gpu_s, 1e3, 9);
    put_val(f, r->gpu_rate, 1, 10);
    put_val(f, r->speedup, 1, 8);
    put_val(f, r->ref_s, 1e3, 9);
    put_val(f, r->ref_rate, 1, 10);
    put_val(f, r->of_ref, 100, 7);
    put_val(f, r->bcast_s, 1e3, 9);
    put_val(f, r->peer_s, 1e3, 9);
    put_val(f, r->peer_ratio, 1, 8);
    fprintf(f, " %9.2e %7.0e %7lld", r->err, r->tol, (long long)r->wrong);
    put_val(f, r->rss_peak, 1.0 / (1 << 20), 9);
    put_val(f, r->gpu_mem_peak, 1.0 / (1 << 20), 9);
    put_val(f, r->cpu_use, 1, 7);
    put_val(f, r->gpu_use, 1, 7);
    put_val(f, r->wall_s, 1, 7);
    fprintf(f, "%s\n", r->wrong > 0 || !(r->err <= r->tol) ? "  FAILED" : "");
    fflush(f);
}

void bench_out_footer(const bench_run *b, const bench_result *res, FILE *f)
{
    const bench_case *c = res->c;
    if (!b->have_gpu)
        fprintf(f, "# %s: CPU only, no crossover (%s)\n", c->name, b->gpu_note);
    else if (c->variant && c->variant(b, 1))
        fprintf(f, "# %s: no crossover across variants (one row per size and variant)\n", c->name);
    else if (isfinite(res->crossover))
        fprintf(f, "# %s: crossover: the GPU is faster from %s = %.0f on\n", c->name, c->size_label, res->crossover);
    else
        fprintf(f, "# %s: crossover: none (the GPU is not faster at the largest size timed on both)\n", c->name);
    int64_t wrong = 0;
    for (int i = 0; i < res->nrows; i++)
        wrong += res->rows[i].wrong;
    const char *what = res->nrows ? res->rows[0].check : "";
    if (res->failed)
        fprintf(f, "# %s: check (%s): FAILED in %d of %d sizes, %lld wrong elements\n", c->name, what, res->failed,
                res->nrows, (long long)wrong);
    else
        fprintf(f, "# %s: check (%s): OK, %d sizes, 0 wrong\n", c->name, what, res->nrows);
    fprintf(f, "#\n");
    fflush(f);
}

// ---------------------------------------------------------------------------------------------------
// CSV and JSON

static void csv_val(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, ",%.9g", v);
    else
        fputs(",", f);
}

void bench_out_csv(const bench_run *b, const bench_result *res, int nres, FILE *f)
{
    fprintf(f, "case,size,shape,unit,work,cpu_s,cpu_rate,gpu_s,gpu_rate,speedup,ref_s,ref_rate,of_ref,bcast_s,peer_s,"
               "peer_ratio,max_err,tol,wrong,ok,rss_peak_bytes,gpu_mem_peak_bytes,cpu_use_pct,gpu_use_pct,wall_s\n");
    for (int i = 0; i < nres; i++)
        for (int k = 0; k < res[i].nrows; k++) {
            const bench_row *r = &res[i].rows[k];
            fprintf(f, "%s,%lld,%s,%s", res[i].c->name, (long long)r->size, r->shape, res[i].c->unit);
            const double v[] = {r->work,     r->cpu_s,   r->cpu_rate, r->gpu_s,   r->gpu_rate,   r->speedup,
                                r->ref_s,    r->ref_rate, r->of_ref,  r->bcast_s, r->peer_s,     r->peer_ratio,
                                r->err,      r->tol};
            for (size_t j = 0; j < sizeof v / sizeof v[0]; j++)
                csv_val(f, v[j]);
            fprintf(f, ",%lld,%d", (long long)r->wrong, !(r->wrong > 0 || !(r->err <= r->tol)));
            const double w[] = {r->rss_peak, r->gpu_mem_peak, r->cpu_use, r->gpu_use, r->wall_s};
            for (size_t j = 0; j < sizeof w / sizeof w[0]; j++)
                csv_val(f, w[j]);
            fputc('\n', f);
        }
    fflush(f);
}

static void json_row(ds_json *j, const bench_row *r)
{
    json_object(j, NULL);
    json_num(j, "size", (double)r->size);
    json_str(j, "shape", r->shape);
    const struct {
        const char *k;
        double v;
    } nums[] = {{"work", r->work},         {"cpu_seconds", r->cpu_s},  {"cpu_rate", r->cpu_rate},
                {"gpu_seconds", r->gpu_s}, {"gpu_rate", r->gpu_rate},  {"speedup", r->speedup},
                {"ref_seconds", r->ref_s}, {"ref_rate", r->ref_rate},  {"of_ref", r->of_ref},
                {"bcast_seconds", r->bcast_s}, {"peer_seconds", r->peer_s}, {"peer_ratio", r->peer_ratio},
                {"max_err", r->err},       {"tol", r->tol},            {"wrong", (double)r->wrong},
                {"rss_peak_bytes", r->rss_peak}, {"gpu_mem_peak_bytes", r->gpu_mem_peak},
                {"cpu_use_pct", r->cpu_use}, {"gpu_use_pct", r->gpu_use}, {"wall_seconds", r->wall_s}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        json_num(j, nums[i].k, nums[i].v);
    json_str(j, "check", r->check);
    json_bool(j, "ok", !(r->wrong > 0 || !(r->err <= r->tol)));
    json_close(j);
}

static void json_case(const bench_run *b, ds_json *j, const bench_result *res)
{
    json_object(j, NULL);
    json_str(j, "case", res->c->name);
    json_str(j, "unit", res->c->unit);
    json_str(j, "size_label", res->c->size_label);
    json_str(j, "dtype", bench_dtype(b, res->c));
    json_str(j, "ref", res->c->ref_label);
    json_num(j, "crossover", res->crossover);
    json_num(j, "failed", res->failed);
    json_array(j, "rows");
    for (int k = 0; k < res->nrows; k++)
        json_row(j, &res->rows[k]);
    json_close(j);
    json_close(j);
}

void bench_out_json(const bench_run *b, const bench_result *res, int nres, FILE *f)
{
    int failed = 0;
    for (int i = 0; i < nres; i++)
        failed += res[i].failed;
    ds_json j;
    json_begin(&j);
    json_str(&j, "command", "bench");
    json_num(&j, "ranks", b->cpu.nranks);
    json_str(&j, "dtype", b->f32 ? "f32" : "f64");
    json_str(&j, "scaling", b->weak ? "weak" : "strong");
    json_num(&j, "repeat", b->repeat);
    json_num(&j, "warmup", b->warmup);
    json_num(&j, "include_transfer", b->include_transfer);
    json_num(&j, "threads_per_rank", b->threads);
    json_num(&j, "gpus", b->have_gpu ? b->cpu.nranks : 0);
    json_str(&j, "device_name", b->have_gpu ? b->gpu.device_name : "");
    json_str(&j, "gpu_note", b->gpu_note);
    json_bool(&j, "ok", !failed);
    json_array(&j, "cases");
    for (int i = 0; i < nres; i++)
        json_case(b, &j, &res[i]);
    json_close(&j);
    json_end(&j, f);
}

// ---------------------------------------------------------------------------------------------------
// The plot

int bench_out_svg(const bench_run *b, const bench_result *res, const char *path, int several, ds_msg *msg)
{
    char file[4200], title[256], ref[160];
    const char *dot = strrchr(path, '.');
    if (several && dot && !strchr(dot, '/'))
        snprintf(file, sizeof file, "%.*s-%s%s", (int)(dot - path), path, res->c->name, dot);
    else if (several)
        snprintf(file, sizeof file, "%s-%s", path, res->c->name);
    else
        snprintf(file, sizeof file, "%s", path);
    int n = res->nrows;
    double *v = calloc((size_t)(5 * (n > 0 ? n : 1)), sizeof(double));
    if (!v)
        return ds_fail(msg, DS_ERR_RUNTIME, "out of host memory");
    double *x = v, *cpu = v + n, *gpu = v + 2 * n, *refs = v + 3 * n, *peer = v + 4 * n;
    for (int i = 0; i < n; i++) {
        x[i] = (double)res->rows[i].size;
        cpu[i] = res->rows[i].cpu_s, gpu[i] = res->rows[i].gpu_s;
        refs[i] = res->rows[i].ref_s, peer[i] = res->rows[i].peer_s;
    }
    snprintf(title, sizeof title, "dsolve bench %s (%s, %d rank%s%s)", res->c->name, bench_dtype(b, res->c),
             b->cpu.nranks, b->cpu.nranks > 1 ? "s" : "", b->have_gpu ? "" : ", CPU only");
    snprintf(ref, sizeof ref, "GPU ref: %.40s", res->c->ref_label);
    ds_series s[4] = {{"CPU (OpenBLAS)", x, cpu, n, 0}, {"GPU", x, gpu, n, 0}};
    int ns = b->have_gpu ? 2 : 1;
    if (b->have_gpu && res->c->ref_label[0])
        s[ns++] = (ds_series){ref, x, refs, n, 0};
    if (b->peer)
        s[ns++] = (ds_series){"peer (seed code)", x, peer, n, 0};
    int rc = plot_svg(file, title, res->c->size_label, "time per call (s)", 1, 1, s, ns, msg);
    free(v);
    return rc;
}
