/* Small internal helpers: see util.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util.h"

void
hc_sb_init (struct hc_sb *sb, char *buf, size_t len)
{
  sb->buf = buf;
  sb->len = len;
  sb->need = 0;
  if (len)
    buf[0] = '\0';
}

void
hc_sb_printf (struct hc_sb *sb, const char *fmt, ...)
{
  va_list ap;
  int r;

  va_start (ap, fmt);
  if (sb->need < sb->len)
    r = vsnprintf (sb->buf + sb->need, sb->len - sb->need, fmt, ap);
  else
    r = vsnprintf (NULL, 0, fmt, ap);
  va_end (ap);
  if (r > 0)
    sb->need += (size_t) r;
}

int
hc_sb_result (const struct hc_sb *sb)
{
  return sb->need > INT_MAX ? INT_MAX : (int) sb->need;
}

int
hc_parse_number (const char *s, unsigned long long *out)
{
  char *end;
  unsigned long long v;
  int base = 10;

  if (!s || !s[0])
    return -EINVAL;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
  }
  if (!isxdigit ((unsigned char) s[0]) || (base == 10 && !isdigit ((unsigned char) s[0])))
    return -EINVAL;
  errno = 0;
  v = strtoull (s, &end, base);
  if (errno || *end != '\0')
    return -EINVAL;
  *out = v;
  return 0;
}

int
hc_parse_size (const char *s, uint64_t *out, bool *unit)
{
  static const char units[] = "KMGT";
  const char *p = s, *u;
  unsigned base = 10, shift = 0;
  uint64_t v = 0;
  bool any = false, over = false;

  if (!s)
    return -EINVAL;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  for (;; p++, any = true) {
    unsigned d;
    if (*p >= '0' && *p <= '9')
      d = (unsigned) (*p - '0');
    else if (base == 16 && isxdigit ((unsigned char) *p))
      d = 10 + (unsigned) (tolower ((unsigned char) *p) - 'a');
    else
      break;
    if (v > (UINT64_MAX - d) / base)
      over = true;
    v = v * base + d;
  }
  if (!any)
    return -EINVAL;
  if (*p && (u = strchr (units, toupper ((unsigned char) *p)))) {
    shift = 10 * (1 + (unsigned) (u - units));
    p++;
    p += p[0] == 'i' && p[1] == 'B' ? 2 : p[0] == 'B';
  }
  if (*p)
    return -EINVAL;
  if (over || v > UINT64_MAX >> shift)
    return -ERANGE;
  *out = v << shift;
  if (unit)
    *unit = shift != 0;
  return 0;
}

int
hc_grow (void *arrayp, size_t *cap, size_t n, size_t size, size_t first)
{
  void *a, *b;
  size_t c;

  if (n < *cap)
    return 0;
  c = *cap ? 2 * *cap : first;
  if (c > SIZE_MAX / size)
    return -ENOMEM;
  memcpy (&a, arrayp, sizeof a);
  if (!(b = realloc (a, c * size)))
    return -ENOMEM;
  memcpy (arrayp, &b, sizeof b);
  *cap = c;
  return 0;
}

const char *
hc_names (const char *(*name) (unsigned), char *buf, size_t len)
{
  struct hc_sb sb;
  const char *s;

  hc_sb_init (&sb, buf, len);
  for (unsigned i = 0, n = 0; i < 256; i++)
    if ((s = name (i)))
      hc_sb_printf (&sb, "%s%s", n++ ? ", " : "", s);
  return buf;
}

void
hc_parse_fail (struct hc_parse_error *err, const char *fmt, ...)
{
  va_list ap;

  if (!err)
    return;
  va_start (ap, fmt);
  vsnprintf (err->msg, sizeof err->msg, fmt, ap);
  va_end (ap);
}

void
hc_kv_init (struct hc_kv_reader *r, const char *text, size_t len)
{
  r->text = text;
  r->len = len;
  r->pos = 0;
  r->line = 0;
}

/* Trims blanks at both ends of s in place and returns the new start. */
static char *
trim (char *s)
{
  char *e;

  while (*s == ' ' || *s == '\t')
    s++;
  e = s + strlen (s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
    *--e = '\0';
  return s;
}

int
hc_kv_next (struct hc_kv_reader *r, char **key, char **value, struct hc_parse_error *err)
{
  while (r->pos < r->len) {
    const char *start = r->text + r->pos;
    const char *nl = memchr (start, '\n', r->len - r->pos);
    size_t n = nl ? (size_t) (nl - start) : r->len - r->pos;
    char *line, *eq, *hash;

    r->pos += n + (nl != NULL);
    r->line++;
    if (err)
      err->line = r->line;
    if (n >= sizeof r->buf) {
      hc_parse_fail (err, "line longer than %zu bytes", sizeof r->buf - 1);
      return -EINVAL;
    }
    if (memchr (start, '\0', n)) {
      hc_parse_fail (err, "NUL byte in line");
      return -EINVAL;
    }
    memcpy (r->buf, start, n);
    r->buf[n] = '\0';
    if ((hash = strchr (r->buf, '#')))
      *hash = '\0';
    line = trim (r->buf);
    if (!*line)
      continue;
    eq = strchr (line, '=');
    if (!eq) {
      hc_parse_fail (err, "expected 'key = value', got '%s'", line);
      return -EINVAL;
    }
    *eq = '\0';
    *key = trim (line);
    *value = trim (eq + 1);
    if (!**key) {
      hc_parse_fail (err, "missing key before '='");
      return -EINVAL;
    }
    if (!**value) {
      hc_parse_fail (err, "missing value after '%s ='", *key);
      return -EINVAL;
    }
    return 1;
  }
  return 0;
}

int
hc_read_small_file (const char *path, size_t max, char **text, size_t *len)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  char *buf = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;

  if (fd < 0)
    return -errno;
  for (;;) {
    ssize_t r;
    if (cap - n < 4096) {
      size_t ncap = cap ? cap * 2 : 8192;
      char *nb;
      if (cap > max + 1) {
        rc = -EFBIG;
        break;
      }
      if (!(nb = realloc (buf, ncap + 1))) {
        rc = -ENOMEM;
        break;
      }
      buf = nb;
      cap = ncap;
    }
    r = read (fd, buf + n, cap - n);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      rc = -errno;
      break;
    }
    if (r == 0)
      break;
    n += (size_t) r;
    if (n > max) {
      rc = -EFBIG;
      break;
    }
  }
  close (fd);
  if (rc < 0) {
    free (buf);
    return rc;
  }
  if (!buf && !(buf = malloc (1)))
    return -ENOMEM;
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return 0;
}

static inline size_t
u64set_home (uint64_t key, size_t cap)
{
  key ^= key >> 33;
  key *= UINT64_C (0xff51afd7ed558ccd);
  key ^= key >> 33;
  return (size_t) key & (cap - 1);
}

int
hc_u64set_add (struct hc_u64set *s, uint64_t key)
{
  if ((s->n + 1) * 2 > s->cap) {
    struct hc_u64set g = { .cap = s->cap ? s->cap * 2 : 64 };
    if (!(g.slot = calloc (g.cap, sizeof *g.slot)))
      return -ENOMEM;
    for (size_t i = 0; i < s->cap; i++)
      if (s->slot[i])
        hc_u64set_add (&g, s->slot[i] - 1);
    free (s->slot);
    *s = g;
  }
  for (size_t i = u64set_home (key, s->cap);; i = (i + 1) & (s->cap - 1)) {
    if (s->slot[i] == key + 1)
      return 0;
    if (!s->slot[i]) {
      s->slot[i] = key + 1;
      s->n++;
      return 0;
    }
  }
}

bool
hc_u64set_has (const struct hc_u64set *s, uint64_t key)
{
  if (!s->n)
    return false;
  for (size_t i = u64set_home (key, s->cap);; i = (i + 1) & (s->cap - 1)) {
    if (s->slot[i] == key + 1)
      return true;
    if (!s->slot[i])
      return false;
  }
}

void
hc_u64set_clear (struct hc_u64set *s)
{
  if (s->n)
    memset (s->slot, 0, s->cap * sizeof *s->slot);
  s->n = 0;
}

void
hc_u64set_free (struct hc_u64set *s)
{
  free (s->slot);
  memset (s, 0, sizeof *s);
}

int
hc_u64map_put (struct hc_u64map *m, uint64_t key, uint64_t val)
{
  uint64_t *v = hc_u64map_get (m, key);
  if (v) {
    *v = val;
    return 0;
  }
  if ((m->n + 1) * 4 > m->cap * 3) {
    struct hc_u64map g = { .cap = m->cap ? m->cap * 2 : 64 };
    g.key = calloc (g.cap, sizeof *g.key);
    g.val = malloc (g.cap * sizeof *g.val);
    if (!g.key || !g.val) {
      free (g.key);
      free (g.val);
      return -ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->key[i])
        hc_u64map_put (&g, m->key[i] - 1, m->val[i]);
    hc_u64map_free (m);
    *m = g;
  }
  for (size_t i = u64set_home (key, m->cap);; i = (i + 1) & (m->cap - 1))
    if (!m->key[i]) {
      m->key[i] = key + 1;
      m->val[i] = val;
      m->n++;
      return 0;
    }
}

uint64_t *
hc_u64map_get (const struct hc_u64map *m, uint64_t key)
{
  if (!m->n)
    return NULL;
  for (size_t i = u64set_home (key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->key[i] == key + 1)
      return &m->val[i];
    if (!m->key[i])
      return NULL;
  }
}

void
hc_u64map_del (struct hc_u64map *m, uint64_t key)
{
  size_t mask = m->cap - 1, i;

  if (!m->n)
    return;
  for (i = u64set_home (key, m->cap); m->key[i] != key + 1; i = (i + 1) & mask)
    if (!m->key[i])
      return;
  /* Backward shift: pull later members of the probe run into the hole. */
  for (size_t j = i;;) {
    m->key[i] = 0;
    for (;;) {
      j = (j + 1) & mask;
      if (!m->key[j]) {
        m->n--;
        return;
      }
      size_t h = u64set_home (m->key[j] - 1, m->cap);
      if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
        break;
    }
    m->key[i] = m->key[j];
    m->val[i] = m->val[j];
    i = j;
  }
}

void
hc_u64map_free (struct hc_u64map *m)
{
  free (m->key);
  free (m->val);
  memset (m, 0, sizeof *m);
}

/* ---- Block sets. ---- */

#define LEAF_SHIFT 15 /* blocks per leaf: 2^15 bits = 4 KiB */

/* The bitmap of a leaf, made if new (NULL if out of memory); the last one
 * is remembered. */
static uint64_t *
blockset_leaf (struct hc_blockset *s, uint64_t leaf)
{
  if (s->last_leaf != leaf + 1) {
    uint64_t *v = hc_u64map_get (&s->leaves, leaf);
    if (v)
      s->last = (uint64_t *) (uintptr_t) *v;
    else {
      uint64_t *bits = calloc (UINT64_C (1) << LEAF_SHIFT >> 6, sizeof *bits);
      if (!bits || hc_u64map_put (&s->leaves, leaf, (uint64_t) (uintptr_t) bits) < 0) {
        free (bits);
        return NULL;
      }
      s->last = bits;
    }
    s->last_leaf = leaf + 1;
  }
  return s->last;
}

int
hc_blockset_add (struct hc_blockset *s, uint64_t block)
{
  uint64_t bit = block & ((UINT64_C (1) << LEAF_SHIFT) - 1), *w, *bits;

  if (!(bits = blockset_leaf (s, block >> LEAF_SHIFT)))
    return -ENOMEM;
  w = &bits[bit >> 6];
  if (*w & UINT64_C (1) << (bit & 63))
    return 0;
  *w |= UINT64_C (1) << (bit & 63);
  s->n++;
  return 1;
}

int64_t
hc_blockset_add_range (struct hc_blockset *s, uint64_t first, uint64_t count)
{
  int64_t added = 0;

  /* A word of the bitmap at a time: the bits of the range in it, of which
   * those not yet set are new. */
  while (count) {
    uint64_t bit = first & ((UINT64_C (1) << LEAF_SHIFT) - 1), *bits;
    unsigned off = (unsigned) (bit & 63);
    uint64_t k = 64 - off < count ? 64 - off : count;
    uint64_t mask = (k == 64 ? ~UINT64_C (0) : (UINT64_C (1) << k) - 1) << off;

    if (!(bits = blockset_leaf (s, first >> LEAF_SHIFT)))
      return -ENOMEM;
    unsigned fresh = (unsigned) __builtin_popcountll (mask & ~bits[bit >> 6]);
    bits[bit >> 6] |= mask;
    s->n += fresh;
    added += fresh;
    first += k;
    count -= k;
  }
  return added;
}

void
hc_blockset_free (struct hc_blockset *s)
{
  for (size_t i = 0; i < s->leaves.cap; i++)
    if (s->leaves.key[i])
      free ((void *) (uintptr_t) s->leaves.val[i]);
  hc_u64map_free (&s->leaves);
  memset (s, 0, sizeof *s);
}

/* ---- Huge-page tables. ---- */

#define HUGE_PAGE (UINT64_C (2) << 20)

void *
hc_alloc_huge (size_t bytes)
{
  void *p;

  if (bytes < HUGE_PAGE / 2) { /* not worth a huge page; cache-line aligned */
    size_t len = (bytes + 63) & ~(size_t) 63;
    p = aligned_alloc (64, len ? len : 64);
    if (p)
      memset (p, 0, len ? len : 64);
    return p;
  }
  /* Huge pages need 2 MiB-aligned extents: map a page more, trim both ends. */
  size_t len = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  char *raw = mmap (NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
  if (raw == MAP_FAILED)
    return NULL;
  char *al = (char *) (((uintptr_t) raw + HUGE_PAGE - 1) & ~(uintptr_t) (HUGE_PAGE - 1));
  if (al > raw)
    munmap (raw, (size_t) (al - raw));
  munmap (al + len, (size_t) (raw + HUGE_PAGE - al));
  p = al;
  madvise (p, len, MADV_HUGEPAGE); /* a hint: fine if refused */
  return p;
}

void
hc_free_huge (void *p, size_t bytes)
{
  if (!p)
    return;
  if (bytes < HUGE_PAGE / 2)
    free (p);
  else
    munmap (p, (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
}

int
hc_next_word (const char **p, const char *seps, char *word, size_t cap)
{
  const char *s = *p + strspn (*p, seps);
  size_t n = strcspn (s, seps);

  if (n == 0) {
    *p = s;
    return 0;
  }
  if (n >= cap)
    return -EINVAL;
  memcpy (word, s, n);
  word[n] = '\0';
  *p = s + n;
  return 1;
}

int
hc_name_find (const char *const *names, unsigned n, const char *name)
{
  if (!name)
    return -EINVAL;
  for (unsigned i = 0; i < n; i++)
    if (names[i] && strcmp (name, names[i]) == 0)
      return (int) i;
  return -EINVAL;
}
