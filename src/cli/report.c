// report.c: a small JSON writer (one object, one line) for --json.
#include "cli/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static void json_put(ds_json *j, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int need = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
        va_end(ap);
        DS_ASSERT(need >= 0);
        if ((size_t)need < j->cap - j->len) {
            j->len += (size_t)need;
            return;
        }
        j->cap = 2 * j->cap + (size_t)need + 64;
        j->buf = realloc(j->buf, j->cap);
        DS_ASSERT(j->buf);
    }
}

static void json_key(ds_json *j, const char *key)
{
    json_put(j, "%s\"%s\":", j->first ? "" : ",", key);
    j->first = 0;
}

static void json_value(ds_json *j, double v)
{
    if (isfinite(v))
        json_put(j, "%.9g", v);
    else
        json_put(j, "null");
}

void json_begin(ds_json *j)
{
    j->cap = 1024;
    j->buf = malloc(j->cap);
    DS_ASSERT(j->buf);
    j->len = 0;
    j->first = 1;
    json_put(j, "{");
}

void json_str(ds_json *j, const char *key, const char *value)
{
    json_key(j, key);
    json_put(j, "\"");
    for (const char *c = value; *c; c++) {
        if (*c == '"' || *c == '\\')
            json_put(j, "\\%c", *c);
        else if ((unsigned char)*c < 0x20)
            json_put(j, "\\u%04x", (unsigned char)*c);
        else
            json_put(j, "%c", *c);
    }
    json_put(j, "\"");
}

void json_int(ds_json *j, const char *key, int64_t value)
{
    json_key(j, key);
    json_put(j, "%lld", (long long)value);
}

void json_num(ds_json *j, const char *key, double value)
{
    json_key(j, key);
    json_value(j, value);
}

void json_nums(ds_json *j, const char *key, const double *v, int64_t n)
{
    json_key(j, key);
    json_put(j, "[");
    for (int64_t i = 0; i < n; i++) {
        if (i)
            json_put(j, ",");
        json_value(j, v[i]);
    }
    json_put(j, "]");
}

void json_bool(ds_json *j, const char *key, int value)
{
    json_key(j, key);
    json_put(j, value ? "true" : "false");
}

void json_end(ds_json *j, FILE *f)
{
    json_put(j, "}");
    fprintf(f, "%s\n", j->buf);
    fflush(f);
    free(j->buf);
    j->buf = NULL;
}
