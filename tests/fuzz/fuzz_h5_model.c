// fuzz_h5_model.c: libFuzzer harness for the model file that `dsolve predict` reads (io/h5io_model.c),
// as src/ann/ann_io.c reads it: h5io_read_matrix of /W and /V, then h5io_read_attrs_num of /V's
// attributes at once; and h5io_read_attr_num of one. The input is the HDF5 file.
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
    static const char *const attrs[] = {"inputs",  "neurons", "outputs", "classes", "y_scale",
                                        "y_shift", "ridge",   "subset",  "seed"};
    enum { N = sizeof attrs / sizeof attrs[0] };
    double values[N];
    int status[N];
    ds_msg why[N], msg = {{0}};
    int rc = h5io_read_attrs_num(path, "V", N, attrs, values, status, why, &msg);
    fuzz_expect(rc, &msg, "h5io_read_attrs_num");
    for (int i = 0; rc == DS_OK && i < N; i++)
        DS_ASSERT(status[i] == DS_OK || (status[i] == DS_ERR_INPUT && why[i].text[0]));
    double value = 0;
    ds_msg one = {{0}};
    fuzz_expect(h5io_read_attr_num(path, "V", "classes", &value, &one), &one, "h5io_read_attr_num");
    return 0;
}
