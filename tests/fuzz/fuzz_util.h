// fuzz_util.h: what the libFuzzer harnesses of tests/fuzz share: a per-process scratch folder that
// the fuzz input is written into (the io/ readers take paths), and the verdict on a reader's status.
// provides: fuzz_dir, fuzz_path, fuzz_write, fuzz_expect, fuzz_alloc, fuzz_same_as_hdf5, FUZZ_MAX_BYTES
#ifndef DS_FUZZ_UTIL_H
#define DS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

// The most bytes a harness lets a reader's output take: an accepted header that sizes more than
// this from a fuzz input (a few KB) is an over-allocation the reader should have refused.
enum { FUZZ_MAX_BYTES = 256 << 20 };

// This process's scratch folder, in $TMPDIR or /tmp (made on first use, removed with its files at exit).
const char *fuzz_dir(void);

// name's path inside this process's scratch folder (made on first use, removed at exit).
const char *fuzz_path(const char *name);

// Writes n bytes to name in the scratch folder (truncating it) and returns its path.
const char *fuzz_write(const char *name, const uint8_t *data, size_t n);

// A reader's verdict must be success or DS_ERR_INPUT with a one-line message; anything else (another
// status, an empty or multi-line message) aborts with what was seen, so that libFuzzer reports it.
// With DSOLVE_FUZZ_VERBOSE set in the environment, every verdict is printed (to triage an input). Verdicts
// of the probe helper that libhdf5 crashed on an input are counted, and the count printed at exit.
void fuzz_expect(int rc, const ds_msg *msg, const char *call);

// A buffer of rows × width × elsize bytes (at least 1) for a reader to fill, sized by what a probe
// accepted: past FUZZ_MAX_BYTES it aborts, naming path and what, since the probe should have refused.
void *fuzz_alloc(const char *path, const char *what, int64_t rows, int64_t width, size_t elsize);

// The differential check of the readers' own decoding of compressed chunks (io/h5io_filters.c): rows
// row0 .. row0+n−1 of dataset name (cols wide, 1-D when 0) that a reader accepted into got (f32 or f64)
// must equal, bit for bit, what libhdf5's H5Dread makes of the same file; else it aborts, naming them.
// Once the reader has accepted every chunk, libhdf5's decoders see only chunks of the right sizes. A read
// that libhdf5 refuses (for a reason the reader does not check) is counted and printed at exit, and aborts
// with DSOLVE_FUZZ_STRICT=1.
void fuzz_same_as_hdf5(const char *path, const char *name, int64_t row0, int64_t n, int64_t cols, int f32,
                       const void *got);

#endif
