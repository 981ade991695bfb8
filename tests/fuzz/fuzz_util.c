// fuzz_util.c: the scratch folder and the verdict shared by the harnesses (see fuzz_util.h).
#include "fuzz_util.h"

#include <fcntl.h>
#include <hdf5.h>  // provides: H5set_free_list_limits
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/probe.h"
#include "h5io.h"

static char scratch[256];
static long hdf5_crashes;     // inputs that crashed libhdf5 in a probe worker (reader status 3)
static long refused_by_hdf5;  // reads accepted by the reader that libhdf5's H5Dread refused

static void crashes_print(void)
{
    if (hdf5_crashes)
        fprintf(stderr, "fuzz: contained crashes of libhdf5: %ld\n", hdf5_crashes);
    if (refused_by_hdf5)
        fprintf(stderr, "fuzz: reads accepted that libhdf5 refused: %ld\n", refused_by_hdf5);
}

static int strict(void)
{
    const char *v = getenv("DSOLVE_FUZZ_STRICT");
    return v && strcmp(v, "1") == 0;
}

// As dsolve's main does: the probe helper, forked while this process has one thread (libFuzzer starts its
// own after this). HDF5 keeps the blocks it frees for reuse without a limit: every file open allocates a
// metadata cache of over 512 KB, which AddressSanitizer maps afresh each time (half of the time spent).
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    H5set_free_list_limits(-1, -1, -1, -1, -1, -1);
    setenv("DSOLVE_PROBE_SECONDS", "1", 0);  // a probe caught in a loop inside libhdf5: exit 3, well inside -timeout
    probe_start(h5io_guard_check);
    atexit(crashes_print);
    return 0;
}
static char paths[8][320];
static int n_paths;

static void scratch_remove(void)
{
    for (int i = 0; i < n_paths; i++)
        unlink(paths[i]);
    rmdir(scratch);
}

const char *fuzz_dir(void)
{
    if (!scratch[0]) {
        const char *tmp = getenv("TMPDIR");
        int n = snprintf(scratch, sizeof scratch, "%s/dsolve-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        DS_ASSERT(n > 0 && (size_t)n < sizeof scratch);
        if (!mkdtemp(scratch)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(scratch_remove);
    }
    return scratch;
}

const char *fuzz_path(const char *name)
{
    fuzz_dir();
    for (int i = 0; i < n_paths; i++)
        if (strcmp(strrchr(paths[i], '/') + 1, name) == 0)
            return paths[i];
    DS_ASSERT(n_paths < 8 && strlen(scratch) + strlen(name) + 2 <= sizeof paths[0]);
    snprintf(paths[n_paths], sizeof paths[0], "%s/%s", scratch, name);
    return paths[n_paths++];
}

const char *fuzz_write(const char *name, const uint8_t *data, size_t n)
{
    const char *path = fuzz_path(name);
    h5io_guard_forget();  // the file is rewritten in place, perhaps within the clock tick of the last one
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        abort();
    }
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, data + done, n - done);
        if (w <= 0) {
            perror(path);
            abort();
        }
        done += (size_t)w;
    }
    close(fd);
    return path;
}

void fuzz_expect(int rc, const ds_msg *msg, const char *call)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("DSOLVE_FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "fuzz: %s: %d %s\n", call, rc, msg->text);
    int ok = rc == DS_OK || (rc == DS_ERR_INPUT && msg->text[0] && !strchr(msg->text, '\n'));
    hdf5_crashes += ok && strstr(msg->text, "(the HDF5 library failed on it: ") != NULL;
    if (ok)
        return;
    fprintf(stderr, "fuzz: %s returned %d (want 0 or %d with a one-line message): \"%s\"\n", call, rc,
            DS_ERR_INPUT, msg->text);
    abort();
}

void *fuzz_alloc(const char *path, const char *what, int64_t rows, int64_t width, size_t elsize)
{
    double bytes = (double)rows * (double)width * (double)elsize;
    if (rows < 0 || width < 0 || bytes > FUZZ_MAX_BYTES) {
        fprintf(stderr, "fuzz: %s: %s: the probe accepted %lld × %lld values (%.3g bytes) from a %s\n", path, what,
                (long long)rows, (long long)width, bytes, "small file");
        abort();
    }
    void *p = malloc(bytes > 0 ? (size_t)bytes : 1);
    DS_ASSERT(p);
    return p;
}

void fuzz_same_as_hdf5(const char *path, const char *name, int64_t row0, int64_t n, int64_t cols, int f32,
                       const void *got)
{
    const size_t bytes = (size_t)n * (size_t)(cols ? cols : 1) * (f32 ? sizeof(float) : sizeof(double));
    if (n <= 0)
        return;
    void *want = malloc(bytes);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = f >= 0 ? H5Dopen2(f, name, H5P_DEFAULT) : -1;
    hid_t fs = d >= 0 ? H5Dget_space(d) : -1;
    hsize_t start[2] = {(hsize_t)row0, 0}, count[2] = {(hsize_t)n, (hsize_t)cols};
    hid_t ms = H5Screate_simple(cols ? 2 : 1, count, NULL);
    int ok = want && fs >= 0 && ms >= 0 && H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
             H5Dread(d, f32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, want) >= 0;
    if (!ok && !strict()) {  // libhdf5 refused what the reader accepted: counted, fatal with DSOLVE_FUZZ_STRICT=1
        refused_by_hdf5++;
    } else if (!ok || memcmp(want, got, bytes) != 0) {
        fprintf(stderr, "fuzz: %s: dataset %s rows %lld..%lld as %s: %s\n", path, name, (long long)row0,
                (long long)(row0 + n - 1), f32 ? "f32" : "f64",
                ok ? "the reader's values differ from libhdf5's" : "accepted by the reader, refused by libhdf5");
        abort();
    }
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
    free(want);
}
