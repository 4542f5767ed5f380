/* The trace readers' string table: comm and object names interned in a
 * hash table keyed by XXH3, with the texts in an arena so their addresses
 * never move; ids are dense from 1 in order of first appearance and
 * survive a rewind.  Writers keep one too, to number what they write.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "trace_priv.h"

/* Size of a block of the string arena: the first one small (a small
 * trace has few strings), each next one twice the last, up to this. */
#define ARENA_BLOCK0 ((size_t) 1 << 10)
#define ARENA_BLOCK ((size_t) 64 << 10)

/* Rebuilds the hash index at twice the size. */
static int
strtab_grow_index (struct hc_trace_strtab *s)
{
  size_t nslot = s->nslot ? s->nslot * 2 : 256;
  uint32_t *slot = calloc (nslot, sizeof *slot);

  if (!slot)
    return -ENOMEM;
  for (uint32_t id = 1; id < s->n; id++) {
    size_t i = s->hash[id] & (nslot - 1);
    while (slot[i])
      i = (i + 1) & (nslot - 1);
    slot[i] = id;
  }
  free (s->slot);
  s->slot = slot;
  s->nslot = nslot;
  return 0;
}

/* Makes room for one more id in the per-id arrays. */
static int
strtab_grow_ids (struct hc_trace_strtab *s)
{
  uint32_t cap = s->cap ? s->cap * 2 : 64;
  const char **text;
  uint32_t *len, *hash;

  if (s->cap >= UINT32_MAX / 2)
    return -ENOMEM;
  /* Each array is replaced only once all three exist, so a failure leaves
   * the table as it was. */
  text = realloc (s->text, cap * sizeof *text);
  if (!text)
    return -ENOMEM;
  s->text = text;
  len = realloc (s->len, cap * sizeof *len);
  if (!len)
    return -ENOMEM;
  s->len = len;
  hash = realloc (s->hash, cap * sizeof *hash);
  if (!hash)
    return -ENOMEM;
  s->hash = hash;
  if (!s->cap) {
    s->text[0] = "";
    s->len[0] = 0;
    s->hash[0] = 0;
    s->n = 1;
  }
  s->cap = cap;
  return 0;
}

/* Copies text into the arena, NUL-terminated. */
static char *
strtab_store (struct hc_trace_strtab *s, const char *text, size_t len)
{
  char *p;

  if (len + 1 > s->block_left) {
    size_t size = s->nblocks < 6 ? ARENA_BLOCK0 << s->nblocks : ARENA_BLOCK;
    if (size < len + 1)
      size = len + 1;
    char **blocks = realloc (s->blocks, (s->nblocks + 1) * sizeof *blocks);
    if (!blocks)
      return NULL;
    s->blocks = blocks;
    if (!(p = malloc (size)))
      return NULL;
    s->blocks[s->nblocks++] = p;
    s->block_pos = p;
    s->block_left = size;
  }
  p = s->block_pos;
  memcpy (p, text, len);
  p[len] = '\0';
  s->block_pos += len + 1;
  s->block_left -= len + 1;
  return p;
}

/* Finds or adds a string; *added says whether it was new. */
int
hc_trace_strtab_intern (struct hc_trace_strtab *s, const char *text, size_t len, uint32_t *id,
                        bool *added)
{
  uint32_t h;
  size_t i;
  char *copy;
  int rc;

  if (added)
    *added = false;
  if (len == 0) {
    *id = 0;
    return 0;
  }
  if (len >= UINT32_MAX)
    return -EINVAL;
  if ((s->n + 1) * (size_t) 2 > s->nslot && (rc = strtab_grow_index (s)) < 0)
    return rc;
  h = (uint32_t) XXH3_64bits (text, len);
  for (i = h & (s->nslot - 1); s->slot[i]; i = (i + 1) & (s->nslot - 1)) {
    uint32_t k = s->slot[i];
    if (s->hash[k] == h && s->len[k] == len && memcmp (s->text[k], text, len) == 0) {
      *id = k;
      return 0;
    }
  }
  if (s->n >= s->cap && (rc = strtab_grow_ids (s)) < 0)
    return rc;
  if (!(copy = strtab_store (s, text, len)))
    return -ENOMEM;
  s->text[s->n] = copy;
  s->len[s->n] = (uint32_t) len;
  s->hash[s->n] = h;
  s->slot[i] = s->n;
  *id = s->n++;
  if (added)
    *added = true;
  return 0;
}

/* Frees a string table. */
void
hc_trace_strtab_free (struct hc_trace_strtab *s)
{
  for (size_t i = 0; i < s->nblocks; i++)
    free (s->blocks[i]);
  free (s->blocks);
  free (s->text);
  free (s->len);
  free (s->hash);
  free (s->slot);
  memset (s, 0, sizeof *s);
}

/* Interns a string for the reader (nothing while probing). */
int
hc_trace_intern (struct hc_trace *t, const char *s, size_t len, uint32_t *id)
{
  if (t->probing) {
    *id = 0;
    return 0;
  }
  return hc_trace_strtab_intern (&t->strs, s, len, id, NULL);
}

/* The text of an interned string. */
const char *
hc_trace_string (const hc_trace *t, uint32_t id)
{
  if (!t || id >= t->strs.n)
    return "";
  return t->strs.text[id];
}
