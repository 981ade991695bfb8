// json.h: the one JSON writer of dsolve (every command's --json, bench's, info's): one object on one
// line, built key by key in a growing buffer, with nested objects and arrays; printed at the end.
// Numbers print as %.9g (null when not finite), integers as %lld, strings escaped (", \, controls).
// provides: ds_json, json_begin, json_str, json_int, json_num, json_nums, json_bool, json_null,
//           json_object, json_array, json_close, json_end
#ifndef DS_JSON_H
#define DS_JSON_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 8

typedef struct ds_json {
    char *buf;
    size_t len, cap;
    int depth;                     // open objects and arrays, the outer object included
    char closer[JSON_MAX_DEPTH];   // '}' or ']' for each
    int first[JSON_MAX_DEPTH];     // whether nothing has been written in it yet
} ds_json;

// Every value below takes a key; inside an array the key is NULL (a bare element).
void json_begin(ds_json *j);  // opens the outer object
void json_str(ds_json *j, const char *key, const char *value);
void json_int(ds_json *j, const char *key, int64_t value);
void json_num(ds_json *j, const char *key, double value);  // null when not finite
void json_nums(ds_json *j, const char *key, const double *v, int64_t n);
void json_bool(ds_json *j, const char *key, int value);
void json_null(ds_json *j, const char *key);
void json_object(ds_json *j, const char *key);  // opens a nested object, closed by json_close
void json_array(ds_json *j, const char *key);   // opens an array, closed by json_close
void json_close(ds_json *j);                    // closes the innermost open object or array
void json_end(ds_json *j, FILE *f);  // closes the outer object, prints it and a newline, and frees it

#endif
