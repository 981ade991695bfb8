// h5io_labels.c: labelled sets in HDF5: X (rows × cols, float) beside an integer labels vector.
// provides: h5io_probe_labelled, h5io_read_labelled_rows
#include <stdlib.h>

#include "core/cleanup.h"
#include "h5io.h"
#include "h5io_internal.h"

// Opens lname (normalised) as a 1-D integer dataset; dims[0] gets its length. The caller closes *dset.
static int open_label_dataset(hid_t file, const char *path, const char *name, hid_t *dset, int64_t dims[2],
                              ds_msg *msg)
{
    DS_CHECK(h5i_open_dataset(file, path, name, dset, msg));
    hid_t t = H5Dget_type(*dset);
    H5T_class_t c = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    int standard = t >= 0 && h5i_standard_type(t), rc = DS_OK;
    h5i_close_type(t);
    if (c != H5T_INTEGER || !standard)
        rc = ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: %s, expected integer class labels", path, name,
                     c == H5T_FLOAT ? "floating-point type" : c == H5T_INTEGER ? "non-standard integer type" : "not an integer type");
    if (rc == DS_OK)
        rc = h5i_check_shape(*dset, path, name, 1, dims, msg);
    return h5i_keep(rc, dset);
}

int h5io_probe_labelled(const char *path, const char *xname, const char *lname, h5io_lsq_info *info, ds_msg *msg)
{
    char xn[NAME_MAX_LEN], ln[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, xname, xn, msg));
    DS_CHECK(h5i_norm_name(path, lname, ln, msg));
    DS_CHECK(h5i_guard(GUARD_PROBE_LABELLED, path, xname, lname, 0, msg));
    h5i_quiet();
    hid_t file = H5I_INVALID_HID, x = H5I_INVALID_HID, l = H5I_INVALID_HID;
    int64_t xd[2] = {0}, ld[2] = {0};
    int x_f32 = 0;
    int rc = h5i_open_ro(path, &file, msg);
    if (rc == DS_OK)
        rc = h5i_open_float_dataset(file, path, xn, 2, &x, xd, &x_f32, msg);
    if (rc == DS_OK)
        rc = open_label_dataset(file, path, ln, &l, ld, msg);
    if (rc == DS_OK && xd[0] != ld[0])
        rc = ds_fail(msg, DS_ERR_INPUT, "%s: %s has %lld rows but %s has %lld", path, xn, (long long)xd[0], ln,
                     (long long)ld[0]);
    if (rc == DS_OK)
        *info = (h5io_lsq_info){.rows = xd[0], .cols = xd[1], .x_f32 = x_f32, .y_f32 = 0};
    h5i_close_obj(l);
    h5i_close_obj(x);
    return h5i_close_file(file, path, rc, msg);
}

// Reads labels row0 .. row0+nrows−1 through int64 (HDF5 clips on conversion; the range check sees it).
static int read_labels(hid_t file, const char *path, const char *name, int64_t row0, int64_t nrows, int32_t *out,
                       ds_msg *msg)
{
    hid_t d = H5I_INVALID_HID;
    int64_t dims[2] = {0};
    int rc = open_label_dataset(file, path, name, &d, dims, msg);
    if (rc == DS_OK)
        rc = h5i_check_range(path, name, dims, row0, nrows, 0, msg);
    int64_t *wide = rc == DS_OK ? malloc((size_t)(nrows > 0 ? nrows : 1) * sizeof(int64_t)) : NULL;
    if (rc == DS_OK && !wide)
        rc = ds_fail(msg, DS_ERR_RUNTIME, "out of host memory reading %s", path);
    if (rc == DS_OK && h5i_xfer_rows(d, 0, row0, nrows, 0, H5T_NATIVE_INT64, wide) < 0)
        rc = ds_fail(msg, h5i_xfer_status(), "%s: dataset %s: cannot read rows %lld..%lld%s", path, name, (long long)row0,
                     (long long)(row0 + nrows - 1), h5i_xfer_why());
    for (int64_t i = 0; rc == DS_OK && i < nrows; i++) {
        if (wide[i] < INT32_MIN || wide[i] > INT32_MAX)
            rc = ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: label %lld at row %lld is out of range", path, name,
                         (long long)wide[i], (long long)(row0 + i));
        else
            out[i] = (int32_t)wide[i];
    }
    free(wide);
    h5i_close_obj(d);
    return rc;
}

int h5io_read_labelled_rows(const char *path, const char *xname, const char *lname, int64_t row0, int64_t nrows,
                            int64_t cols, int x_f32, void *X, int32_t *labels, ds_msg *msg)
{
    if (nrows == 0)
        return DS_OK;
    char xn[NAME_MAX_LEN], ln[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, xname, xn, msg));
    DS_CHECK(h5i_norm_name(path, lname, ln, msg));
    h5i_quiet();
    cleanup_crash_scope(path);  // the data's decompression and conversion: a crash there is exit 3
    hid_t file = H5I_INVALID_HID;
    int rc = h5i_open_ro_bulk(path, &file, msg);
    if (rc == DS_OK)
        rc = h5i_read_float_rows(file, path, xn, row0, nrows, cols, x_f32, X, msg);
    if (rc == DS_OK)
        rc = read_labels(file, path, ln, row0, nrows, labels, msg);
    rc = h5i_close_file(file, path, rc, msg);
    cleanup_crash_scope(NULL);
    return rc;
}
