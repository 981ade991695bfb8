// fuzz_idx.c: libFuzzer harness for the IDX reader (io/idx.c): idx_probe, idx_read_images,
// idx_read_labels and idx_open_set on plain and gzip files.
// Input: one flag byte, then the file. Flags: bits 0-1 what the file is (0 labels, 1 images, 2-3 an
// MNIST-layout set whose images and labels files split the rest at the big-endian 16-bit offset that
// follows the flag byte); bit 2 gzip the file(s) here first (so that mutations reach the IDX layout
// behind the gzip layer; without it a seed may be a gzip file itself); bit 3 read as float; bits 4-5
// the block read (all, first half, second half, last item), as one rank of several would.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "fuzz_util.h"
#include "idx.h"

// data gzip-compressed into a malloc'ed buffer (*out; the caller frees it), its length in *n_out.
static void gzip_bytes(const uint8_t *data, size_t n, uint8_t **out, size_t *n_out)
{
    z_stream z = {0};
    DS_ASSERT(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    *out = malloc(cap);
    DS_ASSERT(*out);
    z.next_in = (Bytef *)data, z.avail_in = (uInt)n;
    z.next_out = *out, z.avail_out = (uInt)cap;
    DS_ASSERT(deflate(&z, Z_FINISH) == Z_STREAM_END);
    *n_out = cap - z.avail_out;
    deflateEnd(&z);
}

// Writes one file, gzip-compressed when gz; returns its path.
static const char *put_file(const char *name, const uint8_t *data, size_t n, int gz)
{
    if (!gz)
        return fuzz_write(name, data, n);
    uint8_t *z = NULL;
    size_t nz = 0;
    gzip_bytes(data, n, &z, &nz);
    const char *path = fuzz_write(name, z, nz);
    free(z);
    return path;
}

// The rows [row0, row0 + n) of count that the block code picks.
static void pick_block(int block, int64_t count, int64_t *row0, int64_t *n)
{
    int64_t half = count / 2;
    switch (block) {
    case 0: *row0 = 0, *n = count; break;
    case 1: *row0 = 0, *n = half; break;
    case 2: *row0 = half, *n = count - half; break;
    default: *row0 = count - 1, *n = 1; break;
    }
}

// Reads the chosen block of a probed file into a buffer the size the header announces.
static void read_block(const char *path, const idx_info *info, int f32, int block)
{
    int64_t row0, n;
    pick_block(block, info->count, &row0, &n);
    size_t elsize = info->ndims == 1 ? sizeof(int32_t) : f32 ? sizeof(float) : sizeof(double);
    void *out = fuzz_alloc(path, "IDX data", n, info->row_len, elsize);
    ds_msg msg = {{0}};
    int rc = info->ndims == 1 ? idx_read_labels(path, row0, n, out, &msg)
                              : idx_read_images(path, row0, n, f32, out, &msg);
    fuzz_expect(rc, &msg, info->ndims == 1 ? "idx_read_labels" : "idx_read_images");
    free(out);
}

static void one_file(const uint8_t *data, size_t n, int ndims, int gz, int f32, int block)
{
    const char *path = put_file(ndims == 1 ? "labels.idx" : "images.idx", data, n, gz);
    idx_info info;
    ds_msg msg = {{0}};
    int rc = idx_probe(path, ndims, &info, &msg);
    fuzz_expect(rc, &msg, "idx_probe");
    if (rc == DS_OK)
        read_block(path, &info, f32, block);
}

// The two files of a set under their MNIST names (the other variant, gzip or plain, removed).
static void one_set(const uint8_t *data, size_t n, int gz, int f32, int block)
{
    if (n < 2)
        return;
    size_t split = (size_t)data[0] << 8 | data[1];
    data += 2, n -= 2;
    split = split < n ? split : n;
    const char *names[2][2] = {{"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"},
                               {"train-labels-idx1-ubyte", "train-labels-idx1-ubyte.gz"}};
    for (int k = 0; k < 2; k++) {
        unlink(fuzz_path(names[k][!gz]));
        put_file(names[k][gz], k == 0 ? data : data + split, k == 0 ? split : n - split, gz);
    }
    idx_set set;
    ds_msg msg = {{0}};
    int rc = idx_open_set(fuzz_dir(), "train", &set, &msg);
    fuzz_expect(rc, &msg, "idx_open_set");
    if (rc != DS_OK)
        return;
    idx_info im = {.ndims = 3, .count = set.count, .row_len = set.row_len};
    idx_info lb = {.ndims = 1, .count = set.count, .row_len = 1};
    read_block(set.images, &im, f32, block);
    read_block(set.labels, &lb, f32, block);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int flags = data[0], what = flags & 3, gz = flags >> 2 & 1, f32 = flags >> 3 & 1, block = flags >> 4 & 3;
    if (what >= 2)
        one_set(data + 1, size - 1, gz, f32, block);
    else
        one_file(data + 1, size - 1, what == 0 ? 1 : 3, gz, f32, block);
    return 0;
}
