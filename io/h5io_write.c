// h5io_write.c: the HDF5 side of dsolve, writing: least-squares files, vectors and their attributes,
// to temporary files that h5io_commit renames into place.
#define _POSIX_C_SOURCE 200809L

#include "h5io.h"
#include "h5io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// Creates dataset name (normalised, intermediate groups made as needed) of file type ftype with
// dims, chunked as chunk (NULL: contiguous); the caller closes *dset.
int h5i_create_dataset(hid_t file, const char *path, const char *name, int rank,
                       const hsize_t *dims, const hsize_t *chunk, hid_t ftype, hid_t *dset,
                          ds_msg *msg)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    *dset = H5I_INVALID_HID;
    if (lcpl >= 0 && dcpl >= 0 && sp >= 0 && H5Pset_create_intermediate_group(lcpl, 1) >= 0 &&
        (!chunk || H5Pset_chunk(dcpl, rank, chunk) >= 0))
        *dset = H5Dcreate2(file, name, ftype, sp, lcpl, dcpl, H5P_DEFAULT);
    h5i_close_space(sp);
    h5i_close_plist(dcpl);
    h5i_close_plist(lcpl);
    if (*dset < 0)
        return ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: cannot create: %s", path, name, h5i_write_why());
    return DS_OK;
}

// chunk_rows rows a chunk (at most rows), fewer when a chunk would pass CHUNK_BYTES; a row wider
// than CHUNK_BYTES is split by columns.
void h5i_chunk_shape(int64_t rows, int64_t cols, size_t elsize, int64_t chunk_rows,
                     hsize_t chunk[2])
{
    int64_t per_chunk = CHUNK_BYTES / (int64_t)elsize;
    int64_t c = cols < per_chunk ? cols : per_chunk;
    int64_t r = chunk_rows > 0 && chunk_rows < rows ? chunk_rows : rows;
    if (r > per_chunk / c)
        r = per_chunk / c;
    chunk[0] = (hsize_t)(r > 0 ? r : 1);
    chunk[1] = (hsize_t)c;
}

int h5io_create_lsq(const char *path, const char *xname, const char *yname, int64_t rows,
                    int64_t cols, int f32, int64_t chunk_rows, ds_msg *msg)
{
    char xn[NAME_MAX_LEN], yn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, xname, xn, msg));
    DS_CHECK(h5i_norm_name(path, yname, yn, msg));
    if (rows <= 0 || cols <= 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: cannot create an empty dataset (%lld × %lld)", path,
                       (long long)rows, (long long)cols);
    h5i_quiet();
    hid_t ftype = f32 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
    hsize_t xdims[2] = {(hsize_t)rows, (hsize_t)cols}, xchunk[2], ychunk[2];
    h5i_chunk_shape(rows, cols, f32 ? 4 : 8, chunk_rows, xchunk);
    h5i_chunk_shape(rows, 1, f32 ? 4 : 8, chunk_rows, ychunk);
    hid_t x = H5I_INVALID_HID, y = H5I_INVALID_HID;
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int rc = file < 0 ? ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot create: %s", path, h5i_write_why()) : DS_OK;
    if (rc == DS_OK)
        rc = h5i_create_dataset(file, path, xn, 2, xdims, xchunk, ftype, &x, msg);
    if (rc == DS_OK)
        rc = h5i_create_dataset(file, path, yn, 1, xdims, ychunk, ftype, &y, msg);
    h5i_close_obj(y);
    h5i_close_obj(x);
    return h5i_close_file(file, path, rc, msg);
}

// Opens an existing dataset of a file opened for writing and checks the rows to be written fit.
static int open_for_write(hid_t file, const char *path, const char *name, int64_t row0,
                          int64_t nrows, int64_t cols, hid_t *dset, ds_msg *msg)
{
    hsize_t d[H5S_MAX_RANK] = {0};
    *dset = H5Dopen2(file, name, H5P_DEFAULT);
    hid_t sp = *dset >= 0 ? H5Dget_space(*dset) : H5I_INVALID_HID;
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (nd == (cols ? 2 : 1) && H5Sget_simple_extent_dims(sp, d, NULL) < 0)
        nd = -1;
    h5i_close_space(sp);
    if (nd < 0)
        return ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: cannot open for writing", path, name);
    if (nd != (cols ? 2 : 1))
        return ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: %d-D, expected %d-D", path, name, nd,
                       cols ? 2 : 1);
    int64_t dims[2] = {(int64_t)d[0], (int64_t)d[1]};
    if (h5i_check_range(path, name, dims, row0, nrows, cols, msg) != DS_OK)
        return DS_ERR_RUNTIME;
    return DS_OK;
}

int h5io_write_rows(const char *path, const char *name, int64_t row0, int64_t nrows, int64_t cols,
                    int src_f32, const void *data, ds_msg *msg)
{
    char dn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, name, dn, msg));
    if (nrows == 0)
        return DS_OK;
    h5i_quiet();
    hid_t d = H5I_INVALID_HID;
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    int rc = file < 0 ? ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot open for writing", path) : DS_OK;
    if (rc == DS_OK)
        rc = open_for_write(file, path, dn, row0, nrows, cols, &d, msg);
    hid_t mtype = src_f32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
    errno = 0;
    if (rc == DS_OK && h5i_xfer_rows(d, 1, row0, nrows, cols, mtype, (void *)data) < 0)
        rc = ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: cannot write rows %lld..%lld: %s", path, dn,
                     (long long)row0, (long long)(row0 + nrows - 1), h5i_write_why());
    h5i_close_obj(d);
    return h5i_close_file(file, path, rc, msg);
}

int h5io_write_vector(const char *path, int create, const char *name, const double *v, int64_t n,
                      ds_msg *msg)
{
    char vn[NAME_MAX_LEN], part[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, name, vn, msg));
    h5i_quiet();
    hid_t d = H5I_INVALID_HID;
    hid_t file = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                        : H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    int rc = file < 0 ? ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot %s", path,
                                create ? "create" : "open for writing")
                      : DS_OK;
    if (rc == DS_OK && h5i_walk_links(file, vn, part) != LINKS_MISSING)
        rc = ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: already exists", path, vn);
    hsize_t dims[1] = {(hsize_t)(n > 0 ? n : 0)};
    if (rc == DS_OK)
        rc = h5i_create_dataset(file, path, vn, 1, dims, NULL, H5T_IEEE_F64LE, &d, msg);
    errno = 0;
    if (rc == DS_OK && n > 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        rc = ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: cannot write: %s", path, vn, h5i_write_why());
    h5i_close_obj(d);
    return h5i_close_file(file, path, rc, msg);
}

// File type, memory type, dataspace and data of one attribute; the caller closes all three ids.
static void attr_layout(const h5io_attr *a, hid_t *ftype, hid_t *mtype, hid_t *space,
                        const void **buf)
{
    hsize_t len = (hsize_t)(a->len > 0 ? a->len : 0);
    switch (a->kind) {
    case H5IO_INT:
        *ftype = H5Tcopy(H5T_STD_I64LE);
        *mtype = H5Tcopy(H5T_NATIVE_INT64);
        *buf = &a->i;
        break;
    case H5IO_DOUBLE:
    case H5IO_DOUBLES:
        *ftype = H5Tcopy(H5T_IEEE_F64LE);
        *mtype = H5Tcopy(H5T_NATIVE_DOUBLE);
        *buf = a->kind == H5IO_DOUBLE ? (const void *)&a->d : (const void *)a->v;
        break;
    default:  // H5IO_STRING: variable-length UTF-8, which h5py reads as str
        DS_ASSERT(a->kind == H5IO_STRING && a->s);
        *ftype = H5Tcopy(H5T_C_S1);
        if (*ftype >= 0 && (H5Tset_size(*ftype, H5T_VARIABLE) < 0 ||
                            H5Tset_cset(*ftype, H5T_CSET_UTF8) < 0)) {
            H5Tclose(*ftype);
            *ftype = H5I_INVALID_HID;
        }
        *mtype = *ftype >= 0 ? H5Tcopy(*ftype) : H5I_INVALID_HID;
        *buf = &a->s;
    }
    // An attribute cannot have a zero-size simple dataspace in HDF5 1.10: len 0 is a null one.
    if (a->kind != H5IO_DOUBLES)
        *space = H5Screate(H5S_SCALAR);
    else
        *space = len ? H5Screate_simple(1, &len, NULL) : H5Screate(H5S_NULL);
}

// Writes one attribute, replacing an earlier one of the same name.
static int write_attr(hid_t obj, const char *path, const char *dn, const h5io_attr *a, ds_msg *msg)
{
    hid_t ftype, mtype, space, attr = H5I_INVALID_HID;
    const void *buf = NULL;
    attr_layout(a, &ftype, &mtype, &space, &buf);
    int ok = ftype >= 0 && mtype >= 0 && space >= 0;
    if (ok && H5Aexists(obj, a->name) > 0)
        ok = H5Adelete(obj, a->name) >= 0;
    errno = 0;
    if (ok)
        attr = H5Acreate2(obj, a->name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    ok = attr >= 0 && (H5Sget_simple_extent_type(space) == H5S_NULL || H5Awrite(attr, mtype, buf) >= 0);
    if (attr >= 0)
        H5Aclose(attr);
    h5i_close_space(space);
    h5i_close_type(mtype);
    h5i_close_type(ftype);
    if (!ok)
        return ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: cannot write attribute %s: %s", path, dn,
                       a->name, h5i_write_why());
    return DS_OK;
}

int h5io_write_attrs(const char *path, const char *dataset, const h5io_attr *attrs, int nattrs,
                     ds_msg *msg)
{
    char dn[NAME_MAX_LEN];
    DS_CHECK(h5i_norm_name(path, dataset, dn, msg));
    h5i_quiet();
    hid_t d = H5I_INVALID_HID;
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    int rc = file < 0 ? ds_fail(msg, DS_ERR_RUNTIME, "%s: cannot open for writing", path) : DS_OK;
    if (rc == DS_OK && (d = H5Dopen2(file, dn, H5P_DEFAULT)) < 0)
        rc = ds_fail(msg, DS_ERR_RUNTIME, "%s: dataset %s: cannot open for writing", path, dn);
    for (int i = 0; rc == DS_OK && i < nattrs; i++)
        rc = write_attr(d, path, dn, &attrs[i], msg);
    h5i_close_obj(d);
    return h5i_close_file(file, path, rc, msg);
}

// Flushes path (a file, or with dir a directory) to stable storage; best effort on filesystems that
// refuse fsync on directories.
static void sync_path(const char *path, int dir)
{
    int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

// The directory part of path ("." when it has none, "/" for the root).
static void dir_of(const char *path, char *dir, size_t len)
{
    snprintf(dir, len, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, len, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
}

int h5io_output_dir_ok(const char *path, ds_msg *msg)
{
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    if (access(dir, W_OK) != 0)
        return ds_fail(msg, DS_ERR_USAGE, "--output %s: directory %s is not writable", path, dir);
    return DS_OK;
}

int h5io_commit(const char *tmp_path, const char *final_path, ds_msg *msg)
{
    sync_path(tmp_path, 0);  // the data reaches the disk before the name does
    char dir[4096];
    dir_of(final_path, dir, sizeof dir);
    if (rename(tmp_path, final_path) != 0) {
        int e = errno;
        return ds_fail(msg, DS_ERR_RUNTIME, "cannot rename %s to %s: %s", tmp_path, final_path,
                       strerror(e));
    }
    sync_path(dir, 1);
    return DS_OK;
}

void h5io_part_name(const char *final_path, unsigned long long tag, char *buf, size_t len)
{
    snprintf(buf, len, "%s.part.%llx", final_path, tag);
}

void h5io_discard(const char *tmp_path)
{
    unlink(tmp_path);
}

void h5io_version(char *buf, size_t len)
{
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    snprintf(buf, len, "HDF5 %u.%u.%u", maj, min, rel);
}
