// sort.h: distributed sample sort of 1-D keys (`dsolve sort`): local radix sort, regular-sampling
// splitters on (key, global position), one all-to-all, a pairwise merge of the received runs. The
// algorithm (sort.c) is backend-neutral; the per-backend steps are a sort_ops table (sort_cpu.c,
// sort_cuda.c). Keys map to unsigned bit patterns (sort_keys.h) so one radix path serves all types;
// where the backend's library sorts native keys in our order, the keys stay native (no mapping passes).
// provides: sort_opts, sort_plan, sort_result, sort_ops, sort_plan_init, sort_plan_free, sort_plan_grow,
//           sort_run, sort_check, sort_dtype_size, sort_dtype_name, sort_dtype_parse, sort_gen_keys,
//           sort_dist_parse, sort_threads, SORT_DIST_NAMES
#ifndef DS_SORT_H
#define DS_SORT_H

#include <stdint.h>

#include "core/ctx.h"
#include "sort/sort_keys.h"

enum sort_dist { DIST_UNIFORM, DIST_SORTED, DIST_REVERSE, DIST_EQUAL, DIST_FEW, DIST_ZIPF, DIST_GAUSS, DIST_STAGGER };
#define SORT_DIST_NAMES "uniform|sorted|reverse|equal|few-unique|zipf|gaussian|staggered"

typedef struct sort_opts {
    int dtype;
    int descending;
    int argsort;    // 1: produce the global permutation (int64 input positions of the output keys)
    int val_size;   // bytes of a payload element carried along (4 or 8), 0 for none
} sort_opts;

// One rank's input (backend memory, never modified) and the buffers of a run; grown, never shrunk, so
// that timed repeats allocate nothing once the first (warm-up) run has sized them.
typedef struct sort_plan {
    sort_opts o;
    int64_t n_local, offset, n_global;  // this rank's keys and their first global position
    const void *keys_in, *vals_in;      // [n_local] keys (native type), values (o.val_size bytes)
    void *k[2];                         // keys, width w; capacity cap
    int64_t *g[3];                      // global positions and merge positions
    void *v[2];                         // values
    int64_t cap;
    void *tmp;                          // library scratch (CUB), tmp_bytes
    size_t tmp_bytes;
    void *small;                        // samples, splitters and bounds in backend memory
    int64_t small_bytes;
    int64_t samples;                    // per rank
    int threads;                        // CPU threads for the CPU backend
    struct sort_host *h;                // host scratch of the splitter and exchange steps (sort_host.h)
} sort_plan;

typedef struct sort_result {
    const void *keys;     // [n] sorted keys of this rank (native type), in plan buffers
    const int64_t *perm;  // [n] with argsort: global input positions of those keys
    const void *vals;     // [n] with values: the payload in the same order
    int64_t n;
    double phase[4];      // seconds: local sort, splitters, exchange, merge (incl. key mapping)
    double seconds;       // the whole sort on this rank
    int path_native;      // 1: sorted by the library's own key order, no key mapping (every rank)
} sort_result;

// Per-backend steps. Key buffers hold w = 4 or 8 byte keys; "mapped" keys are unsigned (sort_keys.h).
typedef struct sort_ops {
    int native_ok;  // 1: radix takes native keys (the library's own order) and sample, bounds and
                    // merge take native keys (native = 1), mapping them on the fly
    // dst[i] = map(src[i]) (inverse: unmap); dst may equal src. Queued.
    int (*map)(ds_ctx *ctx, void *dst, const void *src, int64_t n, int dtype, int desc, int inverse);
    // *any = 1 when a float key is -0.0 or a NaN with its sign bit set (the library's own float
    // order differs from ours only there). Waits.
    int (*special)(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int dtype, int *any);
    // Stable radix sort of p->k[*sel] (n keys, w bytes) with, when pos is given, int64 values
    // p->g[pos[*sel]]. native_dtype ≥ 0: keys are of that native type (library order, desc honoured);
    // −1: mapped unsigned keys, ascending. *sel gets the buffer index holding the result.
    int (*radix)(ds_ctx *ctx, sort_plan *p, int64_t n, int w, int native_dtype, int desc, int *sel, const int pos[2]);
    int (*iota)(ds_ctx *ctx, int64_t *x, int64_t n, int64_t start);  // x[i] = start + i. Queued.
    // dst[i] = src[idx[i] − base], elements of size bytes. Queued.
    int (*gather)(ds_ctx *ctx, void *dst, const void *src, const int64_t *idx, int64_t base, int64_t n, int size);
    // In sample, bounds and merge, native = 0: the keys are mapped (unsigned, ascending); native = 1
    // (only where native_ok): they are native keys of p->o.dtype sorted by the library's order, and
    // are compared as their mapped values sk_map(key, p->o.dtype, p->o.descending).
    // Host out[k] = mapped key at position ⌊k·n/s⌋ of sorted keys, k < s, as uint64. Waits.
    int (*sample)(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int w, int native, int64_t s, uint64_t *out);
    // Host lo[i], hi[i] = first position whose mapped key is ≥ split[i], > split[i] in sorted keys. Waits.
    int (*bounds)(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int w, int native, const uint64_t *split,
                  int ns, int64_t *lo, int64_t *hi);
    // Stable merge of sorted a (na) and b (nb) into out, by mapped key; with pa/pb/pout the int64 tags
    // travel along and ties of equal keys go by tag. Queued.
    int (*merge)(ds_ctx *ctx, sort_plan *p, const void *a, int64_t na, const void *b, int64_t nb, void *out, int w,
                 int native, const int64_t *pa, const int64_t *pb, int64_t *pout);
    // Over native keys: out[0] = adjacent pairs out of order, out[1] = Σ sk_hash(mapped key),
    // out[2], out[3] = first and last mapped key (when n > 0). Waits.
    int (*check)(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int dtype, int desc, uint64_t out[4]);
    // Host dst[0 .. bytes) = backend src, after the work queued before; queued on the same queue, so
    // that a copy to the device on the copy queue runs meanwhile (the streamed sort). dst (pinned on a
    // device) may be read once the backend's queue is synced.
    int (*fetch)(ds_ctx *ctx, void *dst, const void *src, size_t bytes);
} sort_ops;


// p->tmp of at least bytes (backend memory), grown only when too small.
int sort_tmp_reserve(ds_ctx *ctx, sort_plan *p, size_t bytes);

// Grows the plan's key, position and value buffers to capacity cap, carrying over the first keep
// elements of each; on failure the plan has no buffers (cap 0).
int sort_plan_grow(ds_ctx *ctx, sort_plan *p, int64_t cap, int64_t keep);

// Sets up a plan over this rank's input (backend memory) and allocates its buffers. Collective only in
// that every rank must call it.
int sort_plan_init(ds_ctx *ctx, sort_plan *p, const sort_opts *o, const void *keys, const void *vals,
                   int64_t n_local);
void sort_plan_free(ds_ctx *ctx, sort_plan *p);

// One sort of the plan's input. Collective. The result points into the plan (valid until the next run).
int sort_run(ds_ctx *ctx, sort_plan *p, sort_result *r);

// Collective verification of a result against the plan's input: local order, order across rank
// boundaries, count and key checksum; with argsort, the permutation's count and index checksum.
// *ok gets 1 when all hold; why gets a one-line reason otherwise.
int sort_check(ds_ctx *ctx, sort_plan *p, const sort_result *r, int *ok, char *why, size_t why_len);

int sort_dtype_size(int dtype);
const char *sort_dtype_name(int dtype);
int sort_dtype_parse(const char *name);  // −1 when unknown
int sort_dist_parse(const char *name);   // −1 when unknown
int sort_threads(const ds_ctx *ctx);     // the rank's share of this node's cores

// Keys global positions i0 .. i0+n−1 of distribution dist (seeded; independent of how it is split),
// native type dtype, on threads threads.
void sort_gen_keys(int dtype, int dist, uint64_t seed, int64_t n_global, int64_t i0, int64_t n, void *out,
                   int threads);

#endif
