// h5io_keys.c: 1-D integer and float datasets of keys and values for `dsolve sort`: validation,
// hyperslab reads, and writes (in turns, serial HDF5) to a temporary file that h5io_commit renames.
// provides: h5io_probe_keys, h5io_read_keys, h5io_create_keys, h5io_write_keys
#define _POSIX_C_SOURCE 200809L

#include "h5io.h"
#include "h5io_internal.h"
#include "core/cleanup.h"

#include <errno.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>

static hid_t native_type(int type)
{
    switch (type) {
    case H5IO_KEY_I32: return H5T_NATIVE_INT32;
    case H5IO_KEY_I64: return H5T_NATIVE_INT64;
    case H5IO_KEY_U32: return H5T_NATIVE_UINT32;
    case H5IO_KEY_U64: return H5T_NATIVE_UINT64;
    case H5IO_KEY_F32: return H5T_NATIVE_FLOAT;
    default: return H5T_NATIVE_DOUBLE;
    }
}

static hid_t file_type(int type)
{
    switch (type) {
    case H5IO_KEY_I32: return H5T_STD_I32LE;
    case H5IO_KEY_I64: return H5T_STD_I64LE;
    case H5IO_KEY_U32: return H5T_STD_U32LE;
    case H5IO_KEY_U64: return H5T_STD_U64LE;
    case H5IO_KEY_F32: return H5T_IEEE_F32LE;
    default: return H5T_IEEE_F64LE;
    }
}

// The stored type as a key type: integers signed or not, floats, of 4 or 8 bytes.
static int key_type(hid_t dset, const char *path, const char *name, int *type, ds_msg *msg)
{
    hid_t t = H5Dget_type(dset);
    H5T_class_t c = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    size_t size = t >= 0 ? H5Tget_size(t) : 0;
    H5T_sign_t sign = c == H5T_INTEGER ? H5Tget_sign(t) : H5T_SGN_ERROR;
    int standard = t >= 0 && h5i_standard_type(t);
    h5i_close_type(t);
    if (c == H5T_NO_CLASS)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its type", path, name);
    if ((c != H5T_INTEGER && c != H5T_FLOAT) || (size != 4 && size != 8) || !standard)
        return ds_fail(msg, DS_ERR_INPUT,
                       "%s: dataset %s: unsupported type (%zu-byte %s%s); expected int32, int64, uint32, uint64, "
                       "float32 or float64",
                       path, name, size, standard || c == H5T_NO_CLASS ? "" : "non-standard ",
                       c == H5T_INTEGER ? "integer" : c == H5T_FLOAT ? "float" : "non-numeric");
    if (c == H5T_FLOAT)
        *type = size == 4 ? H5IO_KEY_F32 : H5IO_KEY_F64;
    else if (sign == H5T_SGN_NONE)
        *type = size == 4 ? H5IO_KEY_U32 : H5IO_KEY_U64;
    else
        *type = size == 4 ? H5IO_KEY_I32 : H5IO_KEY_I64;
    return DS_OK;
}

static int key_length(hid_t dset, const char *path, const char *name, int64_t *n, ds_msg *msg)
{
    hsize_t d[H5S_MAX_RANK] = {0};
    hid_t sp = H5Dget_space(dset);
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (nd == 1 && H5Sget_simple_extent_dims(sp, d, NULL) < 0)
        nd = -1;
    h5i_close_space(sp);
    if (nd < 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its shape", path, name);
    if (nd != 1)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: %d-D, expected a 1-D dataset", path, name, nd);
    if (d[0] == 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: empty", path, name);
    if (d[0] > (hsize_t)INT64_MAX / 16)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: too large", path, name);
    *n = (int64_t)d[0];
    return h5i_check_storage(dset, path, name, d[0], msg);
}

// Opens a validated 1-D key dataset; the caller closes *dset.
static int open_keys(hid_t file, const char *path, const char *name, hid_t *dset, int *type, int64_t *n, ds_msg *msg)
{
    DS_CHECK(h5i_open_dataset(file, path, name, dset, msg));
    int rc = key_type(*dset, path, name, type, msg);
    if (rc == DS_OK)
        rc = key_length(*dset, path, name, n, msg);
    return h5i_keep(rc, dset);
}

int h5io_probe_keys(const char *path, const char *name, int *type, int64_t *n, ds_msg *msg)
{
    char dn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, name, dn, msg));
    DS_CHECK(h5i_guard(GUARD_PROBE_KEYS, path, name, NULL, 0, msg));
    h5i_quiet();
    hid_t file = H5I_INVALID_HID, d = H5I_INVALID_HID;
    int rc = h5i_open_ro(path, &file, msg);
    if (rc == DS_OK)
        rc = open_keys(file, path, dn, &d, type, n, msg);
    h5i_close_obj(d);
    return h5i_close_file(file, path, rc, msg);
}

int h5io_read_keys(const char *path, const char *name, int type, int64_t row0, int64_t n, void *out, ds_msg *msg)
{
    if (n == 0)
        return DS_OK;
    char dn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, name, dn, msg));
    h5i_quiet();
    cleanup_crash_scope(path);  // the data's decompression and conversion: a crash there is exit 3
    hid_t file = H5I_INVALID_HID, d = H5I_INVALID_HID;
    int stored = 0;
    int64_t len = 0;
    int rc = h5i_open_ro_bulk(path, &file, msg);
    if (rc == DS_OK)
        rc = open_keys(file, path, dn, &d, &stored, &len, msg);
    int64_t dims[2] = {len, 0};
    if (rc == DS_OK)
        rc = h5i_check_range(path, dn, dims, row0, n, 0, msg);
    if (rc == DS_OK && h5i_xfer_rows(d, 0, row0, n, 0, native_type(type), out) < 0)
        rc = ds_fail(msg, h5i_xfer_status(), "%s: dataset %s: cannot read elements %lld..%lld%s", path, dn,
                     (long long)row0, (long long)(row0 + n - 1), h5i_xfer_why());
    h5i_close_obj(d);
    rc = h5i_close_file(file, path, rc, msg);
    cleanup_crash_scope(NULL);
    return rc;
}

int h5io_create_keys(const char *path, int create, const char *name, int type, int64_t n, ds_msg *msg)
{
    char dn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, name, dn, msg));
    h5i_quiet();
    hid_t file = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT) : H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    int rc = file < 0 ? ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot %s", path, create ? "create" : "open for writing") : DS_OK;
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t dims[1] = {(hsize_t)n}, chunk[1] = {(hsize_t)(n < (1 << 20) ? n : (1 << 20))};
    hid_t sp = H5Screate_simple(1, dims, NULL), d = H5I_INVALID_HID;
    if (rc == DS_OK && lcpl >= 0 && dcpl >= 0 && sp >= 0 && n > 0 && H5Pset_create_intermediate_group(lcpl, 1) >= 0 &&
        H5Pset_chunk(dcpl, 1, chunk) >= 0)
        d = H5Dcreate2(file, dn, file_type(type), sp, lcpl, dcpl, H5P_DEFAULT);
    if (rc == DS_OK && d < 0)
        rc = ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: cannot create: %s", path, dn, h5i_write_why());
    h5i_close_obj(d);
    h5i_close_space(sp);
    h5i_close_plist(dcpl);
    h5i_close_plist(lcpl);
    return h5i_close_file(file, path, rc, msg);
}

int h5io_write_keys(const char *path, const char *name, int type, int64_t row0, int64_t n, const void *data,
                    ds_msg *msg)
{
    char dn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, name, dn, msg));
    if (n == 0)
        return DS_OK;
    h5i_quiet();
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    int rc = file < 0 ? ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot open for writing", path) : DS_OK;
    hid_t d = rc == DS_OK ? H5Dopen2(file, dn, H5P_DEFAULT) : H5I_INVALID_HID;
    if (rc == DS_OK && d < 0)
        rc = ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: cannot open for writing", path, dn);
    errno = 0;
    if (rc == DS_OK && h5i_xfer_rows(d, 1, row0, n, 0, native_type(type), (void *)data) < 0)
        rc = ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: cannot write elements %lld..%lld: %s", path, dn,
                     (long long)row0, (long long)(row0 + n - 1), h5i_write_why());
    h5i_close_obj(d);
    return h5i_close_file(file, path, rc, msg);
}
