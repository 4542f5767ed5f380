/* hintcache — per-class performance attributes.
 *
 * Martin Petersen's answer to "what should a device do with a hint" was a
 * table: for each I/O class, the performance properties its I/O has.  This is
 * that table.  The cache engine and the codecs read it; administrators change
 * it at run time or load it from a small config file:
 *
 *     # comment
 *     metadata.priority    = 14
 *     journal.admit_read   = no
 *     streaming.pattern    = sequential
 *     background.max_share = 5
 *
 * Keys are CLASS.ATTRIBUTE with the attribute names of struct
 * hc_class_attrs; booleans are yes/no, true/false, on/off or 1/0.
 *
 * Thread safety: every class's attributes live in one atomic word, so
 * hc_classes_get() and hc_classes_set() may be called from any thread at any
 * time without locks, and a reader always sees a consistent set of one class's
 * attributes.  A config file is applied class by class.
 */
#ifndef HINTCACHE_CLASSES_H
#define HINTCACHE_CLASSES_H

#include <stdbool.h>
#include <stddef.h>

#include "hint.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Expected access pattern of a class. */
enum hc_pattern {
  HC_PATTERN_RANDOM     = 0,
  HC_PATTERN_SEQUENTIAL = 1,
};

/* The attributes of one class. */
struct hc_class_attrs {
  unsigned priority;       /* 0 … 15: cache priority; higher is kept longer */
  bool admit_read;         /* admit a block into the fast tier on a read miss */
  bool admit_write;        /* admit a block into the fast tier on a write */
  enum hc_pattern pattern; /* expected access pattern */
  bool latency_sensitive;  /* a caller waits on each I/O */
  unsigned lifetime;       /* expected write lifetime, RWH scale: 0 not set,
                              1 none, 2 short, 3 medium, 4 long, 5 extreme */
  unsigned max_share;      /* 0 … 100: most of the fast tier the class may hold */
};

/* The attributes, in their text form's order. */
enum hc_class_attr {
  HC_ATTR_PRIORITY = 0, HC_ATTR_ADMIT_READ, HC_ATTR_ADMIT_WRITE, HC_ATTR_PATTERN,
  HC_ATTR_LATENCY_SENSITIVE, HC_ATTR_LIFETIME, HC_ATTR_MAX_SHARE,
};
#define HC_ATTR_COUNT 7

#define HC_PRIORITY_MAX 15
#define HC_LIFETIME_MAX 5

/* An opaque, thread-safe table of attributes for all HC_CLASS_COUNT classes. */
typedef struct hc_classes hc_classes;

/* Where a config text failed: 1-based line number and a one-line reason. */
struct hc_parse_error {
  unsigned line;
  char msg[160];
};

/* Fills *attrs with the built-in defaults for `cls`.  Returns 0, or -EINVAL
 * for an unknown class. */
int hc_class_defaults (unsigned cls, struct hc_class_attrs *attrs);

/* Checks that every attribute is in range.  Returns 0 or -EINVAL. */
int hc_class_attrs_check (const struct hc_class_attrs *attrs);

/* Creates a table holding the defaults.  Returns 0 and sets *out, or -ENOMEM. */
int hc_classes_new (hc_classes **out);

/* Frees a table (NULL is allowed). */
void hc_classes_free (hc_classes *t);

/* Reads the attributes of `cls`.  Returns 0, or -EINVAL for an unknown class. */
int hc_classes_get (const hc_classes *t, unsigned cls, struct hc_class_attrs *attrs);

/* Replaces the attributes of `cls`.  Returns 0, or -EINVAL for an unknown class
 * or an out-of-range attribute (then nothing changes). */
int hc_classes_set (hc_classes *t, unsigned cls, const struct hc_class_attrs *attrs);

/* Was attribute `attr` of class `cls` chosen — by a config line, a key, or
 * hc_classes_set (which chooses all of a class's) — rather than left at its
 * built-in default?  A cache treats a chosen attribute as a bound and a
 * default one as a starting point to be weighed.  False for NULL `t`. */
bool hc_classes_chosen (const hc_classes *t, unsigned cls, enum hc_class_attr attr);

/* Sets one attribute from text: key "CLASS.ATTRIBUTE", value as in a config
 * file.  Returns 0, or -EINVAL (nothing changes); `err` (may be NULL) gets the
 * reason, with line 0. */
int hc_classes_set_key (hc_classes *t, const char *key, const char *value,
                        struct hc_parse_error *err);

/* Applies a config text of `len` bytes.  Either every line is valid and all
 * of it is applied, or nothing changes: returns -EINVAL and fills `err` (may
 * be NULL) with the first bad line. */
int hc_classes_load_text (hc_classes *t, const char *text, size_t len,
                          struct hc_parse_error *err);

/* Reads and applies a config file, as hc_classes_load_text.  Returns 0,
 * -EINVAL with `err` filled, or the negative errno of opening/reading it. */
int hc_classes_load_file (hc_classes *t, const char *path, struct hc_parse_error *err);

/* Writes the whole table as config text into buf (NUL-terminated).  Returns
 * the length needed, like snprintf. */
int hc_classes_format (const hc_classes *t, char *buf, size_t len);

/* Returns the name of a pattern ("random", "sequential"), or NULL. */
const char *hc_pattern_name (unsigned pattern);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_CLASSES_H */
