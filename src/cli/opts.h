// opts.h: one static option table per subcommand, from which both the parser and --help are made.
// provides: ds_opt, ds_args, opts_parse, opts_help, opts_help_markdown, opts_int,
//           opts_double, opts_size, opts_parse_size, opts_str, opts_flag, opts_given
#ifndef DS_OPTS_H
#define DS_OPTS_H

#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "core/err.h"

// OPT_SIZE: bytes, written as a number with an optional binary suffix K, M, G or T ("64M", "1.5G").
enum ds_opt_type { OPT_FLAG, OPT_INT, OPT_DOUBLE, OPT_STRING, OPT_CHOICE, OPT_SIZE };

typedef struct ds_opt {
    const char *name;  // long name without the dashes
    int type;
    const char *def;   // default as text; NULL when there is none
    const char *meta;  // the value's name in --help ("M"), or the choices "f64|f32" for OPT_CHOICE
    double min, max;   // accepted range of OPT_INT and OPT_DOUBLE
    const char *help;
} ds_opt;

#define DS_MAX_OPTS 48

typedef struct ds_args {
    const ds_opt *table;
    int n;
    const char *value[DS_MAX_OPTS];  // the text given, or the default
    int given[DS_MAX_OPTS];
    int markdown;  // --markdown was given (with --help): help prints the Markdown table
} ds_args;

// Parses argv[0 .. argc−1] ("--name value", "--name=value", flags alone) against table (ended by a
// NULL name). DS_ERR_USAGE with a message for an unknown option, a missing value, a number out of
// range or a choice not offered. `--markdown` (with --help only) sets args->markdown.
int opts_parse(const ds_opt *table, int argc, char **argv, ds_args *args, ds_msg *msg);

// Prints "usage" and then one line per option of args' table, with its default, to f; with
// args->markdown, opts_help_markdown's table instead.
void opts_help(FILE *f, const ds_args *args, const char *usage, const char *about);

// Prints table's options to f as a Markdown table (option | default | description), one row per entry
// in table order, from the fields opts_help prints; '|' in a cell is escaped. The docs' option tables
// are this output (docs/options.sh).
void opts_help_markdown(FILE *f, const ds_opt *table);

int64_t opts_int(const ds_args *args, const char *name);
double opts_double(const ds_args *args, const char *name);
double opts_size(const ds_args *args, const char *name);  // bytes; 0 when unset without default
// "64M" → 67108864: DS_OK, or DS_ERR_USAGE when text is not a size.
int opts_parse_size(const char *text, double *bytes);
const char *opts_str(const ds_args *args, const char *name);  // NULL when unset without default
int opts_flag(const ds_args *args, const char *name);
int opts_given(const ds_args *args, const char *name);

// The options every subcommand takes, and --backend for those that compute.
#define DS_REPORT_OPTS                                                                                  \
    {"json", OPT_FLAG, NULL, NULL, 0, 0, "print one JSON object on stdout instead of the summary"},     \
        {"quiet", OPT_FLAG, NULL, NULL, 0, 0, "no progress lines on stderr"},                           \
        {"timeout", OPT_DOUBLE, NULL, "SECONDS", 0, 1e9,                                                \
         "end the job when a rank makes no progress for SECONDS (default DSOLVE_TIMEOUT, else 600; 0: never)"}, \
        {"help", OPT_FLAG, NULL, NULL, 0, 0, "this text"}
#define DS_COMMON_OPTS                                                                                  \
    {"backend", OPT_CHOICE, "auto", ds_backend_choices, 0, 0,                                           \
     "cuda when every rank has a GPU of its own, else cpu"},                                             \
        DS_REPORT_OPTS

#endif
