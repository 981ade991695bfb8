// idx.c: the IDX reader (see idx.h). zlib's gz* functions read gzip and plain files alike; a rank
// skips to its block (decompressing what lies before it) and converts bytes as they arrive.
#include "idx.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

enum { IDX_TYPE_UBYTE = 0x08, IDX_CHUNK = 1 << 20 };

static int idx_open(const char *path, gzFile *gz, ds_msg *msg)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: %s", path, errno == ENOENT ? "no such file" : strerror(errno));
    if (S_ISDIR(st.st_mode))
        return ds_fail(msg, DS_ERR_INPUT, "%s: is a directory, expected an IDX file", path);
    *gz = gzopen(path, "rb");
    if (!*gz)
        return ds_fail(msg, errno == ENOMEM ? DS_ERR_RUNTIME : DS_ERR_INPUT, "%s: cannot open: %s", path,
                       errno ? strerror(errno) : "out of memory");
    gzbuffer(*gz, 1 << 18);
    return DS_OK;
}

// The failure behind a short or failed gzread: a damaged gzip stream, one that ends early, or data
// that ends before the header's count (what names where the data ended).
static int idx_read_error(gzFile gz, const char *path, const char *what, ds_msg *msg)
{
    int zerr = Z_OK;
    const char *text = gzerror(gz, &zerr);
    if (zerr == Z_DATA_ERROR)
        return ds_fail(msg, DS_ERR_INPUT, "%s: corrupt gzip data (%s)", path, text);
    if (zerr == Z_BUF_ERROR)
        return ds_fail(msg, DS_ERR_INPUT, "%s: truncated gzip stream (%s) %s", path, text, what);
    if (zerr == Z_ERRNO)
        return ds_fail(msg, DS_ERR_INPUT, "%s: read error: %s", path, strerror(errno));
    if (zerr == Z_MEM_ERROR)
        return ds_fail(msg, DS_ERR_RUNTIME, "%s: out of memory decompressing", path);
    return ds_fail(msg, DS_ERR_INPUT, "%s: truncated: the data ends %s", path, what);
}

// Reads exactly n bytes; a short read is an error described by what.
static int idx_read_exact(gzFile gz, const char *path, void *buf, unsigned n, const char *what, ds_msg *msg)
{
    int got = gzread(gz, buf, n);
    if (got != (int)n)
        return idx_read_error(gz, path, what, msg);
    return DS_OK;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

// Parses the header at gz's start into info, checking it as idx_probe describes.
static int idx_header(gzFile gz, const char *path, int want_ndims, idx_info *info, ds_msg *msg)
{
    unsigned char b[16];
    DS_CHECK(idx_read_exact(gz, path, b, 4, "inside the header (4-byte magic number)", msg));
    if (b[0] != 0 || b[1] != 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: bad magic number 0x%08x (not an IDX file)", path, (unsigned)be32(b));
    if (b[2] != IDX_TYPE_UBYTE)
        return ds_fail(msg, DS_ERR_INPUT, "%s: IDX type code 0x%02x, expected 0x08 (unsigned byte)", path, b[2]);
    if (b[3] != want_ndims)
        return ds_fail(msg, DS_ERR_INPUT, "%s: IDX file of %d dimensions, expected %d (%s)", path, b[3], want_ndims,
                       want_ndims == 3 ? "images: idx3" : "labels: idx1");
    DS_CHECK(idx_read_exact(gz, path, b, 4u * (unsigned)want_ndims, "inside the header (dimensions)", msg));
    int64_t dims[3] = {1, 1, 1};
    for (int d = 0; d < want_ndims; d++) {
        dims[d] = be32(b + 4 * d);
        if (dims[d] == 0)
            return ds_fail(msg, DS_ERR_INPUT, "%s: IDX dimension %d is 0 (empty)", path, d);
    }
    *info = (idx_info){.ndims = want_ndims, .count = dims[0], .rows = dims[1], .cols = dims[2]};
    int64_t total;
    if (__builtin_mul_overflow(dims[1], dims[2], &info->row_len) ||
        __builtin_mul_overflow(info->count, info->row_len, &total) || total > INT64_MAX / 2)
        return ds_fail(msg, DS_ERR_INPUT, "%s: IDX dimensions too large", path);
    return DS_OK;
}

static int64_t idx_header_bytes(int ndims)
{
    return 4 + 4 * (int64_t)ndims;
}

// deflate's best ratio: a gzip file of n bytes inflates to at most about 1032·n bytes (zlib's
// documentation), so a header that announces more than that is damaged, not merely large.
enum { IDX_GZIP_MAX_RATIO = 1032 };

// A plain file's size must be what its header announces; a gzip file must be able to hold it (checked
// before any reader sizes a buffer by the header).
static int idx_check_size(const char *path, const idx_info *info, int plain, ds_msg *msg)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: %s", path, strerror(errno));
    int64_t want = idx_header_bytes(info->ndims) + info->count * info->row_len, have = (int64_t)st.st_size;
    if (!plain) {
        if (have > INT64_MAX / IDX_GZIP_MAX_RATIO || want <= have * IDX_GZIP_MAX_RATIO)
            return DS_OK;
        return ds_fail(msg, DS_ERR_INPUT, "%s: the header announces %lld items of %lld bytes, more than a %lld-byte gzip file can hold (truncated or damaged)",
                       path, (long long)info->count, (long long)info->row_len, (long long)have);
    }
    if (have < want)
        return ds_fail(msg, DS_ERR_INPUT, "%s: truncated: the header announces %lld items of %lld bytes (%lld bytes in all), the file holds %lld",
                       path, (long long)info->count, (long long)info->row_len, (long long)want, (long long)have);
    if (have > want)
        return ds_fail(msg, DS_ERR_INPUT, "%s: %lld bytes after the %lld items the header announces", path,
                       (long long)(have - want), (long long)info->count);
    return DS_OK;
}

int idx_probe(const char *path, int want_ndims, idx_info *info, ds_msg *msg)
{
    gzFile gz = NULL;
    DS_CHECK(idx_open(path, &gz, msg));
    int rc = idx_header(gz, path, want_ndims, info, msg);
    if (rc == DS_OK)
        rc = idx_check_size(path, info, gzdirect(gz), msg);
    gzclose_r(gz);
    return rc;
}

// Called with each chunk of bytes: items first .. first + n/row_len − 1 of the block.
typedef void (*idx_sink)(const unsigned char *bytes, int64_t n, int64_t offset, void *out);

// After the last item: nothing more may follow, and a gzip stream must end cleanly (its checksum).
static int idx_check_end(gzFile gz, const char *path, const idx_info *info, ds_msg *msg)
{
    unsigned char extra;
    int got = gzread(gz, &extra, 1);
    int zerr = Z_OK;
    gzerror(gz, &zerr);
    if (got < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR))
        return idx_read_error(gz, path, "", msg);
    if (got > 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: data continues after the %lld items the header announces", path,
                       (long long)info->count);
    if (zerr == Z_BUF_ERROR)
        return idx_read_error(gz, path, "after the last item (checksum missing)", msg);
    return DS_OK;
}

static int idx_stream(gzFile gz, const char *path, const idx_info *info, int64_t row0, int64_t nrows, idx_sink sink,
                      void *out, ds_msg *msg)
{
    const int64_t start = idx_header_bytes(info->ndims) + row0 * info->row_len, total = nrows * info->row_len;
    if (start > idx_header_bytes(info->ndims) && gzseek(gz, (z_off_t)start, SEEK_SET) < 0)
        return idx_read_error(gz, path, "before the rank's first item", msg);
    unsigned char *buf = malloc(IDX_CHUNK);
    if (!buf)
        return ds_fail(msg, DS_ERR_RUNTIME, "out of host memory reading %s", path);
    int rc = DS_OK;
    for (int64_t done = 0; rc == DS_OK && done < total;) {
        int64_t n = total - done < IDX_CHUNK ? total - done : IDX_CHUNK;
        int got = gzread(gz, buf, (unsigned)n);
        if (got != (int)n) {
            char what[160];
            int64_t have = done + (got > 0 ? got : 0);
            snprintf(what, sizeof what, "after item %lld of the %lld the header announces",
                     (long long)(row0 + have / info->row_len), (long long)info->count);
            rc = idx_read_error(gz, path, what, msg);
            break;
        }
        sink(buf, n, done, out);
        done += n;
    }
    free(buf);
    if (rc == DS_OK && row0 + nrows == info->count)
        rc = idx_check_end(gz, path, info, msg);
    return rc;
}

static int idx_read(const char *path, int ndims, int64_t row0, int64_t nrows, idx_sink sink, void *out, ds_msg *msg)
{
    gzFile gz = NULL;
    DS_CHECK(idx_open(path, &gz, msg));
    idx_info info = {0};
    int rc = idx_header(gz, path, ndims, &info, msg);
    if (rc == DS_OK && (row0 < 0 || nrows < 0 || row0 + nrows > info.count))
        rc = ds_fail(msg, DS_ERR_INPUT, "%s: items %lld .. %lld asked for, the file holds %lld", path, (long long)row0,
                     (long long)(row0 + nrows - 1), (long long)info.count);
    if (rc == DS_OK)
        rc = idx_stream(gz, path, &info, row0, nrows, sink, out, msg);
    gzclose_r(gz);
    return rc;
}

// byte / 255 correctly rounded, as double and as float (a table: one division per value, not per pixel).
static void scale_tables(double d[256], float f[256])
{
    for (int v = 0; v < 256; v++) {
        d[v] = v / 255.0;
        f[v] = (float)v / 255.0f;
    }
}

static void sink_f64(const unsigned char *b, int64_t n, int64_t off, void *out)
{
    double d[256];
    float f[256];
    scale_tables(d, f);
    double *o = (double *)out + off;
    for (int64_t i = 0; i < n; i++)
        o[i] = d[b[i]];
}

static void sink_f32(const unsigned char *b, int64_t n, int64_t off, void *out)
{
    double d[256];
    float f[256];
    scale_tables(d, f);
    float *o = (float *)out + off;
    for (int64_t i = 0; i < n; i++)
        o[i] = f[b[i]];
}

static void sink_i32(const unsigned char *b, int64_t n, int64_t off, void *out)
{
    int32_t *o = (int32_t *)out + off;
    for (int64_t i = 0; i < n; i++)
        o[i] = b[i];
}

int idx_read_images(const char *path, int64_t row0, int64_t nrows, int f32, void *out, ds_msg *msg)
{
    return idx_read(path, 3, row0, nrows, f32 ? sink_f32 : sink_f64, out, msg);
}

int idx_read_labels(const char *path, int64_t row0, int64_t nrows, int32_t *out, ds_msg *msg)
{
    return idx_read(path, 1, row0, nrows, sink_i32, out, msg);
}

// dir/split-kind-idxN-ubyte.gz when it exists, else the plain name (whose absence probe reports).
static int idx_resolve(const char *dir, const char *split, const char *kind, int ndims, char *out, size_t len,
                       ds_msg *msg)
{
    int n = snprintf(out, len, "%s/%s-%s-idx%d-ubyte.gz", dir, split, kind, ndims);
    if (n < 0 || (size_t)n >= len)
        return ds_fail(msg, DS_ERR_USAGE, "%s: directory name too long", dir);
    struct stat st;
    if (stat(out, &st) != 0)
        out[n - 3] = '\0';
    return DS_OK;
}

int idx_open_set(const char *dir, const char *split, idx_set *set, ds_msg *msg)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ds_fail(msg, DS_ERR_INPUT, "%s: %s", dir, stat(dir, &st) != 0 ? "no such directory" : "not a directory");
    DS_CHECK(idx_resolve(dir, split, "images", 3, set->images, sizeof set->images, msg));
    DS_CHECK(idx_resolve(dir, split, "labels", 1, set->labels, sizeof set->labels, msg));
    idx_info im, lb;
    DS_CHECK(idx_probe(set->images, 3, &im, msg));
    DS_CHECK(idx_probe(set->labels, 1, &lb, msg));
    if (im.count != lb.count)
        return ds_fail(msg, DS_ERR_INPUT, "%s holds %lld images but %s holds %lld labels", set->images,
                       (long long)im.count, set->labels, (long long)lb.count);
    set->count = im.count;
    set->row_len = im.row_len;
    return DS_OK;
}
