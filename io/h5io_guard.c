// h5io_guard.c: the readers that first see an input file (probes, the model's matrices and attributes,
// small vectors) run once in a throw-away worker process (core/probe.h) before they run here, so that a
// crash inside libhdf5 on a hostile file becomes exit 3 with one line naming the file and the signal.
// Bulk reads (h5io_read_lsq_rows, h5io_read_labelled_rows, h5io_read_keys) are not repeated: they come
// after their probe has passed, inside a crash scope (core/cleanup.h) that makes a crash in them exit 3. Without a helper (tests, tools) every reader runs in-process only.
// A file whose check ended the worker (a crash, the probe's time limit) is remembered by its identity, and
// the next guarded read of it fails at once with the same line: a crafted file that holds libhdf5 in a
// loop costs one time limit (DSOLVE_PROBE_SECONDS), not one for each of a reader's calls.
// provides: h5io_guard_check, h5i_guard, h5io_guard_forget
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/probe.h"
#include "h5io.h"
#include "h5io_internal.h"

// One reader call, as the worker repeats it.
typedef struct guard_req {
    int op;
    int64_t n;                    // GUARD_READ_VECTOR: the length expected
    char path[PATH_MAX];
    char name[2][NAME_MAX_LEN];  // datasets or an attribute, as the reader takes them; "" for NULL
} guard_req;

static const char *or_null(const char *s)
{
    return s[0] ? s : NULL;
}

// The worker's side: the reader call of req, its status and message.
int h5io_guard_check(const void *req, size_t len, ds_msg *msg)
{
    const guard_req *r = req;
    DS_ASSERT(len == sizeof *r);
    h5io_lsq_info info;
    int64_t rows = 0, cols = 0;
    double *v = NULL;
    int type = 0, rc = DS_OK;
    switch (r->op) {
    case GUARD_PROBE_LSQ: return h5io_probe_lsq(r->path, r->name[0], or_null(r->name[1]), &info, msg);
    case GUARD_PROBE_LABELLED: return h5io_probe_labelled(r->path, r->name[0], r->name[1], &info, msg);
    case GUARD_PROBE_KEYS: return h5io_probe_keys(r->path, r->name[0], &type, &rows, msg);
    case GUARD_HAS_DATASET: h5io_has_dataset(r->path, r->name[0]); return DS_OK;
    case GUARD_READ_ATTRS: {  // the attribute names, one a line
        char list[NAME_MAX_LEN];
        const char *names[H5IO_ATTRS_MAX];
        double values[H5IO_ATTRS_MAX];
        int status[H5IO_ATTRS_MAX], k = 0;
        strcpy(list, r->name[1]);
        for (char *at = list, *end; k < H5IO_ATTRS_MAX; at = end + 1) {
            names[k++] = at;
            if (!(end = strchr(at, '\n')))
                break;
            *end = '\0';
        }
        return h5io_read_attrs_num(r->path, r->name[0], k, names, values, status, NULL, msg);
    }
    case GUARD_READ_MATRIX: rc = h5io_read_matrix(r->path, r->name[0], &rows, &cols, &v, msg); break;
    case GUARD_READ_VECTOR:
        v = malloc((size_t)(r->n > 0 ? r->n : 1) * sizeof(double));
        rc = v ? h5io_read_vector(r->path, r->name[0], r->n, v, msg) : ds_fail(msg, DS_ERR_RUNTIME, "out of memory");
        break;
    default: DS_ASSERT(!"unknown guarded reader");
    }
    free(v);
    return rc;
}

// The last file whose check ended the worker: its path, identity and the signal.
static struct {
    char path[PATH_MAX];
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int signo;
} failed;
static pthread_mutex_t failed_lock = PTHREAD_MUTEX_INITIALIZER;

// The signal remembered for path when it is still the file whose check ended the worker, else 0; with
// signo > 0, remembers path as that file.
static int failed_file(const char *path, int signo)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    int found = 0;
    pthread_mutex_lock(&failed_lock);
    if (signo) {
        snprintf(failed.path, sizeof failed.path, "%s", path);
        failed.dev = st.st_dev, failed.ino = st.st_ino, failed.size = st.st_size, failed.mtime = st.st_mtim;
        failed.signo = signo;
    } else if (failed.signo && strcmp(failed.path, path) == 0 && failed.dev == st.st_dev &&
               failed.ino == st.st_ino && failed.size == st.st_size && failed.mtime.tv_sec == st.st_mtim.tv_sec &&
               failed.mtime.tv_nsec == st.st_mtim.tv_nsec) {
        found = failed.signo;
    }
    pthread_mutex_unlock(&failed_lock);
    return found;
}

void h5io_guard_forget(void)
{
    pthread_mutex_lock(&failed_lock);
    failed.signo = 0;
    pthread_mutex_unlock(&failed_lock);
}

static int crashed(const char *path, int signo, ds_msg *msg)
{
    return ds_fail(msg, DS_ERR_INPUT, "%s: not a readable HDF5 file (the HDF5 library failed on it: %s)", path,
                   probe_signal_name(signo));
}

int h5i_guard(int op, const char *path, const char *a, const char *b, int64_t n, ds_msg *msg)
{
    guard_req r = {.op = op, .n = n};
    if (strlen(path) >= sizeof r.path || (a && strlen(a) >= NAME_MAX_LEN) || (b && strlen(b) >= NAME_MAX_LEN))
        return DS_OK;  // the reader refuses such names itself
    int seen = failed_file(path, 0);
    if (seen)
        return crashed(path, seen, msg);
    strcpy(r.path, path);
    strcpy(r.name[0], a ? a : "");
    strcpy(r.name[1], b ? b : "");
    int signo = 0;
    ds_msg why = {{0}};
    int rc = probe_run(&r, sizeof r, &signo, &why);
    if (rc == PROBE_NONE || rc == DS_OK)
        return DS_OK;
    if (signo) {
        failed_file(path, signo);
        return crashed(path, signo, msg);
    }
    if (!why.text[0])
        return ds_fail(msg, rc, "%s: the process checking it ended without a verdict", path);
    return ds_fail(msg, rc, "%s", why.text);
}
