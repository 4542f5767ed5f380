/* The control protocol without the socket: one request line in, one reply
 * line out (hc_control_exec), and the statistics as KEY=VALUE text
 * (hc_stats_format, hc_stats_parse).
 *
 * A request is checked completely — printable ASCII only, the right number
 * of words, numbers in the protocol's syntax, a range inside the volume, a
 * hint that names a class or an advice — before anything is done, so a
 * malformed request changes nothing.  Error messages quote at most a short
 * prefix of what the client sent, and since only printable ASCII gets that
 * far, a reply can never contain a newline.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "hintcache/control.h"
#include "control/control_priv.h"
#include "util.h"

/* ---------------------------------------------------------------------------
 * Statistics as text
 */

/* The per-class counters, by index: writes the key's suffix ("read.hits")
 * into name[len] and returns the counter, or NULL past the last.  Format and
 * parse both walk this one list, so they cannot disagree. */
static uint64_t *
class_field (struct hc_class_stats *c, unsigned i, char *name, size_t len)
{
  static const char *const op[2] = { "read", "write" };
  static const struct {
    const char *name;
    size_t off;
  } single[] = {
    { "evictions", offsetof (struct hc_class_stats, evictions) },
    { "writebacks", offsetof (struct hc_class_stats, writebacks) },
    { "hint_hits", offsetof (struct hc_class_stats, hint_hits) },
    { "flash_bytes_written", offsetof (struct hc_class_stats, flash_bytes_written) },
    { "blocks", offsetof (struct hc_class_stats, blocks) },
    { "dirty", offsetof (struct hc_class_stats, dirty) },
  };
  const unsigned per_op = 4 + HC_BYPASS_COUNT;

  if (i < 2 * per_op) {
    unsigned o = i / per_op, k = i % per_op;
    switch (k) {
    case 0: snprintf (name, len, "%s.hits", op[o]); return &c->hits[o];
    case 1: snprintf (name, len, "%s.misses", op[o]); return &c->misses[o];
    case 2: snprintf (name, len, "%s.admissions", op[o]); return &c->admissions[o];
    case 3: snprintf (name, len, "%s.bytes", op[o]); return &c->bytes[o];
    default:
      snprintf (name, len, "%s.bypass.%s", op[o], hc_bypass_name (k - 4));
      return &c->bypass[o][k - 4];
    }
  }
  i -= 2 * per_op;
  if (i < sizeof single / sizeof single[0]) {
    snprintf (name, len, "%s", single[i].name);
    return (uint64_t *) ((char *) c + single[i].off);
  }
  return NULL;
}

/* The volume-wide counters, by index, as class_field. */
static uint64_t *
global_field (struct hc_stats *s, unsigned i, const char **name)
{
  switch (i) {
  case 0: *name = "cache_blocks"; return &s->cache_blocks;
  case 1: *name = "free_blocks"; return &s->free_blocks;
  case 2: *name = "pending_blocks"; return &s->pending_blocks;
  case 3: *name = "commits"; return &s->commits;
  case 4: *name = "flushes"; return &s->flushes;
  case 5: *name = "prefetched"; return &s->prefetched;
  case 6: *name = "errors_fast"; return &s->errors_fast;
  case 7: *name = "errors_checksum"; return &s->errors_checksum;
  case 8: *name = "hint_effects"; return &s->hint_effects;
  case 9: *name = "effect_changes"; return &s->effect_changes;
  case 10: *name = "meta_flash_bytes"; return &s->meta_flash_bytes;
  case 11: *name = "ways"; return &s->ways;
  default: return NULL;
  }
}

int
hc_stats_format (const struct hc_stats *s, char *buf, size_t len)
{
  /* The field walkers hand out writable pointers; work on a copy. */
  struct hc_stats c = *s;
  struct hc_sb sb;
  const char *gname;
  char fname[48];
  uint64_t *p;
  int n;

  hc_sb_init (&sb, buf, len);
  for (unsigned i = 0; (p = global_field (&c, i, &gname)); i++)
    hc_sb_printf (&sb, "%s%s=%" PRIu64, i ? " " : "", gname, *p);
  /* Per-class counters that are zero are left out: parse starts from zero. */
  for (unsigned k = 0; k < HC_CLASS_COUNT; k++)
    for (unsigned i = 0; (p = class_field (&c.cls[k], i, fname, sizeof fname)); i++)
      if (*p)
        hc_sb_printf (&sb, " %s.%s=%" PRIu64, hc_class_name (k), fname, *p);
  n = hc_sb_result (&sb);
  if ((size_t) n >= len)
    return -ENOSPC;
  return n;
}

/* Finds the counter a key names in *s, or NULL for an unknown key. */
static uint64_t *
stats_key (struct hc_stats *s, const char *key)
{
  const char *gname, *dot;
  char fname[48], cname[24];
  enum hc_class cls;
  uint64_t *p;

  for (unsigned i = 0; (p = global_field (s, i, &gname)); i++)
    if (strcmp (key, gname) == 0)
      return p;
  dot = strchr (key, '.');
  if (!dot || (size_t) (dot - key) >= sizeof cname)
    return NULL;
  memcpy (cname, key, (size_t) (dot - key));
  cname[dot - key] = '\0';
  if (hc_class_parse (cname, &cls) < 0)
    return NULL;
  for (unsigned i = 0; (p = class_field (&s->cls[cls], i, fname, sizeof fname)); i++)
    if (strcmp (dot + 1, fname) == 0)
      return p;
  return NULL;
}

int
hc_stats_parse (const char *text, struct hc_stats *out)
{
  struct hc_stats s;
  char word[128];
  unsigned words = 0;
  int rc;

  if (!text || !out)
    return -EINVAL;
  memset (&s, 0, sizeof s);
  for (const char *p = text; (rc = hc_next_word (&p, " ", word, sizeof word)) != 0;) {
    if (rc < 0)
      return rc;
    words++;

    char *eq = strchr (word, '=');
    unsigned long long v;
    if (!eq || eq == word || hc_parse_number (eq + 1, &v) < 0)
      return -EINVAL;
    *eq = '\0';
    uint64_t *field = stats_key (&s, word);
    if (field)
      *field = v;
  }
  if (words == 0)
    return -EINVAL;
  *out = s;
  return 0;
}

/* ---------------------------------------------------------------------------
 * Requests
 */
#define MAX_WORDS 5

/* Writes `head`, then the formatted message after a blank (if any), into
 * reply[len]. */
static void
reply_v (char *reply, size_t len, const char *head, const char *fmt, va_list ap)
{
  struct hc_sb sb;
  char msg[HC_CONTROL_LINE];

  vsnprintf (msg, sizeof msg, fmt, ap);
  hc_sb_init (&sb, reply, len);
  hc_sb_printf (&sb, "%s%s%s", head, msg[0] ? " " : "", msg);
}

/* Writes "error ENAME message" into reply[len]. */
static void __attribute__ ((format (printf, 4, 5)))
reply_error (char *reply, size_t len, int err, const char *fmt, ...)
{
  char head[64];
  va_list ap;

  snprintf (head, sizeof head, "error %s", hc_ctl_errno_name (err));
  va_start (ap, fmt);
  reply_v (reply, len, head, fmt, ap);
  va_end (ap);
}

/* Writes "ok[ payload]" into reply[len]. */
static void __attribute__ ((format (printf, 3, 4)))
reply_ok (char *reply, size_t len, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  reply_v (reply, len, "ok", fmt, ap);
  va_end (ap);
}

/* The names a hint may use, for error messages. */
static void
hint_names (char *buf, size_t len)
{
  struct hc_sb sb;
  const char *name;

  hc_sb_init (&sb, buf, len);
  hc_sb_printf (&sb, "classes:");
  for (unsigned i = 0; (name = hc_class_name (i)); i++)
    hc_sb_printf (&sb, "%s %s", i ? "," : "", name);
  hc_sb_printf (&sb, "; advice:");
  for (unsigned i = 0, n = 0; i < HC_ADVICE_LIMIT; i++)
    if ((name = hc_advice_name (i)))
      hc_sb_printf (&sb, "%s %s", n++ ? "," : "", name);
  hc_sb_printf (&sb, "; flags:");
  for (unsigned i = 0, n = 0; i < 16; i++)
    if ((name = hc_flag_name (1u << i)))
      hc_sb_printf (&sb, "%s %s", n++ ? "," : "", name);
}

/* Parses OFF (and LEN unless len is NULL) and checks that the range lies
 * inside the volume.  Returns 0, or writes the error reply and returns -1. */
static int
parse_range (hc_volume *v, const char *offw, const char *lenw, uint64_t *off, uint64_t *len,
             char *reply, size_t rlen)
{
  uint64_t size = hc_volume_size (v);
  int rc;

  if ((rc = hc_parse_size (offw, off, NULL)) < 0) {
    reply_error (reply, rlen, -rc, "OFF '%.64s' is not a number (decimal or 0x hex, with an "
                 "optional K, M, G or T unit)%s", offw, rc == -ERANGE ? ": too large" : "");
    return -1;
  }
  if (!lenw) {
    if (*off >= size) {
      reply_error (reply, rlen, ERANGE, "OFF %" PRIu64 " is outside the volume (%" PRIu64
                   " bytes)", *off, size);
      return -1;
    }
    return 0;
  }
  if ((rc = hc_parse_size (lenw, len, NULL)) < 0) {
    reply_error (reply, rlen, -rc, "LEN '%.64s' is not a number (decimal or 0x hex, with an "
                 "optional K, M, G or T unit)%s", lenw, rc == -ERANGE ? ": too large" : "");
    return -1;
  }
  if (*len == 0) {
    reply_error (reply, rlen, EINVAL, "LEN must not be 0");
    return -1;
  }
  if (*off >= size || *len > size - *off) {
    reply_error (reply, rlen, ERANGE, "range %" PRIu64 "+%" PRIu64 " is outside the volume (%"
                 PRIu64 " bytes)", *off, *len, size);
    return -1;
  }
  return 0;
}

/* Parses a HINT word for advise.  Returns 0, or writes the error reply and
 * returns -1. */
static int
parse_advise_hint (const char *word, struct hc_hint *h, char *reply, size_t rlen)
{
  char names[512];

  if (hc_hint_parse (word, h) == 0) {
    if (h->cls == HC_CLASS_UNCLASSIFIED && h->advice == HC_ADVICE_NONE) {
      reply_error (reply, rlen, EINVAL, "hint '%.64s' names no class and no advice: nothing to "
                   "store (unadvise OFF LEN withdraws hints)", word);
      return -1;
    }
    return 0;
  }
  hint_names (names, sizeof names);
  /* Say which word is unknown, if one is; else the words conflict. */
  for (const char *p = word; *p;) {
    size_t n = strcspn (p, "+,");
    char one[64];
    struct hc_hint dummy;
    if (n > 0 && n < sizeof one) {
      memcpy (one, p, n);
      one[n] = '\0';
      if (hc_hint_parse (one, &dummy) < 0) {
        reply_error (reply, rlen, EINVAL, "unknown class, advice or flag '%s' (%s)", one, names);
        return -1;
      }
    } else if (n >= sizeof one) {
      reply_error (reply, rlen, EINVAL, "unknown class, advice or flag '%.32s...' (%s)", p, names);
      return -1;
    }
    p += n + (p[n] != '\0');
  }
  reply_error (reply, rlen, EINVAL, "hint '%.64s' repeats or combines conflicting words (at most "
               "one class, one advice, not both sequential and random)", word);
  return -1;
}

/* ---------------------------------------------------------------------------
 * The commands: one handler each, and the one table that names them, says
 * how many words they take and how to use them, and dispatches.  A handler
 * gets the request's words (word[0] is the command; the count is checked)
 * and the source of a from=SOURCE word; it writes the reply and returns 0,
 * or 1 to end the connection.
 */
typedef int command_fn (hc_volume *v, char **word, enum hc_hint_source source, char *reply,
                        size_t rlen);

/* Replies for a volume call's result: ok, or what failed and why. */
static int
reply_volume (char *reply, size_t rlen, const char *what, int rc)
{
  if (rc < 0)
    reply_error (reply, rlen, -rc, "%s failed: %s", what, strerror (-rc));
  else
    reply_ok (reply, rlen, "%s", "");
  return 0;
}

static int
do_version (hc_volume *v, char **word, enum hc_hint_source source, char *reply, size_t rlen)
{
  (void) v, (void) word, (void) source;
  reply_ok (reply, rlen, "%d", HC_CONTROL_VERSION);
  return 0;
}

static int
do_advise (hc_volume *v, char **word, enum hc_hint_source source, char *reply, size_t rlen)
{
  uint64_t off, len;
  struct hc_hint h;
  int rc;

  if (parse_range (v, word[1], word[2], &off, &len, reply, rlen) < 0
      || parse_advise_hint (word[3], &h, reply, rlen) < 0)
    return 0;
  rc = hc_volume_advise_from (v, off, len, h, source);
  return reply_volume (reply, rlen, rc == -ENOSPC ? "advise (the range table is full)" : "advise",
                       rc);
}

static int
do_unadvise (hc_volume *v, char **word, enum hc_hint_source source, char *reply, size_t rlen)
{
  uint64_t off, len;
  int rc;

  if (parse_range (v, word[1], word[2], &off, &len, reply, rlen) < 0)
    return 0;
  rc = hc_volume_unadvise_from (v, off, len, source);
  return reply_volume (reply, rlen,
                       rc == -ENOSPC ? "unadvise (the range table is full)" : "unadvise", rc);
}

static int
do_hint (hc_volume *v, char **word, enum hc_hint_source source, char *reply, size_t rlen)
{
  char text[128];
  uint64_t off;

  (void) source;
  if (parse_range (v, word[1], NULL, &off, NULL, reply, rlen) < 0)
    return 0;
  struct hc_hint h = hc_volume_range_hint (v, off);
  if (hc_hint_empty (h))
    snprintf (text, sizeof text, "%s", hc_class_name (HC_CLASS_UNCLASSIFIED));
  else if (hc_hint_format (h, text, sizeof text) < 0) {
    reply_error (reply, rlen, EIO, "the stored hint is invalid");
    return 0;
  }
  reply_ok (reply, rlen, "%s", text);
  return 0;
}

static int
do_stats (hc_volume *v, char **word, enum hc_hint_source source, char *reply, size_t rlen)
{
  struct hc_stats st;
  int rc;

  (void) word, (void) source;
  if ((rc = hc_volume_stats (v, &st)) < 0)
    return reply_volume (reply, rlen, "stats", rc);
  if (rlen <= 3 || hc_stats_format (&st, reply + 3, rlen - 3) < 0) {
    reply_error (reply, rlen, ENOSPC, "the statistics do not fit in a reply line");
    return 0;
  }
  memcpy (reply, "ok ", 3);
  return 0;
}

static int
do_info (hc_volume *v, char **word, enum hc_hint_source source, char *reply, size_t rlen)
{
  struct hc_volume_info in;

  (void) word, (void) source;
  hc_volume_get_info (v, &in);
  reply_ok (reply, rlen, "size=%" PRIu64 " block_size=%" PRIu32 " cache_blocks=%" PRIu32
            " mode=%s policy=%s range_hints=%" PRIu32, in.volume_size, in.block_size,
            in.nblocks, hc_mode_name (in.mode) ? hc_mode_name (in.mode) : "unknown",
            in.policy[0] ? in.policy : "unknown", in.range_hints);
  return 0;
}

static int
do_clean (hc_volume *v, char **word, enum hc_hint_source source, char *reply, size_t rlen)
{
  (void) word, (void) source;
  return reply_volume (reply, rlen, "clean", hc_volume_clean (v));
}

static int
do_mode (hc_volume *v, char **word, enum hc_hint_source source, char *reply, size_t rlen)
{
  enum hc_mode mode;

  (void) source;
  if (hc_mode_parse (word[1], &mode) < 0) {
    char names[128];
    reply_error (reply, rlen, EINVAL, "unknown mode '%.32s' (%s; or wt, wb, wa, pt)", word[1],
                 hc_names (hc_mode_name, names, sizeof names));
    return 0;
  }
  return reply_volume (reply, rlen, "mode", hc_volume_set_mode (v, mode));
}

static int
do_quit (hc_volume *v, char **word, enum hc_hint_source source, char *reply, size_t rlen)
{
  (void) v, (void) word, (void) source;
  reply_ok (reply, rlen, "%s", "");
  return 1;
}

static const struct hc_ctl_command {
  struct hc_ctl_command_doc doc;
  unsigned args;
  bool from; /* takes an optional last word from=SOURCE */
  command_fn *run;
} commands[] = {
  { { "version", "version", "the protocol version" }, 0, false, do_version },
  { { "advise", "advise OFF LEN HINT [from=SOURCE]",
      "store a range hint (class and/or advice) as SOURCE's: @SOURCES:marked@" }, 3, true,
    do_advise },
  { { "unadvise", "unadvise OFF LEN [from=SOURCE]",
      "withdraw the range hints there that SOURCE stored (admin: all of them)" },
    2, true, do_unadvise },
  { { "hint", "hint OFF", "the range hint stored for OFF" }, 1, false, do_hint },
  { { "stats", "stats", "statistics as KEY=VALUE words" }, 0, false, do_stats },
  { { "info", "info", "size, block size, cache blocks, mode, policy, range hints" }, 0, false,
    do_info },
  { { "clean", "clean", "write back every dirty block" }, 0, false, do_clean },
  { { "mode", "mode MODE", "@MODES@" }, 1, false, do_mode },
  { { "quit", "quit", "end the connection" }, 0, false, do_quit },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

const struct hc_ctl_command_doc *
hc_ctl_command_doc (unsigned i)
{
  return i < NCOMMANDS ? &commands[i].doc : NULL;
}

/* The commands' usages, for error messages: "version, advise OFF …, …". */
static void
usages (char *buf, size_t len)
{
  struct hc_sb sb;

  hc_sb_init (&sb, buf, len);
  for (unsigned i = 0; i < NCOMMANDS; i++)
    hc_sb_printf (&sb, "%s%s", i ? ", " : "", commands[i].doc.usage);
}

int
hc_control_exec (hc_volume *v, const char *line, char *reply, size_t rlen)
{
  char copy[HC_CONTROL_LINE], list[256];
  char *word[MAX_WORDS + 1];
  unsigned nwords = 0;
  const struct hc_ctl_command *c = NULL;
  size_t n;

  if (!reply || rlen == 0)
    return -EINVAL;
  if (!v || !line) {
    reply_error (reply, rlen, EINVAL, "no volume or no request");
    return 0;
  }
  n = strlen (line);
  if (n > HC_CONTROL_LINE - 1) {
    reply_error (reply, rlen, E2BIG, "request longer than %d bytes", HC_CONTROL_LINE - 1);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char) line[i];
    if (ch < 0x20 || ch >= 0x7f) {
      reply_error (reply, rlen, EINVAL, "%s byte 0x%02x at column %zu (requests are printable "
                   "ASCII words separated by spaces)", ch < 0x80 ? "control" : "non-ASCII",
                   ch, i + 1);
      return 0;
    }
  }
  memcpy (copy, line, n + 1);
  for (char *p = copy; *p;) {
    if (*p == ' ') {
      *p++ = '\0';
      continue;
    }
    if (nwords <= MAX_WORDS)
      word[nwords] = p;
    nwords++;
    p += strcspn (p, " ");
  }
  for (unsigned i = 0; nwords && i < NCOMMANDS; i++)
    if (strcmp (word[0], commands[i].doc.name) == 0)
      c = &commands[i];
  if (!c) {
    usages (list, sizeof list);
    if (nwords == 0)
      reply_error (reply, rlen, EINVAL, "empty request (commands: %s)", list);
    else
      reply_error (reply, rlen, EINVAL, "unknown command '%.32s' (commands: %s)", word[0], list);
    return 0;
  }
  /* from=SOURCE: whose range hints these are (enum hc_hint_source). */
  enum hc_hint_source source = HC_SOURCE_ADMIN;
  if (c->from && nwords - 1 == c->args + 1 && nwords <= MAX_WORDS
      && strncmp (word[nwords - 1], "from=", 5) == 0) {
    if (hc_source_parse (word[nwords - 1] + 5, &source) < 0) {
      char names[128];
      reply_error (reply, rlen, EINVAL, "%s: unknown source '%.32s' (sources: %s)", c->doc.name,
                   word[nwords - 1] + 5, hc_names (hc_source_name, names, sizeof names));
      return 0;
    }
    nwords--;
  }
  if (nwords - 1 != c->args) {
    reply_error (reply, rlen, EINVAL, "%s: %s (usage: %s)", c->doc.name,
                 nwords - 1 < c->args ? "missing arguments" : "too many arguments",
                 c->doc.usage);
    return 0;
  }
  return c->run (v, word, source, reply, rlen);
}
