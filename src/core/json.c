// json.c: the JSON writer of json.h (one object, one line, nesting allowed).
#include "core/json.h"

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

// The comma before every member but the first of its object or array, then "key": when key is given.
static void json_key(ds_json *j, const char *key)
{
    DS_ASSERT(j->depth > 0);
    json_put(j, "%s", j->first[j->depth - 1] ? "" : ",");
    j->first[j->depth - 1] = 0;
    if (key)
        json_put(j, "\"%s\":", key);
}

static void json_value(ds_json *j, double v)
{
    if (isfinite(v))
        json_put(j, "%.9g", v);
    else
        json_put(j, "null");
}

static void json_open(ds_json *j, char open, char close)
{
    DS_ASSERT(j->depth < JSON_MAX_DEPTH);
    json_put(j, "%c", open);
    j->closer[j->depth] = close;
    j->first[j->depth] = 1;
    j->depth++;
}

void json_begin(ds_json *j)
{
    j->cap = 1024;
    j->buf = malloc(j->cap);
    DS_ASSERT(j->buf);
    j->len = 0;
    j->depth = 0;
    json_open(j, '{', '}');
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
    json_array(j, key);
    for (int64_t i = 0; i < n; i++)
        json_num(j, NULL, v[i]);
    json_close(j);
}

void json_bool(ds_json *j, const char *key, int value)
{
    json_key(j, key);
    json_put(j, value ? "true" : "false");
}

void json_null(ds_json *j, const char *key)
{
    json_key(j, key);
    json_put(j, "null");
}

void json_object(ds_json *j, const char *key)
{
    json_key(j, key);
    json_open(j, '{', '}');
}

void json_array(ds_json *j, const char *key)
{
    json_key(j, key);
    json_open(j, '[', ']');
}

void json_close(ds_json *j)
{
    DS_ASSERT(j->depth > 1);  // the outer object is json_end's
    j->depth--;
    json_put(j, "%c", j->closer[j->depth]);
}

void json_end(ds_json *j, FILE *f)
{
    DS_ASSERT(j->depth == 1);
    json_put(j, "}");
    fprintf(f, "%s\n", j->buf);
    fflush(f);
    free(j->buf);
    j->buf = NULL;
}
