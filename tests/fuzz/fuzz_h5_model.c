// fuzz_h5_model.c: libFuzzer harness for the model file that `dsolve predict` reads (io/h5io_model.c),
// as src/ann/ann_io.c reads it: h5io_read_matrix of /W and /V, then h5io_read_attr_num of /V's
// attributes. The input is the HDF5 file.
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "h5io.h"

static void matrix(const char *path, const char *name)
{
    int64_t rows = -1, cols = -1;
    double *v = NULL;
    ds_msg msg = {{0}};
    int rc = h5io_read_matrix(path, name, &rows, &cols, &v, &msg);
    fuzz_expect(rc, &msg, "h5io_read_matrix");
    DS_ASSERT(rc == DS_OK ? v != NULL && rows > 0 && cols > 0 : v == NULL);
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("model.h5", data, size);
    matrix(path, "W");
    matrix(path, "V");
    static const char *attrs[] = {"classes", "inputs", "neurons", "outputs", "y_scale", "y_shift", "ridge",
                                  "subset", "seed"};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        double value = 0;
        ds_msg msg = {{0}};
        fuzz_expect(h5io_read_attr_num(path, "V", attrs[i], &value, &msg), &msg, "h5io_read_attr_num");
    }
    return 0;
}
