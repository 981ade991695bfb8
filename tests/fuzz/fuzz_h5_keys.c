// fuzz_h5_keys.c: libFuzzer harness for the input of `dsolve sort` (io/h5io_keys.c): h5io_probe_keys on
// /keys and /values, then h5io_read_keys as one rank (all elements, the stored type) and as the second
// of two (another type, so that HDF5 converts). The input is the HDF5 file.
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "h5io.h"

static size_t key_size(int type)
{
    return type == H5IO_KEY_I32 || type == H5IO_KEY_U32 || type == H5IO_KEY_F32 ? 4 : 8;
}

static void read_keys(const char *path, const char *name, int type, int64_t row0, int64_t n)
{
    void *out = fuzz_alloc(path, name, n, 1, key_size(type));
    ds_msg msg = {{0}};
    fuzz_expect(h5io_read_keys(path, name, type, row0, n, out, &msg), &msg, "h5io_read_keys");
    free(out);
}

static void keys(const char *path, const char *name)
{
    int type = 0;
    int64_t n = 0;
    ds_msg msg = {{0}};
    int rc = h5io_probe_keys(path, name, &type, &n, &msg);
    fuzz_expect(rc, &msg, "h5io_probe_keys");
    if (rc != DS_OK)
        return;
    read_keys(path, name, type, 0, n);
    read_keys(path, name, (type + 1) % (H5IO_KEY_F64 + 1), n / 2, n - n / 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("keys.h5", data, size);
    keys(path, "keys");
    keys(path, "values");
    return 0;
}
