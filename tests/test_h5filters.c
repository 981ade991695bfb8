// test_h5filters.c: io/h5io_filters.c against compressed files written here with the C API (what h5py
// cannot make): every legitimate pipeline of gzip, shuffle and fletcher32 (in h5py's order, and fletcher32
// before deflate as C and netCDF writers may put it; partial edge chunks stored unfiltered) reads back
// exactly what was written, also from rows that cut chunks, from big-endian f32 read as f64 and f32, with
// chunks never written (the fill value), and with the checksum of HDF5 1.6.2 and before, and unfiltered
// chunked files as well (fetched raw too); a chunk written raw that inflates short or long, an unfiltered
// edge chunk or chunk of an unfiltered dataset stored short, a chunk whose checksum fails, a fill value
// stored shorter than its type, and
// another filter (scale-offset) fail with DS_ERR_INPUT and a line that says why; a read that cannot get the
// memory to decode a chunk is DS_ERR_RUNTIME (exit 1), not the file's fault.
// Runs on rank 0; other ranks only take part in the verdict.
#include <hdf5.h>  // provides: the raw HDF5 API, to write the files
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "h5io.h"
#include "harness.h"

enum { ROWS = 100, COLS = 37, CR = 64, CC = 16 };
enum { SHUF = 1, GZIP = 2, SUM_FIRST = 4, SUM_LAST = 8, RAW_EDGES = 16, SCALEOFFSET = 32, F32BE = 64, HALF = 128,
       FILL = 256, NEVER = 512, PAD = 1024, WIDE = 2048, OLD = 4096, UBLOCK = 8192 };
static const double FILL_VALUE = 2.5;

static double X[ROWS][COLS], Y[ROWS];

// path with /X (ROWS × COLS f64, or f32 big-endian with F32BE; chunks CR × CC (CR × COLS with WIDE), the filters flags names, in
// that order; only its first CR rows written with HALF; fill value FILL_VALUE with FILL, fill time "never"
// with NEVER) and /y (and /pad, 64 KB, with PAD: a file that could hold all of X).
static const char *make(const char *name, unsigned flags)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmp_dir(), name);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (!(flags & OLD))  // OLD: the earliest format, a v1 B-tree whose keys hold each chunk's size
        H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);  // (partial-chunk options need it)
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    if (flags & UBLOCK)  // a user block: chunk addresses are no longer file offsets
        H5Pset_userblock(fcpl, 512);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pclose(fcpl);
    hsize_t dims[2] = {ROWS, COLS}, ch[2] = {CR, flags & WIDE ? COLS : CC}, n = ROWS;
    H5Pset_chunk(dcpl, 2, ch);
    if (flags & SUM_FIRST)
        H5Pset_fletcher32(dcpl);
    if (flags & SHUF)
        H5Pset_shuffle(dcpl);
    if (flags & GZIP)
        H5Pset_deflate(dcpl, 4);
    if (flags & SUM_LAST)
        H5Pset_fletcher32(dcpl);
    if (flags & SCALEOFFSET)
        H5Pset_scaleoffset(dcpl, H5Z_SO_FLOAT_DSCALE, 6);
    if (flags & RAW_EDGES)
        H5Pset_chunk_opts(dcpl, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS);
    if (flags & FILL)
        H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &FILL_VALUE);
    if (flags & NEVER)
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t xs = H5Screate_simple(2, dims, NULL), ys = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "X", flags & F32BE ? H5T_IEEE_F32BE : H5T_IEEE_F64LE, xs, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hsize_t first[2] = {CR, COLS}, zero[2] = {0, 0};
    hid_t ms = H5Screate_simple(2, flags & HALF ? first : dims, NULL);
    if (flags & HALF)
        H5Sselect_hyperslab(xs, H5S_SELECT_SET, zero, NULL, first, NULL);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, ms, xs, H5P_DEFAULT, X) >= 0, "%s: write X", name);
    H5Sclose(ms);
    H5Dclose(d);
    d = H5Dcreate2(f, "y", H5T_IEEE_F64LE, ys, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, Y) >= 0, "%s: write y", name);
    H5Dclose(d);
    if (flags & PAD) {
        static const double pad[8192];
        hsize_t np = 8192;
        hid_t ps = H5Screate_simple(1, &np, NULL);
        d = H5Dcreate2(f, "pad", H5T_IEEE_F64LE, ps, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, pad) >= 0, "%s: write pad", name);
        H5Dclose(d);
        H5Sclose(ps);
    }
    H5Sclose(xs);
    H5Sclose(ys);
    H5Pclose(dcpl);
    H5Pclose(fapl);
    H5Fclose(f);
    return path;
}

// The stored chunk of /X at (r, c), raw, into raw (cap bytes); its size.
static size_t get_chunk(const char *path, hsize_t r, hsize_t c, unsigned char *raw, size_t cap)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, "X", H5P_DEFAULT);
    hsize_t at[2] = {r, c}, size = 0;
    uint32_t mask = 0;
    CHECK(H5Dget_chunk_storage_size(d, at, &size) >= 0 && size <= cap && H5Dread_chunk(d, H5P_DEFAULT, at, &mask, raw) >= 0,
          "%s: read the chunk at %llu, %llu", path, (unsigned long long)r, (unsigned long long)c);
    H5Dclose(d);
    H5Fclose(f);
    return (size_t)size;
}

// Replaces the stored chunk of /X at (r, c) by raw bytes (no filters run), mask 0.
static void put_chunk(const char *path, hsize_t r, hsize_t c, const void *raw, size_t n)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, "X", H5P_DEFAULT);
    hsize_t at[2] = {r, c};
    CHECK(H5Dwrite_chunk(d, H5P_DEFAULT, 0, at, n, raw) >= 0, "%s: write the chunk at %llu, %llu", path,
          (unsigned long long)r, (unsigned long long)c);
    H5Dclose(d);
    H5Fclose(f);
}

// Rows row0 .. row0+n−1 of p's /X read as f64 (and as f32 when f32) equal what was written (X, rounded to
// float when the file keeps f32; fillv past row `written`, the fill value of chunks never written).
static void read_back(const char *name, const char *p, int64_t row0, int64_t n, int f32, int64_t written, double fillv)
{
    static double got[ROWS][COLS], gy[ROWS];
    static float gotf[ROWS][COLS];
    for (int as_f32 = 0; as_f32 <= f32; as_f32++) {
        ds_msg m = {{0}};
        int rc = h5io_read_lsq_rows(p, "X", "y", row0, n, COLS, as_f32, as_f32 ? (void *)gotf : (void *)got, gy, NULL, &m);
        CHECK(rc == DS_OK, "%s: rc %d: %s", name, rc, m.text);
        int bad = 0;
        for (int64_t i = 0; rc == DS_OK && i < n; i++)
            for (int j = 0; j < COLS; j++) {
                double want = row0 + i < written ? X[row0 + i][j] : fillv, v = as_f32 ? gotf[i][j] : got[i][j];
                bad += f32 ? v != (double)(float)want : v != want;
            }
        CHECK(bad == 0 && (rc != DS_OK || gy[0] == Y[row0]), "%s: %d values read back as %s differ", name, bad,
              as_f32 ? "f32" : "f64");
    }
}

static void expect_same(const char *name, unsigned flags)
{
    read_back(name, make(name, flags), 0, ROWS, 0, ROWS, 0);
}

static void expect_refused(const char *name, const char *p, const char *want)
{
    static double got[ROWS][COLS], gy[ROWS];
    ds_msg m = {{0}};
    h5io_lsq_info info;
    int rc = h5io_probe_lsq(p, "X", "y", &info, &m);
    if (rc == DS_OK)
        rc = h5io_read_lsq_rows(p, "X", "y", 0, ROWS, COLS, 0, got, gy, NULL, &m);
    CHECK(rc == DS_ERR_INPUT && strstr(m.text, "/X") && strstr(m.text, want), "%s: rc %d, message '%s', want '%s'",
          name, rc, m.text, want);
}

// Every place in p's first 64 KB that holds the len bytes of pattern gets `to` in its first 4 bytes
// (little-endian, as the file); the number of such places.
static size_t patch(const char *p, const void *pattern, size_t len, uint32_t to)
{
    FILE *f = fopen(p, "r+b");
    static unsigned char b[1 << 16];
    size_t n = f ? fread(b, 1, sizeof b, f) : 0, hits = 0;
    for (size_t i = 0; i + len <= n; i++)
        if (memcmp(b + i, pattern, len) == 0) {
            hits++;
            fseek(f, (long)i, SEEK_SET);
            fwrite(&to, 4, 1, f);
        }
    if (f)
        fclose(f);
    return hits;
}

// The v1 B-tree key of p's chunk at (0, 0) (its size, filter mask 0, offsets 0, 0, 0) made to say `to`
// bytes: what a damaged index does (libhdf5 stores an unfiltered chunk's size itself, whatever it is given).
static void patch_key(const char *p, uint32_t from, uint32_t to)
{
    unsigned char key[32] = {0};
    memcpy(key, &from, 4);
    const size_t hits = patch(p, key, sizeof key, to);
    CHECK(hits == 1, "%s: the key of chunk (0, 0) found %zu times", p, hits);
}

// Each fill-value message of p (the size 8, then FILL_VALUE) made to say it stores `to` bytes: a damaged
// message that libhdf5 1.10 accepts, after which its H5Pget_fill_value reads past the value it stored.
static void patch_fill(const char *p, uint32_t to)
{
    unsigned char msg[12] = {8, 0, 0, 0};
    memcpy(msg + 4, &FILL_VALUE, 8);
    CHECK(patch(p, msg, sizeof msg, to) >= 1, "%s: no fill-value message found", p);
}

// A zlib stream of n bytes of v, in *out (the caller frees it); its length in *len.
static void *zbytes(size_t n, int v, size_t *len)
{
    unsigned char *src = malloc(n);
    uLongf cap = compressBound((uLong)n);
    unsigned char *dst = malloc(cap);
    memset(src, v, n);
    compress2(dst, &cap, src, (uLong)n, 4);
    free(src);
    *len = cap;
    return dst;
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

// One gzip chunk of 64 MB (zeros, 64 KB stored) read in a child whose address space leaves no room for
// the check's scratch of one chunk: exit 1 with "out of host memory", not 3. Not under AddressSanitizer,
// which reserves terabytes of address space.
static void expect_out_of_memory(void)
{
#ifndef UNDER_ASAN
    enum { BR = 1024, BC = 8192 };
    char path[512];
    snprintf(path, sizeof path, "%s/big.h5", test_tmp_dir());
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t dims[2] = {BR, BC}, n = BR;
    H5Pset_chunk(dcpl, 2, dims);
    H5Pset_deflate(dcpl, 1);
    double *big = calloc((size_t)BR * BC, sizeof(double)), *y = calloc(BR, sizeof(double));
    hid_t xs = H5Screate_simple(2, dims, NULL), ys = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "X", H5T_IEEE_F64LE, xs, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, big) >= 0, "big: write X");
    H5Dclose(d);
    d = H5Dcreate2(f, "y", H5T_IEEE_F64LE, ys, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, y) >= 0, "big: write y");
    H5Dclose(d);
    H5Sclose(xs);
    H5Sclose(ys);
    H5Pclose(dcpl);
    H5Fclose(f);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        long pages = 0;
        FILE *statm = fopen("/proc/self/statm", "r");
        if (!statm || fscanf(statm, "%ld", &pages) != 1)
            _exit(10);
        fclose(statm);
        struct rlimit lim = {.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (32 << 20)};
        lim.rlim_max = lim.rlim_cur;
        if (setrlimit(RLIMIT_AS, &lim) != 0)
            _exit(11);
        ds_msg m = {{0}};
        int rc = h5io_read_lsq_rows(path, "X", "y", 0, BR, BC, 0, big, y, NULL, &m);
        int ok = rc == DS_ERR_RUNTIME && strstr(m.text, "out of host memory") && strstr(m.text, "/X");
        if (!ok)
            fprintf(stderr, "out of memory: rc %d, message '%s'\n", rc, m.text);
        _exit(ok ? 0 : 12);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "a check out of memory: child status %d (want DS_ERR_RUNTIME naming the memory)", st);
    free(big);
    free(y);
#endif
}

// Unfiltered chunks: read by dsolve too (the rows wanted from the file; whole chunks where the file has a
// user block), in place when of the memory's type and every column, and one
// that a damaged index sizes wrong is refused (libhdf5 1.10 reads heap memory past it).
static void test_unfiltered(void)
{
    expect_same("no filters", 0);
    expect_same("no filters, chunks of every column", WIDE);
    read_back("rows 10 to 89, no filters, chunks of every column", make("cutwide.h5", WIDE), 10, 80, 0, ROWS, 0);
    read_back("f32 big-endian, no filters", make("f32bes.h5", F32BE | WIDE), 0, ROWS, 1, ROWS, 0);
    read_back("no filters, a user block (whole chunks)", make("ub.h5", WIDE | UBLOCK), 0, ROWS, 0, ROWS, 0);
    read_back("rows 10 to 89, no filters, a user block", make("ubcut.h5", UBLOCK), 10, 80, 0, ROWS, 0);
    read_back("chunks never written, no filters", make("halfs.h5", HALF | WIDE | FILL | PAD), 0, ROWS, 0, CR,
              FILL_VALUE);
    const char *p = make("plainshort.h5", WIDE | OLD);
    patch_key(p, CR * COLS * 8, 100);
    // (libhdf5's lookup sizes an unfiltered chunk by its shape, its index walk by the key: they differ)
    expect_refused("an unfiltered chunk stored short", p, "the chunk at row 0 has two sizes in the chunk index");
    p = make("fillshort.h5", HALF | WIDE | FILL | PAD | OLD);
    patch_fill(p, 4);
    expect_refused("a fill value stored in 4 bytes", p, "its fill value is stored in 4 bytes where its type has 8 (damaged)");
    read_back("the same, undamaged", make("fillok.h5", HALF | WIDE | FILL | PAD | OLD), 0, ROWS, 0, CR, FILL_VALUE);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < ROWS; i++) {
        Y[i] = i;
        for (int j = 0; j < COLS; j++)
            X[i][j] = (i - 50) * 0.25 + j * 1e-3;
    }
    if (rank == 0) {
        test_tmp_open("h5filters");
        expect_same("gzip", GZIP);
        expect_same("shuffle gzip fletcher32 (h5py's order)", SHUF | GZIP | SUM_LAST);
        expect_same("fletcher32 before gzip", SUM_FIRST | GZIP);
        expect_same("fletcher32 shuffle gzip", SUM_FIRST | SHUF | GZIP);
        expect_same("shuffle alone", SHUF);
        expect_same("fletcher32 alone", SUM_LAST);
        expect_same("edge chunks unfiltered", SHUF | GZIP | RAW_EDGES);
        read_back("rows 10 to 89 (cutting chunks)", make("cut.h5", SHUF | GZIP | SUM_LAST), 10, 80, 0, ROWS, 0);
        read_back("rows 70 to 99 of unfiltered edges", make("cutedge.h5", SHUF | GZIP | RAW_EDGES), 70, 30, 0, ROWS, 0);
        read_back("f32 big-endian, shuffle gzip", make("f32be.h5", F32BE | SHUF | GZIP), 0, ROWS, 1, ROWS, 0);
        read_back("chunks never written", make("half.h5", SHUF | GZIP | HALF), 0, ROWS, 0, CR, 0);
        read_back("chunks never written, fill value 2.5", make("fill.h5", SHUF | GZIP | HALF | FILL), 0, ROWS, 0, CR,
                  FILL_VALUE);
        expect_refused("chunks never written, fill time never", make("never.h5", SHUF | GZIP | HALF | NEVER),
                       "parts of it were never written and it defines no fill value for them (incomplete)");
        expect_refused("the same, no filters", make("nevers.h5", HALF | NEVER | PAD),
                       "parts of it were never written and it defines no fill value for them (incomplete)");
        read_back("every chunk written, fill time never", make("neverall.h5", SHUF | GZIP | NEVER), 0, ROWS, 0, ROWS, 0);

        // the checksum as HDF5 1.6.2 and before wrote it (each 16-bit half byte-swapped) reads; a changed
        // byte does not
        static unsigned char sum[CR * CC * 8 + 64];
        const char *ps = make("oldsum.h5", SHUF | GZIP | SUM_LAST);
        size_t len = get_chunk(ps, 0, 0, sum, sizeof sum);
        unsigned char t = sum[len - 4];
        sum[len - 4] = sum[len - 3], sum[len - 3] = t;
        t = sum[len - 2];
        sum[len - 2] = sum[len - 1], sum[len - 1] = t;
        put_chunk(ps, 0, 0, sum, len);
        read_back("the checksum of HDF5 1.6.2", ps, 0, ROWS, 0, ROWS, 0);
        sum[len / 2] ^= 0x10;
        put_chunk(ps, 0, 0, sum, len);
        expect_refused("a changed byte under fletcher32", ps, "the chunk at row 0 fails its fletcher32 checksum");

        const char *p = make("short.h5", GZIP);
        void *z = zbytes(48, 1, &len);
        put_chunk(p, 0, 16, z, len);
        free(z);
        expect_refused("a chunk that inflates short", p,
                       "the chunk at row 0 decodes to 48 bytes where a chunk holds 8192");
        p = make("long.h5", GZIP);
        z = zbytes(CR * CC * 8 + 40, 0, &len);
        put_chunk(p, 64, 0, z, len);
        free(z);
        expect_refused("a chunk that inflates long", p, "the chunk at row 64 decodes to more than 8192 bytes");
        p = make("edge.h5", SHUF | GZIP | RAW_EDGES);
        static const unsigned char raw[100];
        put_chunk(p, 64, 32, raw, sizeof raw);
        expect_refused("an unfiltered edge chunk stored short", p, "the chunk at row 64 decodes to 100 bytes");
        // shuffle alone writes what the file stored: one stored longer than its buffers is refused first
        p = make("shuflong.h5", SHUF);
        static unsigned char longraw[CR * CC * 8 + 4096];
        put_chunk(p, 0, 0, longraw, sizeof longraw);
        expect_refused("a shuffled chunk stored long", p, "the chunk at row 0 decodes to more than 8192 bytes");
        expect_refused("scale-offset", make("so.h5", SCALEOFFSET), "stored with HDF5 filter 6");

        test_unfiltered();
        expect_out_of_memory();
        test_tmp_remove();
    }
    int rc = test_finish("test_h5filters");
    MPI_Finalize();
    return rc;
}
