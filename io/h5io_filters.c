// h5io_filters.c: the filtered chunks that a read is about to decode, checked first. HDF5 1.10 copies a
// chunk's full size out of whatever its filters returned, so a crafted chunk that inflates to fewer bytes
// made it read heap memory past the buffer into the data: finite garbage that no later check sees (found
// by fuzzing on 2026-11-26: failures.md). libhdf5's own decoders cannot be replaced (H5Zregister refuses
// the predefined filters), so before each H5Dread of a filtered dataset every stored chunk in the rows it
// reads is fetched raw (H5Dread_chunk) and its pipeline's sizes are followed as HDF5 would decode it
// (its filter mask honoured): fletcher32 takes 4 bytes off, shuffle keeps the size, deflate is inflated
// (zlib, into a scratch of one chunk): the result must be exactly one chunk (an edge chunk that the
// dataset keeps unfiltered, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS, must be stored whole; tests in
// tests/test_h5filters.c). That costs a second read and
// inflate of compressed chunks only; unfiltered data is not touched. Filters other than these three are
// refused by the probe (h5i_check_filters), as is a filter listed twice.
// provides: h5i_check_filters, h5i_filters_check_rows, h5i_xfer_why, h5i_xfer_status
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "h5io_internal.h"

enum { FLETCHER_LEN = 4, MAX_FILTERS = 8, MAX_CD = 8 };

// The number of bytes that inflating src (n bytes) gives, counted in out (cap bytes, reused); more than
// cap − 1 is reported as cap. SIZE_MAX when src is not a whole zlib stream.
static size_t inflated_size(const unsigned char *src, size_t n, unsigned char *out, size_t cap)
{
    z_stream z = {.next_in = (Bytef *)src, .avail_in = (uInt)n};
    if (n > UINT32_MAX || inflateInit(&z) != Z_OK)
        return SIZE_MAX;
    int st = Z_OK;
    size_t total = 0;
    while (st == Z_OK) {  // the output wraps in out: only its count matters
        z.next_out = out;
        z.avail_out = (uInt)(cap < UINT32_MAX ? cap : UINT32_MAX);
        st = inflate(&z, Z_NO_FLUSH);
        total += (size_t)(z.next_out - out);
        if (total >= cap)
            break;
    }
    inflateEnd(&z);
    return total >= cap ? cap : st == Z_STREAM_END ? total : SIZE_MAX;
}

// What one stored chunk (raw, n bytes) decodes to through the pipeline (filters f[0 .. nf), decoded from
// the last), skipping the filters that mask names; SIZE_MAX when a decoder would fail. A chunk of `chunk`
// bytes comes out of deflate 4 bytes longer for each fletcher32 that sums it before it is compressed
// (below deflate in the pipeline), so deflate's output is counted up to that size and one byte more in
// scratch (chunk + 4·nf + 1 bytes). (h5i_check_filters let through only orders where nothing but
// fletcher32 is decoded before deflate, and fletcher32 only takes the last 4 bytes off: so deflate's input
// is the raw chunk's first bytes.)
static size_t decoded_size(const unsigned char *raw, size_t n, const H5Z_filter_t *f, int nf, unsigned mask,
                           unsigned char *scratch, size_t chunk)
{
    size_t size = n, after = chunk;
    for (int i = 0; i < nf && f[i] != H5Z_FILTER_DEFLATE; i++)
        after += f[i] == H5Z_FILTER_FLETCHER32 && !(mask & (1u << i)) ? FLETCHER_LEN : 0;
    for (int i = nf - 1; i >= 0 && size != SIZE_MAX; i--) {
        if (mask & (1u << i))
            continue;
        if (f[i] == H5Z_FILTER_FLETCHER32)
            size = size >= FLETCHER_LEN ? size - FLETCHER_LEN : SIZE_MAX;
        else if (f[i] == H5Z_FILTER_DEFLATE)
            size = inflated_size(raw, size, scratch, after + 1);
    }
    return size;
}

static char g_why[160];           // why the last check failed, for the reader's message
static int g_status = DS_ERR_INPUT;  // and whose fault: the file's, or the host's memory

const char *h5i_xfer_why(void)
{
    return g_why;
}

int h5i_xfer_status(void)
{
    return g_status;
}

// The check could not get n bytes: the machine's failure, not the file's (exit 1, not 3).
static int out_of_memory(size_t n)
{
    g_status = DS_ERR_RUNTIME;
    snprintf(g_why, sizeof g_why, " (out of host memory: %zu bytes to check its compressed chunks)", n);
    return 0;
}

int h5i_filters_check_rows(hid_t dset, int64_t row0, int64_t n)
{
    g_why[0] = '\0';
    g_status = DS_ERR_INPUT;
    hid_t dcpl = H5Dget_create_plist(dset), sp = H5Dget_space(dset), t = H5Dget_type(dset);
    hsize_t c[H5S_MAX_RANK] = {1, 1}, dims[H5S_MAX_RANK] = {1, 1};
    const int nf = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED ? H5Pget_nfilters(dcpl) : 0;
    const int nd = nf > 0 ? H5Pget_chunk(dcpl, H5S_MAX_RANK, c) : 0;
    const int rank = sp >= 0 ? H5Sget_simple_extent_dims(sp, dims, NULL) : -1;
    unsigned opts = 0;  // partial edge chunks stored unfiltered (H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)
    H5Z_filter_t f[MAX_FILTERS];
    int ok = dcpl >= 0 && nf <= MAX_FILTERS && (nf == 0 || H5Pget_chunk_opts(dcpl, &opts) >= 0);
    for (int i = 0; ok && i < nf; i++) {
        unsigned fl = 0, cd[MAX_CD];
        size_t ncd = MAX_CD;
        f[i] = H5Pget_filter2(dcpl, (unsigned)i, &fl, &ncd, cd, 0, NULL, NULL);
    }
    const size_t chunk = (size_t)(t >= 0 ? H5Tget_size(t) : 0) * (size_t)c[0] * (size_t)c[1];
    h5i_close_type(t);
    h5i_close_space(sp);
    h5i_close_plist(dcpl);
    if (nf == 0 || !ok)
        return ok;  // not chunked, or no filters: nothing to decode
    if (nd != rank || nd > 2 || c[0] == 0 || c[1] == 0 || chunk == 0)
        return 0;
    unsigned char *scratch = malloc(chunk + FLETCHER_LEN * MAX_FILTERS + 1), *raw = NULL;
    size_t raw_cap = 0;
    if (!scratch)
        return out_of_memory(chunk + FLETCHER_LEN * MAX_FILTERS + 1);
    const hsize_t cols = nd == 2 ? dims[1] : 1, ccols = nd == 2 ? c[1] : 1;
    for (hsize_t r = (hsize_t)row0 / c[0] * c[0]; ok && r < (hsize_t)(row0 + n); r += c[0])
        for (hsize_t q = 0; ok && q < cols; q += ccols) {
            hsize_t at[2] = {r, q}, size = 0;
            haddr_t addr = HADDR_UNDEF;
            unsigned mask = 0;
            ok = H5Dget_chunk_info_by_coord(dset, at, &mask, &addr, &size) >= 0;
            if (!ok || addr == HADDR_UNDEF)
                continue;  // a chunk never written reads as the fill value, with no decoding
            if (size > raw_cap) {
                unsigned char *more = realloc(raw, size);
                ok = more != NULL || out_of_memory((size_t)size);
                raw = ok ? more : raw, raw_cap = ok ? size : raw_cap;
            }
            uint32_t got_mask = 0;
            ok = ok && H5Dread_chunk(dset, H5P_DEFAULT, at, &got_mask, raw) >= 0;
            // an edge chunk kept unfiltered must be stored whole: HDF5 copies a chunk's size out of it
            const int raw_edge = (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) &&
                                 (r + c[0] > dims[0] || (nd == 2 && q + ccols > cols));
            const size_t out = !ok ? 0 : raw_edge ? (size_t)size
                                                  : decoded_size(raw, (size_t)size, f, nf, got_mask, scratch, chunk);
            if (ok && out != chunk) {
                ok = 0;
                if (out == SIZE_MAX)
                    snprintf(g_why, sizeof g_why, " (the chunk at row %llu does not decode: damaged)",
                             (unsigned long long)r);
                else
                    snprintf(g_why, sizeof g_why, " (the chunk at row %llu decodes to %s%zu bytes where a chunk "
                             "holds %zu: damaged)", (unsigned long long)r, out > chunk ? "more than " : "",
                             out > chunk ? chunk : out, chunk);
            }
        }
    free(raw);
    free(scratch);
    return ok;
}

int h5i_check_filters(hid_t dcpl, const char *path, const char *name, ds_msg *msg)
{
    const int nf = H5Pget_nfilters(dcpl);
    unsigned seen = 0;
    int at_deflate = -1, at_shuffle = -1;
    if (nf < 0 || nf > MAX_FILTERS)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its filters", path, name);
    for (int i = 0; i < nf; i++) {
        unsigned fl = 0, cd[MAX_CD];
        size_t ncd = MAX_CD;
        char fname[64] = "";
        H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)i, &fl, &ncd, cd, sizeof fname, fname, NULL);
        fname[sizeof fname - 1] = '\0';
        if (f < H5Z_FILTER_DEFLATE || f > H5Z_FILTER_FLETCHER32)
            return ds_fail(msg, DS_ERR_INPUT,
                           "%s: dataset %s: stored with HDF5 filter %d (%s), which dsolve does not read (it reads "
                           "gzip, shuffle and fletcher32): rewrite it, e.g. h5repack -f GZIP=4 %s out.h5",
                           path, name, (int)f, fname[0] ? fname : "unknown", path);
        if (seen & (1u << f))
            return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: filter %d appears twice in its pipeline (damaged)",
                           path, name, (int)f);
        seen |= 1u << f;
        at_deflate = f == H5Z_FILTER_DEFLATE ? i : at_deflate;
        at_shuffle = f == H5Z_FILTER_SHUFFLE ? i : at_shuffle;
    }
    if (at_deflate >= 0 && at_shuffle > at_deflate)  // shuffled after compression: not what writers do
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: shuffle applied after deflate, an order dsolve does not "
                       "read: rewrite it, e.g. h5repack -f SHUF -f GZIP=4 %s out.h5", path, name, path);
    return DS_OK;
}
