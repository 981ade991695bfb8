// test_h5io.c: io/h5io against files it writes itself in a fresh directory (test_tmp_open): round trips
// of least-squares files (float32 and float64, whole and partial reads), vectors and attributes, and
// every kind of bad input, each of which must fail with DS_ERR_INPUT and a message naming the file
// and the dataset; a file whose guarded check crashed the probe worker is refused at once after that, until
// it changes or is forgotten. Runs on rank 0; other ranks only take part in the verdict.
#include <hdf5.h>  // provides: the raw HDF5 API, to build bad files and to read attributes back
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/probe.h"
#include "h5io.h"
#include "harness.h"

// Whether text holds want (a NULL want is held by every text).
static int holds(const char *text, const char *want)
{
    return !want || strstr(text, want) != NULL;
}

// Checks that a call failed with `status` and that its message holds both pieces (want2 may be NULL).
#define CHECK_FAIL(rc, m, status, want1, want2)                                              \
    CHECK((rc) == (status) && holds((m).text, (want1)) && holds((m).text, (want2)),         \
          "rc %d (want %d), message \"%s\" (want \"%s\" and \"%s\")", (rc), (status), (m).text, \
          (want1), (want2) ? (const char *)(want2) : "")

static double xval(int64_t i, int64_t j)
{
    return (double)(i * 16 + j) + 0.5;  // exact in float32 for the sizes used here
}

// Writes dataset name of type ftype and dims into an open file, with data (doubles) when non-NULL.
static void put(hid_t file, const char *name, hid_t ftype, int rank, const hsize_t *dims,
                const double *data)
{
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (data)
        H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(d);
    H5Sclose(sp);
}

// A file with X (rows × cols) and y (yrows), float64, filled from xval and −i.
static const char *make_lsq(const char *name, int64_t rows, int64_t cols, int64_t yrows)
{
    const char *p = test_tmp_path(name);
    double *X = malloc(sizeof(double) * (size_t)(rows * cols + 1));
    double *y = malloc(sizeof(double) * (size_t)(yrows + 1));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            X[i * cols + j] = xval(i, j);
    for (int64_t i = 0; i < yrows; i++)
        y[i] = -(double)i;
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t xd[2] = {(hsize_t)rows, (hsize_t)cols}, yd[1] = {(hsize_t)yrows};
    put(f, "X", H5T_IEEE_F64LE, 2, xd, X);
    put(f, "y", H5T_IEEE_F64LE, 1, yd, y);
    H5Fclose(f);
    free(X);
    free(y);
    return p;
}

// Fills X (rows × cols) and y with the expected values, as float or double.
static void fill_expected(int64_t row0, int64_t rows, int64_t cols, int f32, void *X, double *y)
{
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t j = 0; j < cols; j++) {
            if (f32)
                ((float *)X)[i * cols + j] = (float)xval(row0 + i, j);
            else
                ((double *)X)[i * cols + j] = xval(row0 + i, j);
        }
        y[i] = -(double)(row0 + i);
    }
}

// Reads rows row0.. of a file holding make_lsq's values and compares exactly.
static void check_read(const char *p, const char *xn, const char *yn, int64_t row0, int64_t n,
                       int64_t cols, int f32, const char *what)
{
    size_t el = f32 ? sizeof(float) : sizeof(double);
    void *X = calloc((size_t)(n * cols), el), *Xw = calloc((size_t)(n * cols), el);
    double *y = calloc((size_t)n, sizeof(double)), *yw = calloc((size_t)n, sizeof(double));
    ds_msg m = {{0}};
    double big[16] = {0};  // each column's largest magnitude, then y's (cols < 16 here)
    int rc = h5io_read_lsq_rows(p, xn, yn, row0, n, cols, f32, X, y, big, &m);
    CHECK(rc == DS_OK, "%s: rc %d: %s", what, rc, m.text);
    for (int64_t j = 0; n > 0 && j <= cols; j++)  // column j's, then y's
        CHECK(big[j] == (j < cols ? xval(row0 + n - 1, j) : (double)(row0 + n - 1)), "%s: largest magnitude %lld: %g",
              what, (long long)j, big[j]);
    fill_expected(row0, n, cols, f32, Xw, yw);
    CHECK(memcmp(X, Xw, (size_t)(n * cols) * el) == 0, "%s: X differs", what);
    CHECK(memcmp(y, yw, (size_t)n * sizeof(double)) == 0, "%s: y differs", what);
    free(X);
    free(Xw);
    free(y);
    free(yw);
}

// create_lsq, then write_rows in two pieces from double (or float) buffers; read back as both.
static void test_round_trip(int f32, const char *xn, const char *yn)
{
    const int64_t rows = 10, cols = 3, split = 6;
    const char *p = test_tmp_path(f32 ? "rt32.h5" : "rt64.h5");
    ds_msg m = {{0}};
    int rc = h5io_create_lsq(p, xn, yn, rows, cols, f32, 4, &m);
    CHECK(rc == DS_OK, "create_lsq: %s", m.text);
    void *X = calloc((size_t)(rows * cols), sizeof(double));
    double *y = calloc((size_t)rows, sizeof(double));
    fill_expected(0, rows, cols, f32, X, y);
    size_t el = f32 ? sizeof(float) : sizeof(double);
    rc = h5io_write_rows(p, xn, 0, split, cols, f32, X, &m);
    rc |= h5io_write_rows(p, xn, split, rows - split, cols, f32, (char *)X + split * cols * el, &m);
    rc |= h5io_write_rows(p, yn, 0, split, 0, 0, y, &m);
    rc |= h5io_write_rows(p, yn, split, rows - split, 0, 0, y + split, &m);
    CHECK(rc == DS_OK, "write_rows: %s", m.text);
    h5io_lsq_info info = {0};
    rc = h5io_probe_lsq(p, xn, yn, &info, &m);
    CHECK(rc == DS_OK, "probe: %s", m.text);
    CHECK(info.rows == rows && info.cols == cols && info.x_f32 == f32 && info.y_f32 == f32,
          "probe: %lld × %lld, f32 %d %d", (long long)info.rows, (long long)info.cols, info.x_f32,
          info.y_f32);
    check_read(p, xn, yn, 0, rows, cols, 0, "whole as f64");
    check_read(p, xn, yn, 0, rows, cols, 1, "whole as f32");
    check_read(p, xn, yn, 3, 5, cols, 0, "rows 3..7 as f64");
    check_read(p, xn, yn, 3, 5, cols, 1, "rows 3..7 as f32");
    rc = h5io_read_lsq_rows(p, xn, yn, 4, 0, cols, 0, NULL, NULL, NULL, &m);
    CHECK(rc == DS_OK, "0 rows: %s", m.text);
    rc = h5io_write_rows(p, xn, 8, 3, cols, f32, X, &m);
    CHECK(rc == DS_ERR_RUNTIME && strstr(m.text, "outside"), "write past the end: %d %s", rc, m.text);
    m.text[0] = '\0';
    rc = h5io_read_lsq_rows(p, xn, yn, 8, 3, cols, 0, X, y, NULL, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "outside", "rows 8..10");
    free(X);
    free(y);
}

// Chunk shape of dataset name in path.
static void chunk_of(const char *p, const char *name, hsize_t chunk[2])
{
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t pl = H5Dget_create_plist(d);
    chunk[0] = chunk[1] = 0;
    H5Pget_chunk(pl, 2, chunk);
    H5Pclose(pl);
    H5Dclose(d);
    H5Fclose(f);
}

static void test_chunks(void)
{
    ds_msg m = {{0}};
    hsize_t c[2];
    const char *p = test_tmp_path("chunks.h5");
    CHECK(h5io_create_lsq(p, "X", "y", 5000, 1000, 0, 10000, &m) == DS_OK, "%s", m.text);
    chunk_of(p, "X", c);
    CHECK(c[0] == 524 && c[1] == 1000, "4 MiB chunks: %llu × %llu", (unsigned long long)c[0],
          (unsigned long long)c[1]);
    CHECK(h5io_create_lsq(p, "X", "y", 2, 600000, 0, 100, &m) == DS_OK, "%s", m.text);
    chunk_of(p, "X", c);
    CHECK(c[0] == 1 && c[1] == 524288, "wide rows: %llu × %llu", (unsigned long long)c[0],
          (unsigned long long)c[1]);
    CHECK(h5io_create_lsq(p, "X", "y", 3, 4, 1, 100, &m) == DS_OK, "%s", m.text);
    chunk_of(p, "X", c);
    CHECK(c[0] == 3 && c[1] == 4, "small: %llu × %llu", (unsigned long long)c[0],
          (unsigned long long)c[1]);
    int rc = h5io_create_lsq(p, "X", "y", 0, 4, 1, 100, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "empty", NULL);
}

static int64_t attr_int(hid_t d, const char *name)
{
    int64_t v = -1;
    hid_t a = H5Aopen(d, name, H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    return v;
}

static void attr_doubles(hid_t d, const char *name, double *v, hssize_t *n, int *null_space)
{
    hid_t a = H5Aopen(d, name, H5P_DEFAULT), sp = H5Aget_space(a);
    *n = H5Sget_simple_extent_npoints(sp);
    *null_space = H5Sget_simple_extent_type(sp) == H5S_NULL;
    if (!*null_space)
        H5Aread(a, H5T_NATIVE_DOUBLE, v);
    H5Sclose(sp);
    H5Aclose(a);
}

static void attr_string(hid_t d, const char *name, char *out, size_t len)
{
    char *s = NULL;
    hid_t a = H5Aopen(d, name, H5P_DEFAULT), t = H5Aget_type(a);
    out[0] = '\0';
    if (H5Tis_variable_str(t) > 0 && H5Aread(a, t, &s) >= 0 && s)
        snprintf(out, len, "%s", s);
    H5free_memory(s);
    H5Tclose(t);
    H5Aclose(a);
}

static void check_attrs(const char *p, const char *dn, const char *want_s, int64_t want_i)
{
    char s[64];
    double v[4] = {0}, dv = 0;
    hssize_t n = 0;
    int null = 0;
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, dn, H5P_DEFAULT);
    CHECK_EQ_INT(attr_int(d, "iters"), want_i, "int attribute");
    attr_doubles(d, "tol", &dv, &n, &null);
    CHECK(n == 1 && !null && dv == 1e-9, "double attribute: n %lld, %g", (long long)n, dv);
    attr_string(d, "solver", s, sizeof s);
    CHECK(strcmp(s, want_s) == 0, "string attribute: \"%s\"", s);
    attr_doubles(d, "hist", v, &n, &null);
    CHECK(n == 3 && !null && v[0] == 1 && v[1] == 0.5 && v[2] == 0.25, "doubles attribute: n %lld",
          (long long)n);
    attr_doubles(d, "none", v, &n, &null);
    CHECK(n == 0 && null, "empty doubles attribute: n %lld, null %d", (long long)n, null);
    H5Dclose(d);
    H5Fclose(f);
}

static void test_vectors(void)
{
    const double w[5] = {1, -2, 3.25, 4e100, -5e-300};
    const double hist[3] = {1, 0.5, 0.25};
    double r[5] = {0};
    ds_msg m = {{0}};
    const char *p = test_tmp_path("vec.h5");
    CHECK(h5io_write_vector(p, 1, "w", w, 5, &m) == DS_OK, "write_vector: %s", m.text);
    CHECK(h5io_write_vector(p, 0, "grp/b", w, 2, &m) == DS_OK, "write_vector: %s", m.text);
    CHECK(h5io_read_vector(p, "/w", 5, r, &m) == DS_OK, "read_vector: %s", m.text);
    CHECK(memcmp(r, w, sizeof w) == 0, "read_vector: values differ");
    CHECK(h5io_read_vector(p, "grp/b", 2, r, &m) == DS_OK && r[1] == -2, "grp/b: %s", m.text);
    int rc = h5io_read_vector(p, "w", 4, r, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "dataset /w: 5 elements, expected 4", NULL);
    m.text[0] = '\0';
    rc = h5io_write_vector(p, 0, "/w", w, 5, &m);
    CHECK_FAIL(rc, m, DS_ERR_RUNTIME, "/w", "already exists");
    m.text[0] = '\0';
    h5io_attr attrs[] = {
        {.name = "iters", .kind = H5IO_INT, .i = 1234567890123},
        {.name = "tol", .kind = H5IO_DOUBLE, .d = 1e-9},
        {.name = "solver", .kind = H5IO_STRING, .s = "cholesky – réel"},
        {.name = "hist", .kind = H5IO_DOUBLES, .v = hist, .len = 3},
        {.name = "none", .kind = H5IO_DOUBLES, .v = NULL, .len = 0},
    };
    CHECK(h5io_write_attrs(p, "w", attrs, 5, &m) == DS_OK, "write_attrs: %s", m.text);
    check_attrs(p, "w", "cholesky – réel", 1234567890123);
    attrs[0].i = 7;
    attrs[2].s = "";
    CHECK(h5io_write_attrs(p, "/w", attrs, 5, &m) == DS_OK, "rewrite attrs: %s", m.text);
    check_attrs(p, "w", "", 7);
    rc = h5io_write_attrs(p, "nope", attrs, 1, &m);
    CHECK_FAIL(rc, m, DS_ERR_RUNTIME, "/nope", NULL);
    CHECK(h5io_has_dataset(p, "w") == 1 && h5io_has_dataset(p, "/grp/b") == 1, "has_dataset");
    CHECK(h5io_has_dataset(p, "grp") == 0 && h5io_has_dataset(p, "nope") == 0, "has_dataset: group");
    CHECK(h5io_has_dataset(test_tmp_path("missing.h5"), "w") == 0, "has_dataset: missing file");
}

// A model's attributes read at once (h5io_read_attrs_num, through the guard's worker): numbers whatever
// their stored type, the rest a status each with its reason, values untouched where they fail.
static void test_model_attrs(void)
{
    const char *p = test_tmp_path("attrs.h5");
    const double m6[6] = {1, 2, 3, 4, 5, 6}, hist[2] = {1, 2};
    ds_msg m = {{0}};
    CHECK(h5io_write_matrix(p, 1, "V", m6, 2, 3, &m) == DS_OK, "write_matrix: %s", m.text);
    h5io_attr attrs[] = {{.name = "classes", .kind = H5IO_INT, .i = 7}, {.name = "ridge", .kind = H5IO_DOUBLE, .d = 2.5},
                         {.name = "solver", .kind = H5IO_STRING, .s = "qr"},
                         {.name = "hist", .kind = H5IO_DOUBLES, .v = hist, .len = 2}};
    CHECK(h5io_write_attrs(p, "V", attrs, 4, &m) == DS_OK, "write_attrs: %s", m.text);
    const char *const names[] = {"classes", "ridge", "solver", "hist", "seed"};
    double v[5] = {-1, -1, -1, -1, -1};
    int st[5];
    ds_msg why[5];
    CHECK(h5io_read_attrs_num(p, "/V", 5, names, v, st, why, &m) == DS_OK, "read_attrs_num: %s", m.text);
    CHECK(st[0] == DS_OK && v[0] == 7 && st[1] == DS_OK && v[1] == 2.5, "numbers: %g, %g", v[0], v[1]);
    static const char *const want[] = {"attribute solver: not a number", "attribute hist: not a number",
                                       "attribute seed: not found"};
    for (int i = 2; i < 5; i++)  // a string, two numbers, missing
        CHECK(st[i] == DS_ERR_INPUT && strstr(why[i].text, want[i - 2]) && strstr(why[i].text, p) && v[i] == -1,
              "%s: %s", names[i], why[i].text);
    double one = 0;
    CHECK(h5io_read_attr_num(p, "V", "ridge", &one, &m) == DS_OK && one == 2.5, "one attribute: %s", m.text);
    int rc = h5io_read_attr_num(p, "V", "seed", &one, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "dataset /V: attribute seed: not found", NULL);
    m.text[0] = '\0';
    rc = h5io_read_attrs_num(p, "W", 2, names, v, st, NULL, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "/W", NULL);
}

// Probes (xn, yn) in p and expects DS_ERR_INPUT with both pieces in the message.
static void expect_probe(const char *p, const char *xn, const char *yn, const char *w1,
                         const char *w2)
{
    h5io_lsq_info info;
    ds_msg m = {{0}};
    int rc = h5io_probe_lsq(p, xn, yn, &info, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, w1, w2);
    CHECK(strchr(m.text, '\n') == NULL && strstr(m.text, p), "one line naming the file: %s", m.text);
}

static void test_bad_files(void)
{
    expect_probe(test_tmp_path("missing.h5"), "X", "y", "no such file", NULL);
    FILE *t = fopen(test_tmp_path("text.h5"), "w");
    fputs("this is not HDF5\n", t);
    fclose(t);
    expect_probe(test_tmp_path("text.h5"), "X", "y", "not an HDF5 file", NULL);
    expect_probe(test_tmp_dir(), "X", "y", "directory", NULL);
    const char *p = make_lsq("trunc.h5", 2000, 20, 2000);
    struct stat st;
    stat(p, &st);
    CHECK(truncate(p, st.st_size / 2) == 0, "truncate");
    expect_probe(p, "X", "y", "cannot open", NULL);
    double X[2], y[1];
    ds_msg m = {{0}};
    int rc = h5io_read_lsq_rows(p, "X", "y", 0, 1, 2, 0, X, y, NULL, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "cannot open", NULL);
    CHECK(h5io_has_dataset(p, "X") == 0, "has_dataset on a truncated file");
}

static void test_bad_datasets(void)
{
    const char *p = make_lsq("bad.h5", 10, 3, 10);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t d3[3] = {10, 3, 2}, d2[2] = {10, 2}, y9[1] = {9}, x0[2] = {0, 3}, y0[1] = {0};
    put(f, "Xint", H5T_STD_I32LE, 2, d3, NULL);
    put(f, "X3", H5T_IEEE_F64LE, 3, d3, NULL);
    put(f, "y2", H5T_IEEE_F64LE, 2, d2, NULL);
    put(f, "y9", H5T_IEEE_F32LE, 1, y9, NULL);
    put(f, "X0", H5T_IEEE_F64LE, 2, x0, NULL);
    put(f, "y0", H5T_IEEE_F64LE, 1, y0, NULL);
    H5Gclose(H5Gcreate2(f, "grp", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Lcreate_soft("/X", f, "Xsoft", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_external(test_tmp_path("rt64.h5"), "/X", f, "Xext", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_external(test_tmp_path("rt32.h5"), "/data", f, "gext", H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    expect_probe(p, "nope", "y", "dataset /nope: not found", NULL);
    expect_probe(p, "X", "grp/nope", "dataset /grp/nope: not found", NULL);
    expect_probe(p, "Xint", "y", "dataset /Xint: integer type, expected float32 or float64", NULL);
    expect_probe(p, "X3", "y", "dataset /X3: 3-D, expected 2-D", NULL);
    expect_probe(p, "X", "y2", "dataset /y2: 2-D, expected 1-D", NULL);
    expect_probe(p, "X", "/y9", "/X has 10 rows but /y9 has 9", NULL);
    expect_probe(p, "X0", "y0", "dataset /X0: empty", NULL);
    expect_probe(p, "grp", "y", "/grp is not a dataset", NULL);
    expect_probe(p, "Xsoft", "y", "dataset /Xsoft", "soft link");
    expect_probe(p, "Xext", "y", "dataset /Xext", "external link");
    expect_probe(p, "gext/X", "gext/y", "dataset /gext/X", "external link");
    expect_probe(p, "", "y", "empty dataset name", NULL);
    CHECK(h5io_has_dataset(p, "Xsoft") == 1 && h5io_has_dataset(p, "Xint") == 1, "has_dataset");
    double r[10];
    ds_msg m = {{0}};
    int rc = h5io_read_vector(p, "X", 10, r, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "dataset /X: 2-D, expected 1-D", NULL);
    m.text[0] = '\0';
    rc = h5io_read_vector(p, "Xext", 10, r, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "dataset /Xext", "external link");
}

// NaN in X at global row 7, column 2 and Inf in y at row 3; reads that miss them succeed.
static void test_nonfinite(void)
{
    const char *p = make_lsq("nan.h5", 10, 3, 10);
    ds_msg m = {{0}};
    double bad_x = NAN, bad_y = -INFINITY;
    CHECK(h5io_write_rows(p, "X", 7, 1, 3, 0, (double[3]){1, 2, bad_x}, &m) == DS_OK, "%s", m.text);
    CHECK(h5io_write_rows(p, "y", 3, 1, 0, 0, &bad_y, &m) == DS_OK, "%s", m.text);
    float X32[5 * 3];
    double X[5 * 3], y[5];
    int rc = h5io_read_lsq_rows(p, "X", "y", 5, 5, 3, 0, X, y, NULL, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "dataset /X: non-finite value (nan) at row 7, column 2", NULL);
    m.text[0] = '\0';
    rc = h5io_read_lsq_rows(p, "X", "y", 5, 5, 3, 1, X32, y, NULL, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "dataset /X: non-finite value (nan) at row 7, column 2", NULL);
    m.text[0] = '\0';
    rc = h5io_read_lsq_rows(p, "X", "y", 0, 5, 3, 0, X, y, NULL, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "dataset /y: non-finite value (-inf) at row 3", NULL);
    m.text[0] = '\0';
    rc = h5io_read_lsq_rows(p, "X", "y", 4, 3, 3, 0, X, y, NULL, &m);
    CHECK(rc == DS_OK, "rows 4..6 hold no NaN: %s", m.text);
}

static void test_commit(void)
{
    const char *tmp = test_tmp_path("out.h5.tmp"), *fin = test_tmp_path("out.h5"), *gone = test_tmp_path("gone.h5.tmp");
    ds_msg m = {{0}};
    double v = 1;
    CHECK(h5io_write_vector(tmp, 1, "w", &v, 1, &m) == DS_OK, "%s", m.text);
    CHECK(h5io_commit(tmp, fin, &m) == DS_OK, "commit: %s", m.text);
    CHECK(access(tmp, F_OK) != 0 && h5io_has_dataset(fin, "w") == 1, "commit renamed");
    int rc = h5io_commit(tmp, fin, &m);
    CHECK_FAIL(rc, m, DS_ERR_RUNTIME, "cannot rename", "No such file");
    CHECK(h5io_write_vector(gone, 1, "w", &v, 1, &m) == DS_OK, "%s", m.text);
    h5io_discard(gone);
    CHECK(access(gone, F_OK) != 0, "discard removed the file");
    h5io_discard(gone);
    char ver[64];
    h5io_version(ver, sizeof ver);
    CHECK(strncmp(ver, "HDF5 1.", 7) == 0, "version \"%s\"", ver);
}

// h5io must leave no file, dataset, group, type or attribute open behind it.
static void check_no_open_ids(const char *after)
{
    ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    CHECK(n == 0, "%zd HDF5 objects still open after %s", n, after);
}

// The probe worker's check: h5io's own, but a crash (as libhdf5's on a crafted file) when the marker file
// exists, which it removes first, so that the next check of the same file would pass. The marker's name is
// set before probe_start, as the helper is a copy of this process made there.
static char crash_marker[512];

static int crash_once_check(const void *req, size_t len, ds_msg *msg)
{
    if (unlink(crash_marker) == 0)
        raise(SIGSEGV);
    return h5io_guard_check(req, len, msg);
}

static void crash_next_check(void)
{
    FILE *f = fopen(crash_marker, "w");
    CHECK(f != NULL, "cannot create %s", crash_marker);
    if (f)
        fclose(f);
}

// A file whose check crashed the worker is refused with the same line without a new check (a file that holds
// libhdf5 in a loop costs one time limit), until h5io_guard_forget or until the file changes.
static void test_guard_memo(void)
{
    const char *p = make_lsq("memo.h5", 4, 3, 4);
    double v = 0;
    ds_msg m = {{0}};
    crash_next_check();
    int rc = h5io_read_attr_num(p, "X", "classes", &v, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "memo.h5: not a readable HDF5 file", "SIGSEGV");
    m = (ds_msg){{0}};
    rc = h5io_read_attr_num(p, "y", "seed", &v, &m);  // the worker would pass it now: the memo answers
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "memo.h5: not a readable HDF5 file", "SIGSEGV");
    h5io_guard_forget();
    m = (ds_msg){{0}};
    rc = h5io_read_attr_num(p, "X", "classes", &v, &m);
    CHECK(rc == DS_ERR_INPUT && !strstr(m.text, "SIGSEGV"), "after h5io_guard_forget: rc %d '%s'", rc, m.text);
    crash_next_check();
    m = (ds_msg){{0}};
    rc = h5io_read_attr_num(p, "X", "classes", &v, &m);
    CHECK_FAIL(rc, m, DS_ERR_INPUT, "memo.h5: not a readable HDF5 file", "SIGSEGV");
    p = make_lsq("memo.h5", 5, 3, 5);  // another file under the same name
    m = (ds_msg){{0}};
    rc = h5io_read_attr_num(p, "X", "classes", &v, &m);
    CHECK(rc == DS_ERR_INPUT && !strstr(m.text, "SIGSEGV"), "a rewritten file: rc %d '%s'", rc, m.text);
    unlink(crash_marker);
}

int main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(crash_marker, sizeof crash_marker, "%s/dsolve-h5io-crash-%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    probe_start(crash_once_check);  // before MPI_Init, as dsolve's main does
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        test_tmp_open("h5io");
        test_round_trip(0, "X", "y");
        check_no_open_ids("test_round_trip");
        test_round_trip(1, "data/X", "/data/y");
        check_no_open_ids("test_round_trip");
        test_chunks();
        check_no_open_ids("test_chunks");
        test_vectors();
        check_no_open_ids("test_vectors");
        test_bad_files();
        check_no_open_ids("test_bad_files");
        test_bad_datasets();
        check_no_open_ids("test_bad_datasets");
        test_nonfinite();
        check_no_open_ids("test_nonfinite");
        test_commit();
        check_no_open_ids("test_commit");
        test_guard_memo();
        check_no_open_ids("test_guard_memo");
        test_model_attrs();
        check_no_open_ids("test_model_attrs");
        test_tmp_remove();
    }
    int rc = test_finish("test_h5io");
    MPI_Finalize();
    return rc;
}
