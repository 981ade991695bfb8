// registry.c: every backend this build has, in the order `--backend auto` tries them (device backends
// first, the host backend last), and the names of those left out of the build. The only C file outside
// the CUDA ones that knows which backends were built: adding a backend is its files plus its entry
// here (the array, its name in --backend's choices, and its line among the absent ones).
// provides: ds_backends, ds_nbackends, ds_backend_choices, ds_backend_find, ds_backend_host, ds_backend_device
#include <string.h>

#include "backend/backend.h"

extern const ds_backend ds_backend_cpu;
#ifdef DSOLVE_HAVE_CUDA
extern const ds_backend ds_backend_cuda;
#endif

const ds_backend *const ds_backends[] = {
#ifdef DSOLVE_HAVE_CUDA
    &ds_backend_cuda,
#endif
    &ds_backend_cpu,
};
const int ds_nbackends = (int)(sizeof ds_backends / sizeof ds_backends[0]);

// --backend's choices: auto, then every backend's name, whether this build has it or not (a name not
// built is refused with its reason below, not as an unknown word).
const char ds_backend_choices[] = "auto|cpu|cuda";

// Backends this dsolve knows of but was built without: the name and what --backend NAME says.
typedef struct ds_backend_absent {
    const char *name, *why, *note;  // note: what `--backend auto` says when it falls back to the host
} ds_backend_absent;

static const ds_backend_absent absent[] = {
#ifndef DSOLVE_HAVE_CUDA
    {"cuda", "this dsolve was built without CUDA (DSOLVE_CUDA=OFF)", "built without CUDA"},
#endif
    {NULL, NULL, NULL},
};

const ds_backend *ds_backend_find(const char *name, const char **why)
{
    for (int i = 0; i < ds_nbackends; i++)
        if (strcmp(ds_backends[i]->name, name) == 0)
            return ds_backends[i];
    *why = "unknown backend";
    for (const ds_backend_absent *a = absent; a->name; a++)
        if (strcmp(a->name, name) == 0)
            *why = a->why;
    return NULL;
}

const ds_backend *ds_backend_host(void)
{
    return ds_backends[ds_nbackends - 1];
}

const ds_backend *ds_backend_device(const char **why)
{
    for (int i = 0; i < ds_nbackends; i++)
        if (ds_backends[i]->device_count)
            return ds_backends[i];
    *why = absent[0].note ? absent[0].note : "no device backend built";
    return NULL;
}
