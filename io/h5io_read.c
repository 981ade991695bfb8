// h5io_read.c: the bulk reads of rows (h5io_read_lsq_rows, and the rows of labelled sets through
// h5i_read_float_rows): pieces of whole chunks, each checked for NaN and Inf and measured for its largest
// magnitude while it is still in the CPU's cache, from a file opened without libhdf5's chunk cache.
// provides: h5io_read_lsq_rows, h5i_read_float_rows
#include <float.h>
#include <hdf5.h>  // provides: H5D/H5P/H5T
#include <math.h>
#include <stdint.h>

#include "core/cleanup.h"
#include "h5io.h"
#include "h5io_internal.h"

// Index of the first NaN or Inf among n float (f32) or double values, or −1; *bad gets it, and *big the
// largest magnitude of the values before it (of all of them when none is bad). Blocks of 512 values in
// eight independent lanes (a comparison and a maximum each, which vectorise): a third of the time of a
// loop that stops at each value, and the caller needs no second pass for the largest magnitude.
static int64_t scan_values(const void *v, int f32, int64_t n, double *big, double *bad)
{
    const float *f = v;
    const double *d = v;
    double m[8] = {0};
    for (int64_t b0 = 0; b0 < n; b0 += 512) {
        const int64_t len = n - b0 < 512 ? n - b0 : 512;
        int ok = 1;
        for (int64_t i = 0; i + 8 <= len; i += 8)
            for (int k = 0; k < 8; k++) {
                const double a = fabs(f32 ? (double)f[b0 + i + k] : d[b0 + i + k]);
                ok &= a <= DBL_MAX;
                m[k] = a > m[k] ? a : m[k];
            }
        for (int64_t i = len / 8 * 8; i < len; i++) {
            const double a = fabs(f32 ? (double)f[b0 + i] : d[b0 + i]);
            ok &= a <= DBL_MAX;
            m[0] = a > m[0] ? a : m[0];
        }
        if (ok)
            continue;
        for (int64_t i = b0;; i++) {  // the block holds a NaN or Inf: find the first
            const double x = f32 ? (double)f[i] : d[i];
            if (!isfinite(x)) {
                *bad = x;
                return i;
            }
        }
    }
    for (int k = 1; k < 8; k++)
        m[0] = m[k] > m[0] ? m[k] : m[0];
    *big = m[0];
    return -1;
}

// scan_values over nrows rows of cols values (row-major): colmax[j] is raised to column j's largest
// magnitude (of the rows before the first NaN or Inf). A row's columns are independent lanes, which vectorise.
static int64_t scan_rows(const void *v, int f32, int64_t nrows, int64_t cols, double *colmax, double *bad)
{
    for (int64_t r = 0; r < nrows; r++) {
        int ok = 1;
        if (f32) {
            const float *f = (const float *)v + r * cols;
            for (int64_t j = 0; j < cols; j++) {
                const double a = fabs((double)f[j]);
                ok &= a <= DBL_MAX;
                colmax[j] = a > colmax[j] ? a : colmax[j];
            }
        } else {
            const double *d = (const double *)v + r * cols;
            for (int64_t j = 0; j < cols; j++) {
                const double a = fabs(d[j]);
                ok &= a <= DBL_MAX;
                colmax[j] = a > colmax[j] ? a : colmax[j];
            }
        }
        if (ok)
            continue;
        for (int64_t j = 0;; j++) {  // the row holds a NaN or Inf: find the first
            const double x = f32 ? (double)((const float *)v)[r * cols + j] : ((const double *)v)[r * cols + j];
            if (!isfinite(x)) {
                *bad = x;
                return r * cols + j;
            }
        }
    }
    return -1;
}

static const char *nonfinite_name(double x)
{
    return isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

// Fails on the first non-finite value of a block read from rows row0.. (cols wide; 1-D when 0); raises
// big (NULL: not wanted) to the block's largest magnitude: big[j] for each column j when cols > 0, else
// *big.
static int check_finite(const char *path, const char *name, const void *v, int f32, int64_t row0,
                        int64_t nrows, int64_t cols, double *big, ds_msg *msg)
{
    double bad = 0, m = 0;
    int64_t i;
    if (cols > 0 && big) {
        i = scan_rows(v, f32, nrows, cols, big, &bad);
    } else {
        i = scan_values(v, f32, nrows * (cols ? cols : 1), &m, &bad);
        if (big)
            *big = m > *big ? m : *big;
    }
    if (i < 0)
        return DS_OK;
    if (cols == 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: non-finite value (%s) at row %lld", path,
                       name, nonfinite_name(bad), (long long)(row0 + i));
    return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: non-finite value (%s) at row %lld, column %lld",
                   path, name, nonfinite_name(bad), (long long)(row0 + i / cols),
                   (long long)(i % cols));
}

// Rows a bulk read moves at a time: whole chunks of the dataset (or any rows when it is not chunked),
// about SCAN_BYTES of them, so that each piece is checked while it is still in the cache.
enum { SCAN_BYTES = 4 << 20 };
static int64_t piece_rows(hid_t dset, int64_t row_bytes)
{
    hid_t dcpl = H5Dget_create_plist(dset);
    hsize_t chunk[2] = {1, 1};
    int64_t unit = 1;
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 2, chunk) >= 1 && chunk[0] > 0)
        unit = (int64_t)chunk[0];
    h5i_close_plist(dcpl);
    const int64_t units = SCAN_BYTES / (unit * row_bytes);
    return unit * (units > 1 ? units : 1);
}

// Reads and checks one dataset's rows: X (cols wide, float or double) or y (cols == 0, double), by
// pieces of piece_rows cut at its multiples; big (NULL: not wanted) is raised to the largest magnitude
// read: of each column (cols of them) when cols > 0, else one.
static int read_checked(hid_t file, const char *path, const char *name, int64_t row0,
                        int64_t nrows, int64_t cols, int f32, void *buf, double *big, ds_msg *msg)
{
    hid_t d = H5I_INVALID_HID;
    int64_t dims[2] = {0};
    int stored_f32 = 0;
    int rc = h5i_open_float_dataset(file, path, name, cols ? 2 : 1, &d, dims, &stored_f32, msg);
    if (rc == DS_OK)
        rc = h5i_check_range(path, name, dims, row0, nrows, cols, msg);
    const hid_t mtype = f32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
    const int64_t row_bytes = (cols ? cols : 1) * (f32 ? 4 : 8), step = rc == DS_OK ? piece_rows(d, row_bytes) : 1;
    for (int64_t r = 0; rc == DS_OK && r < nrows;) {
        const int64_t end = ((row0 + r) / step + 1) * step - row0, n = (end < nrows ? end : nrows) - r;
        void *p = (char *)buf + r * row_bytes;
        if (h5i_xfer_rows(d, 0, row0 + r, n, cols, mtype, p) < 0)
            rc = ds_fail(msg, h5i_xfer_status(), "%s: dataset %s: cannot read rows %lld..%lld%s", path, name,
                         (long long)(row0 + r), (long long)(row0 + r + n - 1), h5i_xfer_why());
        else
            rc = check_finite(path, name, p, f32, row0 + r, n, cols, big, msg);
        r += n;
    }
    h5i_close_obj(d);
    return rc;
}

int h5io_read_lsq_rows(const char *path, const char *xname, const char *yname, int64_t row0,
                       int64_t nrows, int64_t cols, int x_f32, void *X, double *y, double *colmax, ds_msg *msg)
{
    if (nrows == 0)
        return DS_OK;
    char xn[NAME_MAX_LEN], yn[NAME_MAX_LEN] = "";
    DS_CHECK(h5i_norm_name(path, xname, xn, msg));
    if (yname)
        DS_CHECK(h5i_norm_name(path, yname, yn, msg));
    if (cols <= 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: %lld columns requested", path, xn,
                       (long long)cols);
    h5i_quiet();
    cleanup_crash_scope(path);  // the data's decompression and conversion: a crash there is exit 3
    hid_t file = H5I_INVALID_HID;
    int rc = h5i_open_ro_bulk(path, &file, msg);
    if (rc == DS_OK)
        rc = read_checked(file, path, xn, row0, nrows, cols, x_f32, X, colmax, msg);
    if (rc == DS_OK && yname)
        rc = read_checked(file, path, yn, row0, nrows, 0, 0, y, colmax ? colmax + cols : NULL, msg);
    rc = h5i_close_file(file, path, rc, msg);
    cleanup_crash_scope(NULL);
    return rc;
}

int h5i_read_float_rows(hid_t file, const char *path, const char *name, int64_t row0, int64_t nrows, int64_t cols,
                        int f32, void *buf, ds_msg *msg)
{
    return read_checked(file, path, name, row0, nrows, cols, f32, buf, NULL, msg);
}
