/* A minimal streaming JSON writer for the command-line tool's --json output.
 *
 * The tool only ever writes JSON, never reads it, so a writer that tracks
 * commas and escapes strings is all it needs.  Output is one compact line per
 * top-level value.  Nesting is limited to JSON_MAX_DEPTH.
 */
#ifndef HC_TOOLS_JSON_H
#define HC_TOOLS_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
  FILE *f;
  unsigned depth;
  bool need_comma[JSON_MAX_DEPTH];
  bool after_key;
};

/* Starts writing to f. */
void json_init (struct json *j, FILE *f);

void json_object_begin (struct json *j);
void json_object_end (struct json *j);
void json_array_begin (struct json *j);
void json_array_end (struct json *j);

/* Writes a member name; the next value written is its value. */
void json_key (struct json *j, const char *key);

void json_string (struct json *j, const char *s);
void json_uint (struct json *j, uint64_t v);
void json_int (struct json *j, int64_t v);
void json_double (struct json *j, double v);
void json_bool (struct json *j, bool v);
void json_null (struct json *j);

/* Shorthands for "key": value. */
void json_kv_string (struct json *j, const char *key, const char *s);
void json_kv_uint (struct json *j, const char *key, uint64_t v);
void json_kv_bool (struct json *j, const char *key, bool v);

/* "key": an array of name (i) for each bit i set in `bits` (bits whose
 * name is NULL are left out). */
void json_kv_bits (struct json *j, const char *key, uint64_t bits, const char *(*name) (unsigned));

#endif /* HC_TOOLS_JSON_H */
