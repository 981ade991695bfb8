// version.c: --version: dsolve and the libraries it was built and runs with.
#include <cblas.h>
#include <mpi.h>

#include "backend.h"
#include "cmds.h"
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
#ifdef DSOLVE_HAVE_CUDA
    char cuda[256];
    ds_cuda_versions(cuda, sizeof cuda);
    fprintf(f, "  CUDA: %s\n", cuda);
#else
    fprintf(f, "  CUDA: not built (DSOLVE_CUDA=OFF)\n");
#endif
}
