// cmds.h: the subcommands. Each parses its own option table, runs collectively over MPI_COMM_WORLD
// and returns the exit status (0 ok, 1 runtime, 2 usage, 3 bad input, 4 numerical failure); the
// message of a failure is printed by rank 0 of main.
// provides: cmd_solve, cmd_gen, cmd_ann, cmd_predict, cmd_sort, cmd_logreg, cmd_bench, cmd_info, ds_print_version
#ifndef DS_CMDS_H
#define DS_CMDS_H

#include <mpi.h>
#include <stdio.h>

#include "core/err.h"

int cmd_solve(MPI_Comm comm, int argc, char **argv, ds_msg *msg);
int cmd_gen(MPI_Comm comm, int argc, char **argv, ds_msg *msg);
int cmd_ann(MPI_Comm comm, int argc, char **argv, ds_msg *msg);
int cmd_predict(MPI_Comm comm, int argc, char **argv, ds_msg *msg);
int cmd_sort(MPI_Comm comm, int argc, char **argv, ds_msg *msg);
int cmd_logreg(MPI_Comm comm, int argc, char **argv, ds_msg *msg);
int cmd_bench(MPI_Comm comm, int argc, char **argv, ds_msg *msg);
int cmd_info(MPI_Comm comm, int argc, char **argv, ds_msg *msg);
void ds_print_version(FILE *f);

#endif
