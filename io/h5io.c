// h5io.c: the HDF5 side of dsolve, reading: validating and reading least-squares files and vectors,
// and the helpers that h5io_write.c shares (h5io_internal.h); these files and h5io_internal.h are the
// only code that includes hdf5.h. HDF5 "is not designed to handle maliciously crafted files safely",
// so every input is checked (existence, links, type, rank, sizes) before use. Each function opens
// what it needs and closes every hid_t before it returns.
#define _POSIX_C_SOURCE 200809L

#include "h5io.h"
#include "h5io_internal.h"
#include "core/cleanup.h"

#include <errno.h>
#include <hdf5.h>  // provides: H5F/H5D/H5S/H5T/H5A/H5L/H5O/H5P/H5E
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


void h5i_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void h5i_close_obj(hid_t id)
{
    if (id >= 0)
        H5Oclose(id);
}

void h5i_close_space(hid_t id)
{
    if (id >= 0)
        H5Sclose(id);
}

void h5i_close_type(hid_t id)
{
    if (id >= 0)
        H5Tclose(id);
}

void h5i_close_plist(hid_t id)
{
    if (id >= 0)
        H5Pclose(id);
}

// Closes a file opened for writing; a failure here (data not flushed) is a failure of the write.
const char *h5i_write_why(void)
{
    return errno ? strerror(errno) : "write failed (disk full?)";
}

int h5i_close_file(hid_t file, const char *path, int rc, ds_msg *msg)
{
    errno = 0;
    if (file >= 0 && H5Fclose(file) < 0 && rc == DS_OK)
        return ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot write: %s", path, h5i_write_why());
    return rc;
}

// "X", "/X", "grp//X/" → "/X", "/grp/X": one absolute form that HDF5 and the messages both use.
int h5i_norm_name(const char *path, const char *name, char *out, ds_msg *msg)
{
    size_t n = 0;
    for (const char *p = name; *p; p++) {
        if (*p == '/' && (n == 0 || out[n - 1] == '/'))
            continue;
        if (n + 2 >= NAME_MAX_LEN)
            return ds_fail(msg, DS_ERR_INPUT, "%s: dataset name too long: %.40s...", path, name);
        if (n == 0)
            out[n++] = '/';
        out[n++] = *p;
    }
    if (n > 1 && out[n - 1] == '/')
        n--;
    out[n] = '\0';
    if (n == 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: empty dataset name", path);
    return DS_OK;
}

static int is_hdf5(const char *path)
{
#if H5_VERSION_GE(1, 12, 0)
    return H5Fis_accessible(path, H5P_DEFAULT);
#else
    return H5Fis_hdf5(path);
#endif
}

// Opens path read-only after checking that it exists, is readable and is HDF5; for bulk reads (bulk 1)
// without the chunk cache: the reads take whole chunks in order (h5io_read.c), which libhdf5 then
// moves straight into the caller's buffer instead of through the cache (1.5× the rate in the page cache).
static int open_ro_as(const char *path, int bulk, hid_t *file, ds_msg *msg)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        if (e == ENOENT)
            return ds_fail(msg, DS_ERR_INPUT, "%s: no such file", path);
        return ds_fail(msg, DS_ERR_INPUT, "%s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode))
        return ds_fail(msg, DS_ERR_INPUT, "%s: is a directory, expected an HDF5 file", path);
    if (access(path, R_OK) != 0) {
        int e = errno;
        return ds_fail(msg, DS_ERR_INPUT, "%s: cannot read: %s", path, strerror(e));
    }
    int ok = is_hdf5(path);
    if (ok == 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: not an HDF5 file", path);
    hid_t fapl = bulk ? H5Pcreate(H5P_FILE_ACCESS) : H5P_DEFAULT;
    if (bulk && fapl >= 0 && H5Pset_cache(fapl, 0, 521, 0, 0.75) < 0)
        h5i_close_plist(fapl), fapl = H5P_DEFAULT;
    *file = ok > 0 ? H5Fopen(path, H5F_ACC_RDONLY, fapl < 0 ? H5P_DEFAULT : fapl) : H5I_INVALID_HID;
    if (bulk)
        h5i_close_plist(fapl);
    if (*file < 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: cannot open (truncated or damaged file?)", path);
    return DS_OK;
}

static int open_ro(const char *path, hid_t *file, ds_msg *msg)
{
    return open_ro_as(path, 0, file, msg);
}

// Follows name (normalised) one component at a time, so that no soft or external link is ever
// traversed; *bad gets the first component that is missing or not a hard link.
int h5i_walk_links(hid_t file, const char *name, char *bad)
{
    size_t n = strlen(name);
    for (size_t i = 1; i <= n; i++) {
        if (name[i] != '/' && name[i] != '\0')
            continue;
        memcpy(bad, name, i);
        bad[i] = '\0';
        H5L_info_t li;
        if (H5Lexists(file, bad, H5P_DEFAULT) <= 0 || H5Lget_info(file, bad, &li, H5P_DEFAULT) < 0)
            return LINKS_MISSING;
        if (li.type != H5L_TYPE_HARD)
            return li.type == H5L_TYPE_SOFT       ? LINKS_SOFT
                   : li.type == H5L_TYPE_EXTERNAL ? LINKS_EXTERNAL
                                                  : LINKS_OTHER;
    }
    return LINKS_HARD;
}

static int check_links(hid_t file, const char *path, const char *name, ds_msg *msg)
{
    static const char *kinds[] = {[LINKS_SOFT] = "a soft", [LINKS_EXTERNAL] = "an external",
                                  [LINKS_OTHER] = "a user-defined"};
    char part[NAME_MAX_LEN];
    int w = h5i_walk_links(file, name, part);
    if (w == LINKS_HARD)
        return DS_OK;
    if (w == LINKS_MISSING)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: not found", path, name);
    return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: %s is %s link, refused (only hard links)",
                   path, name, part, kinds[w]);
}

static const char *class_name(H5T_class_t c)
{
    switch (c) {
    case H5T_INTEGER: return "integer";
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "variable-length";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_REFERENCE: return "reference";
    case H5T_TIME: return "time";
    default: return "unknown";
    }
}

// The stored type must be float32 or float64; *f32 tells which.
static int check_type(hid_t dset, const char *path, const char *name, int *f32, ds_msg *msg)
{
    hid_t t = H5Dget_type(dset);
    H5T_class_t c = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    size_t size = t >= 0 ? H5Tget_size(t) : 0;
    int standard = t >= 0 && h5i_standard_type(t);
    h5i_close_type(t);
    if (c == H5T_NO_CLASS)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its type", path, name);
    if (c != H5T_FLOAT)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: %s type, expected float32 or float64",
                       path, name, class_name(c));
    if ((size != 4 && size != 8) || !standard)
        return ds_fail(msg, DS_ERR_INPUT,
                       "%s: dataset %s: %zu-byte%s float type, expected float32 or float64", path,
                       name, size, standard ? "" : " non-IEEE");
    *f32 = size == 4;
    return DS_OK;
}

// The dataset must have `rank` dimensions, none 0, whose product times 8 bytes fits in int64, and
// which its file can back (h5i_check_storage).
static int check_shape(hid_t dset, const char *path, const char *name, int rank, int64_t dims[2],
                       ds_msg *msg)
{
    hsize_t d[H5S_MAX_RANK] = {0};
    hid_t sp = H5Dget_space(dset);
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (nd == rank && H5Sget_simple_extent_dims(sp, d, NULL) < 0)
        nd = -1;
    h5i_close_space(sp);
    if (nd < 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its shape", path, name);
    if (nd != rank)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: %d-D, expected %d-D", path, name, nd,
                       rank);
    uint64_t total = 1;
    for (int i = 0; i < rank; i++) {
        if (d[i] == 0)
            return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: empty", path, name);
        if (d[i] > (uint64_t)INT64_MAX / 8 / total)
            return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: too large", path, name);
        total *= d[i];
        dims[i] = (int64_t)d[i];
    }
    return h5i_check_storage(dset, path, name, total, msg);
}

// Opens name (normalised) once it passes check_links and is a dataset; the caller closes *dset.
static int open_dataset(hid_t file, const char *path, const char *name, hid_t *dset, ds_msg *msg)
{
    *dset = H5I_INVALID_HID;
    DS_CHECK(check_links(file, path, name, msg));
    hid_t obj = H5Oopen(file, name, H5P_DEFAULT);
    if (obj < 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot open", path, name);
    if (H5Iget_type(obj) != H5I_DATASET) {
        h5i_close_obj(obj);
        return ds_fail(msg, DS_ERR_INPUT, "%s: %s is not a dataset", path, name);
    }
    *dset = obj;
    return DS_OK;
}

// Opens dataset name (normalised) once it passes open_dataset, check_type and check_shape; the caller
// closes *dset. dims gets rank sizes.
static int open_float_dataset(hid_t file, const char *path, const char *name, int rank,
                              hid_t *dset, int64_t dims[2], int *f32, ds_msg *msg)
{
    DS_CHECK(open_dataset(file, path, name, dset, msg));
    int rc = check_type(*dset, path, name, f32, msg);
    if (rc == DS_OK)
        rc = check_shape(*dset, path, name, rank, dims, msg);
    return h5i_keep(rc, dset);
}

// Moves rows row0 .. row0+n−1 (cols wide; 1-D when cols == 0) between dset and buf.
static herr_t xfer_block(hid_t dset, int write, hsize_t row0, hsize_t n, hsize_t cols, hid_t mtype,
                         void *buf)
{
    // chunked data is read and decoded by h5io_filters.c, never by libhdf5
    const int filtered = write ? -1 : h5i_filters_read_rows(dset, row0, n, cols, mtype, buf);
    if (filtered >= 0)
        return filtered ? 0 : -1;
    int rank = cols ? 2 : 1;
    hsize_t start[2] = {row0, 0}, count[2] = {n, cols};
    hid_t fs = H5Dget_space(dset), ms = H5Screate_simple(rank, count, NULL);
    herr_t st = -1;
    if (fs >= 0 && ms >= 0 && H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0)
        st = write ? H5Dwrite(dset, mtype, ms, fs, H5P_DEFAULT, buf)
                   : H5Dread(dset, mtype, ms, fs, H5P_DEFAULT, buf);
    h5i_close_space(ms);
    h5i_close_space(fs);
    return st;
}

// xfer_block in blocks of at most XFER_BYTES, so that no single call sees a huge selection.
herr_t h5i_xfer_rows(hid_t dset, int write, int64_t row0, int64_t nrows, int64_t cols,
                        hid_t mtype, void *buf)
{
    int64_t row_bytes = (cols ? cols : 1) * (int64_t)H5Tget_size(mtype);
    int64_t step = XFER_BYTES / row_bytes > 0 ? XFER_BYTES / row_bytes : 1;
    for (int64_t r = 0; r < nrows; r += step) {
        int64_t n = nrows - r < step ? nrows - r : step;
        if (xfer_block(dset, write, (hsize_t)(row0 + r), (hsize_t)n, (hsize_t)cols, mtype,
                       (char *)buf + r * row_bytes) < 0)
            return -1;
    }
    return 0;
}

int h5io_probe_lsq(const char *path, const char *xname, const char *yname, h5io_lsq_info *info,
                   ds_msg *msg)
{
    char xn[NAME_MAX_LEN], yn[NAME_MAX_LEN] = "";
    DS_CHECK(h5i_norm_name(path, xname, xn, msg));
    if (yname)
        DS_CHECK(h5i_norm_name(path, yname, yn, msg));
    DS_CHECK(h5i_guard(GUARD_PROBE_LSQ, path, xname, yname, 0, msg));
    h5i_quiet();
    hid_t file = H5I_INVALID_HID, x = H5I_INVALID_HID, y = H5I_INVALID_HID;
    int64_t xd[2] = {0}, yd[2] = {0};
    int rc = open_ro(path, &file, msg);
    if (rc == DS_OK)
        rc = open_float_dataset(file, path, xn, 2, &x, xd, &info->x_f32, msg);
    if (rc == DS_OK && yname)
        rc = open_float_dataset(file, path, yn, 1, &y, yd, &info->y_f32, msg);
    if (rc == DS_OK && yname && xd[0] != yd[0])
        rc = ds_fail(msg, DS_ERR_INPUT, "%s: %s has %lld rows but %s has %lld", path, xn,
                     (long long)xd[0], yn, (long long)yd[0]);
    if (rc == DS_OK) {
        info->rows = xd[0];
        info->cols = xd[1];
    }
    h5i_close_obj(y);
    h5i_close_obj(x);
    return h5i_close_file(file, path, rc, msg);
}

// The rows asked for must lie inside the dataset, which must be cols wide (cols == 0: 1-D).
int h5i_check_range(const char *path, const char *name, const int64_t dims[2], int64_t row0,
                       int64_t nrows, int64_t cols, ds_msg *msg)
{
    if (cols && dims[1] != cols)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: %lld columns, expected %lld", path, name,
                       (long long)dims[1], (long long)cols);
    if (row0 < 0 || nrows < 0 || row0 > dims[0] - nrows)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: rows %lld..%lld outside its %lld rows",
                       path, name, (long long)row0, (long long)(row0 + nrows - 1),
                       (long long)dims[0]);
    return DS_OK;
}

int h5io_has_dataset(const char *path, const char *name)
{
    char n[NAME_MAX_LEN], part[NAME_MAX_LEN];
    ds_msg m = {{0}};
    if (h5i_norm_name(path, name, n, &m) != DS_OK)
        return 0;
    if (h5i_guard(GUARD_HAS_DATASET, path, name, NULL, 0, &m) != DS_OK)
        return 1;  // present, so that the reader that follows says what is wrong with the file
    h5i_quiet();
    hid_t file = H5I_INVALID_HID, obj = H5I_INVALID_HID;
    int found = 0, w = LINKS_MISSING;
    if (open_ro(path, &file, &m) != DS_OK)
        goto done;
    w = h5i_walk_links(file, n, part);
    // A name behind a soft or external link counts as present so that the reader, which refuses
    // such links, says why instead of the name being silently skipped.
    if (w != LINKS_HARD) {
        found = w != LINKS_MISSING;
        goto done;
    }
    obj = H5Oopen(file, n, H5P_DEFAULT);
    found = obj >= 0 && H5Iget_type(obj) == H5I_DATASET;
done:
    h5i_close_obj(obj);
    h5i_close_file(file, path, DS_OK, NULL);
    return found;
}

int h5io_read_vector(const char *path, const char *name, int64_t n, double *out, ds_msg *msg)
{
    char vn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, name, vn, msg));
    DS_CHECK(h5i_guard(GUARD_READ_VECTOR, path, name, NULL, n, msg));
    h5i_quiet();
    hid_t file = H5I_INVALID_HID, d = H5I_INVALID_HID;
    int64_t dims[2] = {0};
    int f32 = 0;
    int rc = open_ro(path, &file, msg);
    if (rc == DS_OK)
        rc = open_float_dataset(file, path, vn, 1, &d, dims, &f32, msg);
    if (rc == DS_OK && dims[0] != n)
        rc = ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: %lld elements, expected %lld", path, vn,
                     (long long)dims[0], (long long)n);
    if (rc == DS_OK && h5i_xfer_rows(d, 0, 0, n, 0, H5T_NATIVE_DOUBLE, out) < 0)
        rc = ds_fail(msg, h5i_xfer_status(), "%s: dataset %s: cannot read%s", path, vn, h5i_xfer_why());
    h5i_close_obj(d);
    return h5i_close_file(file, path, rc, msg);
}

// What other io/ files (h5io_labels.c, h5io_keys.c, h5io_model.c) use of the checks above; see
// h5io_internal.h.
int h5i_open_ro(const char *path, hid_t *file, ds_msg *msg)
{
    return open_ro(path, file, msg);
}

int h5i_open_ro_bulk(const char *path, hid_t *file, ds_msg *msg)
{
    return open_ro_as(path, 1, file, msg);
}

int h5i_open_dataset(hid_t file, const char *path, const char *name, hid_t *dset, ds_msg *msg)
{
    return open_dataset(file, path, name, dset, msg);
}

int h5i_keep(int rc, hid_t *dset)
{
    if (rc != DS_OK) {
        h5i_close_obj(*dset);
        *dset = H5I_INVALID_HID;
    }
    return rc;
}

int h5i_open_float_dataset(hid_t file, const char *path, const char *name, int rank, hid_t *dset, int64_t dims[2],
                           int *f32, ds_msg *msg)
{
    return open_float_dataset(file, path, name, rank, dset, dims, f32, msg);
}

int h5i_check_shape(hid_t dset, const char *path, const char *name, int rank, int64_t dims[2], ds_msg *msg)
{
    return check_shape(dset, path, name, rank, dims, msg);
}
