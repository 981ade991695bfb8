// h5io_model.c: whole small matrices and their numeric attributes (the network's model file), and
// empty datasets that ranks then fill block by block in turns (prediction outputs).
#include <stdlib.h>
#include <string.h>

#include "h5io.h"
#include "h5io_internal.h"

int h5io_create_dataset(const char *path, int create, const char *name, int64_t rows, int64_t cols, ds_msg *msg)
{
    char dn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, name, dn, msg));
    h5i_quiet();
    hid_t d = H5I_INVALID_HID;
    hid_t file = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT) : H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    int rc = file < 0 ? ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot %s", path, create ? "create" : "open for writing") : DS_OK;
    hsize_t dims[2] = {(hsize_t)rows, (hsize_t)cols}, chunk[2];
    h5i_chunk_shape(rows > 0 ? rows : 1, cols > 0 ? cols : 1, sizeof(double), 65536, chunk);
    if (!cols)
        chunk[0] = chunk[0] * chunk[1], chunk[1] = 0;
    if (rc == DS_OK)
        rc = h5i_create_dataset(file, path, dn, cols ? 2 : 1, dims, rows > 0 ? chunk : NULL, H5T_IEEE_F64LE, &d, msg);
    h5i_close_obj(d);
    return h5i_close_file(file, path, rc, msg);
}

int h5io_write_matrix(const char *path, int create, const char *name, const double *v, int64_t rows, int64_t cols,
                      ds_msg *msg)
{
    DS_CHECK(h5io_create_dataset(path, create, name, rows, cols, msg));
    return h5io_write_rows(path, name, 0, rows, cols, 0, v, msg);
}

int h5io_read_matrix(const char *path, const char *name, int64_t *rows, int64_t *cols, double **out, ds_msg *msg)
{
    char dn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, name, dn, msg));
    *out = NULL;
    DS_CHECK(h5i_guard(GUARD_READ_MATRIX, path, name, NULL, 0, msg));
    h5i_quiet();
    hid_t file = H5I_INVALID_HID, d = H5I_INVALID_HID;
    int64_t dims[2] = {0, 0};
    int f32 = 0;
    int rc = h5i_open_ro(path, &file, msg);
    if (rc == DS_OK)
        rc = h5i_open_float_dataset(file, path, dn, 2, &d, dims, &f32, msg);
    if (rc == DS_OK && (*out = malloc((size_t)(dims[0] * dims[1]) * sizeof(double))) == NULL)
        rc = ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: out of host memory", path, dn);
    if (rc == DS_OK && h5i_xfer_rows(d, 0, 0, dims[0], dims[1], H5T_NATIVE_DOUBLE, *out) < 0)
        rc = ds_fail(msg, h5i_xfer_status(), "%s: dataset %s: cannot read%s", path, dn, h5i_xfer_why());
    if (rc != DS_OK) {
        free(*out);
        *out = NULL;
    }
    *rows = dims[0], *cols = dims[1];
    h5i_close_obj(d);
    return h5i_close_file(file, path, rc, msg);
}

// One scalar numeric attribute of the open dataset d (named dn) into *value; DS_ERR_INPUT in msg otherwise.
static int read_attr(hid_t d, const char *path, const char *dn, const char *attr, double *value, ds_msg *msg)
{
    hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    double v = 0;
    int rc = DS_OK;
    if (H5Aexists(d, attr) <= 0)
        rc = ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: attribute %s: not found", path, dn, attr);
    if (rc == DS_OK && ((a = H5Aopen(d, attr, H5P_DEFAULT)) < 0 || (t = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0))
        rc = ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: attribute %s: cannot open", path, dn, attr);
    if (rc == DS_OK) {
        H5T_class_t c = H5Tget_class(t);
        if ((c != H5T_INTEGER && c != H5T_FLOAT) || !h5i_standard_type(t) || H5Sget_simple_extent_npoints(sp) != 1 ||
            H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0)
            rc = ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: attribute %s: not a number", path, dn, attr);
    }
    h5i_close_space(sp);
    h5i_close_type(t);
    if (a >= 0)
        H5Aclose(a);
    if (rc == DS_OK)
        *value = v;
    return rc;
}

int h5io_read_attrs_num(const char *path, const char *dataset, int n, const char *const *attrs, double *values,
                        int *status, ds_msg *why, ds_msg *msg)
{
    char dn[NAME_MAX_LEN], list[NAME_MAX_LEN];
    DS_ASSERT(n >= 1 && n <= H5IO_ATTRS_MAX);
    size_t len = 0;
    for (int i = 0; i < n; i++) {  // the names for the guard's worker, one a line
        const size_t k = strlen(attrs[i]);
        DS_ASSERT(len + k + 1 < sizeof list && !strchr(attrs[i], '\n'));
        memcpy(list + len, attrs[i], k);
        len += k;
        list[len++] = '\n';
        status[i] = DS_ERR_INPUT;
        if (why)
            why[i].text[0] = '\0';
    }
    list[len - 1] = '\0';
    DS_CHECK(h5i_norm_name(path, dataset, dn, msg));
    DS_CHECK(h5i_guard(GUARD_READ_ATTRS, path, dataset, list, 0, msg));
    // The file opened afresh for each attribute: on some crafted files libhdf5 1.10's H5Aexists reads freed
    // memory when one opening serves several attributes (AddressSanitizer saw it 15 times in 10⁴ fuzzed
    // model files so, against once in 2·10⁴ with an opening each).
    int rc = DS_OK;
    for (int i = 0; rc == DS_OK && i < n; i++) {
        h5i_quiet();
        hid_t file = H5I_INVALID_HID, d = H5I_INVALID_HID;
        int64_t dims[2];
        int f32;
        rc = h5i_open_ro(path, &file, msg);
        if (rc == DS_OK)
            rc = h5i_open_float_dataset(file, path, dn, 2, &d, dims, &f32, msg);
        ds_msg ignore = {{0}};
        if (rc == DS_OK)
            status[i] = read_attr(d, path, dn, attrs[i], &values[i], why ? &why[i] : &ignore);
        h5i_close_obj(d);
        rc = h5i_close_file(file, path, rc, msg);
    }
    return rc;
}

int h5io_read_attr_num(const char *path, const char *dataset, const char *attr, double *value, ds_msg *msg)
{
    int status = DS_OK;
    ds_msg why = {{0}};
    DS_CHECK(h5io_read_attrs_num(path, dataset, 1, &attr, value, &status, &why, msg));
    return status == DS_OK ? DS_OK : ds_fail(msg, status, "%s", why.text);
}
