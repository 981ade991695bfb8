// opts.c: the option-table parser and --help printer.
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

static int opts_check_value(const ds_opt *o, const char *v, ds_msg *msg)
{
    char *end = NULL;
    errno = 0;
    if (o->type == OPT_INT) {
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
    return DS_OK;
}

void opts_help(FILE *f, const char *usage, const char *about, const ds_opt *table)
{
    fprintf(f, "usage: %s\n%s\n\noptions:\n", usage, about);
    for (int i = 0; table[i].name; i++) {
        const ds_opt *o = &table[i];
        char left[64];
        if (o->type == OPT_FLAG)
            snprintf(left, sizeof left, "--%s", o->name);
        else
            snprintf(left, sizeof left, "--%s %s", o->name, o->meta ? o->meta : "X");
        fprintf(f, "  %-28s %s", left, o->help);
        if (o->def && o->type != OPT_FLAG)
            fprintf(f, " (default %s)", o->def);
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
