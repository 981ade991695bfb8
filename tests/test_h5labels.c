// test_h5labels.c: io/h5io_labels against files it writes itself: a float X with integer labels of
// several stored types (whole and partial reads, f32 and f64), and the bad cases (float labels, 2-D
// labels, a row-count mismatch, labels beyond int32, a missing dataset), each DS_ERR_INPUT naming the
// file and the dataset.
#include <hdf5.h>  // provides: the raw HDF5 API, to write labels of chosen integer types
#include <stdlib.h>
#include <string.h>

#include "h5io.h"
#include "harness.h"

enum { M = 23, C = 4 };

static void put(hid_t f, const char *name, hid_t type, int rank, const hsize_t *dims, hid_t mtype, const void *data)
{
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "writing %s", name);
    H5Dclose(d);
    H5Sclose(sp);
}

static void make_file(const char *path, double *X, int64_t *lab)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dx[2] = {M, C}, dl[1] = {M}, dshort[1] = {M - 1}, d2[2] = {M, 1};
    put(f, "X", H5T_IEEE_F32LE, 2, dx, H5T_NATIVE_DOUBLE, X);
    put(f, "labels", H5T_STD_U8LE, 1, dl, H5T_NATIVE_INT64, lab);
    put(f, "labels64", H5T_STD_I64LE, 1, dl, H5T_NATIVE_INT64, lab);
    put(f, "short", H5T_STD_I32LE, 1, dshort, H5T_NATIVE_INT64, lab);
    put(f, "wide", H5T_STD_I32LE, 2, d2, H5T_NATIVE_INT64, lab);
    put(f, "flt", H5T_IEEE_F64LE, 1, dl, H5T_NATIVE_INT64, lab);
    lab[7] = (int64_t)1 << 40;
    put(f, "huge", H5T_STD_I64LE, 1, dl, H5T_NATIVE_INT64, lab);
    lab[7] = 7 % 10;
    H5Fclose(f);
}

#define CHECK_FAIL(rc, m, want)                                                                        \
    CHECK((rc) == DS_ERR_INPUT && strstr((m).text, path) && strstr((m).text, (want)),                 \
          "rc %d, message \"%s\" (want the file and \"%s\")", (rc), (m).text, (want))

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    char path[600] = "";
    if (test_tmp_open("h5labels"))
        snprintf(path, sizeof path, "%s", test_tmp_path("labels.h5"));
    double X[M * C];
    int64_t lab[M];
    for (int i = 0; i < M * C; i++)
        X[i] = (i % 17) * 0.25 - 1.0;  // exact in float32
    for (int i = 0; i < M; i++)
        lab[i] = i % 10;
    make_file(path, X, lab);
    ds_msg m = {{0}};
    h5io_lsq_info info;
    CHECK(h5io_probe_labelled(path, "X", "labels", &info, &m) == DS_OK && info.rows == M && info.cols == C &&
              info.x_f32 == 1,
          "probe: %s (rows %lld cols %lld f32 %d)", m.text, (long long)info.rows, (long long)info.cols, info.x_f32);
    for (int f32 = 0; f32 <= 1; f32++) {
        double xd[M * C];
        float xf[M * C];
        int32_t y[M];
        const char *ln = f32 ? "labels64" : "labels";
        CHECK(h5io_read_labelled_rows(path, "X", ln, 5, 11, C, f32, f32 ? (void *)xf : (void *)xd, y, &m) == DS_OK,
              "read %s: %s", ln, m.text);
        int bad = 0;
        for (int i = 0; i < 11 * C; i++)
            bad += (f32 ? xf[i] : xd[i]) != X[5 * C + i];
        for (int i = 0; i < 11; i++)
            bad += y[i] != lab[5 + i];
        CHECK(bad == 0, "rows 5..15 (f32 %d): %d values differ", f32, bad);
    }
    int32_t y[M];
    double xd[M * C];
    CHECK_FAIL(h5io_probe_labelled(path, "X", "flt", &info, &m), m, "integer");
    m.text[0] = '\0';
    CHECK_FAIL(h5io_probe_labelled(path, "X", "wide", &info, &m), m, "2-D, expected 1-D");
    m.text[0] = '\0';
    CHECK_FAIL(h5io_probe_labelled(path, "X", "short", &info, &m), m, "22");
    m.text[0] = '\0';
    CHECK_FAIL(h5io_probe_labelled(path, "X", "nolabels", &info, &m), m, "not found");
    m.text[0] = '\0';
    CHECK_FAIL(h5io_probe_labelled(path, "labels", "labels", &info, &m), m, "expected float32 or float64");
    m.text[0] = '\0';
    CHECK_FAIL(h5io_read_labelled_rows(path, "X", "huge", 0, M, C, 0, xd, y, &m), m, "row 7 is out of range");
    m.text[0] = '\0';
    CHECK(h5io_read_labelled_rows(path, "X", "huge", 8, 5, C, 0, xd, y, &m) == DS_OK, "rows past the bad one: %s", m.text);
    test_tmp_remove();
    int rc = test_finish("test_h5labels");
    MPI_Finalize();
    return rc;
}
