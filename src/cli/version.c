// version.c: --version: dsolve and the libraries it was built and runs with.
#include <cblas.h>
#include <mpi.h>

#include "backend/backend.h"
#include "cli/cmds.h"
#include "h5io.h"

extern void ilaver_(int *major, int *minor, int *patch);  // LAPACK's version, from OpenBLAS

void ds_print_version(FILE *f)
{
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING], h5[64];
    int len = 0, maj = 0, min = 0, pat = 0;
    MPI_Get_library_version(mpi, &len);
    for (int i = 0; i < len; i++)
        if (mpi[i] == '\n' || mpi[i] == ',') {
            mpi[i] = '\0';
            break;
        }
    h5io_version(h5, sizeof h5);
    ilaver_(&maj, &min, &pat);
    fprintf(f, "dsolve %s\n", DSOLVE_VERSION);
    fprintf(f, "  MPI: %s\n", mpi);
    fprintf(f, "  HDF5: %s\n", h5);
    fprintf(f, "  BLAS: %s\n", openblas_get_config());
    fprintf(f, "  LAPACK: %d.%d.%d (LAPACKE)\n", maj, min, pat);
    const char *why = NULL;
    const ds_backend *dev = ds_backend_device(&why);
    if (dev) {
        ds_versions v;
        dev->versions(&v);
        char drv[32];
        if (v.driver > 0)
            snprintf(drv, sizeof drv, "%d.%d", v.driver / 1000, v.driver % 1000 / 10);
        else
            snprintf(drv, sizeof drv, "none");
        fprintf(f, "  CUDA: CUDA runtime %d.%d, driver %s, cuBLAS %d.%d.%d, cuSOLVER %d.%d.%d, NCCL %d.%d.%d\n",
                v.runtime / 1000, v.runtime % 1000 / 10, drv, v.blas[0], v.blas[1], v.blas[2], v.solver[0],
                v.solver[1], v.solver[2], v.comm / 10000, v.comm / 100 % 100, v.comm % 100);
    } else {
        fprintf(f, "  CUDA: not built (DSOLVE_CUDA=OFF)\n");
    }
}
