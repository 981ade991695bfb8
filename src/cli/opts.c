// opts.c: the option-table parser and the --help printers (text, and Markdown for the docs).
#include "cli/opts.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int opts_find(const ds_opt *table, const char *name, size_t len)
{
    for (int i = 0; table[i].name; i++)
        if (strlen(table[i].name) == len && strncmp(table[i].name, name, len) == 0)
            return i;
    return -1;
}

int opts_parse_size(const char *text, double *bytes)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(text, &end);
    if (errno || end == text || !isfinite(x) || x < 0)
        return DS_ERR_USAGE;
    static const char units[] = "KMGT";
    const char *u = *end ? strchr(units, *end >= 'a' ? *end - 'a' + 'A' : *end) : NULL;
    if (*end && (!u || end[1] != '\0'))
        return DS_ERR_USAGE;
    *bytes = u ? ldexp(x, 10 * (int)(u - units + 1)) : x;
    return DS_OK;
}

static int opts_check_value(const ds_opt *o, const char *v, ds_msg *msg)
{
    char *end = NULL;
    errno = 0;
    if (o->type == OPT_SIZE) {
        double x = 0;
        if (opts_parse_size(v, &x) != DS_OK)
            return ds_fail(msg, DS_ERR_USAGE, "--%s: '%s' is not a size (bytes, or a number with K, M, G or T: 64M)",
                           o->name, v);
        if (x < o->min || x > o->max)
            return ds_fail(msg, DS_ERR_USAGE, "--%s: %s is out of range [%.17g, %.17g] bytes", o->name, v, o->min,
                           o->max);
    } else if (o->type == OPT_INT) {
        long long x = strtoll(v, &end, 10);
        if (errno == ERANGE)
            return ds_fail(msg, DS_ERR_USAGE, "--%s: %s is out of range", o->name, v);
        if (errno || end == v || *end != '\0')
            return ds_fail(msg, DS_ERR_USAGE, "--%s: '%s' is not an integer", o->name, v);
        if ((double)x < o->min || (double)x > o->max)
            return ds_fail(msg, DS_ERR_USAGE, "--%s: %s is out of range [%.17g, %.17g]", o->name, v, o->min, o->max);
    } else if (o->type == OPT_DOUBLE) {
        double x = strtod(v, &end);
        if (errno == ERANGE && end != v && *end == '\0' && fabs(x) <= 1.0)
            errno = 0;  // underflow: a tiny number is still that number (or 0)
        if (errno == ERANGE)
            return ds_fail(msg, DS_ERR_USAGE, "--%s: %s is out of range", o->name, v);
        if (errno || end == v || *end != '\0' || !isfinite(x))
            return ds_fail(msg, DS_ERR_USAGE, "--%s: '%s' is not a number", o->name, v);
        if (x < o->min || x > o->max)
            return ds_fail(msg, DS_ERR_USAGE, "--%s: %s is out of range [%g, %g]", o->name, v, o->min, o->max);
    } else if (o->type == OPT_CHOICE) {
        size_t len = strlen(v);
        for (const char *c = o->meta; c && *c;) {
            const char *bar = strchr(c, '|');
            size_t clen = bar ? (size_t)(bar - c) : strlen(c);
            if (clen == len && strncmp(c, v, len) == 0)
                return DS_OK;
            c = bar ? bar + 1 : c + clen;
        }
        return ds_fail(msg, DS_ERR_USAGE, "--%s: '%s' is not one of %s", o->name, v, o->meta);
    } else if (o->type == OPT_STRING && v[0] == '\0') {
        return ds_fail(msg, DS_ERR_USAGE, "--%s: empty value", o->name);
    }
    return DS_OK;
}

int opts_parse(const ds_opt *table, int argc, char **argv, ds_args *args, ds_msg *msg)
{
    memset(args, 0, sizeof *args);
    args->table = table;
    for (args->n = 0; table[args->n].name; args->n++) {
        DS_ASSERT(args->n < DS_MAX_OPTS);
        args->value[args->n] = table[args->n].def;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0)
            return ds_fail(msg, DS_ERR_USAGE, "unexpected argument '%s' (options start with --)", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        int k = opts_find(table, name, eq ? (size_t)(eq - name) : strlen(name));
        if (k < 0 && strcmp(a, "--markdown") == 0) {
            args->markdown = 1;
            continue;
        }
        if (k < 0)
            return ds_fail(msg, DS_ERR_USAGE, "unknown option '%s' (see --help)", a);
        const ds_opt *o = &table[k];
        const char *v = NULL;
        if (o->type == OPT_FLAG) {
            if (eq)
                return ds_fail(msg, DS_ERR_USAGE, "--%s takes no value", o->name);
            v = "1";
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            return ds_fail(msg, DS_ERR_USAGE, "--%s needs a value (%s)", o->name, o->meta ? o->meta : "");
        }
        DS_CHECK(opts_check_value(o, v, msg));
        args->value[k] = v;
        args->given[k] = 1;
    }
    const int help = opts_find(table, "help", 4);
    if (args->markdown && (help < 0 || !args->given[help]))
        return ds_fail(msg, DS_ERR_USAGE, "--markdown goes with --help (dsolve COMMAND --help --markdown)");
    return DS_OK;
}

// The option as --help shows it: "--name" for a flag, else "--name META" ("X" without a meta).
static void opts_left(const ds_opt *o, char *buf, size_t len)
{
    if (o->type == OPT_FLAG)
        snprintf(buf, len, "--%s", o->name);
    else
        snprintf(buf, len, "--%s %s", o->name, o->meta ? o->meta : "X");
}

// The default --help shows: none for a flag or an option without one.
static const char *opts_default(const ds_opt *o)
{
    return o->def && o->type != OPT_FLAG ? o->def : NULL;
}

void opts_help(FILE *f, const ds_args *args, const char *usage, const char *about)
{
    const ds_opt *table = args->table;
    if (args->markdown) {
        opts_help_markdown(f, table);
        return;
    }
    fprintf(f, "usage: %s\n%s\n\noptions:\n", usage, about);
    for (int i = 0; table[i].name; i++) {
        const ds_opt *o = &table[i];
        char left[64];
        opts_left(o, left, sizeof left);
        fprintf(f, "  %-28s %s", left, o->help);
        if (opts_default(o))
            fprintf(f, " (default %s)", opts_default(o));
        fputc('\n', f);
    }
}

// A Markdown table cell: text between quote marks ("`" for code, "" for prose), '|' escaped; empty
// text gives an empty cell.
static void md_cell(FILE *f, const char *text, const char *quote)
{
    if (!*text) {
        fputs(" |", f);
        return;
    }
    fprintf(f, " %s", quote);
    for (const char *c = text; *c; c++) {
        if (*c == '|')
            fputc('\\', f);
        fputc(*c, f);
    }
    fprintf(f, "%s |", quote);
}

void opts_help_markdown(FILE *f, const ds_opt *table)
{
    fprintf(f, "| option | default | description |\n| --- | --- | --- |\n");
    for (int i = 0; table[i].name; i++) {
        const ds_opt *o = &table[i];
        char left[256];
        opts_left(o, left, sizeof left);
        fputc('|', f);
        md_cell(f, left, "`");
        md_cell(f, opts_default(o) ? opts_default(o) : "", "`");
        md_cell(f, o->help, "");
        fputc('\n', f);
    }
}

static int opts_index(const ds_args *args, const char *name)
{
    int k = opts_find(args->table, name, strlen(name));
    DS_ASSERT(k >= 0);
    return k;
}

int64_t opts_int(const ds_args *args, const char *name)
{
    const char *v = args->value[opts_index(args, name)];
    return v ? strtoll(v, NULL, 10) : 0;
}

double opts_double(const ds_args *args, const char *name)
{
    const char *v = args->value[opts_index(args, name)];
    return v ? strtod(v, NULL) : 0.0;
}

double opts_size(const ds_args *args, const char *name)
{
    const char *v = args->value[opts_index(args, name)];
    double x = 0;
    return v && opts_parse_size(v, &x) == DS_OK ? x : 0.0;
}

const char *opts_str(const ds_args *args, const char *name)
{
    return args->value[opts_index(args, name)];
}

int opts_flag(const ds_args *args, const char *name)
{
    return args->value[opts_index(args, name)] != NULL;
}

int opts_given(const ds_args *args, const char *name)
{
    return args->given[opts_index(args, name)];
}
