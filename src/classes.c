/* Per-class performance attributes: the defaults, the run-time table and its
 * config file.
 *
 * The table is read on every I/O by the engine and written rarely by an
 * administrator, so each class's attributes are packed into one 32-bit word
 * and kept in an atomic: readers never lock and never see half an update.
 *
 *     bits  3:0   priority (0 … 15)
 *     bit   4     admit on read miss
 *     bit   5     admit on write
 *     bit   6     pattern (0 random, 1 sequential)
 *     bit   7     latency sensitive
 *     bits 10:8   write lifetime (RWH 0 … 5)
 *     bits 22:16  maximum share of the fast tier (0 … 100 %)
 *
 * The defaults are our reading of Petersen's class table (hint-standards §3)
 * and of Chinner's point that metadata deserves flash while journal writes,
 * which are never read back, do not.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hintcache/classes.h"
#include "util.h"

struct hc_classes {
  _Atomic uint32_t word[HC_CLASS_COUNT];
  /* Per class, a bit per attribute (enum hc_class_attr) chosen by a
   * config line, a key or hc_classes_set rather than left at its default. */
  _Atomic uint32_t chosen[HC_CLASS_COUNT];
};

static const struct hc_class_attrs defaults[HC_CLASS_COUNT] = {
  /*                          prio  adm_r  adm_w  pattern                 lat    life share */
  [HC_CLASS_UNCLASSIFIED] = { 8,  true,  true,  HC_PATTERN_RANDOM,     false, 0, 100 },
  [HC_CLASS_METADATA]     = { 14, true,  true,  HC_PATTERN_RANDOM,     true,  2, 100 },
  [HC_CLASS_JOURNAL]      = { 1,  false, true,  HC_PATTERN_SEQUENTIAL, true,  2, 10 },
  [HC_CLASS_TRANSACTION]  = { 12, true,  true,  HC_PATTERN_RANDOM,     true,  3, 100 },
  [HC_CLASS_DATA]         = { 8,  true,  true,  HC_PATTERN_RANDOM,     false, 0, 100 },
  [HC_CLASS_PAGING]       = { 10, true,  true,  HC_PATTERN_RANDOM,     true,  2, 50 },
  [HC_CLASS_STREAMING]    = { 3,  false, false, HC_PATTERN_SEQUENTIAL, false, 4, 10 },
  [HC_CLASS_BACKGROUND]   = { 0,  false, false, HC_PATTERN_SEQUENTIAL, false, 5, 5 },
};

static uint32_t
attrs_pack (const struct hc_class_attrs *a)
{
  return a->priority | (uint32_t) a->admit_read << 4 | (uint32_t) a->admit_write << 5
         | (uint32_t) a->pattern << 6 | (uint32_t) a->latency_sensitive << 7
         | a->lifetime << 8 | a->max_share << 16;
}

static void
attrs_unpack (uint32_t w, struct hc_class_attrs *a)
{
  a->priority = w & 0xf;
  a->admit_read = (w >> 4) & 1;
  a->admit_write = (w >> 5) & 1;
  a->pattern = (enum hc_pattern) ((w >> 6) & 1);
  a->latency_sensitive = (w >> 7) & 1;
  a->lifetime = (w >> 8) & 7;
  a->max_share = (w >> 16) & 0x7f;
}

const char *
hc_pattern_name (unsigned pattern)
{
  switch (pattern) {
  case HC_PATTERN_RANDOM: return "random";
  case HC_PATTERN_SEQUENTIAL: return "sequential";
  default: return NULL;
  }
}

int
hc_class_defaults (unsigned cls, struct hc_class_attrs *attrs)
{
  if (cls >= HC_CLASS_COUNT)
    return -EINVAL;
  *attrs = defaults[cls];
  return 0;
}

int
hc_class_attrs_check (const struct hc_class_attrs *a)
{
  if (a->priority > HC_PRIORITY_MAX || a->lifetime > HC_LIFETIME_MAX || a->max_share > 100
      || hc_pattern_name (a->pattern) == NULL)
    return -EINVAL;
  return 0;
}

int
hc_classes_new (hc_classes **out)
{
  hc_classes *t = malloc (sizeof *t);
  if (!t)
    return -ENOMEM;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    atomic_init (&t->word[c], attrs_pack (&defaults[c]));
    atomic_init (&t->chosen[c], 0);
  }
  *out = t;
  return 0;
}

void
hc_classes_free (hc_classes *t)
{
  free (t);
}

int
hc_classes_get (const hc_classes *t, unsigned cls, struct hc_class_attrs *attrs)
{
  if (cls >= HC_CLASS_COUNT)
    return -EINVAL;
  attrs_unpack (atomic_load_explicit (&((hc_classes *) t)->word[cls], memory_order_acquire),
                attrs);
  return 0;
}

int
hc_classes_set (hc_classes *t, unsigned cls, const struct hc_class_attrs *attrs)
{
  if (cls >= HC_CLASS_COUNT || hc_class_attrs_check (attrs) < 0)
    return -EINVAL;
  atomic_store_explicit (&t->word[cls], attrs_pack (attrs), memory_order_release);
  atomic_store_explicit (&t->chosen[cls], (1u << HC_ATTR_COUNT) - 1, memory_order_release);
  return 0;
}

bool
hc_classes_chosen (const hc_classes *t, unsigned cls, enum hc_class_attr attr)
{
  return t && cls < HC_CLASS_COUNT
         && (atomic_load_explicit (&((hc_classes *) t)->chosen[cls], memory_order_acquire) >> attr
             & 1);
}

/* ---------------------------------------------------------------------------
 * Text form: "CLASS.ATTRIBUTE = VALUE".
 */

enum attr_kind { A_UINT, A_BOOL, A_PATTERN };

static const struct attr_desc {
  const char *name;
  enum attr_kind kind;
  unsigned max;
} attr_descs[] = {
  { "priority", A_UINT, HC_PRIORITY_MAX },
  { "admit_read", A_BOOL, 1 },
  { "admit_write", A_BOOL, 1 },
  { "pattern", A_PATTERN, 1 },
  { "latency_sensitive", A_BOOL, 1 },
  { "lifetime", A_UINT, HC_LIFETIME_MAX },
  { "max_share", A_UINT, 100 },
};
#define ATTR_COUNT (sizeof attr_descs / sizeof attr_descs[0])
_Static_assert (ATTR_COUNT == HC_ATTR_COUNT, "enum hc_class_attr follows attr_descs");

/* Points at the field of *a that attribute i names, as an unsigned value. */
static unsigned
attr_get (const struct hc_class_attrs *a, unsigned i)
{
  switch (i) {
  case 0: return a->priority;
  case 1: return a->admit_read;
  case 2: return a->admit_write;
  case 3: return a->pattern;
  case 4: return a->latency_sensitive;
  case 5: return a->lifetime;
  default: return a->max_share;
  }
}

static void
attr_put (struct hc_class_attrs *a, unsigned i, unsigned v)
{
  switch (i) {
  case 0: a->priority = v; break;
  case 1: a->admit_read = v; break;
  case 2: a->admit_write = v; break;
  case 3: a->pattern = (enum hc_pattern) v; break;
  case 4: a->latency_sensitive = v; break;
  case 5: a->lifetime = v; break;
  default: a->max_share = v; break;
  }
}

/* Parses one value of attribute `d`.  Returns 0 or -EINVAL with err->msg. */
static int
attr_parse (const struct attr_desc *d, const char *s, unsigned *v, struct hc_parse_error *err)
{
  static const char *const yes[] = { "yes", "true", "on", "1" };
  static const char *const no[] = { "no", "false", "off", "0" };

  switch (d->kind) {
  case A_BOOL:
    for (unsigned i = 0; i < 4; i++) {
      if (strcasecmp (s, yes[i]) == 0) return *v = 1, 0;
      if (strcasecmp (s, no[i]) == 0) return *v = 0, 0;
    }
    hc_parse_fail (err, "%s: expected yes or no, got '%s'", d->name, s);
    return -EINVAL;
  case A_PATTERN:
    for (unsigned p = 0; p <= 1; p++)
      if (strcmp (s, hc_pattern_name (p)) == 0) return *v = p, 0;
    hc_parse_fail (err, "%s: expected random or sequential, got '%s'", d->name, s);
    return -EINVAL;
  case A_UINT:
  default: {
    unsigned long long n;
    if (hc_parse_number (s, &n) < 0 || n > d->max) {
      hc_parse_fail (err, "%s: expected an integer 0 … %u, got '%s'", d->name, d->max, s);
      return -EINVAL;
    }
    *v = (unsigned) n;
    return 0;
  }
  }
}

/* Applies "CLASS.ATTRIBUTE" = value to the staged attributes in `a`. */
static int
apply_key (struct hc_class_attrs a[HC_CLASS_COUNT], uint32_t chosen[HC_CLASS_COUNT],
           const char *key, const char *value, struct hc_parse_error *err)
{
  const char *dot = strchr (key, '.');
  char cname[32];
  enum hc_class cls;

  if (!dot || (size_t) (dot - key) >= sizeof cname) {
    hc_parse_fail (err, "'%s': expected CLASS.ATTRIBUTE", key);
    return -EINVAL;
  }
  memcpy (cname, key, (size_t) (dot - key));
  cname[dot - key] = '\0';
  if (hc_class_parse (cname, &cls) < 0) {
    char names[256];
    hc_parse_fail (err, "unknown class '%s' (classes: %s)", cname,
                   hc_names (hc_class_name, names, sizeof names));
    return -EINVAL;
  }
  for (unsigned i = 0; i < ATTR_COUNT; i++)
    if (strcmp (dot + 1, attr_descs[i].name) == 0) {
      unsigned v;
      if (attr_parse (&attr_descs[i], value, &v, err) < 0)
        return -EINVAL;
      attr_put (&a[cls], i, v);
      chosen[cls] |= 1u << i;
      return 0;
    }
  hc_parse_fail (err, "unknown attribute '%s' (attributes: priority, admit_read, admit_write, "
                      "pattern, latency_sensitive, lifetime, max_share)", dot + 1);
  return -EINVAL;
}

/* `chosen` may be NULL. */
static void
snapshot (const hc_classes *t, struct hc_class_attrs a[HC_CLASS_COUNT],
          uint32_t chosen[HC_CLASS_COUNT])
{
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    hc_classes_get (t, c, &a[c]);
    if (chosen)
      chosen[c] = atomic_load_explicit (&((hc_classes *) t)->chosen[c], memory_order_acquire);
  }
}

static void
publish (hc_classes *t, const struct hc_class_attrs a[HC_CLASS_COUNT],
         const uint32_t chosen[HC_CLASS_COUNT])
{
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    atomic_store_explicit (&t->word[c], attrs_pack (&a[c]), memory_order_release);
    atomic_store_explicit (&t->chosen[c], chosen[c], memory_order_release);
  }
}

int
hc_classes_set_key (hc_classes *t, const char *key, const char *value, struct hc_parse_error *err)
{
  struct hc_class_attrs a[HC_CLASS_COUNT];
  uint32_t chosen[HC_CLASS_COUNT];

  if (err)
    err->line = 0;
  snapshot (t, a, chosen);
  if (apply_key (a, chosen, key, value, err) < 0)
    return -EINVAL;
  publish (t, a, chosen);
  return 0;
}

/* The config parser: staged into a copy, published only when every line
 * parsed, so a bad file changes nothing. */
int
hc_classes_load_text (hc_classes *t, const char *text, size_t len, struct hc_parse_error *err)
{
  struct hc_class_attrs a[HC_CLASS_COUNT];
  uint32_t chosen[HC_CLASS_COUNT];
  struct hc_kv_reader r;
  char *key, *value;
  int rc;

  snapshot (t, a, chosen);
  hc_kv_init (&r, text, len);
  while ((rc = hc_kv_next (&r, &key, &value, err)) > 0)
    if (apply_key (a, chosen, key, value, err) < 0) {
      if (err)
        err->line = r.line;
      return -EINVAL;
    }
  if (rc < 0)
    return rc;
  publish (t, a, chosen);
  return 0;
}

int
hc_classes_load_file (hc_classes *t, const char *path, struct hc_parse_error *err)
{
  char *text;
  size_t len;
  int rc = hc_read_small_file (path, 1 << 20, &text, &len);

  if (rc < 0)
    return rc;
  rc = hc_classes_load_text (t, text, len, err);
  free (text);
  return rc;
}

int
hc_classes_format (const hc_classes *t, char *buf, size_t len)
{
  struct hc_class_attrs a[HC_CLASS_COUNT];
  struct hc_sb sb;

  snapshot (t, a, NULL);
  hc_sb_init (&sb, buf, len);
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    for (unsigned i = 0; i < ATTR_COUNT; i++) {
      unsigned v = attr_get (&a[c], i);
      const char *vs = attr_descs[i].kind == A_BOOL      ? (v ? "yes" : "no")
                       : attr_descs[i].kind == A_PATTERN ? hc_pattern_name (v)
                                                         : NULL;
      if (vs)
        hc_sb_printf (&sb, "%s.%s = %s\n", hc_class_name (c), attr_descs[i].name, vs);
      else
        hc_sb_printf (&sb, "%s.%s = %u\n", hc_class_name (c), attr_descs[i].name, v);
    }
  return hc_sb_result (&sb);
}
