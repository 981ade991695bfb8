// fuzz_h5_lsq.c: libFuzzer harness for the least-squares input of `dsolve solve`, `dsolve ann` (regression)
// and `dsolve predict` (io/h5io.c): h5io_probe_lsq with and without y, h5io_read_lsq_rows as one rank
// (all rows, stored precision) and as the second of two (the other precision), each accepted read equal to
// libhdf5's own (fuzz_same_as_hdf5: the check of dsolve's decoding of compressed chunks), and the optional
// /a_true reference (h5io_has_dataset, h5io_read_vector). The input is the HDF5 file, datasets /X and /y.
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "h5io.h"

static void read_rows(const char *path, const char *yname, const h5io_lsq_info *info, int64_t row0, int x_f32)
{
    int64_t n = info->rows - row0;
    void *X = fuzz_alloc(path, "X", n, info->cols, x_f32 ? sizeof(float) : sizeof(double));
    double *y = fuzz_alloc(path, "y", n, 1, sizeof(double));
    ds_msg msg = {{0}};
    int rc = h5io_read_lsq_rows(path, "X", yname, row0, n, info->cols, x_f32, X, yname ? y : NULL, NULL, &msg);
    fuzz_expect(rc, &msg, "h5io_read_lsq_rows");
    if (rc == DS_OK) {
        fuzz_same_as_hdf5(path, "X", row0, n, info->cols, x_f32, X);
        if (yname)
            fuzz_same_as_hdf5(path, yname, row0, n, 0, 0, y);
    }
    free(y);
    free(X);
}

static void lsq(const char *path, const char *yname)
{
    h5io_lsq_info info;
    ds_msg msg = {{0}};
    int rc = h5io_probe_lsq(path, "X", yname, &info, &msg);
    fuzz_expect(rc, &msg, "h5io_probe_lsq");
    if (rc != DS_OK)
        return;
    read_rows(path, yname, &info, 0, info.x_f32);
    read_rows(path, yname, &info, info.rows / 2, !info.x_f32);
    if (!yname || !h5io_has_dataset(path, "a_true"))
        return;
    double *a = fuzz_alloc(path, "a_true", info.cols, 1, sizeof(double));
    ds_msg why = {{0}};
    fuzz_expect(h5io_read_vector(path, "a_true", info.cols, a, &why), &why, "h5io_read_vector");
    free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("lsq.h5", data, size);
    lsq(path, "y");
    lsq(path, NULL);
    return 0;
}
