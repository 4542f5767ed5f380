/* Fuzzes the control protocol: each input line is one request to
 * hc_control_exec, the whole protocol apart from the socket, against a live
 * volume.  The volume (write-back, on memory tiers, no cleaner thread, a
 * range table of 64 entries so that it can fill up) is made once, in
 * LLVMFuzzerInitialize, with dirty blocks in it, so that advise, clean and
 * mode changes have something to act on.  No request reaches a file or a
 * socket: the tiers are memory, and exec only calls the volume.
 *
 * After each input the volume is put back as it was — every range hint
 * withdrawn, write-back mode, two blocks dirty again — so inputs do not
 * depend on the ones before them.
 *
 * Beyond not crashing, every request gets exactly one reply line:
 *   - printable ASCII, shorter than HC_CONTROL_LINE, "ok" (alone or with a
 *     payload) or "error ENAME message" with a name the client maps back
 *     to an errno; exec returns 1 only for quit, with "ok";
 *   - a stats payload reads back with hc_stats_parse and writes out again
 *     as the same text;
 *   - a successful advise stores its class over the whole range (the
 *     first and last byte's range hint say so), a successful unadvise
 *     leaves no hint there.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "control/control_priv.h"
#include "util.h"
#include "fuzz.h"
#include "hintcache/control.h"

#define FAST (1u << 20)
#define SLOW (4u << 20)
#define MAX_LINES 64

static hc_tier *fast, *slow;
static hc_volume *vol;
static char reply[HC_CONTROL_LINE];

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* Dirties two blocks, so that clean and leaving write-back have work. */
static void
dirty_some (void)
{
  static uint8_t block[4096];

  for (unsigned i = 0; i < 2; i++) {
    memset (block, 0x5a + i, sizeof block);
    FUZZ_CHECK (hc_volume_write (vol, block, sizeof block, (uint64_t) (7 + 13 * i) << 12, 0, NULL)
                    == 0,
                "write");
  }
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK, .max_ranges = 64 };
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[256] = "";

  (void) argc, (void) argv;
  FUZZ_CHECK (hc_tier_new_memory (FAST, &fast) == 0 && hc_tier_new_memory (SLOW, &slow) == 0,
              "memory tiers");
  FUZZ_CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  FUZZ_CHECK (hc_volume_open (fast, slow, &oo, &vol, why, sizeof why) == 0, "open: %s", why);
  dirty_some ();
  return 0;
}

/* The reply's shape. */
static void
check_reply (const char *line, int rc)
{
  size_t n = strlen (reply);

  FUZZ_CHECK (rc == 0 || (rc == 1 && strcmp (reply, "ok") == 0), "'%s': rc %d, '%s'", line, rc,
              reply);
  FUZZ_CHECK (n < HC_CONTROL_LINE, "'%s': reply of %zu bytes", line, n);
  for (size_t i = 0; i < n; i++)
    FUZZ_CHECK (reply[i] >= 0x20 && reply[i] < 0x7f, "'%s': byte 0x%02x in the reply", line,
                (unsigned char) reply[i]);
  if (strncmp (reply, "ok", 2) == 0) {
    FUZZ_CHECK (reply[2] == '\0' || reply[2] == ' ', "'%s': reply '%.40s'", line, reply);
    return;
  }
  FUZZ_CHECK (strncmp (reply, "error E", 7) == 0, "'%s': reply '%.40s'", line, reply);
  char name[32];
  size_t k = strcspn (reply + 6, " ");
  FUZZ_CHECK (k < sizeof name && reply[6 + k] == ' ' && reply[7 + k], "'%s': reply '%.60s'", line,
              reply);
  memcpy (name, reply + 6, k);
  name[k] = '\0';
  FUZZ_CHECK (hc_ctl_errno_parse (name) != 0, "'%s': unknown error name '%s'", line, name);
}

/* What a successful request must have done. */
static void
check_effect (const char *line)
{
  char copy[256], *word[5] = { NULL };
  unsigned nw = 0;
  uint64_t off, len;

  if (strncmp (reply, "ok", 2) != 0 || strlen (line) >= sizeof copy)
    return;
  memcpy (copy, line, strlen (line) + 1);
  for (char *s = strtok (copy, " "); s && nw < 5; s = strtok (NULL, " "))
    word[nw++] = s;
  if (nw == 1 && strcmp (word[0], "stats") == 0) {
    struct hc_stats st;
    char again[HC_CONTROL_LINE];
    FUZZ_CHECK (hc_stats_parse (reply + 3, &st) == 0, "stats payload does not parse");
    FUZZ_CHECK (hc_stats_format (&st, again, sizeof again) >= 0 && strcmp (again, reply + 3) == 0,
                "stats payload does not round-trip");
    return;
  }
  if (nw < 3 || hc_parse_size (word[1], &off, NULL) < 0 || hc_parse_size (word[2], &len, NULL) < 0)
    return;
  struct hc_hint first = hc_volume_range_hint (vol, off);
  struct hc_hint last = hc_volume_range_hint (vol, off + len - 1);
  if (nw == 4 && strcmp (word[0], "advise") == 0) {
    struct hc_hint h;
    FUZZ_CHECK (hc_hint_parse (word[3], &h) == 0, "'%s' accepted a bad hint", line);
    if (h.cls)
      FUZZ_CHECK (first.cls == h.cls && last.cls == h.cls, "'%s': classes %u and %u stored", line,
                  first.cls, last.cls);
  } else if (nw == 3 && strcmp (word[0], "unadvise") == 0) {
    FUZZ_CHECK (!first.cls && !first.advice && !last.cls && !last.advice,
                "'%s': hints left (%u/%u, %u/%u)", line, first.cls, first.advice, last.cls,
                last.advice);
  }
}

/* Puts the volume back as Initialize left it. */
static void
reset (void)
{
  char line[64];
  int rc;

  snprintf (line, sizeof line, "unadvise 0 %llu", (unsigned long long) hc_volume_size (vol));
  rc = hc_control_exec (vol, line, reply, sizeof reply);
  FUZZ_CHECK (rc == 0 && strcmp (reply, "ok") == 0, "reset: '%s'", reply);
  rc = hc_control_exec (vol, "mode writeback", reply, sizeof reply);
  FUZZ_CHECK (rc == 0 && strcmp (reply, "ok") == 0, "reset: '%s'", reply);
  dirty_some ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = fuzz_strdup (data, size);
  unsigned lines = 0;

  /* Lines end at '\n' (a NUL ends the input, as a C string would). */
  for (char *p = text, *nl; p && lines < MAX_LINES; p = nl ? nl + 1 : NULL, lines++) {
    if ((nl = strchr (p, '\n')))
      *nl = '\0';
    int rc = hc_control_exec (vol, p, reply, sizeof reply);
    check_reply (p, rc);
    check_effect (p);
  }
  free (text);
  reset ();
  return 0;
}
