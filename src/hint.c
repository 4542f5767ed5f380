/* The hint model: names, checking, packing, parsing and resolution.
 *
 * A hint is three independent statements — a class (why the I/O happens),
 * an advice (what to do about the range) and flags (facts about the access).
 * This file owns their names and the single precedence rule that merges the
 * hints of several layers into the hint of one I/O.  Everything here is a
 * pure function of its arguments.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hintcache/hint.h"
#include "util.h"

static const char *const class_names[HC_CLASS_COUNT] = {
  [HC_CLASS_UNCLASSIFIED] = "unclassified",
  [HC_CLASS_METADATA]     = "metadata",
  [HC_CLASS_JOURNAL]      = "journal",
  [HC_CLASS_TRANSACTION]  = "transaction",
  [HC_CLASS_DATA]         = "data",
  [HC_CLASS_PAGING]       = "paging",
  [HC_CLASS_STREAMING]    = "streaming",
  [HC_CLASS_BACKGROUND]   = "background",
};

/* Reserved advice values (4–6) have no name: that is how they are rejected. */
static const char *const advice_names[HC_ADVICE_LIMIT] = {
  [HC_ADVICE_NONE]     = "none",
  [HC_ADVICE_EVICT]    = "evict",
  [HC_ADVICE_DONTNEED] = "dontneed",
  [HC_ADVICE_NORMAL]   = "normal",
  [HC_ADVICE_WILLNEED] = "willneed",
};

static const char *const flag_names[] = {
  "sequential", "random", "noreuse", "sync", "readahead", "incompressible",
};
#define FLAG_COUNT (sizeof flag_names / sizeof flag_names[0])

static const char *const layer_names[HC_LAYER_COUNT] = {
  [HC_LAYER_IO] = "io", [HC_LAYER_RANGE] = "range", [HC_LAYER_STREAM] = "stream",
  [HC_LAYER_PROCESS] = "process", [HC_LAYER_DEVICE] = "device",
};

HC_DEFINE_NAMES (hc_class, enum hc_class, class_names, HC_CLASS_COUNT)
HC_DEFINE_NAMES (hc_advice, enum hc_advice, advice_names, HC_ADVICE_LIMIT)

static const char *const source_names[HC_SOURCE_COUNT] = { "admin", "hintd", "advise", "preload" };

HC_DEFINE_NAMES (hc_source, enum hc_hint_source, source_names, HC_SOURCE_COUNT)

const char *
hc_flag_name (unsigned flag)
{
  for (unsigned i = 0; i < FLAG_COUNT; i++)
    if (flag == 1u << i)
      return flag_names[i];
  return NULL;
}

const char *
hc_layer_name (unsigned layer)
{
  return layer < HC_LAYER_COUNT ? layer_names[layer] : NULL;
}

int
hc_hint_check (struct hc_hint h)
{
  if (h.cls >= HC_CLASS_COUNT || hc_advice_name (h.advice) == NULL)
    return -EINVAL;
  if (h.flags & ~HC_HINT_FLAGS_ALL)
    return -EINVAL;
  if ((h.flags & HC_HINT_PATTERN) == HC_HINT_PATTERN)
    return -EINVAL;
  return 0;
}

uint32_t
hc_hint_pack (struct hc_hint h)
{
  return (uint32_t) h.cls | (uint32_t) h.advice << 8 | (uint32_t) h.flags << 16;
}

int
hc_hint_unpack (uint32_t packed, struct hc_hint *hint)
{
  struct hc_hint h = {
    .cls = packed & 0xff, .advice = (packed >> 8) & 0xff, .flags = packed >> 16,
  };
  if (hc_hint_check (h) < 0)
    return -EINVAL;
  *hint = h;
  return 0;
}

/* The precedence rule, in one place.  Layers are scanned from the most
 * specific (the I/O itself) to the least (the device default); class, advice
 * and pattern each stop at the first layer that says something, so a range
 * hint of "journal" and a process hint of "dontneed" combine into
 * journal+dontneed, while a per-I/O "metadata" overrides the range's class
 * and leaves its advice alone. */
struct hc_hint
hc_hint_resolve (const struct hc_hint layer[HC_LAYER_COUNT], struct hc_hint_origin *origin)
{
  struct hc_hint out = { 0 };
  struct hc_hint_origin o = { HC_LAYER_COUNT, HC_LAYER_COUNT, HC_LAYER_COUNT };

  for (unsigned i = 0; i < HC_LAYER_COUNT; i++) {
    const struct hc_hint *h = &layer[i];
    if (o.cls == HC_LAYER_COUNT && h->cls != HC_CLASS_UNCLASSIFIED) {
      out.cls = h->cls;
      o.cls = i;
    }
    if (o.advice == HC_LAYER_COUNT && h->advice != HC_ADVICE_NONE) {
      out.advice = h->advice;
      o.advice = i;
    }
    if (o.pattern == HC_LAYER_COUNT && (h->flags & HC_HINT_PATTERN)) {
      out.flags |= h->flags & HC_HINT_PATTERN;
      o.pattern = i;
    }
    out.flags |= h->flags & ~HC_HINT_PATTERN;
  }
  if (origin)
    *origin = o;
  return out;
}

/* Applies one word of a hint text to *h; `seen` tracks which parts were
 * given so that a repeated class or advice is an error. */
static int
parse_word (const char *w, struct hc_hint *h, unsigned *seen)
{
  enum hc_class c;
  enum hc_advice a;

  if (hc_class_parse (w, &c) == 0) {
    if (*seen & 1)
      return -EINVAL;
    *seen |= 1;
    h->cls = c;
    return 0;
  }
  if (hc_advice_parse (w, &a) == 0) {
    if (*seen & 2)
      return -EINVAL;
    *seen |= 2;
    h->advice = a;
    return 0;
  }
  for (unsigned i = 0; i < FLAG_COUNT; i++)
    if (strcmp (w, flag_names[i]) == 0) {
      if (h->flags & (1u << i))
        return -EINVAL;
      h->flags |= 1u << i;
      return 0;
    }
  return -EINVAL;
}

int
hc_hint_parse (const char *text, struct hc_hint *hint)
{
  struct hc_hint h = { 0 };
  unsigned seen = 0;
  char word[32];
  int rc;

  for (const char *p = text; (rc = hc_next_word (&p, "+, \t", word, sizeof word)) != 0;)
    if (rc < 0 || parse_word (word, &h, &seen) < 0)
      return -EINVAL;
  if (hc_hint_check (h) < 0)
    return -EINVAL;
  *hint = h;
  return 0;
}

int
hc_hint_format (struct hc_hint h, char *buf, size_t len)
{
  const char *parts[2 + FLAG_COUNT];
  unsigned n = 0;
  struct hc_sb sb;

  if (hc_hint_check (h) < 0)
    return -EINVAL;
  if (h.cls != HC_CLASS_UNCLASSIFIED)
    parts[n++] = class_names[h.cls];
  if (h.advice != HC_ADVICE_NONE)
    parts[n++] = advice_names[h.advice];
  for (unsigned i = 0; i < FLAG_COUNT; i++)
    if (h.flags & (1u << i))
      parts[n++] = flag_names[i];
  if (n == 0)
    parts[n++] = "none";

  hc_sb_init (&sb, buf, len);
  for (unsigned i = 0; i < n; i++)
    hc_sb_printf (&sb, "%s%s", i ? "+" : "", parts[i]);
  return hc_sb_result (&sb);
}
