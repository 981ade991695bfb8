// report.h: the one-line JSON object of --json, built key by key.
// provides: ds_json, json_begin, json_str, json_int, json_num, json_nums, json_bool, json_end, json_free
#ifndef DS_REPORT_H
#define DS_REPORT_H

#include <stdint.h>
#include <stdio.h>

typedef struct ds_json {
    char *buf;
    size_t len, cap;
    int first;
} ds_json;

void json_begin(ds_json *j);
void json_str(ds_json *j, const char *key, const char *value);
void json_int(ds_json *j, const char *key, int64_t value);
void json_num(ds_json *j, const char *key, double value);  // null when not finite
void json_nums(ds_json *j, const char *key, const double *v, int64_t n);
void json_bool(ds_json *j, const char *key, int value);
void json_end(ds_json *j, FILE *f);  // closes the object, prints it and a newline, and frees it

#endif
