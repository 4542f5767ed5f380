/* A minimal streaming JSON writer: see json.h. */
#include <assert.h>
#include <inttypes.h>
#include <math.h>

#include "json.h"

void
json_init (struct json *j, FILE *f)
{
  j->f = f;
  j->depth = 0;
  j->need_comma[0] = false;
  j->after_key = false;
}

/* Writes the separator a new value needs in the current container. */
static void
sep (struct json *j)
{
  if (j->after_key) {
    j->after_key = false;
    return;
  }
  if (j->need_comma[j->depth])
    fputc (',', j->f);
  j->need_comma[j->depth] = true;
}

static void
open_container (struct json *j, char c)
{
  sep (j);
  fputc (c, j->f);
  assert (j->depth + 1 < JSON_MAX_DEPTH);
  j->need_comma[++j->depth] = false;
}

static void
close_container (struct json *j, char c)
{
  assert (j->depth > 0);
  j->depth--;
  fputc (c, j->f);
  if (j->depth == 0) {
    fputc ('\n', j->f);
    j->need_comma[0] = false;
  }
}

void json_object_begin (struct json *j) { open_container (j, '{'); }
void json_object_end (struct json *j) { close_container (j, '}'); }
void json_array_begin (struct json *j) { open_container (j, '['); }
void json_array_end (struct json *j) { close_container (j, ']'); }

static void
write_string (FILE *f, const char *s)
{
  fputc ('"', f);
  for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
    switch (*p) {
    case '"': fputs ("\\\"", f); break;
    case '\\': fputs ("\\\\", f); break;
    case '\n': fputs ("\\n", f); break;
    case '\t': fputs ("\\t", f); break;
    case '\r': fputs ("\\r", f); break;
    default:
      if (*p < 0x20)
        fprintf (f, "\\u%04x", *p);
      else
        fputc (*p, f);
    }
  }
  fputc ('"', f);
}

void
json_key (struct json *j, const char *key)
{
  sep (j);
  write_string (j->f, key);
  fputc (':', j->f);
  j->after_key = true;
}

void json_string (struct json *j, const char *s) { sep (j); write_string (j->f, s); }
void json_uint (struct json *j, uint64_t v) { sep (j); fprintf (j->f, "%" PRIu64, v); }
void json_int (struct json *j, int64_t v) { sep (j); fprintf (j->f, "%" PRId64, v); }
void json_bool (struct json *j, bool v) { sep (j); fputs (v ? "true" : "false", j->f); }
void json_null (struct json *j) { sep (j); fputs ("null", j->f); }

void
json_double (struct json *j, double v)
{
  sep (j);
  if (isfinite (v))
    fprintf (j->f, "%.10g", v);
  else
    fputs ("null", j->f);
}

void json_kv_string (struct json *j, const char *k, const char *s) { json_key (j, k); json_string (j, s); }
void json_kv_uint (struct json *j, const char *k, uint64_t v) { json_key (j, k); json_uint (j, v); }
void json_kv_bool (struct json *j, const char *k, bool v) { json_key (j, k); json_bool (j, v); }

void
json_kv_bits (struct json *j, const char *key, uint64_t bits, const char *(*name) (unsigned))
{
  json_key (j, key);
  json_array_begin (j);
  for (unsigned i = 0; i < 64; i++)
    if ((bits >> i & 1) && name (i))
      json_string (j, name (i));
  json_array_end (j);
}
