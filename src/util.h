/* Small internal helpers shared by the library's modules: strict number
 * parsing, a bounded string builder with snprintf semantics, a reader for
 * "key = value" config texts, and reading a small file whole.
 *
 * Internal: not exported from the shared library.
 */
#ifndef HC_UTIL_H
#define HC_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "hintcache/classes.h" /* struct hc_parse_error */

#include "hintcache/hint.h"

/* True if a hint says nothing: no class, no advice, no flags (the hint {0},
 * which every layer of the precedence rule passes over).  Shared by the
 * volume's resolution shortcut, the control server and the file-system map. */
static inline bool
hc_hint_empty (struct hc_hint h)
{
  return h.cls == HC_CLASS_UNCLASSIFIED && h.advice == HC_ADVICE_NONE && h.flags == 0;
}

/* A string builder over a caller's buffer.  Output is truncated to fit (and
 * always NUL-terminated when len > 0); `need` counts what the whole text
 * needs, like snprintf's return value. */
struct hc_sb {
  char *buf;
  size_t len;
  size_t need;
};

/* Starts a builder over buf[len] (buf may be NULL when len is 0). */
void hc_sb_init (struct hc_sb *sb, char *buf, size_t len);

/* Appends formatted text. */
void hc_sb_printf (struct hc_sb *sb, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* Returns the length the whole text needs, clamped to INT_MAX. */
int hc_sb_result (const struct hc_sb *sb);

/* Parses a whole string as an unsigned integer, decimal or 0x-hex (never
 * octal): no sign, no blanks, no trailing text.  Returns 0 or -EINVAL (also
 * on overflow). */
int hc_parse_number (const char *s, unsigned long long *out);

/* Nanoseconds of clock `id` (CLOCK_MONOTONIC for deadlines and rates). */
static inline uint64_t
hc_clock_ns (clockid_t id)
{
  struct timespec ts;
  clock_gettime (id, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Parses a size, the one grammar of every size and offset the tools, the
 * control protocol and the preload library read: a number as
 * hc_parse_number reads it (decimal or 0x-hex, never octal: "010" is ten),
 * then optionally a unit, K, M, G or T in either case (powers of 1024),
 * which may be followed by "B" or "iB" ("64M", "64MiB", "0x10k").  No sign,
 * no blanks, no fractions.  *unit, if not NULL, says whether a unit was
 * given.  Returns 0, -EINVAL (not that syntax) or -ERANGE (more than 64
 * bits). */
int hc_parse_size (const char *s, uint64_t *out, bool *unit);

/* Writes the names a registry gives by index (name(0), name(1), … up to
 * index 255; indexes without a name are skipped) into buf[len], separated
 * by ", ", and returns buf: the lists of modes, policies, strategies and
 * classes in messages are made from the registries, never typed out. */
const char *hc_names (const char *(*name) (unsigned), char *buf, size_t len);

/* Where a function's reason for a failure goes: why[*whylen], or scratch
 * (of scratchlen ≥ 1 bytes, with *whylen set to that) when the caller
 * passed no buffer; either way emptied.  Returns the buffer. */
static inline char *
hc_why (char *why, size_t *whylen, char *scratch, size_t scratchlen)
{
  if (!why || *whylen == 0) {
    why = scratch;
    *whylen = scratchlen;
  }
  why[0] = '\0';
  return why;
}

/* The index of `name` in names[n] (NULL entries never match), or -EINVAL
 * (also for a NULL name). */
int hc_name_find (const char *const *names, unsigned n, const char *name);

/* Defines a registry's two public functions over its table names[count]:
 * `const char *PREFIX_name (unsigned v)`, the name of v or NULL if out of
 * range, and `int PREFIX_parse (const char *name, TYPE *out)`, which stores
 * the index of name (0) or returns -EINVAL.  Each is declared and
 * documented in the registry's public header. */
#define HC_DEFINE_NAMES(prefix, type, names, count)                                       \
  const char *prefix##_name (unsigned v)                                                 \
  {                                                                                      \
    return v < (count) ? (names)[v] : NULL;                                              \
  }                                                                                      \
  int prefix##_parse (const char *name, type *out)                                       \
  {                                                                                      \
    int i = hc_name_find ((names), (count), name);                                       \
    if (i >= 0)                                                                          \
      *out = (type) i;                                                                   \
    return i < 0 ? i : 0;                                                                \
  }

/* Copies the next word of *p — a run of characters not in `seps`, skipping
 * separators before it — into word[cap] and moves *p past it.  Returns 1,
 * 0 at the end of the text, or -EINVAL for a word that does not fit. */
int hc_next_word (const char **p, const char *seps, char *word, size_t cap);

/* Makes room for element n of a growable array: when n == *cap, doubles
 * *cap (from `first`) and reallocates the array *arrayp (a pointer to the
 * array's pointer) of elements of `size` bytes.  Returns 0, or -ENOMEM
 * with the array and *cap unchanged. */
int hc_grow (void *arrayp, size_t *cap, size_t n, size_t size, size_t first);

/* Formats a parse error message into err->msg (err may be NULL). */
void hc_parse_fail (struct hc_parse_error *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* A reader of "key = value" lines.  '#' starts a comment; blank lines are
 * skipped; keys and values are trimmed.  The reader copies the text, so the
 * returned pointers stay valid until the next call. */
struct hc_kv_reader {
  const char *text;
  size_t len;
  size_t pos;
  unsigned line; /* number of the line last returned */
  char buf[512];
};

/* Starts reading text[len]. */
void hc_kv_init (struct hc_kv_reader *r, const char *text, size_t len);

/* Returns the next pair: 1 with *key and *value set, 0 at the end, or -EINVAL
 * for a malformed line (no '=', empty key, a line over 511 bytes, a NUL byte)
 * with err filled, line number included. */
int hc_kv_next (struct hc_kv_reader *r, char **key, char **value, struct hc_parse_error *err);

/* Reads a whole file of at most `max` bytes into a malloc'd, NUL-terminated
 * buffer.  Returns 0, -EFBIG if larger, or the negative errno of open/read. */
int hc_read_small_file (const char *path, size_t max, char **text, size_t *len);

/* Allocates `bytes` of zeroed memory for a large, randomly accessed table,
 * aligned to a cache line at least, in transparent huge pages where the
 * kernel offers them.  Returns NULL if
 * out of memory.  Free with hc_free_huge and the same size. */
void *hc_alloc_huge (size_t bytes);
void hc_free_huge (void *p, size_t bytes);

/* A set of 64-bit keys that only grows until it is cleared (open addressing,
 * linear probing, no deletion). */
struct hc_u64set {
  uint64_t *slot; /* key + 1; 0 = empty */
  size_t cap;     /* a power of two */
  size_t n;
};

/* Adds a key.  Returns 0 or -ENOMEM (the set is unchanged). */
int hc_u64set_add (struct hc_u64set *s, uint64_t key);

/* True if the key is in the set. */
bool hc_u64set_has (const struct hc_u64set *s, uint64_t key);

/* Empties the set (keeps its memory). */
void hc_u64set_clear (struct hc_u64set *s);

/* Frees the set's memory. */
void hc_u64set_free (struct hc_u64set *s);

/* A map from 64-bit keys to 64-bit values (open addressing, linear
 * probing, deletion by backward shift). */
struct hc_u64map {
  uint64_t *key;  /* key + 1; 0 = empty */
  uint64_t *val;
  size_t cap;     /* a power of two */
  size_t n;
};

/* Sets key's value.  Returns 0 or -ENOMEM (the map is unchanged). */
int hc_u64map_put (struct hc_u64map *m, uint64_t key, uint64_t val);

/* Finds key: returns a pointer to its value, or NULL.  The pointer is good
 * until the next put or del. */
uint64_t *hc_u64map_get (const struct hc_u64map *m, uint64_t key);

/* Removes key if present. */
void hc_u64map_del (struct hc_u64map *m, uint64_t key);

/* Frees the map's memory. */
void hc_u64map_free (struct hc_u64map *m);

/* A set of block numbers for counting distinct blocks (a trace's
 * footprint): a bitmap in 4 KiB leaves of 32 K blocks each, allocated as
 * touched and found through a map, with the last leaf remembered — a
 * fraction of a bit per block when blocks cluster, as disk blocks do. */
struct hc_blockset {
  struct hc_u64map leaves; /* leaf number → its bitmap (a pointer) */
  uint64_t last_leaf;      /* number + 1 of the leaf `last` points to; 0 none */
  uint64_t *last;
  uint64_t n;              /* distinct blocks added */
};

/* Adds a block.  Returns 1 if it was new, 0 if already there, or -ENOMEM. */
int hc_blockset_add (struct hc_blockset *s, uint64_t block);

/* Adds blocks [first, first + count) (first + count must not overflow), a
 * word of the bitmap at a time.  Returns how many were new, or -ENOMEM
 * (those added before it stay, and are counted in n). */
int64_t hc_blockset_add_range (struct hc_blockset *s, uint64_t first, uint64_t count);

/* Frees the set's memory. */
void hc_blockset_free (struct hc_blockset *s);

#endif /* HC_UTIL_H */
