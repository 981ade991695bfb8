// test_idx.c: io/idx against IDX files it writes itself (plain and gzip, whole and partial reads, f32
// and f64) and damaged ones (missing, bad magic, wrong type code or rank, truncated, corrupt gzip,
// trailing bytes, count mismatch), each of which must fail with DS_ERR_INPUT and a message naming
// the file and the problem; then the installed Fashion-MNIST files when they are present.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>  // provides: gzopen/gzwrite to make the gzip test files

#include "harness.h"
#include "idx.h"

static int holds(const char *text, const char *want)
{
    return !want || strstr(text, want) != NULL;
}

#define CHECK_FAIL(rc, m, want1, want2)                                                              \
    CHECK((rc) == DS_ERR_INPUT && holds((m).text, (want1)) && holds((m).text, (want2)),             \
          "rc %d (want 3), message \"%s\" (want \"%s\" and \"%s\")", (rc), (m).text, (want1), (want2) ? (want2) : "")

enum { N = 37, R = 5, C = 3 };  // 37 images of 5 × 3

// The file's bytes: an IDX header (magic 0 0 type ndims, big-endian dims) and data.
static size_t make_idx(unsigned char *buf, int type, int ndims, const uint32_t *dims, const unsigned char *data,
                       size_t n)
{
    size_t k = 0;
    buf[k++] = 0;
    buf[k++] = 0;
    buf[k++] = (unsigned char)type;
    buf[k++] = (unsigned char)ndims;
    for (int d = 0; d < ndims; d++)
        for (int s = 24; s >= 0; s -= 8)
            buf[k++] = (unsigned char)(dims[d] >> s);
    memcpy(buf + k, data, n);
    return k + n;
}

static void write_plain(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n, "writing %s", path);
    if (f)
        fclose(f);
}

static void write_gz(const char *path, const unsigned char *b, size_t n)
{
    gzFile g = gzopen(path, "wb");
    CHECK(g && gzwrite(g, b, (unsigned)n) == (int)n, "writing %s", path);
    if (g)
        gzclose(g);
}

static size_t file_bytes(const char *path, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap, f) : 0;
    if (f)
        fclose(f);
    return n;
}

static unsigned char pixels_[N * R * C], labels_[N];
static unsigned char file_[N * R * C + 64];

static void write_good(void)
{
    for (int i = 0; i < N * R * C; i++)
        pixels_[i] = (unsigned char)((i * 37 + 11) % 256);
    for (int i = 0; i < N; i++)
        labels_[i] = (unsigned char)(i % 10);
    uint32_t d3[3] = {N, R, C}, d1[1] = {N};
    size_t n = make_idx(file_, 8, 3, d3, pixels_, sizeof pixels_);
    write_plain(test_tmp_path("train-images-idx3-ubyte"), file_, n);
    write_gz(test_tmp_path("images.gz"), file_, n);
    n = make_idx(file_, 8, 1, d1, labels_, sizeof labels_);
    write_plain(test_tmp_path("train-labels-idx1-ubyte"), file_, n);
    write_gz(test_tmp_path("labels.gz"), file_, n);
    d1[0] = N - 1;
    n = make_idx(file_, 8, 1, d1, labels_, N - 1);
    write_gz(test_tmp_path("t10k-labels-idx1-ubyte.gz"), file_, n);  // one label fewer than the images
}

static void test_round_trip(const char *images, const char *labels)
{
    ds_msg m = {{0}};
    idx_info info;
    CHECK(idx_probe(images, 3, &info, &m) == DS_OK, "probe %s: %s", images, m.text);
    CHECK(info.count == N && info.rows == R && info.cols == C && info.row_len == R * C, "%s: dims %lld %lld %lld",
          images, (long long)info.count, (long long)info.rows, (long long)info.cols);
    const int64_t blocks[][2] = {{0, N}, {0, 1}, {5, 11}, {N - 4, 4}, {N - 1, 1}, {3, 0}};
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        int64_t r0 = blocks[b][0], nr = blocks[b][1];
        double xd[N * R * C];
        float xf[N * R * C];
        int32_t y[N];
        CHECK(idx_read_images(images, r0, nr, 0, xd, &m) == DS_OK, "read f64 %lld+%lld: %s", (long long)r0, (long long)nr, m.text);
        CHECK(idx_read_images(images, r0, nr, 1, xf, &m) == DS_OK, "read f32: %s", m.text);
        CHECK(idx_read_labels(labels, r0, nr, y, &m) == DS_OK, "read labels: %s", m.text);
        int bad = 0;
        for (int64_t i = 0; i < nr * R * C; i++) {
            const int v = pixels_[r0 * R * C + i];
            bad += xd[i] != v / 255.0 || xf[i] != (float)v / 255.0f;
        }
        for (int64_t i = 0; i < nr; i++)
            bad += y[i] != labels_[r0 + i];
        CHECK(bad == 0, "%s rows %lld+%lld: %d values differ", images, (long long)r0, (long long)nr, bad);
    }
    double x[2 * R * C];
    CHECK_FAIL(idx_read_images(images, N - 1, 2, 0, x, &m), m, images, "holds 37");
    m.text[0] = '\0';
}

static void test_bad_headers(void)
{
    uint32_t d3[3] = {N, R, C}, d1[1] = {N}, d0[3] = {N, 0, C};
    ds_msg m = {{0}};
    idx_info info;
    CHECK_FAIL(idx_probe(test_tmp_path("absent.gz"), 3, &info, &m), m, "absent.gz", "no such file");
    m.text[0] = '\0';
    CHECK_FAIL(idx_probe(test_tmp_dir(), 3, &info, &m), m, test_tmp_dir(), "directory");
    m.text[0] = '\0';
    size_t n = make_idx(file_, 8, 3, d3, pixels_, sizeof pixels_);
    file_[0] = 0x1f;
    write_gz(test_tmp_path("magic.gz"), file_, n);
    CHECK_FAIL(idx_probe(test_tmp_path("magic.gz"), 3, &info, &m), m, "magic.gz", "bad magic number");
    m.text[0] = '\0';
    n = make_idx(file_, 0x0D, 3, d3, pixels_, sizeof pixels_);
    write_gz(test_tmp_path("float.gz"), file_, n);
    CHECK_FAIL(idx_probe(test_tmp_path("float.gz"), 3, &info, &m), m, "float.gz", "type code 0x0d");
    m.text[0] = '\0';
    n = make_idx(file_, 8, 1, d1, labels_, sizeof labels_);
    write_plain(test_tmp_path("rank.idx"), file_, n);
    CHECK_FAIL(idx_probe(test_tmp_path("rank.idx"), 3, &info, &m), m, "rank.idx", "1 dimensions, expected 3");
    m.text[0] = '\0';
    n = make_idx(file_, 8, 3, d0, pixels_, 0);
    write_plain(test_tmp_path("zero.idx"), file_, n);
    CHECK_FAIL(idx_probe(test_tmp_path("zero.idx"), 3, &info, &m), m, "zero.idx", "dimension 1 is 0");
    m.text[0] = '\0';
    write_plain(test_tmp_path("short.idx"), file_, 6);
    CHECK_FAIL(idx_probe(test_tmp_path("short.idx"), 3, &info, &m), m, "short.idx", "header");
    m.text[0] = '\0';
}

static void test_truncated(void)
{
    uint32_t d3[3] = {N, R, C};
    ds_msg m = {{0}};
    idx_info info;
    double x[N * R * C];
    size_t n = make_idx(file_, 8, 3, d3, pixels_, sizeof pixels_);
    write_plain(test_tmp_path("trunc.idx"), file_, n - 7);
    CHECK_FAIL(idx_probe(test_tmp_path("trunc.idx"), 3, &info, &m), m, "trunc.idx", "truncated");
    m.text[0] = '\0';
    CHECK_FAIL(idx_read_images(test_tmp_path("trunc.idx"), 0, N, 0, x, &m), m, "trunc.idx", "truncated");
    m.text[0] = '\0';
    CHECK(idx_read_images(test_tmp_path("trunc.idx"), 0, N - 1, 0, x, &m) == DS_OK, "rows before the cut: %s", m.text);
    write_plain(test_tmp_path("long.idx"), file_, n);
    FILE *f = fopen(test_tmp_path("long.idx"), "ab");
    fputs("xyz", f);
    fclose(f);
    CHECK_FAIL(idx_probe(test_tmp_path("long.idx"), 3, &info, &m), m, "long.idx", "3 bytes after");
    m.text[0] = '\0';
    write_gz(test_tmp_path("gzlong.gz"), file_, n + 5);  // five bytes more than the header announces
    CHECK(idx_probe(test_tmp_path("gzlong.gz"), 3, &info, &m) == DS_OK, "gzip header alone is fine: %s", m.text);
    CHECK_FAIL(idx_read_images(test_tmp_path("gzlong.gz"), 2, N - 2, 0, x, &m), m, "gzlong.gz", "continues after");
    m.text[0] = '\0';
    write_gz(test_tmp_path("gzshort.gz"), file_, n - R * C - 2);  // a complete stream holding fewer items
    CHECK_FAIL(idx_read_images(test_tmp_path("gzshort.gz"), 0, N, 0, x, &m), m, "gzshort.gz", "after item 35 of the 37");
    m.text[0] = '\0';
}

static void test_corrupt_gzip(void)
{
    ds_msg m = {{0}};
    double x[N * R * C];
    static unsigned char gz[8192];
    size_t n = file_bytes(test_tmp_path("images.gz"), gz, sizeof gz);
    CHECK(n > 30 && n < sizeof gz, "images.gz: %zu bytes", n);
    write_plain(test_tmp_path("cut.gz"), gz, n / 2);  // the stream stops half way
    CHECK_FAIL(idx_read_images(test_tmp_path("cut.gz"), 0, N, 0, x, &m), m, "cut.gz", "truncated");
    m.text[0] = '\0';
    write_plain(test_tmp_path("nocrc.gz"), gz, n - 8);  // all the data, no trailer
    CHECK_FAIL(idx_read_images(test_tmp_path("nocrc.gz"), 0, N, 0, x, &m), m, "nocrc.gz", "truncated gzip stream");
    m.text[0] = '\0';
    gz[n - 8] ^= 0x5a;  // a wrong CRC-32
    write_plain(test_tmp_path("crc.gz"), gz, n);
    CHECK_FAIL(idx_read_images(test_tmp_path("crc.gz"), 0, N, 0, x, &m), m, "crc.gz", "corrupt gzip");
    m.text[0] = '\0';
    gz[n - 8] ^= 0x5a;
    gz[10] = 0xff;  // the first deflate block header: reserved block type 3
    write_plain(test_tmp_path("block.gz"), gz, n);
    CHECK_FAIL(idx_read_images(test_tmp_path("block.gz"), 0, N, 0, x, &m), m, "block.gz", "corrupt gzip");
    m.text[0] = '\0';
}

static void test_sets(void)
{
    ds_msg m = {{0}};
    idx_set s;
    CHECK(idx_open_set(test_tmp_dir(), "train", &s, &m) == DS_OK, "plain train set: %s", m.text);
    CHECK(s.count == N && s.row_len == R * C && holds(s.images, "train-images-idx3-ubyte"), "set %lld %lld %s",
          (long long)s.count, (long long)s.row_len, s.images);
    CHECK_FAIL(idx_open_set(test_tmp_dir(), "t10k", &s, &m), m, "t10k-images-idx3-ubyte", "no such file");
    m.text[0] = '\0';
    rename(test_tmp_path("images.gz"), test_tmp_path("t10k-images-idx3-ubyte.gz"));
    CHECK_FAIL(idx_open_set(test_tmp_dir(), "t10k", &s, &m), m, "37 images", "36 labels");
    m.text[0] = '\0';
    CHECK_FAIL(idx_open_set(test_tmp_path("nodir"), "train", &s, &m), m, "nodir", "no such directory");
    m.text[0] = '\0';
}

// The installed Fashion-MNIST: sizes, the first labels, the first image's byte sum, labels in 0 .. 9.
static void test_fashion(void)
{
    const char *dir = "/usr/share/datasets/fashion-mnist";
    ds_msg m = {{0}};
    idx_set tr, te;
    if (access(dir, R_OK) != 0) {
        printf("test_idx: %s absent, its checks skipped\n", dir);
        return;
    }
    CHECK(idx_open_set(dir, "train", &tr, &m) == DS_OK && tr.count == 60000 && tr.row_len == 784, "train: %s", m.text);
    CHECK(idx_open_set(dir, "t10k", &te, &m) == DS_OK && te.count == 10000, "t10k: %s", m.text);
    int32_t y[8], want[8] = {9, 0, 0, 3, 0, 2, 7, 2};
    double x[784], sum = 0;
    CHECK(idx_read_labels(tr.labels, 0, 8, y, &m) == DS_OK && memcmp(y, want, sizeof y) == 0, "train labels: %s", m.text);
    CHECK(idx_read_images(tr.images, 0, 1, 0, x, &m) == DS_OK, "image 0: %s", m.text);
    for (int i = 0; i < 784; i++)
        sum += x[i] * 255.0;
    CHECK_NEAR(sum, 76247, 1e-6, "byte sum of train image 0");
    int32_t *all = malloc(10000 * sizeof(int32_t));
    int counts[10] = {0}, out = 0;
    CHECK(idx_read_labels(te.labels, 0, 10000, all, &m) == DS_OK, "t10k labels: %s", m.text);
    for (int i = 0; i < 10000; i++)
        all[i] >= 0 && all[i] < 10 ? counts[all[i]]++ : out++;
    CHECK(out == 0 && counts[0] == 1000 && counts[9] == 1000, "t10k label counts: %d out of range, %d zeros", out, counts[0]);
    free(all);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_tmp_open("idx");
    write_good();
    test_round_trip(test_tmp_path("train-images-idx3-ubyte"), test_tmp_path("train-labels-idx1-ubyte"));
    test_round_trip(test_tmp_path("images.gz"), test_tmp_path("labels.gz"));
    test_bad_headers();
    test_truncated();
    test_corrupt_gzip();
    test_sets();
    test_fashion();
    test_tmp_remove();
    int rc = test_finish("test_idx");
    MPI_Finalize();
    return rc;
}
