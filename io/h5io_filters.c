// h5io_filters.c: the reads of chunked datasets, filtered (compressed) or not, decoded here and not by
// libhdf5. HDF5 1.10 copies a chunk's full size out of whatever its filters returned, so a crafted chunk
// that inflates to fewer bytes made it read heap memory past the buffer into the data: finite garbage that
// no later check sees (found by fuzzing on 2026-11-26: failures.md); a damaged index that gives an
// unfiltered chunk the wrong stored size does the same (2026-11-27). So libhdf5 reads only contiguous and
// compact datasets for dsolve. Its decoders cannot be replaced (H5Zregister refuses
// the predefined filters), and checking each chunk before H5Dread decoded every chunk twice (+50 % reading
// a gzip file) and left the file free to change between the check and the read. So each stored chunk in
// the rows read is fetched raw (H5Dread_chunk; an unfiltered one only in the rows read, by pread from the
// file, straight into place when it is of the memory's type and every column: libhdf5's own partial reads
// of unfiltered chunks kept their speed) and decoded once, here, through its pipeline from the last
// filter (its filter mask honoured): fletcher32 verified as HDF5 does (the sum of 1.6.2 and before
// accepted too) and taken off, deflate inflated (zlib), shuffle undone; what comes out must be exactly one
// chunk (an edge chunk that the dataset keeps unfiltered, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS, is stored
// whole), then converted to the memory type (H5Tconvert) and copied into place. A chunk never written
// reads as the fill value (and is refused where the dataset defines none: libhdf5 would leave the memory
// as it was). Filters other than these three are refused
// by the probe (h5i_check_filters), as is a filter listed twice. Tests: tests/test_h5filters.c.
// provides: h5i_check_filters, h5i_filters_read_rows, h5i_xfer_why, h5i_xfer_status
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "h5io_internal.h"

enum { FLETCHER_LEN = 4, MAX_FILTERS = 8, MAX_CD = 8 };

static char g_why[160];           // why the last read failed, for the reader's message
static int g_status = DS_ERR_INPUT;  // and whose fault: the file's, or the host's memory

const char *h5i_xfer_why(void)
{
    return g_why;
}

int h5i_xfer_status(void)
{
    return g_status;
}

// The read could not get n bytes: the machine's failure, not the file's (exit 1, not 3).
static int out_of_memory(size_t n)
{
    g_status = DS_ERR_RUNTIME;
    snprintf(g_why, sizeof g_why, " (out of host memory: %zu bytes to decode its chunks)", n);
    return 0;
}

static int damaged(hsize_t row, const char *what)
{
    snprintf(g_why, sizeof g_why, " (the chunk at row %llu %s: damaged)", (unsigned long long)row, what);
    return 0;
}

// HDF5's Fletcher-32 of n bytes: 16-bit big-endian words (an odd last byte the high half of one), both
// sums folded every 360 words, before they could overflow.
static uint32_t fletcher32(const unsigned char *p, size_t n)
{
    uint32_t s1 = 0, s2 = 0;
    for (size_t words = n / 2; words > 0;) {
        size_t len = words > 360 ? 360 : words;
        words -= len;
        for (; len > 0; len--, p += 2) {
            s1 += (uint32_t)p[0] << 8 | p[1];
            s2 += s1;
        }
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    if (n % 2) {
        s1 += (uint32_t)p[0] << 8;
        s2 += s1;
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    s1 = (s1 & 0xffff) + (s1 >> 16);
    s2 = (s2 & 0xffff) + (s2 >> 16);
    return s2 << 16 | s1;
}

// A chunked dataset's pipeline and the buffers its reads reuse.
typedef struct decoder {
    int nf;
    H5Z_filter_t f[MAX_FILTERS];
    unsigned elsize;           // shuffle's element size (its one client value)
    size_t chunk, cap;         // a decoded chunk's bytes; each of a and b holds chunk + 4·nf + 1
    unsigned char *a, *b, *raw, *conv;
    size_t raw_cap;
} decoder;

// Inflates src (n bytes, a whole zlib stream) into out (cap bytes); the bytes it gave, cap when it had
// more to give, SIZE_MAX when src is not a whole stream.
static size_t inflate_into(const unsigned char *src, size_t n, unsigned char *out, size_t cap)
{
    z_stream z = {.next_in = (Bytef *)src, .avail_in = (uInt)n, .next_out = out};
    if (n > UINT32_MAX || inflateInit(&z) != Z_OK)
        return SIZE_MAX;
    int st = Z_OK;
    size_t got = 0;
    while (st == Z_OK && got < cap) {  // zlib counts in 32 bits: a chunk near 4 GiB takes two calls
        const size_t room = cap - got;
        z.avail_out = (uInt)(room < UINT32_MAX ? room : UINT32_MAX);
        st = inflate(&z, Z_NO_FLUSH);
        got = (size_t)(z.next_out - out);
    }
    inflateEnd(&z);
    return st == Z_STREAM_END ? got : got == cap ? cap : SIZE_MAX;
}

// The chunk at row: "VERB [more than ]N bytes where a chunk holds C" (damaged).
static int bad_size(hsize_t row, const char *verb, size_t size, size_t chunk)
{
    char what[96];
    snprintf(what, sizeof what, "%s %s%zu bytes where a chunk holds %zu", verb, size > chunk ? "more than " : "",
             size > chunk ? chunk : size, chunk);
    return damaged(row, what);
}

// A chunk that does not decode to exactly one chunk's bytes.
static int wrong_size(hsize_t row, size_t size, size_t chunk)
{
    return bad_size(row, "decodes to", size, chunk);
}

// Decodes one stored chunk (raw, n bytes, in d->raw) through the pipeline, skipping the filters that mask
// names: 1 with *out at exactly d->chunk bytes, or 0 with g_why set. A stage that writes (deflate, shuffle)
// writes at most d->cap bytes: a chunk too long for that cannot come out at a chunk's size.
static int decode(decoder *d, unsigned mask, size_t n, hsize_t row, const unsigned char **out)
{
    unsigned char *cur = d->raw;
    size_t size = n;
    for (int i = d->nf - 1; i >= 0; i--) {
        if (mask & (1u << i))
            continue;
        unsigned char *next = cur == d->a ? d->b : d->a;
        if (d->f[i] == H5Z_FILTER_FLETCHER32) {
            if (size < FLETCHER_LEN)
                return damaged(row, "does not decode");
            size -= FLETCHER_LEN;
            const unsigned char *s = cur + size;
            const uint32_t stored = (uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24;
            const uint32_t sum = fletcher32(cur, size), old = (sum & 0x00ff00ffu) << 8 | (sum >> 8 & 0x00ff00ffu);
            if (stored != sum && stored != old)
                return damaged(row, "fails its fletcher32 checksum");
        } else if (d->f[i] == H5Z_FILTER_DEFLATE) {
            size = inflate_into(cur, size, next, d->cap);
            if (size == SIZE_MAX)
                return damaged(row, "does not decode");
            cur = next;
        } else if (d->f[i] == H5Z_FILTER_SHUFFLE && size >= d->cap) {
            return wrong_size(row, size, d->chunk);
        } else if (d->f[i] == H5Z_FILTER_SHUFFLE && d->elsize > 1 && size / d->elsize > 1) {
            const size_t es = d->elsize, count = size / es;
            for (size_t j = 0; j < es; j++)
                for (size_t e = 0; e < count; e++)
                    next[e * es + j] = cur[j * count + e];
            memcpy(next + count * es, cur + count * es, size - count * es);
            cur = next;
        }
    }
    if (size != d->chunk)
        return wrong_size(row, size, d->chunk);
    *out = cur;
    return 1;
}

// Rows a .. b−1 of the decoded chunk at (r, q) (c0 × c1 values of ftype) into buf (rows from row0, width
// values each, of mtype), its columns q .. qe−1.
static int place(decoder *d, const unsigned char *dec, hid_t ftype, hid_t mtype, int same, const hsize_t at[2],
                 hsize_t c1, hsize_t a, hsize_t b, hsize_t qe, hsize_t row0, hsize_t width, unsigned char *buf)
{
    const size_t fsize = H5Tget_size(ftype), msize = H5Tget_size(mtype), vals = (size_t)((b - a) * c1);
    const unsigned char *src = dec + (size_t)((a - at[0]) * c1) * fsize;
    if (!same) {
        memcpy(d->conv, src, vals * fsize);
        if (H5Tconvert(ftype, mtype, vals, d->conv, NULL, H5P_DEFAULT) < 0)
            return damaged(at[0], "has values that do not convert");
        src = d->conv;
    }
    for (hsize_t i = a; i < b; i++)
        memcpy(buf + (size_t)((i - row0) * width + at[1]) * msize, src + (size_t)((i - a) * c1) * msize,
               (size_t)(qe - at[1]) * msize);
    return 1;
}

// What a chunk never written reads as, in mtype, into fill (its size): the fill value (zeros by default),
// 1; or 0 where libhdf5 would leave the caller's memory as it was (fill time "never", or no fill value):
// such values are undefined, and dsolve refuses them rather than read garbage.
static int fill_value(hid_t dcpl, hid_t mtype, unsigned char *fill)
{
    H5D_fill_value_t status = H5D_FILL_VALUE_ERROR;
    H5D_fill_time_t when = H5D_FILL_TIME_ERROR;
    return H5Pfill_value_defined(dcpl, &status) >= 0 && H5Pget_fill_time(dcpl, &when) >= 0 &&
           when != H5D_FILL_TIME_NEVER && (status == H5D_FILL_VALUE_DEFAULT || status == H5D_FILL_VALUE_USER_DEFINED) &&
           H5Pget_fill_value(dcpl, mtype, fill) >= 0;
}

// Rows a .. b−1, columns q .. qe−1 of buf (rows from row0, width values of msize each) set to fill.
static void put_fill(unsigned char *buf, const unsigned char *fill, size_t msize, hsize_t a, hsize_t b, hsize_t q,
                     hsize_t qe, hsize_t row0, hsize_t width)
{
    for (hsize_t i = a; i < b; i++)
        for (hsize_t j = q; j < qe; j++)
            memcpy(buf + (size_t)((i - row0) * width + j) * msize, fill, msize);
}

// The dataset's pipeline into d (0 when it cannot be read or is not what h5i_check_filters lets through).
static int pipeline(hid_t dcpl, decoder *d)
{
    unsigned seen = 0;
    for (int i = 0; i < d->nf; i++) {
        unsigned fl = 0, cd[MAX_CD] = {0};
        size_t ncd = MAX_CD;
        d->f[i] = H5Pget_filter2(dcpl, (unsigned)i, &fl, &ncd, cd, 0, NULL, NULL);
        if (d->f[i] < H5Z_FILTER_DEFLATE || d->f[i] > H5Z_FILTER_FLETCHER32 || (seen & (1u << d->f[i])))
            return 0;
        seen |= 1u << d->f[i];
        if ((d->f[i] == H5Z_FILTER_SHUFFLE && (ncd != 1 || cd[0] == 0)) ||
            (d->f[i] == H5Z_FILTER_DEFLATE && (ncd != 1 || cd[0] > 9)))
            return 0;  // libhdf5 refuses them too
        d->elsize = d->f[i] == H5Z_FILTER_SHUFFLE ? cd[0] : d->elsize;
    }
    return 1;
}

// The descriptor under dset's file where the sec2 driver (the default) holds one and the file has no user
// block, so that a chunk's address is its offset in the file; −1 otherwise (chunks are read whole then).
static int chunk_fd(hid_t dset)
{
    hid_t fid = H5Iget_file_id(dset);
    hid_t fapl = fid >= 0 ? H5Fget_access_plist(fid) : H5I_INVALID_HID;
    hid_t fcpl = fid >= 0 ? H5Fget_create_plist(fid) : H5I_INVALID_HID;
    hsize_t ub = 1;
    void *handle = NULL;
    int fd = -1;
    if (fapl >= 0 && fcpl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2 && H5Pget_userblock(fcpl, &ub) >= 0 && ub == 0 &&
        H5Fget_vfd_handle(fid, fapl, &handle) >= 0 && handle)
        fd = *(int *)handle;
    h5i_close_plist(fapl);
    h5i_close_plist(fcpl);
    if (fid >= 0)
        H5Fclose(fid);  // (the dataset keeps the file, and fd, open)
    return fd;
}

// len bytes at offset off of fd into dst: 1, or 0 with g_why set (the file ends first: damaged; an I/O
// error: the machine's, exit 1).
static int pread_all(int fd, haddr_t off, size_t len, unsigned char *dst, hsize_t row)
{
    while (len > 0) {
        const ssize_t got = pread(fd, dst, len, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            g_status = DS_ERR_RUNTIME;
            snprintf(g_why, sizeof g_why, " (reading the chunk at row %llu: %s)", (unsigned long long)row, strerror(errno));
            return 0;
        }
        if (got == 0)
            return damaged(row, "lies past the end of the file");
        dst += got, off += (haddr_t)got, len -= (size_t)got;
    }
    return 1;
}

// Rows a .. b−1 of the unfiltered chunk at (r, q) (one chunk's bytes at addr) into buf as place() puts
// them: from fd, those rows only, straight into buf when it is of the memory's type (same) and every
// column; without fd, the whole chunk by H5Dread_chunk (into buf when those rows are all of it).
static int read_plain(decoder *d, hid_t dset, int fd, haddr_t addr, hid_t ftype, hid_t mtype, int same,
                      const hsize_t at[2], hsize_t c1, hsize_t a, hsize_t b, hsize_t qe, hsize_t row0, hsize_t width,
                      unsigned char *buf)
{
    const size_t rowb = (size_t)c1 * H5Tget_size(ftype), off = (size_t)(a - at[0]) * rowb, len = (size_t)(b - a) * rowb;
    int in_place = same && at[1] == 0 && c1 == width;
    unsigned char *dst = in_place ? buf + (size_t)(a - row0) * width * H5Tget_size(mtype) : d->raw + off;
    uint32_t mask = 0;
    if (fd >= 0) {
        if (addr > (haddr_t)INT64_MAX - d->chunk)  // (an offset pread would take as negative)
            return damaged(at[0], "lies past the end of the file");
        if (!pread_all(fd, addr + off, len, dst, at[0]))
            return 0;
    } else {
        in_place = in_place && len == d->chunk;
        if (H5Dread_chunk(dset, H5P_DEFAULT, at, &mask, in_place ? dst : d->raw) < 0)
            return 0;
    }
    return in_place || place(d, d->raw, ftype, mtype, same, at, c1, a, b, qe, row0, width, buf);
}

// Long: one loop over the chunks the rows cover, with each chunk's lookups and size checks and the three
// ways it lands (the fill value, in place, decoded and placed), best read in one piece.
int h5i_filters_read_rows(hid_t dset, hsize_t row0, hsize_t n, hsize_t cols, hid_t mtype, void *buf)
{
    g_why[0] = '\0';
    g_status = DS_ERR_INPUT;
    decoder d = {0};
    hid_t dcpl = H5Dget_create_plist(dset), sp = H5Dget_space(dset), ftype = H5Dget_type(dset);
    hsize_t c[H5S_MAX_RANK] = {1, 1}, dims[H5S_MAX_RANK] = {1, 1};
    if (dcpl < 0 || H5Pget_layout(dcpl) != H5D_CHUNKED) {  // contiguous or compact: libhdf5 reads it
        h5i_close_plist(dcpl);
        h5i_close_space(sp);
        h5i_close_type(ftype);
        return dcpl >= 0 ? -1 : 0;
    }
    d.nf = H5Pget_nfilters(dcpl);
    const int nd = H5Pget_chunk(dcpl, H5S_MAX_RANK, c), rank = sp >= 0 ? H5Sget_simple_extent_dims(sp, dims, NULL) : -1;
    unsigned opts = 0;  // partial edge chunks stored unfiltered (H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)
    int ok = d.nf >= 0 && d.nf <= MAX_FILTERS && H5Pget_chunk_opts(dcpl, &opts) >= 0 && pipeline(dcpl, &d) &&
             nd == rank && (nd == 1 || nd == 2) && c[0] > 0 && c[1] > 0 && ftype >= 0;
    const size_t fsize = ok ? H5Tget_size(ftype) : 0, msize = H5Tget_size(mtype);
    const int same = ok && H5Tequal(ftype, mtype) > 0;
    unsigned char fill[64] = {0};  // msize ≤ 8: the readers' memory types are numbers
    const int have_fill = ok && msize <= sizeof fill && fill_value(dcpl, mtype, fill);
    const hsize_t c1 = nd == 2 ? c[1] : 1, width = cols ? cols : 1;
    d.chunk = fsize * (size_t)c[0] * (size_t)c1;
    d.cap = d.chunk + FLETCHER_LEN * MAX_FILTERS + 1;
    const size_t conv = (size_t)c[0] * (size_t)c1 * (fsize > msize ? fsize : msize);
    ok = ok && d.chunk > 0;
    const int fd = ok && d.nf == 0 ? chunk_fd(dset) : -1;
    if (!ok)
        snprintf(g_why, sizeof g_why, " (its filters or chunks cannot be read: damaged)");
    else if ((d.nf > 0 && (!(d.a = malloc(d.cap)) || !(d.b = malloc(d.cap)))) || (!same && !(d.conv = malloc(conv))))
        ok = out_of_memory(2 * d.cap + conv);
    for (hsize_t r = row0 / c[0] * c[0]; ok && r < row0 + n; r += c[0])
        for (hsize_t q = 0; ok && q < width; q += c1) {
            const hsize_t at[2] = {r, q}, a = r > row0 ? r : row0, b = r + c[0] < row0 + n ? r + c[0] : row0 + n;
            const hsize_t qe = q + c1 < width ? q + c1 : width;
            hsize_t size = 0;
            haddr_t addr = HADDR_UNDEF;
            unsigned mask = 0;
            uint32_t got_mask = 0;
            ok = H5Dget_chunk_info_by_coord(dset, at, &mask, &addr, &size) >= 0;
            if (ok && addr == HADDR_UNDEF) {  // never written: the fill value, nothing to decode
                if (!have_fill)
                    ok = damaged(r, "was never written and the dataset defines no fill value");
                else
                    put_fill(buf, fill, msize, a, b, q, qe, row0, width);
                continue;
            }
            // H5Dread_chunk writes as many bytes as the index lookup says (H5Dget_chunk_storage_size's),
            // which a damaged index can make differ from the size found above: the buffer takes that one.
            hsize_t stored = 0;
            ok = ok && H5Dget_chunk_storage_size(dset, at, &stored) >= 0;
            if (ok && stored != size)
                ok = damaged(r, "has two sizes in the chunk index");
            if (ok && d.nf == 0 && size != d.chunk)  // (read in place below: exactly one chunk's bytes)
                ok = bad_size(r, "is stored in", (size_t)size, d.chunk);
            if (ok && size > d.raw_cap) {
                unsigned char *more = realloc(d.raw, size);
                ok = more != NULL || out_of_memory((size_t)size);
                d.raw = ok ? more : d.raw, d.raw_cap = ok ? size : d.raw_cap;
            }
            if (d.nf == 0) {
                ok = ok && read_plain(&d, dset, fd, addr, ftype, mtype, same, at, c1, a, b, qe, row0, width, buf);
                continue;
            }
            ok = ok && H5Dread_chunk(dset, H5P_DEFAULT, at, &got_mask, d.raw) >= 0;
            const unsigned char *dec = d.raw;
            // an edge chunk kept unfiltered is stored whole: HDF5 copies a chunk's size out of it
            const int raw_edge = (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) &&
                                 (r + c[0] > dims[0] || (nd == 2 && q + c1 > dims[1]));
            if (ok && raw_edge && size != d.chunk)
                ok = wrong_size(r, (size_t)size, d.chunk);
            ok = ok && (raw_edge || decode(&d, got_mask, (size_t)size, r, &dec));
            ok = ok && place(&d, dec, ftype, mtype, same, at, c1, a, b, qe, row0, width, buf);
        }
    free(d.a);
    free(d.b);
    free(d.raw);
    free(d.conv);
    h5i_close_plist(dcpl);
    h5i_close_space(sp);
    h5i_close_type(ftype);
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
        if (f == H5Z_FILTER_SHUFFLE && (ncd != 1 || cd[0] == 0))
            return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: its shuffle filter has no element size (damaged)", path,
                           name);
        if (f == H5Z_FILTER_DEFLATE && (ncd != 1 || cd[0] > 9))  // the level, 0 to 9 (libhdf5 checks it to decode)
            return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: its gzip filter has no level from 0 to 9 (damaged)", path,
                           name);
        seen |= 1u << f;
        at_deflate = f == H5Z_FILTER_DEFLATE ? i : at_deflate;
        at_shuffle = f == H5Z_FILTER_SHUFFLE ? i : at_shuffle;
    }
    if (at_deflate >= 0 && at_shuffle > at_deflate)  // shuffled after compression: not what writers do
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: shuffle applied after deflate, an order dsolve does not "
                       "read: rewrite it, e.g. h5repack -f SHUF -f GZIP=4 %s out.h5", path, name, path);
    return DS_OK;
}
