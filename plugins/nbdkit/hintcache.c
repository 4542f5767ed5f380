/* nbdkit-hintcache-plugin: serves a hintcache volume over NBD.
 *
 *   nbdkit hintcache fast=FAST [slow=SLOW] [mode=M] [format=true|force|discard]
 *                    [policy=P] [block-size=N] [control=SOCKET] [classes=FILE]
 *                    [seq-cutoff=SIZE] [direct=true] [slow-timeout=SECONDS]
 *                    [checksums=true] [trace=FILE] [promotion=second-touch]
 *                    [flash-budget=SIZE]
 *
 * The volume's two tiers are FAST (a file or block device: the flash) and
 * SLOW (a file, a block device, or an NBD URI such as
 * nbd+unix:///?socket=/run/disk.sock: the disk, possibly another server).
 * Without slow=, the slow tier recorded when the volume was formatted is
 * used.  format=true formats FAST when it clearly holds no volume (and
 * opens the one it holds otherwise); format=force also replaces a volume
 * with no dirty data; format=discard formats whatever FAST holds, losing
 * dirty data.
 *
 * Hints on the wire, with no protocol change: the export name is a hint for
 * every request of the connection — a class ("metadata", "journal", …), an
 * advice or both ("background+dontneed"), as hc_hint_parse reads them.  The
 * default export "" carries none, so the volume's range hints decide.
 * An unknown export name is refused with the list of classes.
 * NBD_CMD_CACHE is willneed advice for its range; NBD_CMD_TRIM discards (the
 * data goes from both tiers); NBD_CMD_WRITE_ZEROES zeroes; FUA is native.
 *
 * Each connection is a stream: its own sequential run and readahead
 * window, so that its reader never competes with others for the volume's
 * few shared windows.  A client with several connections (nbdfuse opens
 * four) may send one reader's requests over all of them in turn, where no
 * connection sees a run: the volume's own run detection, which sees every
 * request, finds such a run and gives it a shared window.  The thread
 * model is PARALLEL: the volume is thread-safe.  Multi-conn is advertised
 * because a flush commits the volume's journal and flushes both tiers,
 * which makes every connection's completed writes durable.
 *
 * trace=FILE records every request served, as the labeled CSV of the shared
 * traces (gzip-compressed when FILE ends in .gz), so that a deployment can
 * be replayed under other policies and sizes (`hintcache replay FILE`):
 * time since the volume opened, op, offset, length, FUA (and a flush as
 * "FF", the kernel's flush request), comm "nbd" and the connection's
 * number as pid, the export name as object, and a label for the export's
 * class (metadata: fs_metadata, journal: journal, transaction: table,
 * background: temp, other classes: other_file, none: unknown), which the
 * replayer's built-in `io` rules map back to the class.  Requests are
 * written in the order they complete, under one lock.
 *
 * Lifecycle: config_complete checks the keys; get_ready opens the tiers,
 * formats if asked and checks that FAST holds a volume for SLOW (so errors
 * show before nbdkit detaches); after_fork opens the volume (its cleaner is a
 * thread, so it must start in the process that serves) and the control
 * socket; cleanup stops both and closes the volume cleanly.
 */
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hintcache/hintcache.h"
#include "hintcache/control.h"
#include "hintcache/trace.h"
#include "util.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct {
  char *fast, *slow, *control, *classes_file, *policy, *trace;
  bool direct;
  int checksums;         /* 0 not given, 1 false, 2 true (applies when formatting) */
  int format;            /* 0 no, 1 if missing, 2 force (no dirty data), 3 discard */
  bool mode_set;
  enum hc_mode mode;
  uint32_t block_size;
  uint64_t seq_cutoff;
  bool second_touch;
  uint64_t flash_budget;
  unsigned slow_timeout;  /* seconds, for an NBD slow tier; 0: the tier's default */
} cfg;

static hc_tier *fast_tier, *slow_tier;
static hc_classes *classes;
static hc_volume *vol;
static hc_control *control;

/* trace=FILE: the writer, its lock, and the clock's origin. */
static hc_trace_writer *tracer;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t trace_t0;
static _Atomic uint32_t connections;

/* One connection. */
struct handle {
  struct hc_ioctx ctx;
  const char *export; /* its name, interned by nbdkit */
  uint32_t id;        /* its number, from 1 */
};

/* Appends a request to the trace (if one is kept); a failure to write it
 * is logged once and ends the trace, never the request. */
static void
trace_req (const struct handle *h, unsigned op, uint64_t offset, uint64_t length, uint16_t rwbs)
{
  static const uint8_t label[HC_CLASS_COUNT] = {
    [HC_CLASS_UNCLASSIFIED] = HC_LABEL_UNKNOWN, [HC_CLASS_METADATA] = HC_LABEL_FS_METADATA,
    [HC_CLASS_JOURNAL] = HC_LABEL_JOURNAL,      [HC_CLASS_TRANSACTION] = HC_LABEL_TABLE,
    [HC_CLASS_DATA] = HC_LABEL_OTHER_FILE,      [HC_CLASS_PAGING] = HC_LABEL_OTHER_FILE,
    [HC_CLASS_STREAMING] = HC_LABEL_OTHER_FILE, [HC_CLASS_BACKGROUND] = HC_LABEL_TEMP,
  };
  if (!tracer)
    return;
  struct hc_trace_req r = { .op = (uint8_t) op, .offset = offset, .length = length, .rwbs = rwbs,
                            .pid = h->id,
                            .label = h->ctx.hint.cls < HC_CLASS_COUNT ? label[h->ctx.hint.cls]
                                                                      : HC_LABEL_UNKNOWN };
  pthread_mutex_lock (&trace_lock);
  if (tracer) {
    r.ts_ns = hc_clock_ns (CLOCK_MONOTONIC) - trace_t0;
    int rc = hc_trace_write_strings (tracer, &r, "nbd", h->export);
    if (rc < 0) {
      nbdkit_error ("trace=%s: %s: no more requests are recorded", cfg.trace, strerror (-rc));
      hc_trace_writer_close (tracer);
      tracer = NULL;
    }
  }
  pthread_mutex_unlock (&trace_lock);
}

static void
hc_unload (void)
{
  free (cfg.fast);
  free (cfg.slow);
  free (cfg.control);
  free (cfg.classes_file);
  free (cfg.policy);
  free (cfg.trace);
}

/* Paths are made absolute: nbdkit changes directory when it detaches. */
static int
set_path (char **dst, const char *value)
{
  free (*dst);
  *dst = nbdkit_absolute_path (value);
  return *dst ? 0 : -1;
}

static int
hc_config (const char *key, const char *value)
{
  if (strcmp (key, "fast") == 0)
    return set_path (&cfg.fast, value);
  if (strcmp (key, "slow") == 0) {
    free (cfg.slow);
    /* NBD URIs are kept as they are; paths become absolute. */
    if (strstr (value, "://"))
      return (cfg.slow = strdup (value)) ? 0 : -1;
    return set_path (&cfg.slow, value);
  }
  if (strcmp (key, "control") == 0)
    return set_path (&cfg.control, value);
  if (strcmp (key, "classes") == 0)
    return set_path (&cfg.classes_file, value);
  if (strcmp (key, "trace") == 0)
    return set_path (&cfg.trace, value);
  if (strcmp (key, "mode") == 0) {
    if (hc_mode_parse (value, &cfg.mode) < 0) {
      char names[128];
      nbdkit_error ("mode=%s: expected one of %s", value,
                    hc_names (hc_mode_name, names, sizeof names));
      return -1;
    }
    cfg.mode_set = true;
    return 0;
  }
  if (strcmp (key, "policy") == 0) {
    free (cfg.policy);
    return (cfg.policy = strdup (value)) ? 0 : -1;
  }
  if (strcmp (key, "format") == 0) {
    if (strcmp (value, "force") == 0)
      cfg.format = 2;
    else if (strcmp (value, "discard") == 0)
      cfg.format = 3;
    else {
      int b = nbdkit_parse_bool (value);
      if (b < 0)
        return -1;
      cfg.format = b;
    }
    return 0;
  }
  if (strcmp (key, "direct") == 0 || strcmp (key, "checksums") == 0) {
    int b = nbdkit_parse_bool (value);
    if (b < 0)
      return -1;
    if (key[0] == 'd')
      cfg.direct = b;
    else
      cfg.checksums = b + 1;
    return 0;
  }
  if (strcmp (key, "block-size") == 0 || strcmp (key, "seq-cutoff") == 0) {
    int64_t n = nbdkit_parse_size (value);
    if (n < 0)
      return -1;
    if (key[0] == 'b') {
      if (n < 4096 || n > 65536 || (n & (n - 1))) {
        nbdkit_error ("block-size=%s: a power of two from 4K to 64K", value);
        return -1;
      }
      cfg.block_size = (uint32_t) n;
    } else
      cfg.seq_cutoff = n ? (uint64_t) n : UINT64_MAX;
    return 0;
  }
  if (strcmp (key, "promotion") == 0) {
    if (strcmp (value, "always") && strcmp (value, "second-touch")) {
      nbdkit_error ("promotion=%s: expected always or second-touch", value);
      return -1;
    }
    cfg.second_touch = value[0] == 's';
    return 0;
  }
  if (strcmp (key, "flash-budget") == 0) {
    int64_t n = nbdkit_parse_size (value);
    if (n <= 0) {
      if (n == 0)
        nbdkit_error ("flash-budget=%s: bytes per day, above 0", value);
      return -1;
    }
    cfg.flash_budget = (uint64_t) n;
    return 0;
  }
  if (strcmp (key, "slow-timeout") == 0) {
    unsigned t;
    if (nbdkit_parse_unsigned ("slow-timeout", value, &t) < 0 || t == 0 || t > 86400) {
      nbdkit_error ("slow-timeout=%s: seconds, 1 to 86400", value);
      return -1;
    }
    cfg.slow_timeout = t;
    return 0;
  }
  nbdkit_error ("unknown parameter '%s' (see nbdkit hintcache --help)", key);
  return -1;
}

static int
hc_config_complete (void)
{
  if (!cfg.fast) {
    nbdkit_error ("fast=FILE is required: the fast tier (flash) holding the volume");
    return -1;
  }
  if (cfg.format && !cfg.slow) {
    nbdkit_error ("format needs slow=FILE|URI: the slow tier to format the volume for");
    return -1;
  }
  return 0;
}

#define hc_config_help                                                                   \
  "fast=FILE           (required) the fast tier: a file or block device (flash)\n"     \
  "slow=FILE|URI       the slow tier: a file, block device or NBD URI; default: the\n"  \
  "                    one recorded when the volume was formatted\n"                     \
  "mode=MODE           writethrough, writeback, writearound or passthrough (persists)\n" \
  "format=true|force|discard  format FAST if it holds no volume (true), also over a\n"  \
  "                    volume with no dirty data (force), or whatever it holds (discard)\n" \
  "policy=NAME         replacement policy when formatting: hintaware, lru, s3fifo, ...\n" \
  "block-size=N        cache block size when formatting (4K ... 64K, default 4K)\n"     \
  "checksums=true      when formatting: checksum every cached block, verified on read\n" \
  "control=SOCKET      serve the control socket (range hints, stats) at SOCKET\n"       \
  "classes=FILE        class attributes (CLASS.ATTRIBUTE = VALUE lines)\n"              \
  "trace=FILE          record every request served, as labeled CSV (.gz: compressed)\n" \
  "seq-cutoff=SIZE     sequential run length before bypass (default 4M, 0 = never)\n"   \
  "promotion=P         always (default) or second-touch: a read miss is admitted only\n" \
  "                    when read again soon (fewer flash writes; policy hintaware)\n"   \
  "flash-budget=SIZE   flash bytes per day: while the cache writes faster, second\n"    \
  "                    touch, and write misses around the cache (policy hintaware)\n"  \
  "slow-timeout=SECONDS  an NBD slow tier's deadline per request (default 30)\n"        \
  "direct=true         open the fast tier with O_DIRECT\n"                              \
  "Export names are hints for every request of a connection: a class\n"                \
  "(unclassified, metadata, journal, transaction, data, paging, streaming,\n"           \
  "background), an advice (dontneed, willneed, ...) or both (background+dontneed)."

static void
hc_dump_plugin (void)
{
  printf ("hintcache_version=%s\n", hc_version ());
  printf ("hintcache_exports=");
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    printf ("%s%s", c ? "," : "", hc_class_name (c));
  printf ("\nhintcache_policies=");
  for (unsigned p = 0; hc_policy_name (p); p++)
    printf ("%s%s", p ? "," : "", hc_policy_name (p));
  printf ("\n");
}

/* Opens the two tiers (and formats, if asked). */
static int
hc_get_ready (void)
{
  char why[256], recorded[512];
  int rc;

  if ((rc = hc_tier_open (cfg.fast, (cfg.direct ? HC_TIER_DIRECT : 0) | HC_TIER_CLAIM, &fast_tier, why,
                          sizeof why)) < 0) {
    nbdkit_error ("fast tier: %s", why);
    return -1;
  }
  const char *slow = cfg.slow;
  if (!slow) {
    if (hc_volume_slow_path (fast_tier, recorded, sizeof recorded) < 0 || !recorded[0]) {
      nbdkit_error ("%s holds no hintcache volume recording its slow tier: give slow= (and "
                    "format=true to make one)", cfg.fast);
      return -1;
    }
    slow = recorded;
  }
  if ((rc = hc_tier_open (slow, HC_TIER_CLAIM, &slow_tier, why, sizeof why)) < 0) {
    nbdkit_error ("slow tier: %s", why);
    return -1;
  }
  if (cfg.slow_timeout && hc_tier_nbd_set_timeout (slow_tier, cfg.slow_timeout * 1000u) < 0) {
    nbdkit_error ("slow-timeout= applies to an NBD slow tier (%s is not one)", slow);
    return -1;
  }
  rc = -EEXIST;
  if (cfg.format) {
    static const enum hc_format_over over[] = { 0, HC_FORMAT_NEW, HC_FORMAT_REPLACE,
                                                HC_FORMAT_DISCARD };
    struct hc_format_opts fo = { .block_size = cfg.block_size, .mode = cfg.mode,
                                 .policy = cfg.policy, .slow_path = slow,
                                 .over = over[cfg.format], .checksums = cfg.checksums == 2 };
    rc = hc_volume_format (fast_tier, slow_tier, &fo, why, sizeof why);
    if (rc < 0 && (cfg.format > 1 || rc != -EEXIST)) {
      nbdkit_error ("formatting %s: %s", cfg.fast, why);
      return -1;
    }
    if (rc == 0)
      nbdkit_debug ("formatted %s for %s", cfg.fast, slow);
    else
      nbdkit_debug ("%s holds a volume (%s): opening it", cfg.fast, why);
  }
  if (rc < 0 && (cfg.policy || cfg.block_size || cfg.checksums)) {
    nbdkit_error ("policy=, block-size= and checksums= apply when formatting (add format=force to "
                  "reformat, losing the cache's contents)");
    return -1;
  }
  if (cfg.classes_file) {
    struct hc_parse_error err;
    if (hc_classes_new (&classes) < 0)
      return -1;
    if ((rc = hc_classes_load_file (classes, cfg.classes_file, &err)) < 0) {
      if (rc == -EINVAL)
        nbdkit_error ("%s:%u: %s", cfg.classes_file, err.line, err.msg);
      else
        nbdkit_error ("%s: %s", cfg.classes_file, strerror (-rc));
      return -1;
    }
  }
  /* Check now, before nbdkit detaches, that FAST holds a volume for SLOW. */
  if ((rc = hc_volume_check (fast_tier, slow_tier, why, sizeof why)) < 0) {
    nbdkit_error ("%s: %s", cfg.fast, why);
    return -1;
  }
  return 0;
}

/* Opens the volume and the control socket in the serving process. */
static int
hc_after_fork (void)
{
  struct hc_open_opts oo = { .classes = classes, .seq_cutoff = cfg.seq_cutoff,
                             .second_touch = cfg.second_touch,
                             .flash_budget = cfg.flash_budget };
  char why[256];
  int rc;

  if ((rc = hc_volume_open (fast_tier, slow_tier, &oo, &vol, why, sizeof why)) < 0) {
    nbdkit_error ("opening the volume on %s: %s", cfg.fast, why);
    return -1;
  }
  if (cfg.mode_set && hc_volume_mode (vol) != cfg.mode
      && (rc = hc_volume_set_mode (vol, cfg.mode)) < 0) {
    nbdkit_error ("mode=%s: %s", hc_mode_name (cfg.mode), strerror (-rc));
    return -1;
  }
  if (cfg.control && (rc = hc_control_start (vol, cfg.control, &control, why, sizeof why)) < 0) {
    nbdkit_error ("control=%s: %s", cfg.control, why);
    return -1;
  }
  if (cfg.trace
      && (rc = hc_trace_writer_open (cfg.trace, HC_TRACE_CSV, 0, &tracer, why, sizeof why)) < 0) {
    nbdkit_error ("trace=%s: %s", cfg.trace, why);
    return -1;
  }
  trace_t0 = hc_clock_ns (CLOCK_MONOTONIC);
  return 0;
}

static void
hc_cleanup (void)
{
  hc_control_stop (control);
  control = NULL;
  pthread_mutex_lock (&trace_lock);
  if (tracer) {
    int rc = hc_trace_writer_close (tracer);
    if (rc < 0)
      nbdkit_error ("trace=%s: %s", cfg.trace, strerror (-rc));
    tracer = NULL;
  }
  pthread_mutex_unlock (&trace_lock);
  if (vol) {
    int rc = hc_volume_close (vol);
    if (rc < 0)
      nbdkit_error ("closing the volume: %s", strerror (-rc));
    vol = NULL;
  }
  hc_tier_close (slow_tier);
  hc_tier_close (fast_tier);
  slow_tier = fast_tier = NULL;
  hc_classes_free (classes);
  classes = NULL;
}

static int
hc_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  (void) readonly, (void) is_tls;
  if (nbdkit_add_export (exports, "", "no hint: range hints and the policy decide") < 0)
    return -1;
  for (unsigned c = 1; c < HC_CLASS_COUNT; c++) {
    char desc[64];
    snprintf (desc, sizeof desc, "every request is %s I/O", hc_class_name (c));
    if (nbdkit_add_export (exports, hc_class_name (c), desc) < 0)
      return -1;
  }
  return 0;
}

static const char *
hc_default_export (int readonly, int is_tls)
{
  (void) readonly, (void) is_tls;
  return "";
}

static void *
hc_open (int readonly)
{
  const char *name = nbdkit_export_name ();
  struct handle *h;
  struct hc_hint hint = { 0 };

  (void) readonly;
  if (name && *name && strcmp (name, "unclassified") != 0 && hc_hint_parse (name, &hint) < 0) {
    char list[256] = "";
    for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
      snprintf (list + strlen (list), sizeof list - strlen (list), "%s%s", c ? ", " : "",
                hc_class_name (c));
    nbdkit_error ("unknown export '%s': export names are I/O classes (%s), optionally with "
                  "an advice (e.g. background+dontneed)", name, list);
    nbdkit_set_error (ENOENT);
    return NULL;
  }
  if (!(h = calloc (1, sizeof *h))) {
    nbdkit_set_error (ENOMEM);
    return NULL;
  }
  h->ctx.hint = hint;
  h->export = name && *name ? nbdkit_strdup_intern (name) : NULL;
  h->id = atomic_fetch_add (&connections, 1) + 1;
  if (hc_stream_new (vol, (struct hc_hint) { 0 }, &h->ctx.stream) < 0) {
    free (h);
    nbdkit_set_error (ENOMEM);
    return NULL;
  }
  return h;
}

static void
hc_close (void *handle)
{
  struct handle *h = handle;
  hc_stream_free (h->ctx.stream);
  free (h);
}

/* The text lives as long as the connection (connections describe
 * themselves from their own threads at once: no shared buffer). */
static const char *
hc_export_description (void *handle)
{
  struct handle *h = handle;
  unsigned c = h->ctx.hint.cls < HC_CLASS_COUNT ? h->ctx.hint.cls : 0;
  return nbdkit_printf_intern ("hintcache volume, class %s", hc_class_name (c));
}

static int64_t
hc_get_size (void *handle)
{
  (void) handle;
  return (int64_t) hc_volume_size (vol);
}

static int
hc_yes (void *handle)
{
  (void) handle;
  return 1;
}

static int
hc_can_fua (void *handle)
{
  (void) handle;
  return NBDKIT_FUA_NATIVE;
}

static int
hc_can_cache (void *handle)
{
  (void) handle;
  return NBDKIT_CACHE_NATIVE;
}

/* Reports a volume error to nbdkit. */
static int
fail (int rc)
{
  nbdkit_set_error (-rc);
  return -1;
}

/* Logs, once per change, when the fast tier starts or stops failing: the
 * volume goes on around it meanwhile (hc_volume_degraded). */
static int
note_health (int rc)
{
  static _Atomic int logged;
  int now = hc_volume_degraded (vol);

  /* Read first: an exchange by every request of every thread would pass
   * the word from CPU to CPU with each. */
  if (atomic_load_explicit (&logged, memory_order_relaxed) != now
      && atomic_exchange (&logged, now) != now) {
    if (now)
      nbdkit_error ("fast tier %s is failing writes (%s): the cache is degraded, writes and "
                    "read misses go to the slow tier until it takes writes again", cfg.fast,
                    strerror (now));
    else
      nbdkit_error ("fast tier %s takes writes again: the cache is back in service", cfg.fast);
  }
  return rc;
}

static int
hc_pread (void *handle, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  int rc = note_health (hc_volume_read (vol, buf, count, offset, &h->ctx));
  (void) flags;
  trace_req (h, HC_TOP_READ, offset, count, 0);
  return rc < 0 ? fail (rc) : 0;
}

static int
hc_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  int rc = note_health (hc_volume_write (vol, buf, count, offset,
                                         flags & NBDKIT_FLAG_FUA ? HC_VOL_FUA : 0, &h->ctx));
  trace_req (h, HC_TOP_WRITE, offset, count, flags & NBDKIT_FLAG_FUA ? HC_RWBS_FUA : 0);
  return rc < 0 ? fail (rc) : 0;
}

static int
hc_flush (void *handle, uint32_t flags)
{
  int rc = hc_volume_flush (vol);
  (void) flags;
  trace_req (handle, HC_TOP_FLUSH, 0, 0, HC_RWBS_PREFLUSH);
  return rc < 0 ? fail (rc) : 0;
}

static int
hc_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  int rc = hc_volume_discard (vol, offset, count, &h->ctx);
  if (rc == 0 && (flags & NBDKIT_FLAG_FUA))
    rc = hc_volume_flush (vol);
  trace_req (h, HC_TOP_DISCARD, offset, count, flags & NBDKIT_FLAG_FUA ? HC_RWBS_FUA : 0);
  return rc < 0 ? fail (rc) : 0;
}

static int
hc_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  int rc = note_health (hc_volume_zero (vol, offset, count,
                                        flags & NBDKIT_FLAG_FUA ? HC_VOL_FUA : 0, &h->ctx));
  /* The block layer's name for a write of zeros is a write. */
  trace_req (h, HC_TOP_WRITE, offset, count, flags & NBDKIT_FLAG_FUA ? HC_RWBS_FUA : 0);
  return rc < 0 ? fail (rc) : 0;
}

static int
hc_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  int rc = hc_volume_advise (vol, offset, count, (struct hc_hint) { .advice = HC_ADVICE_WILLNEED });
  (void) handle, (void) flags;
  return rc < 0 ? fail (rc) : 0;
}

static int
hc_block_size (void *handle, uint32_t *minimum, uint32_t *preferred, uint32_t *maximum)
{
  (void) handle;
  *minimum = 1; /* any alignment works; whole blocks work best */
  *preferred = hc_volume_block_size (vol);
  *maximum = 0xffffffff;
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "hintcache",
  .longname = "hintcache hybrid drive",
  .version = HC_VERSION,
  .description = "A hint-aware hybrid drive: a fast tier caching a slow one, steered by I/O "
                 "classes chosen with the export name and range hints from a control socket",
  .unload = hc_unload,
  .config = hc_config,
  .config_complete = hc_config_complete,
  .config_help = hc_config_help,
  .magic_config_key = "fast",
  .dump_plugin = hc_dump_plugin,
  .get_ready = hc_get_ready,
  .after_fork = hc_after_fork,
  .cleanup = hc_cleanup,
  .list_exports = hc_list_exports,
  .default_export = hc_default_export,
  .export_description = hc_export_description,
  .open = hc_open,
  .close = hc_close,
  .get_size = hc_get_size,
  .block_size = hc_block_size,
  .can_write = hc_yes,
  .can_flush = hc_yes,
  .can_trim = hc_yes,
  .can_zero = hc_yes,
  .can_fua = hc_can_fua,
  .can_cache = hc_can_cache,
  .can_multi_conn = hc_yes,
  .pread = hc_pread,
  .pwrite = hc_pwrite,
  .flush = hc_flush,
  .trim = hc_trim,
  .zero = hc_zero,
  .cache = hc_cache,
  .errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN (plugin)
