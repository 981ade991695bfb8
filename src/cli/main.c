// main.c: dsolve's entry point: MPI start, subcommand dispatch, the one-line error and the exit code.
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "core/cleanup.h"
#include "core/probe.h"
#include "h5io.h"
#include "cli/opts.h"

typedef struct ds_command {
    const char *name;
    int (*run)(MPI_Comm comm, int argc, char **argv, ds_msg *msg);
    const char *about;
} ds_command;

static const ds_command commands[] = {
    {"solve", cmd_solve, "SolveBak least squares on an HDF5 input or the built-in problem"},
    {"gen", cmd_gen, "write a least-squares or network test problem to HDF5"},
    {"ann", cmd_ann, "train the least-squares network (neurons sharded across ranks)"},
    {"predict", cmd_predict, "apply a network written by dsolve ann"},
    {"sort", cmd_sort, "distributed sample sort of a 1-D HDF5 dataset or generated keys"},
    {"logreg", cmd_logreg, "multi-class logistic regression (Fashion-MNIST IDX or HDF5)"},
    {"bench", cmd_bench, "time CPU against GPU (matmul, add, solve, all), checked, with resources"},
    {"info", cmd_info, "ranks, hosts, GPUs, memory and library versions"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: dsolve COMMAND [options]     (mpirun -np P dsolve ... for P ranks, one GPU each)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].about);
    fprintf(f, "\n  dsolve COMMAND --help   the command's options (--help --markdown: as a Markdown table)\n"
               "  dsolve --version        versions of dsolve and its libraries\n");
    fprintf(f, "\nexit codes: 0 ok, 1 runtime failure, 2 usage, 3 bad input, 4 numerical failure\n");
}

static int dispatch(int argc, char **argv, int rank, ds_msg *msg)
{
    if (argc < 2) {
        if (rank == 0)
            usage(stderr);
        return ds_fail(msg, DS_ERR_USAGE, "no command given");
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (rank == 0)
            usage(stdout);
        return DS_OK;
    }
    if (strcmp(name, "--version") == 0) {
        if (rank == 0)
            ds_print_version(stdout);
        return DS_OK;
    }
    int nargs = argc - 2;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0) {
            return commands[i].run(MPI_COMM_WORLD, nargs, argv + 2, msg);
        }
    return ds_fail(msg, DS_ERR_USAGE, "unknown command '%s' (see dsolve --help)", name);
}

int main(int argc, char **argv)
{
    // A write past `ulimit -f` then fails with EFBIG, reported and cleaned up like a full disk, instead of
    // killing the process with its temporary file left behind.
    signal(SIGXFSZ, SIG_IGN);
    cleanup_install();  // SIGTERM, SIGINT, SIGHUP: no temporary output left behind
    // Input files are first read in throw-away processes forked from this one while fork is still safe (no
    // MPI, CUDA or threads of ours yet): a crash of libhdf5 on a hostile file is then exit 3, not a dead rank.
    probe_start(h5io_guard_check);
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ds_msg msg = {{0}};
    int rc = dispatch(argc, argv, rank, &msg);
    if (rc != DS_OK && rank == 0) {
        fprintf(stderr, "dsolve: %s\n", msg.text[0] ? msg.text : "failed");
        fflush(stderr);
    }
    fflush(stdout);
    MPI_Finalize();
    // After a failed write HDF5 (1.10) may hold a file it could not close, and its exit handler then
    // crashes closing it again: a failed run leaves without exit handlers (every output is closed or
    // discarded by now, and the streams are flushed).
    if (rc != DS_OK) {
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}
