// h5io_storage.c: whether a dataset's file can back what its header declares, checked before any
// caller sizes a buffer by the header (a damaged or crafted file may declare 2^40 rows in 2 KB), and
// the refusal of raw data kept outside the file (external storage, virtual datasets) and of number types
// other than the standard ones (HDF5 1.10's conversions of odd bit layouts read out of bounds).
// provides: h5i_check_storage, h5i_standard_type
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h5io_internal.h"

// A filtered dataset inflates to at most deflate's best ratio, about 1032:1 (zlib's documentation);
// shuffle and fletcher32 do not compress. A header that declares more is damaged, not merely large.
enum { FILTERED_MAX_RATIO = 1032 };

// The most bytes that path's file (of file_bytes) can back for one dataset or chunk.
static double max_backed(double file_bytes, int filtered)
{
    return filtered ? file_bytes * FILTERED_MAX_RATIO : file_bytes;
}

// The dataset's raw data must lie in this file: not in external files, not mapped from others.
static int check_in_file(hid_t dcpl, const char *path, const char *name, ds_msg *msg)
{
    if (H5Pget_external_count(dcpl) != 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: data kept in external files, refused", path, name);
    H5D_layout_t layout = H5Pget_layout(dcpl);
    if (layout == H5D_VIRTUAL)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: a virtual dataset (data in other files), refused", path,
                       name);
    if (layout < 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its storage layout", path, name);
    return DS_OK;
}

// A compact dataset keeps its data in its header: that must hold what the shape needs (HDF5 1.10
// copies the shape's worth out of it).
static int check_compact(hid_t dset, hid_t dcpl, const char *path, const char *name, double bytes, ds_msg *msg)
{
    if (H5Pget_layout(dcpl) != H5D_COMPACT || (double)H5Dget_storage_size(dset) >= bytes)
        return DS_OK;
    return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: holds %llu bytes of data, its shape needs %.0f (damaged)", path,
                   name, (unsigned long long)H5Dget_storage_size(dset), bytes);
}

// The chunk that HDF5 would hold in memory to read a chunked dataset must fit the same bound, and no
// wider than a dimension that cannot grow (HDF5's own rule when it creates one; 1.10 reads past a
// decompressed chunk that is smaller than the chunk shape says). Its rank must be the dataset's: a
// 6.6 KB file whose 1-D y declared chunks of rank 0 made HDF5 1.10's H5Dread take 23 GB and 100 s (found
// by fuzzing, 2026-11-26; tests/fuzz/corpus/h5_lsq/regress-chunk_rank).
static int check_chunk(hid_t dset, hid_t dcpl, const char *path, const char *name, double elsize, double limit,
                       ds_msg *msg)
{
    hsize_t c[H5S_MAX_RANK], maxdims[H5S_MAX_RANK];
    hid_t sp = H5Dget_space(dset);
    const int chunked = H5Pget_layout(dcpl) == H5D_CHUNKED;
    int nd = chunked ? H5Pget_chunk(dcpl, H5S_MAX_RANK, c) : 0;
    const int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (chunked && (rank < 0 || nd < 0 || H5Sget_simple_extent_dims(sp, NULL, maxdims) < 0))
        nd = -1;
    h5i_close_space(sp);
    if (nd < 0)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its chunk shape", path, name);
    if (chunked && nd != rank)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: chunks of rank %d for a dataset of rank %d (damaged)", path,
                       name, nd, rank);
    double bytes = elsize;
    for (int i = 0; i < nd; i++) {
        if (maxdims[i] != H5S_UNLIMITED && c[i] > maxdims[i])
            return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: chunks of %llu along dimension %d, which holds %llu (damaged)",
                           path, name, (unsigned long long)c[i], i, (unsigned long long)maxdims[i]);
        bytes *= (double)c[i];
    }
    if (bytes > limit)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: chunks of %.0f bytes, more than the file can hold (damaged?)",
                       path, name, bytes);
    return DS_OK;
}

// The chunks that a chunked dataset's shape holds (the product over its dimensions of ⌈dim / chunk⌉; the
// checks before this one made the ranks agree and every chunk size nonzero).
static double chunk_slots(hid_t dset, hid_t dcpl)
{
    hsize_t c[H5S_MAX_RANK], dims[H5S_MAX_RANK];
    hid_t sp = H5Dget_space(dset);
    int nd = H5Pget_chunk(dcpl, H5S_MAX_RANK, c), rank = sp >= 0 ? H5Sget_simple_extent_dims(sp, dims, NULL) : -1;
    h5i_close_space(sp);
    double slots = 1;
    for (int i = 0; i < nd && nd == rank; i++)
        slots *= c[i] > 0 ? ceil((double)dims[i] / (double)c[i]) : 0;
    return nd == rank ? slots : 0;
}

// The chunks that the index declares must fit in the file together (stored chunks do not overlap): HDF5
// 1.10 allocates a buffer of a chunk's declared size before it reads the chunk, so a 6 KB file whose index
// declares a 3.5 GB chunk would make H5Dread ask for 3.5 GB. Nor may the index list more chunks than the
// shape holds (a 6.6 KB file listed three chunks at one place in a shape of one; 1.10 read heap memory
// past the short inflated chunk into X, found by fuzzing, 2026-11-26: regress-chunk_count). One pass over the index (H5Dget_num_chunks
// and H5Dget_storage_size each walk it), of the same nodes that a read's lookups descend through.
static int check_chunk_index(hid_t dset, hid_t dcpl, const char *path, const char *name, double file_bytes,
                             ds_msg *msg)
{
    if (H5Pget_layout(dcpl) != H5D_CHUNKED)
        return DS_OK;
    hsize_t n = 0;
    hid_t sp = H5Dget_space(dset);  // (1.10 refuses H5S_ALL here)
    int ok = sp >= 0 && H5Dget_num_chunks(dset, sp, &n) >= 0;
    h5i_close_space(sp);
    hsize_t stored = ok && n > 0 ? H5Dget_storage_size(dset) : 0;
    if (!ok || (n > 0 && stored == 0))
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its chunk index (damaged)", path, name);
    if ((double)n > chunk_slots(dset, dcpl))
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: its chunk index lists %llu chunks where its shape holds %.0f (damaged)",
                       path, name, (unsigned long long)n, chunk_slots(dset, dcpl));
    if ((double)stored > file_bytes)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: its %llu chunks declare %llu bytes, more than the %.0f-byte file holds (damaged)",
                       path, name, (unsigned long long)n, (unsigned long long)stored, file_bytes);
    return DS_OK;
}

// A property list's encoding (HDF5 1.12 added the file access list argument).
static herr_t encode_plist(hid_t plist, unsigned char *buf, size_t *n)
{
#if H5_VERSION_GE(1, 12, 0)
    return H5Pencode2(plist, buf, n, H5P_DEFAULT);
#else
    return H5Pencode(plist, buf, n);
#endif
}

// The number of bytes the dataset's fill value is stored in, or −1 where that cannot be told. libhdf5's
// H5Pget_fill_value copies as many bytes as the value's type has from a buffer of the stored size, so a
// damaged message that stores fewer would be read past its end. No call returns that size, but the
// property list's own encoding (H5Pencode, HDF5 1.10 to 1.14) carries it: the property's name, the
// allocation and fill times (a byte each), then the size as a little-endian 64-bit integer. The last
// occurrence of the name is the property: filter parameters encoded before it may hold the same bytes;
// the value itself, when shorter than its (at most 8-byte) type, cannot hold the 11 of the name.
static int64_t stored_fill_size(hid_t dcpl)
{
    static const char key[] = "fill_value";  // with its terminating zero: 11 bytes
    size_t n = 0;
    herr_t st = encode_plist(dcpl, NULL, &n);
    unsigned char *b = st >= 0 && n > 0 ? malloc(n) : NULL;
    st = b ? encode_plist(dcpl, b, &n) : -1;
    int64_t size = -1;
    for (size_t i = 0; st >= 0 && i + sizeof key + 2 + 8 <= n; i++)
        if (memcmp(b + i, key, sizeof key) == 0) {
            uint64_t u = 0;
            for (int k = 7; k >= 0; k--)
                u = u << 8 | b[i + sizeof key + 2 + k];
            size = (int64_t)u;
        }
    free(b);
    return size;
}

// Parts never written read as the fill value, unless the dataset defines none or its fill time is "never":
// libhdf5 then leaves the reader's memory as it was, so those values would be whatever the buffer held.
// Such a dataset is refused unless every part of it is written (all the chunks its shape holds, or its
// contiguous storage).
static int check_fill(hid_t dset, hid_t dcpl, size_t elsize, const char *path, const char *name, uint64_t n_elements,
                      ds_msg *msg)
{
    H5D_fill_value_t status = H5D_FILL_VALUE_ERROR;
    H5D_fill_time_t when = H5D_FILL_TIME_ERROR;
    if (H5Pfill_value_defined(dcpl, &status) < 0 || H5Pget_fill_time(dcpl, &when) < 0)  // libhdf5 reads none of it
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its fill value (damaged)", path, name);
    int64_t stored = status == H5D_FILL_VALUE_USER_DEFINED ? stored_fill_size(dcpl) : -1;
    if (stored > 0 && (size_t)stored != elsize)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: its fill value is stored in %lld bytes where its type has "
                       "%zu (damaged)", path, name, (long long)stored, elsize);
    if (n_elements == 0 ||
        (when != H5D_FILL_TIME_NEVER && (status == H5D_FILL_VALUE_DEFAULT || status == H5D_FILL_VALUE_USER_DEFINED)))
        return DS_OK;
    int whole = 0;
    if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t n = 0;
        hid_t sp = H5Dget_space(dset);
        whole = sp >= 0 && H5Dget_num_chunks(dset, sp, &n) >= 0 && (double)n >= chunk_slots(dset, dcpl);
        h5i_close_space(sp);
    } else {
        H5D_space_status_t alloc = H5D_SPACE_STATUS_ERROR;
        whole = H5Dget_space_status(dset, &alloc) >= 0 && alloc == H5D_SPACE_STATUS_ALLOCATED;
    }
    return whole ? DS_OK
                 : ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: parts of it were never written and it defines no fill "
                           "value for them (incomplete)", path, name);
}

int h5i_check_storage(hid_t dset, const char *path, const char *name, uint64_t n_elements, ds_msg *msg)
{
    struct stat st;
    hid_t t = H5Dget_type(dset), dcpl = H5Dget_create_plist(dset);
    size_t elsize = t >= 0 ? H5Tget_size(t) : 0;
    int nfilters = dcpl >= 0 ? H5Pget_nfilters(dcpl) : -1;
    int rc = DS_OK;
    if (stat(path, &st) != 0 || elsize == 0 || nfilters < 0)
        rc = ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: cannot read its storage", path, name);
    if (rc == DS_OK)
        rc = check_in_file(dcpl, path, name, msg);
    if (rc == DS_OK)
        rc = h5i_check_filters(dcpl, path, name, msg);
    double limit = max_backed((double)st.st_size, nfilters > 0), bytes = (double)n_elements * (double)elsize;
    if (rc == DS_OK && bytes > limit)
        rc = ds_fail(msg, DS_ERR_INPUT,
                     "%s: dataset %s: declares %llu values (%.0f bytes), more than the %lld-byte file holds (truncated or damaged)",
                     path, name, (unsigned long long)n_elements, bytes, (long long)st.st_size);
    if (rc == DS_OK)
        rc = check_compact(dset, dcpl, path, name, bytes, msg);
    if (rc == DS_OK)
        rc = check_chunk(dset, dcpl, path, name, (double)elsize, limit, msg);
    if (rc == DS_OK)
        rc = check_chunk_index(dset, dcpl, path, name, (double)st.st_size, msg);
    if (rc == DS_OK)
        rc = check_fill(dset, dcpl, elsize, path, name, n_elements, msg);
    h5i_close_plist(dcpl);
    h5i_close_type(t);
    return rc;
}

int h5i_standard_type(hid_t t)
{
    const hid_t std[] = {H5T_IEEE_F32LE, H5T_IEEE_F32BE, H5T_IEEE_F64LE, H5T_IEEE_F64BE, H5T_STD_I8LE,
                         H5T_STD_I8BE,   H5T_STD_I16LE,  H5T_STD_I16BE,  H5T_STD_I32LE,  H5T_STD_I32BE,
                         H5T_STD_I64LE,  H5T_STD_I64BE,  H5T_STD_U8LE,   H5T_STD_U8BE,   H5T_STD_U16LE,
                         H5T_STD_U16BE,  H5T_STD_U32LE,  H5T_STD_U32BE,  H5T_STD_U64LE,  H5T_STD_U64BE};
    for (size_t i = 0; i < sizeof std / sizeof std[0]; i++)
        if (H5Tequal(t, std[i]) > 0)
            return 1;
    return 0;
}
