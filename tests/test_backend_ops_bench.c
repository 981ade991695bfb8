// test_backend_ops_bench.c: test_backend_ops's cases of bench_ops (bench/bench.h): gemm (within rounding),
// add and bcast (exact), against the CPU backend (gpu mode) or the loops here. gemm_alone and copy_alone
// are timings of the vendor library, not operations of ours.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"
#include "bench/bench.h"

static const int64_t sizes[] = {0, 1, 3, 17, 130, 1001};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

static void to_double(const void *x, int f32, int64_t n, double *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = f32 ? ((const float *)x)[i] : ((const double *)x)[i];
}

static int gemm_on(ds_ctx *c, const ops_arr *A, const ops_arr *B, int64_t m, int64_t n, int64_t k, double *out)
{
    ops_mem mm = {c}, h = {NULL};
    const size_t cb = (size_t)(m * n) * (A->f32 ? 4 : 8);
    const void *a = ops_put(&mm, A->raw, ops_arr_bytes(A)), *b = ops_put(&mm, B->raw, ops_arr_bytes(B));
    void *d = ops_new(&mm, cb), *raw = ops_new(&h, cb);
    int rc = ops_ran(c, c->be->bench->gemm(c, A->f32, m, n, k, a, b, d), "bench.gemm");
    ops_get(&mm, raw, d, cb);
    to_double(raw, A->f32, m * n, out);
    ops_release(&mm);
    ops_release(&h);
    return rc;
}

// C = A·B; each entry's scale is (|A|·|B|)_ij, tol 2·k·u.
void case_bench_gemm(ops_run *r)
{
    const int64_t shapes[][3] = {{1, 1, 1}, {3, 17, 5}, {17, 130, 33}, {130, 67, 1001}, {0, 5, 3}, {5, 0, 3}};
    for (int s = 0; s < 6; s++)
        for (int f32 = 0; f32 <= 1; f32++) {
            const int64_t m = shapes[s][0] ? ops_dim(r, shapes[s][0]) : 0,
                          n = shapes[s][1] ? ops_dim(r, shapes[s][1]) : 0;
            const int64_t k = ops_dim(r, shapes[s][2]);
            ops_mem h = {NULL};
            ops_arr A, B;
            ops_arr_make(r, &h, m * k, f32, -0.5, 0.5, 1, &A);
            ops_arr_make(r, &h, k * n, f32, -0.5, 0.5, 1, &B);
            double *got = ops_new(&h, (size_t)(m * n) * 8), *want = ops_new(&h, (size_t)(m * n) * 8);
            double *scale = ops_new(&h, (size_t)(m * n) * 8);
            ops_abs_product(A.d, k, B.d, n, m, n, k, scale);
            int st = gemm_on(r->dut, &A, &B, m, n, k, got);
            if (r->cpu) {
                st |= gemm_on(r->cpu, &A, &B, m, n, k, want);
            } else {
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++)
                        for (int64_t l = 0; l < k; l++)
                            want[i * n + j] += A.d[i * k + l] * B.d[l * n + j];
            }
            char shape[64];
            snprintf(shape, sizeof shape, "%lld x %lld x %lld", (long long)m, (long long)n, (long long)k);
            ops_report(r, "bench.gemm", shape, ops_dtype_name(f32), ops_err_each(got, want, scale, m * n),
                       2.0 * (double)k * ops_unit(f32), st);
            ops_release(&h);
        }
}

static int add_on(ds_ctx *c, const ops_arr *a, const ops_arr *b, void *out)
{
    ops_mem m = {c};
    const void *x = ops_put(&m, a->raw, ops_arr_bytes(a)), *y = ops_put(&m, b->raw, ops_arr_bytes(b));
    void *z = ops_new(&m, ops_arr_bytes(a));
    int rc = ops_ran(c, c->be->bench->add(c, a->f32, a->n, x, y, z), "bench.add");
    ops_get(&m, out, z, ops_arr_bytes(a));
    ops_release(&m);
    return rc;
}

// c = a + b, one rounding: exact.
void case_bench_add(ops_run *r)
{
    for (int s = 0; s < NSIZES + 1; s++)
        for (int f32 = 0; f32 <= 1; f32++) {
            const int64_t n = s < NSIZES ? ops_dim(r, sizes[s]) : 130001;
            ops_mem h = {NULL};
            ops_arr a, b;
            ops_arr_make(r, &h, n, f32, -1, 1, 1, &a);
            ops_arr_make(r, &h, n, f32, -1e3, 1e3, 1, &b);
            void *got = ops_new(&h, ops_arr_bytes(&a)), *want = ops_new(&h, ops_arr_bytes(&a));
            int st = add_on(r->dut, &a, &b, got);
            if (r->cpu) {
                st |= add_on(r->cpu, &a, &b, want);
            } else {
                for (int64_t i = 0; i < n; i++) {
                    if (f32)
                        ((float *)want)[i] = (float)a.d[i] + (float)b.d[i];
                    else
                        ((double *)want)[i] = a.d[i] + b.d[i];
                }
            }
            char shape[64];
            snprintf(shape, sizeof shape, "n %lld", (long long)n);
            ops_report(r, "bench.add", shape, ops_dtype_name(f32), ops_err_bytes(got, want, n, f32 ? 4 : 8), 0, st);
            ops_release(&h);
        }
}

static int bcast_on(ds_ctx *c, const uint8_t *init, int64_t bytes, int root, uint8_t *out)
{
    ops_mem m = {c};
    uint8_t *b = ops_put(&m, init, (size_t)bytes);
    int rc = ops_ran(c, c->be->bench->bcast(c, b, (size_t)bytes, root), "bench.bcast");
    ops_get(&m, out, b, (size_t)bytes);
    ops_release(&m);
    return rc;
}

// Every rank ends with the root's bytes.
void case_bench_bcast(ops_run *r)
{
    for (int s = 0; s < NSIZES + 1; s++)
        for (int last = 0; last <= 1; last++) {
            const int64_t bytes = s < NSIZES ? ops_dim(r, sizes[s]) : ((int64_t)1 << 20) + 3;
            const int root = last ? r->nranks - 1 : 0;
            const uint64_t stream = ops_stream(r);
            ops_mem h = {NULL};
            uint8_t *init = ops_new(&h, (size_t)bytes), *got = ops_new(&h, (size_t)bytes);
            uint8_t *want = ops_new(&h, (size_t)bytes);
            for (int64_t i = 0; i < bytes; i++) {
                init[i] = (uint8_t)ops_bits(r, stream, r->rank, i);
                want[i] = (uint8_t)ops_bits(r, stream, root, i);
            }
            int st = bcast_on(r->dut, init, bytes, root, got);
            if (r->cpu)
                st |= bcast_on(r->cpu, init, bytes, root, want);
            char shape[64];
            snprintf(shape, sizeof shape, "%lld bytes from rank %d", (long long)bytes, root);
            ops_report(r, "bench.bcast", shape, "u8", ops_err_bytes(got, want, bytes, 1), 0, st);
            ops_release(&h);
        }
}

