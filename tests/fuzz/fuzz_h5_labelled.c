// fuzz_h5_labelled.c: libFuzzer harness for the labelled input of `dsolve logreg` and `dsolve ann
// --classes` (io/h5io_labels.c): h5io_probe_labelled, then h5io_read_labelled_rows as one rank (all rows,
// double) and as the second of two (float). The input is the HDF5 file, datasets /X and /labels.
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "h5io.h"

static void read_rows(const char *path, const h5io_lsq_info *info, int64_t row0, int x_f32)
{
    int64_t n = info->rows - row0;
    void *X = fuzz_alloc(path, "X", n, info->cols, x_f32 ? sizeof(float) : sizeof(double));
    int32_t *labels = fuzz_alloc(path, "labels", n, 1, sizeof(int32_t));
    ds_msg msg = {{0}};
    fuzz_expect(h5io_read_labelled_rows(path, "X", "labels", row0, n, info->cols, x_f32, X, labels, &msg), &msg,
                "h5io_read_labelled_rows");
    free(labels);
    free(X);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("labelled.h5", data, size);
    h5io_lsq_info info;
    ds_msg msg = {{0}};
    int rc = h5io_probe_labelled(path, "X", "labels", &info, &msg);
    fuzz_expect(rc, &msg, "h5io_probe_labelled");
    if (rc == DS_OK) {
        read_rows(path, &info, 0, 0);
        read_rows(path, &info, info.rows / 2, 1);
    }
    return 0;
}
