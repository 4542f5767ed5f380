/* The volume commands of the hintcache tool:
 *
 *   format --fast F --slow S     make a volume
 *   info F                       geometry, mode, occupancy and dirty blocks by class
 *   check F                      verify every checksum and invariant
 *   clean F | --socket S         write back all dirty data
 *   stats F | --socket S         lifetime statistics by class
 *   io F OP …                    read, write, flush, discard, zero, advise, mode
 *
 * Commands other than format find the slow tier through the path recorded
 * at format time, or --slow.  stats and clean can instead ask a running
 * volume through its control socket (--socket); the statistics are then
 * printed by the same code.  Every command that fails prints one line and
 * exits non-zero, and changes nothing it has not reported doing.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "hintcache/control.h"
#include "hintcache/hintcache.h"
#include "cli.h"
#include "commands.h"
#include "util.h"
#include "json.h"

static void
uuid_text (const uint8_t u[16], char out[37])
{
  static const int dash[] = { 4, 6, 8, 10 };
  char *p = out;
  for (int i = 0, d = 0; i < 16; i++) {
    if (d < 4 && i == dash[d]) {
      *p++ = '-';
      d++;
    }
    p += sprintf (p, "%02x", u[i]);
  }
}

/* An open volume with its tiers, for the commands. */
struct vol {
  hc_tier *fast, *slow;
  hc_volume *v;
};

static void
vol_close (struct vol *x)
{
  if (x->v)
    hc_volume_close (x->v);
  hc_tier_close (x->fast);
  hc_tier_close (x->slow);
}

/* Opens the tiers (the slow one by --slow or the recorded path) and the
 * volume.  Returns 0 or an exit status after printing why. */
static int
vol_open (const char *cmd, const char *fast_path, const char *slow_path, bool read_only,
          struct vol *x)
{
  char recorded[256], why[256];
  struct hc_open_opts o = { .read_only = read_only, .no_cleaner = true };
  unsigned flags = (read_only ? HC_TIER_READONLY : 0) | HC_TIER_CLAIM;
  int rc;

  memset (x, 0, sizeof *x);
  if ((rc = hc_tier_open (fast_path, flags, &x->fast, why, sizeof why)) < 0)
    return cli_fail (cmd, "%s", why);
  if (!slow_path) {
    if ((rc = hc_volume_slow_path (x->fast, recorded, sizeof recorded)) < 0) {
      hc_tier_close (x->fast);
      return cli_fail (cmd, "%s: not a hintcache volume (%s)", fast_path, strerror (-rc));
    }
    if (!recorded[0]) {
      hc_tier_close (x->fast);
      return cli_usage (cmd, "%s records no slow tier path; give --slow", fast_path);
    }
    slow_path = recorded;
  }
  if ((rc = hc_tier_open (slow_path, flags, &x->slow, why, sizeof why)) < 0) {
    hc_tier_close (x->fast);
    return cli_fail (cmd, "slow tier: %s", why);
  }
  if ((rc = hc_volume_open (x->fast, x->slow, &o, &x->v, why, sizeof why)) < 0) {
    vol_close (x);
    return cli_fail (cmd, "%s: %s", fast_path, why);
  }
  return 0;
}

/* Options every volume command takes. */
struct common {
  const char *slow;
  bool json;
};

enum { OPT_SLOW = 300, OPT_FAST, OPT_BLOCK, OPT_MODE, OPT_POLICY, OPT_RANGES, OPT_FORCE, OPT_DISCARD_DIRTY,
       OPT_HINT, OPT_OUT, OPT_IN, OPT_PATTERN, OPT_FUA, OPT_SOCKET, OPT_CHECKSUMS, OPT_REPAIR, OPT_FORMAT };

static const struct option vol_opts[] = {
  { "help", no_argument, NULL, 'h' },
  { "json", no_argument, NULL, 'j' },
  { "slow", required_argument, NULL, OPT_SLOW },
  { "fast", required_argument, NULL, OPT_FAST },
  { "block-size", required_argument, NULL, OPT_BLOCK },
  { "mode", required_argument, NULL, OPT_MODE },
  { "policy", required_argument, NULL, OPT_POLICY },
  { "max-ranges", required_argument, NULL, OPT_RANGES },
  { "force", no_argument, NULL, OPT_FORCE },
  { "discard-dirty", no_argument, NULL, OPT_DISCARD_DIRTY },
  { "checksums", no_argument, NULL, OPT_CHECKSUMS },
  { "repair", no_argument, NULL, OPT_REPAIR },
  { "hint", required_argument, NULL, OPT_HINT },
  { "out", required_argument, NULL, OPT_OUT },
  { "in", required_argument, NULL, OPT_IN },
  { "pattern", required_argument, NULL, OPT_PATTERN },
  { "fua", no_argument, NULL, OPT_FUA },
  { "socket", required_argument, NULL, OPT_SOCKET },
  { "format", required_argument, NULL, OPT_FORMAT },
  { NULL, 0, NULL, 0 },
};

/* Everything the volume commands can be given. */
struct args {
  struct common c;
  const char *fast;
  uint64_t block_size, max_ranges;
  const char *mode, *policy, *hint, *out, *in, *pattern;
  const char *socket; /* stats and clean only */
  bool force, discard_dirty, fua, checksums, repair;
  bool prometheus;    /* stats --format prometheus */
};

/* Parses options; returns -1 to go on, or an exit status. */
static int
parse (const char *cmd, const char *usage, int argc, char **argv, struct args *a)
{
  int ch;

  memset (a, 0, sizeof *a);
  optind = 1;
  while ((ch = getopt_long (argc, argv, "hj", vol_opts, NULL)) != -1) {
    switch (ch) {
    case 'h': cli_help (stdout, usage); return 0;
    case 'j': a->c.json = true; break;
    case OPT_SLOW: a->c.slow = optarg; break;
    case OPT_FAST: a->fast = optarg; break;
    case OPT_BLOCK:
      if (hc_parse_size (optarg, &a->block_size, NULL) < 0)
        return cli_usage (cmd, "--block-size: '%s' is not a size", optarg);
      break;
    case OPT_RANGES:
      if (hc_parse_size (optarg, &a->max_ranges, NULL) < 0 || a->max_ranges > UINT32_MAX)
        return cli_usage (cmd, "--max-ranges: '%s' is not a count", optarg);
      break;
    case OPT_MODE: a->mode = optarg; break;
    case OPT_POLICY: a->policy = optarg; break;
    case OPT_FORCE: a->force = true; break;
    case OPT_DISCARD_DIRTY: a->discard_dirty = true; break;
    case OPT_CHECKSUMS: a->checksums = true; break;
    case OPT_REPAIR:
      if (strcmp (cmd, "check") != 0)
        return cli_usage (cmd, "--repair is for check only");
      a->repair = true;
      break;
    case OPT_HINT: a->hint = optarg; break;
    case OPT_OUT: a->out = optarg; break;
    case OPT_IN: a->in = optarg; break;
    case OPT_PATTERN: a->pattern = optarg; break;
    case OPT_FUA: a->fua = true; break;
    case OPT_SOCKET:
      if (strcmp (cmd, "stats") != 0 && strcmp (cmd, "clean") != 0)
        return cli_usage (cmd, "--socket is for stats and clean only");
      a->socket = optarg;
      break;
    case OPT_FORMAT:
      if (strcmp (cmd, "stats") != 0)
        return cli_usage (cmd, "--format is for stats only");
      if (strcmp (optarg, "json") == 0)
        a->c.json = true;
      else if (strcmp (optarg, "prometheus") == 0)
        a->prometheus = true;
      else if (strcmp (optarg, "text") != 0)
        return cli_usage (cmd, "--format: '%s' is not one of text, json, prometheus", optarg);
      break;
    default: return cli_usage (cmd, "bad option; see 'hintcache %s --help'", cmd);
    }
  }
  return -1;
}

/* ---------------------------------------------------------------------------
 * format
 */
static const char format_usage[] =
  "Usage: hintcache format --fast FILE --slow FILE [--block-size N] [--mode M]\n"
  "                        [--policy P] [--max-ranges N] [--checksums]\n"
  "                        [--force [--discard-dirty]]\n"
  "\n"
  "Makes FILE (fast) a cache for FILE (slow): writes a superblock and empty metadata on\n"
  "the fast tier.  Nothing is written on the slow tier: the volume is all of it, with\n"
  "whatever it holds (a disk with a filesystem or partition table keeps them).  The\n"
  "superblock records the slow tier's size, device name (/dev/disk/by-id) and a hash of\n"
  "16 of its sectors, to refuse another slow tier at open.\n"
  "  --block-size N   cache block size, 4k to 64k, a power of two (default 4k)\n"
  "  --mode M         @MODES:marked@\n"
  "  --policy P       @POLICIES:marked@\n"
  "  --max-ranges N   range hints kept (default 65536)\n"
  "  --checksums      checksum every cached block's data, verified on each read: a\n"
  "                   corrupt clean copy is read from the slow tier instead and\n"
  "                   dropped, a corrupt dirty one returns an I/O error (counted in\n"
  "                   stats); never rewritten in place (costs: see the README)\n"
  "  --force          format over an existing volume that has no dirty data (refused\n"
  "                   while any block is not yet written back: see hintcache clean)\n"
  "  --discard-dirty  with --force: format over whatever the fast tier holds, even a\n"
  "                   damaged volume or dirty data (which is lost)\n"
  "Without --force, a fast tier that holds or may hold a volume (one damaged superblock,\n"
  "an unreadable one, another format version) is never formatted.\n";

int
cmd_format (int argc, char **argv)
{
  const char *cmd = "format";
  struct args a;
  struct hc_format_opts fo = { 0 };
  hc_tier *fast = NULL, *slow = NULL;
  char why[256], real[4096];
  int rc;

  if ((rc = parse (cmd, format_usage, argc, argv, &a)) >= 0)
    return rc;
  if (!a.fast || !a.c.slow || optind != argc)
    return cli_usage (cmd, "expected --fast FILE --slow FILE (see --help)");
  char names[256];
  if (a.mode && hc_mode_parse (a.mode, &fo.mode) < 0)
    return cli_usage (cmd, "--mode: '%s' is not one of %s", a.mode,
                      hc_names (hc_mode_name, names, sizeof names));
  if (a.policy) {
    bool ok = false;
    for (unsigned i = 0; hc_policy_name (i); i++)
      ok |= strcmp (a.policy, hc_policy_name (i)) == 0;
    if (!ok)
      return cli_usage (cmd, "--policy: '%s' is not one of %s", a.policy,
                        hc_names (hc_policy_name, names, sizeof names));
  }
  fo.block_size = (uint32_t) a.block_size;
  fo.policy = a.policy;
  fo.max_ranges = (uint32_t) a.max_ranges;
  fo.checksums = a.checksums;
  fo.slow_path = realpath (a.c.slow, real) ? real : a.c.slow;
  if (a.discard_dirty && !a.force)
    return cli_usage (cmd, "--discard-dirty goes with --force");
  fo.over = a.discard_dirty ? HC_FORMAT_DISCARD : a.force ? HC_FORMAT_REPLACE : HC_FORMAT_NEW;
  if ((rc = hc_tier_open (a.fast, HC_TIER_CLAIM, &fast, why, sizeof why)) < 0)
    return cli_fail (cmd, "%s", why);
  if ((rc = hc_tier_open (a.c.slow, HC_TIER_CLAIM, &slow, why, sizeof why)) < 0) {
    hc_tier_close (fast);
    return cli_fail (cmd, "%s", why);
  }
  rc = hc_volume_format (fast, slow, &fo, why, sizeof why);
  if (rc == 0) {
    struct hc_open_opts oo = { .read_only = true };
    hc_volume *v;
    if (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0) {
      struct hc_volume_info in;
      char u[37];
      hc_volume_get_info (v, &in);
      uuid_text (in.cache_uuid, u);
      printf ("formatted %s: %u cache blocks of %u bytes (%.1f MiB) for %.1f MiB of %s, %s, %s\n"
              "cache uuid %s\n", a.fast, in.nblocks, in.block_size,
              in.nblocks * (double) in.block_size / 1048576, in.volume_size / 1048576.0, a.c.slow,
              hc_mode_name (in.mode), in.policy, u);
      hc_volume_close (v);
    }
  }
  hc_tier_close (fast);
  hc_tier_close (slow);
  if (rc == -EEXIST || rc == -EBUSY)
    return cli_fail (cmd, "%s: %s%s", a.fast, why,
                     a.force ? "; --discard-dirty formats anyway, losing it"
                             : "; --force replaces a volume with no dirty data");
  if (rc < 0)
    return rc == -EINVAL ? cli_usage (cmd, "%s", why) : cli_fail (cmd, "%s", why);
  return 0;
}

/* ---------------------------------------------------------------------------
 * info and stats
 */
static const char info_usage[] =
  "Usage: hintcache info FAST [--slow FILE] [--json]\n"
  "\n"
  "Shows a volume's geometry, mode and policy, and its cached and dirty blocks by class.\n"
  "Opens the volume read-only (the journal is replayed in memory only).\n";

static const char stats_usage[] =
  "Usage: hintcache stats FAST [--slow FILE] [--json | --format FORMAT]\n"
  "       hintcache stats --socket SOCKET [--json | --format FORMAT]\n"
  "\n"
  "Shows a volume's lifetime statistics by class, as of its last checkpoint: hits, misses,\n"
  "admissions and bypasses (with their reasons) for reads and writes, evictions,\n"
  "write-backs, hint hits, client bytes and flash bytes written.\n"
  "With --socket, asks a running volume through its control socket: live figures.\n"
  "  --format F   text (default), json (as --json) or prometheus: the Prometheus text\n"
  "               exposition format, every metric labelled volume=\"FAST or SOCKET\", for\n"
  "               node_exporter's textfile collector (write to a temporary file, then\n"
  "               rename it into the collector's directory)\n";

static void
json_class_stats (struct json *j, const struct hc_class_stats *c)
{
  static const char *const op[2] = { "read", "write" };
  json_object_begin (j);
  for (unsigned o = 0; o < 2; o++) {
    json_key (j, op[o]);
    json_object_begin (j);
    json_kv_uint (j, "hits", c->hits[o]);
    json_kv_uint (j, "misses", c->misses[o]);
    json_kv_uint (j, "admissions", c->admissions[o]);
    json_kv_uint (j, "bytes", c->bytes[o]);
    json_key (j, "bypass");
    json_object_begin (j);
    for (unsigned r = 0; r < HC_BYPASS_COUNT; r++)
      json_kv_uint (j, hc_bypass_name (r), c->bypass[o][r]);
    json_object_end (j);
    json_object_end (j);
  }
  json_kv_uint (j, "evictions", c->evictions);
  json_kv_uint (j, "writebacks", c->writebacks);
  json_kv_uint (j, "hint_hits", c->hint_hits);
  json_kv_uint (j, "flash_bytes_written", c->flash_bytes_written);
  json_kv_uint (j, "blocks", c->blocks);
  json_kv_uint (j, "dirty", c->dirty);
  json_object_end (j);
}

/* Writes the members info and stats share after the volume's description:
 * occupancy, the volume-wide counters (stats only) and the classes. */
static void
json_stats_members (struct json *j, const struct hc_stats *st, bool stats)
{
  uint64_t used = 0, dirty = 0;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    used += st->cls[c].blocks;
    dirty += st->cls[c].dirty;
  }
  json_kv_uint (j, "used_blocks", used);
  json_kv_uint (j, "dirty_blocks", dirty);
  if (stats) {
    json_kv_uint (j, "commits", st->commits);
    json_kv_uint (j, "flushes", st->flushes);
    json_kv_uint (j, "prefetched", st->prefetched);
    json_kv_uint (j, "fast_errors", st->errors_fast);
    json_kv_uint (j, "checksum_errors", st->errors_checksum);
    json_kv_bits (j, "hint_effects", st->hint_effects, hc_effect_name);
    json_kv_uint (j, "effect_changes", st->effect_changes);
    json_kv_bits (j, "trial_ways", st->ways, hc_way_name);
    json_kv_uint (j, "meta_flash_bytes", st->meta_flash_bytes);
  }
  json_key (j, "classes");
  json_object_begin (j);
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    json_key (j, hc_class_name (c));
    if (stats)
      json_class_stats (j, &st->cls[c]);
    else {
      json_object_begin (j);
      json_kv_uint (j, "blocks", st->cls[c].blocks);
      json_kv_uint (j, "dirty", st->cls[c].dirty);
      json_object_end (j);
    }
  }
  json_object_end (j);
}

/* Prints " NAME, NAME" for the bits set in `bits`, " none" for none. */
static void
print_bit_names (uint64_t bits, const char *(*name) (unsigned))
{
  const char *sep = " ";
  for (unsigned i = 0; name (i); i++)
    if (bits >> i & 1) {
      printf ("%s%s", sep, name (i));
      sep = ", ";
    }
  if (*sep == ' ')
    printf (" none");
}

/* The table `stats` prints, for a volume file or a live volume alike. */
static void
print_stats_text (const struct hc_stats *st)
{
  uint64_t hits = 0, hint_hits = 0;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    hits += st->cls[c].hits[0] + st->cls[c].hits[1];
    hint_hits += st->cls[c].hint_hits;
  }
  printf ("%-13s %10s %10s %10s %10s %10s %10s %10s %12s\n", "class", "rd hits", "rd miss",
          "wr hits", "wr miss", "admitted", "bypassed", "evicted", "flash MiB");
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    const struct hc_class_stats *k = &st->cls[c];
    uint64_t by = 0;
    for (unsigned o = 0; o < 2; o++)
      for (unsigned r = 0; r < HC_BYPASS_COUNT; r++)
        by += k->bypass[o][r];
    printf ("%-13s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64
            " %10" PRIu64 " %10" PRIu64 " %12.1f\n", hc_class_name (c), k->hits[0], k->misses[0],
            k->hits[1], k->misses[1], k->admissions[0] + k->admissions[1], by, k->evictions,
            k->flash_bytes_written / 1048576.0);
  }
  printf ("hint efficacy: %" PRIu64 " of %" PRIu64 " hits on blocks a hint admitted or "
          "protected (%.1f%%)\n", hint_hits, hits, hits ? 100.0 * hint_hits / hits : 0.0);
  printf ("commits %" PRIu64 ", flushes %" PRIu64 ", prefetched %" PRIu64 ", fast-tier errors %"
          PRIu64 ", checksum errors %" PRIu64 "\n", st->commits, st->flushes, st->prefetched,
          st->errors_fast, st->errors_checksum);
  printf ("metadata's flash: %.2f MiB (journal, checkpoints, superblocks, in whole 4 KiB "
          "pages)\n", st->meta_flash_bytes / 1048576.0);
  printf ("hint effects in force:");
  print_bit_names (st->hint_effects, hc_effect_name);
  printf (" (changed %" PRIu64 " times by the cache's evidence since open)\n", st->effect_changes);
  printf ("work on helper threads, as the trials chose:");
  print_bit_names (st->ways, hc_way_name);
  printf ("\n");
}

/* Writes a label value with the exposition format's escapes. */
static void
prom_label_value (const char *s)
{
  for (; *s; s++)
    if (*s == '\\' || *s == '"')
      printf ("\\%c", *s);
    else if (*s == '\n')
      fputs ("\\n", stdout);
    else
      putchar (*s);
}

/* One metric family's header. */
static void
prom_family (const char *name, const char *type, const char *help)
{
  printf ("# HELP hintcache_%s %s\n# TYPE hintcache_%s %s\n", name, help, name, type);
}

/* One sample: hintcache_NAME{volume="…"[,class="…"][,op="…"][,reason="…"]} V. */
static void
prom_sample (const char *name, const char *volume, int cls, int op, int reason, uint64_t v)
{
  static const char *const ops[2] = { "read", "write" };
  printf ("hintcache_%s{volume=\"", name);
  prom_label_value (volume);
  putchar ('"');
  if (cls >= 0)
    printf (",class=\"%s\"", hc_class_name ((unsigned) cls));
  if (op >= 0)
    printf (",op=\"%s\"", ops[op]);
  if (reason >= 0)
    printf (",reason=\"%s\"", hc_bypass_name ((unsigned) reason));
  printf ("} %" PRIu64 "\n", v);
}

/* `stats --format prometheus`: every counter of the volume, per class and
 * operation, in the Prometheus text exposition format (counters end in
 * _total; gauges are what is cached now). */
static void
print_stats_prometheus (const struct hc_stats *st, const char *volume)
{
  /* Per class and operation. */
  static const struct {
    const char *name, *help;
    size_t off; /* of the uint64_t[2] in struct hc_class_stats */
  } per_op[] = {
    { "hits_total", "Cache hits, in blocks.", offsetof (struct hc_class_stats, hits) },
    { "misses_total", "Cache misses, in blocks.", offsetof (struct hc_class_stats, misses) },
    { "admissions_total", "Missed blocks admitted to the fast tier.",
      offsetof (struct hc_class_stats, admissions) },
    { "client_bytes_total", "Bytes clients read or wrote.", offsetof (struct hc_class_stats, bytes) },
  };
  /* Per class. */
  static const struct {
    const char *name, *type, *help;
    size_t off;
  } per_class[] = {
    { "evictions_total", "counter", "Blocks evicted to make room.",
      offsetof (struct hc_class_stats, evictions) },
    { "writebacks_total", "counter", "Dirty blocks written back to the slow tier (the cleaner's work).",
      offsetof (struct hc_class_stats, writebacks) },
    { "hint_hits_total", "counter", "Hits on blocks a hint admitted or protected.",
      offsetof (struct hc_class_stats, hint_hits) },
    { "flash_written_bytes_total", "counter", "Bytes written to the fast tier (fills and write hits).",
      offsetof (struct hc_class_stats, flash_bytes_written) },
    { "cached_blocks", "gauge", "Blocks cached now.", offsetof (struct hc_class_stats, blocks) },
    { "dirty_blocks", "gauge", "Dirty blocks now (not yet on the slow tier).",
      offsetof (struct hc_class_stats, dirty) },
  };
  /* The volume's. */
  const struct {
    const char *name, *type, *help;
    uint64_t v;
  } whole[] = {
    { "capacity_blocks", "gauge", "Cache blocks of the fast tier.", st->cache_blocks },
    { "free_blocks", "gauge", "Cache blocks free now (and reusable after the next commit).",
      st->free_blocks + st->pending_blocks },
    { "commits_total", "counter", "Metadata commits.", st->commits },
    { "flushes_total", "counter", "Client flushes.", st->flushes },
    { "prefetched_blocks_total", "counter", "Blocks brought in by willneed advice.", st->prefetched },
    { "fast_errors_total", "counter", "Fast-tier errors survived (by bypassing it).", st->errors_fast },
    { "checksum_errors_total", "counter", "Cached blocks whose data failed its checksum.",
      st->errors_checksum },
    { "hint_effect_changes_total", "counter",
      "Times the cache's evidence changed the hint effects in force (since open).",
      st->effect_changes },
    { "meta_flash_bytes_total", "counter",
      "Flash worn by metadata (journal, checkpoints, superblocks), in whole 4 KiB pages.",
      st->meta_flash_bytes },
  };

  for (size_t m = 0; m < sizeof per_op / sizeof per_op[0]; m++) {
    prom_family (per_op[m].name, "counter", per_op[m].help);
    for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
      for (int o = 0; o < 2; o++)
        prom_sample (per_op[m].name, volume, (int) c, o, -1,
                     ((const uint64_t *) ((const char *) &st->cls[c] + per_op[m].off))[o]);
  }
  prom_family ("bypasses_total", "counter", "Missed blocks not admitted, by reason.");
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    for (int o = 0; o < 2; o++)
      for (int r = 0; r < HC_BYPASS_COUNT; r++)
        prom_sample ("bypasses_total", volume, (int) c, o, r, st->cls[c].bypass[o][r]);
  for (size_t m = 0; m < sizeof per_class / sizeof per_class[0]; m++) {
    prom_family (per_class[m].name, per_class[m].type, per_class[m].help);
    for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
      prom_sample (per_class[m].name, volume, (int) c, -1, -1,
                   *(const uint64_t *) ((const char *) &st->cls[c] + per_class[m].off));
  }
  for (size_t m = 0; m < sizeof whole / sizeof whole[0]; m++) {
    prom_family (whole[m].name, whole[m].type, whole[m].help);
    prom_sample (whole[m].name, volume, -1, -1, -1, whole[m].v);
  }
}

/* Asks a live volume for its statistics.  Returns 0 or an exit status
 * after printing why. */
static int
socket_stats (const char *cmd, hc_control_client *c, struct hc_stats *st)
{
  char *reply = malloc (HC_CONTROL_LINE);
  int rc;

  if (!reply)
    return cli_fail (cmd, "out of memory");
  if ((rc = control_ask (cmd, c, "stats", reply, HC_CONTROL_LINE)) == 0
      && hc_stats_parse (reply, st) < 0)
    rc = cli_fail (cmd, "the server's statistics are malformed: '%.80s'", reply);
  free (reply);
  return rc;
}

/* `stats --socket S`: the live volume's info and statistics. */
static int
stats_socket (const char *cmd, const char *socket, bool json, bool prometheus)
{
  hc_control_client *c;
  struct hc_stats st;
  char info[HC_CONTROL_LINE];
  int rc;

  if ((rc = control_open (cmd, socket, &c)) != 0)
    return rc;
  if ((rc = control_ask (cmd, c, "info", info, sizeof info)) != 0
      || (rc = socket_stats (cmd, c, &st)) != 0) {
    hc_control_close (c);
    return rc;
  }
  hc_control_close (c);
  if (prometheus) {
    print_stats_prometheus (&st, socket);
    return 0;
  }
  if (!json) {
    print_stats_text (&st);
    return 0;
  }
  /* The info payload: KEY=VALUE words; numbers stay numbers. */
  struct json j;
  json_init (&j, stdout);
  json_object_begin (&j);
  json_kv_string (&j, "socket", socket);
  for (char *save = NULL, *w = strtok_r (info, " ", &save); w; w = strtok_r (NULL, " ", &save)) {
    char *eq = strchr (w, '=');
    uint64_t v;
    if (!eq)
      continue;
    *eq = '\0';
    const char *key = strcmp (w, "size") == 0 ? "volume_bytes" : w;
    if (hc_parse_size (eq + 1, &v, NULL) == 0 && strcmp (w, "mode") != 0 && strcmp (w, "policy") != 0)
      json_kv_uint (&j, key, v);
    else
      json_kv_string (&j, key, eq + 1);
  }
  json_stats_members (&j, &st, true);
  json_object_end (&j);
  return 0;
}

static int
show (const char *cmd, const char *usage, int argc, char **argv, bool stats)
{
  struct args a;
  struct vol x;
  int rc;

  if ((rc = parse (cmd, usage, argc, argv, &a)) >= 0)
    return rc;
  if (a.socket) {
    if (argc != optind || a.c.slow)
      return cli_usage (cmd, "--socket takes no volume path and no --slow (see --help)");
    return stats_socket (cmd, a.socket, a.c.json, a.prometheus);
  }
  if (argc - optind != 1)
    return cli_usage (cmd, "expected the fast tier's path (see --help)");
  if ((rc = vol_open (cmd, argv[optind], a.c.slow, true, &x)) != 0)
    return rc;
  struct hc_volume_info in;
  struct hc_stats st;
  char cu[37];
  hc_volume_get_info (x.v, &in);
  hc_volume_stats (x.v, &st);
  uuid_text (in.cache_uuid, cu);
  uint64_t used = 0, dirty = 0;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    used += st.cls[c].blocks;
    dirty += st.cls[c].dirty;
  }
  if (a.prometheus) {
    print_stats_prometheus (&st, argv[optind]);
  } else if (a.c.json) {
    struct json j;
    json_init (&j, stdout);
    json_object_begin (&j);
    json_kv_string (&j, "cache_uuid", cu);
    json_kv_string (&j, "slow_path", in.slow_path);
    json_kv_string (&j, "slow_identity", in.slow_identity);
    json_kv_bool (&j, "slow_fingerprint_checked", in.slow_fingerprint);
    json_kv_uint (&j, "format_version", in.format_version);
    json_kv_uint (&j, "block_size", in.block_size);
    json_kv_bool (&j, "checksums", in.checksums);
    json_kv_uint (&j, "cache_blocks", in.nblocks);
    json_kv_uint (&j, "volume_bytes", in.volume_size);
    json_kv_string (&j, "mode", hc_mode_name (in.mode));
    json_kv_string (&j, "policy", in.policy);
    json_kv_bool (&j, "clean_shutdown", in.was_clean);
    json_kv_uint (&j, "journal_sectors_replayed", in.replayed);
    json_kv_uint (&j, "range_hints", in.range_hints);
    json_kv_uint (&j, "superblocks_damaged", (unsigned) __builtin_popcount (in.sb_damaged));
    json_kv_bool (&j, "journal_tail_damaged", in.tail_damaged);
    json_kv_string (&j, "fast_tier", in.degraded ? strerror (in.degraded) : "ok");
    json_kv_uint (&j, "ram_bytes", in.ram_bytes);
    json_stats_members (&j, &st, stats);
    json_object_end (&j);
  } else if (!stats) {
    printf ("volume      %s (cache uuid %s)\n", argv[optind], cu);
    printf ("slow tier   %s%s%s%s; recognised by size%s%s\n",
            in.slow_path[0] ? in.slow_path : "?", in.slow_identity[0] ? " (device " : "",
            in.slow_identity, in.slow_identity[0] ? ")" : "",
            in.slow_identity[0] ? ", device name" : "",
            in.slow_fingerprint ? " and sampled sectors" : " (sectors not compared: "
                                                              "not closed cleanly)");
    printf ("geometry    %u cache blocks of %u bytes (%.1f MiB) for %.1f MiB; format v%u\n",
            in.nblocks, in.block_size, in.nblocks * (double) in.block_size / 1048576,
            in.volume_size / 1048576.0, in.format_version);
    printf ("mode        %s, policy %s%s\n", hc_mode_name (in.mode), in.policy,
            in.checksums ? ", data checksums" : "");
    printf ("state       %s; %" PRIu64 " journal sectors to replay; %u range hints\n",
            in.was_clean ? "closed cleanly" : "not closed cleanly", in.replayed, in.range_hints);
    if (in.sb_damaged)
      printf ("damaged     superblock %s (the other copy was used; opening read-write rewrites "
              "both)\n", in.sb_damaged == 1 ? "A" : "B");
    if (in.degraded)
      printf ("degraded    the fast tier fails writes (%s): writes go to the slow tier\n",
              strerror (in.degraded));
    if (in.tail_damaged)
      printf ("recovered   the journal ended at a damaged sector: the commit being written when "
              "the power failed was dropped\n");
    printf ("occupancy   %" PRIu64 " of %u blocks used (%.1f%%), %" PRIu64 " dirty\n", used,
            in.nblocks, 100.0 * used / in.nblocks, dirty);
    printf ("%-13s %10s %10s\n", "class", "blocks", "dirty");
    for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
      printf ("%-13s %10" PRIu64 " %10" PRIu64 "\n", hc_class_name (c), st.cls[c].blocks,
              st.cls[c].dirty);
  } else {
    print_stats_text (&st);
  }
  vol_close (&x);
  return 0;
}

int
cmd_info (int argc, char **argv)
{
  return show ("info", info_usage, argc, argv, false);
}

int
cmd_stats (int argc, char **argv)
{
  return show ("stats", stats_usage, argc, argv, true);
}

/* ---------------------------------------------------------------------------
 * check and clean
 */
static const char check_usage[] =
  "Usage: hintcache check FAST [--slow FILE] [--repair]\n"
  "\n"
  "Verifies both superblocks, the slow tier's identity, every table, range-hint, statistics\n"
  "and journal sector checksum, and the mapping invariants.  Exit 0 if clean, 1 with the\n"
  "first problem otherwise.  Writes nothing.\n"
  "\n"
  "With --repair, a volume that does not open is salvaged: its metadata is read\n"
  "leniently (damaged table sectors leave their blocks unmapped, the journal is replayed\n"
  "up to its first damage), every dirty block that remains and can be read (and, with\n"
  "data checksums, verified) is written back to the slow tier, which is flushed, and the\n"
  "fast tier is formatted anew with the same options and range hints.  Nothing but dirty\n"
  "data is written to the slow tier; a volume of another slow tier is refused.  Prints\n"
  "what was lost.  Exit 0: nothing to repair, or repaired with nothing lost; 3: repaired,\n"
  "but the blocks listed may have lost their latest writes; 1: not repaired.\n";

static int
cmp_u64 (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

/* Prints a repair's report; returns the exit status. */
static int
print_repair (const char *fast, const struct hc_repair_report *r, uint32_t block_size)
{
  if (!r->repaired) {
    printf ("%s: ok, nothing to repair\n", fast);
    return 0;
  }
  printf ("%s: repaired%s\n", fast, r->rebuilt ? " (salvaged, then formatted anew)" : "");
  if (!r->rebuilt)
    return 0;
  printf ("  damaged: %" PRIu64 " table sectors, %" PRIu64 " range-hint sectors%s%s\n",
          r->table_sectors_damaged, r->range_sectors_damaged,
          r->journal_cut ? ", the journal (the commits after the damage are gone)" : "",
          r->stats_reset ? "; statistics reset" : "");
  printf ("  dropped: %" PRIu64 " inconsistent mappings, %" PRIu64 " journal records, %" PRIu64
          " range hints\n", r->entries_dropped, r->records_dropped, r->range_hints_dropped);
  printf ("  salvaged: %" PRIu64 " dirty blocks written back; %" PRIu64 " range hints kept\n",
          r->written_back, r->range_hints_kept);
  if (r->unreadable)
    printf ("  unreadable or failing their checksums: %" PRIu64 " dirty blocks\n", r->unreadable);
  if (r->unknown_blocks)
    printf ("  unknown: %" PRIu64 " cache blocks whose mappings are lost in both checkpoint "
            "copies (any dirty data there is lost, at volume blocks that cannot be named)\n",
            r->unknown_blocks);
  if (r->nlost) {
    printf ("  possibly lost: the latest writes of %" PRIu64 " volume blocks of %u bytes:",
            r->nlost, block_size);
    uint64_t n = r->nlost < HC_REPAIR_LOST_MAX ? r->nlost : HC_REPAIR_LOST_MAX, i = 0;
    uint64_t *l = malloc (n * sizeof *l);
    if (l) {
      memcpy (l, r->lost, n * sizeof *l);
      qsort (l, n, sizeof *l, cmp_u64);
      while (i < n) { /* runs as FIRST-LAST */
        uint64_t j = i;
        while (j + 1 < n && l[j + 1] <= l[j] + 1)
          j++;
        printf (l[j] > l[i] ? " %" PRIu64 "-%" PRIu64 : " %" PRIu64, l[i], l[j]);
        i = j + 1;
      }
      free (l);
    }
    printf ("%s\n", r->nlost > HC_REPAIR_LOST_MAX ? " ..." : "");
  }
  return r->nlost || r->unknown_blocks || r->journal_cut ? 3 : 0;
}

int
cmd_check (int argc, char **argv)
{
  const char *cmd = "check";
  struct args a;
  hc_tier *fast, *slow;
  char recorded[256], why[256];
  const char *slow_path;
  int rc;

  if ((rc = parse (cmd, check_usage, argc, argv, &a)) >= 0)
    return rc;
  if (argc - optind != 1)
    return cli_usage (cmd, "expected the fast tier's path (see --help)");
  unsigned ro = a.repair ? 0 : HC_TIER_READONLY;
  if ((rc = hc_tier_open (argv[optind], ro | HC_TIER_CLAIM, &fast, why, sizeof why)) < 0)
    return cli_fail (cmd, "%s", why);
  slow_path = a.c.slow;
  if (!slow_path && hc_volume_slow_path (fast, recorded, sizeof recorded) == 0 && recorded[0])
    slow_path = recorded;
  if (!slow_path) {
    /* Without the slow tier, still say what is wrong with the fast one. */
    rc = hc_volume_check (fast, fast, why, sizeof why);
    hc_tier_close (fast);
    return cli_fail (cmd, "%s: %s", argv[optind], rc == -ENODEV ? "no slow tier recorded; give --slow" : why);
  }
  if ((rc = hc_tier_open (slow_path, ro | HC_TIER_CLAIM, &slow, why, sizeof why)) < 0) {
    hc_tier_close (fast);
    return cli_fail (cmd, "slow tier: %s", why);
  }
  if (a.repair) {
    struct hc_repair_report rep;
    rc = hc_volume_repair (fast, slow, &rep, why, sizeof why);
    hc_tier_close (fast);
    hc_tier_close (slow);
    if (rc < 0)
      return cli_fail (cmd, "%s: not repaired: %s", argv[optind], why);
    return print_repair (argv[optind], &rep, rep.block_size);
  }
  rc = hc_volume_check (fast, slow, why, sizeof why);
  hc_tier_close (fast);
  hc_tier_close (slow);
  if (rc < 0)
    return cli_fail (cmd, "%s: %s", argv[optind], why);
  printf ("%s: ok%s%s\n", argv[optind], why[0] ? "; " : "", why);
  return 0;
}

static const char clean_usage[] =
  "Usage: hintcache clean FAST [--slow FILE]\n"
  "       hintcache clean --socket SOCKET\n"
  "\n"
  "Writes every dirty block back to the slow tier and commits, so that the fast tier\n"
  "could be detached.  Exit 1 if dirty blocks remain.\n"
  "With --socket, asks a running volume through its control socket; as it may be\n"
  "written meanwhile, blocks dirty again after the write-back do not make it fail.\n";

/* `clean --socket S`: cleans a live volume; reports as for a volume file. */
static int
clean_socket (const char *cmd, const char *socket)
{
  hc_control_client *c;
  struct hc_stats before, after;
  char reply[HC_CONTROL_LINE];
  int rc;

  if ((rc = control_open (cmd, socket, &c)) != 0)
    return rc;
  if ((rc = socket_stats (cmd, c, &before)) != 0 || (rc = control_ask (cmd, c, "clean", reply,
                                                                        sizeof reply)) != 0
      || (rc = socket_stats (cmd, c, &after)) != 0) {
    hc_control_close (c);
    return rc;
  }
  hc_control_close (c);
  uint64_t n = 0, left = 0;
  for (unsigned k = 0; k < HC_CLASS_COUNT; k++) {
    n += after.cls[k].writebacks - before.cls[k].writebacks;
    left += after.cls[k].dirty;
  }
  printf ("%s: wrote back %" PRIu64 " blocks; %" PRIu64 " dirty\n", socket, n, left);
  return 0;
}

int
cmd_clean (int argc, char **argv)
{
  const char *cmd = "clean";
  struct args a;
  struct vol x;
  int rc;

  if ((rc = parse (cmd, clean_usage, argc, argv, &a)) >= 0)
    return rc;
  if (a.socket) {
    if (argc != optind || a.c.slow)
      return cli_usage (cmd, "--socket takes no volume path and no --slow (see --help)");
    return clean_socket (cmd, a.socket);
  }
  if (argc - optind != 1)
    return cli_usage (cmd, "expected the fast tier's path (see --help)");
  if ((rc = vol_open (cmd, argv[optind], a.c.slow, false, &x)) != 0)
    return rc;
  struct hc_stats before, after;
  hc_volume_stats (x.v, &before);
  rc = hc_volume_clean (x.v);
  hc_volume_stats (x.v, &after);
  uint64_t n = 0, left = 0;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    n += after.cls[c].writebacks - before.cls[c].writebacks;
    left += after.cls[c].dirty;
  }
  int crc = hc_volume_close (x.v);
  x.v = NULL;
  vol_close (&x);
  if (rc < 0 || crc < 0)
    return cli_fail (cmd, "%s: %s", argv[optind], strerror (-(rc < 0 ? rc : crc)));
  printf ("%s: wrote back %" PRIu64 " blocks; %" PRIu64 " dirty\n", argv[optind], n, left);
  return left ? 1 : 0;
}

/* ---------------------------------------------------------------------------
 * io
 */
static const char io_usage[] =
  "Usage: hintcache io FAST [--slow FILE] OP ARGS [--hint H]\n"
  "\n"
  "One operation on a volume, for scripts and tests:\n"
  "  read OFF LEN [--out FILE]      read; prints the bytes' xxh64, writes them to FILE\n"
  "  write OFF LEN [--pattern BYTE | --in FILE] [--fua]\n"
  "  flush\n"
  "  discard OFF LEN\n"
  "  zero OFF LEN [--fua]\n"
  "  advise OFF LEN HINT            HINT: a class and/or advice (metadata, willneed,\n"
  "                                 background+dontneed, evict, normal …)\n"
  "  mode MODE                      @MODES@\n"
  "OFF and LEN take k, M, G suffixes.  --hint gives the I/O's own hint.\n";

/* The operations, by index (k below), and their operands. */
static const struct { const char *name; int operands; } io_ops[] = {
  { "read", 2 }, { "write", 2 }, { "flush", 0 }, { "discard", 2 }, { "zero", 2 },
  { "advise", 3 }, { "mode", 1 },
};

static const char *
io_op_name (unsigned i)
{
  return i < sizeof io_ops / sizeof io_ops[0] ? io_ops[i].name : NULL;
}

static int
io_read_file (const char *path, uint8_t *buf, uint64_t len)
{
  int fd = strcmp (path, "-") == 0 ? 0 : open (path, O_RDONLY | O_CLOEXEC);
  uint64_t got = 0;
  if (fd < 0)
    return -errno;
  while (got < len) {
    ssize_t r = read (fd, buf + got, len - got);
    if (r <= 0) {
      int e = r < 0 ? -errno : -EIO;
      if (fd)
        close (fd);
      return e == -EIO ? -ENODATA : e;
    }
    got += (uint64_t) r;
  }
  if (fd)
    close (fd);
  return 0;
}

int
cmd_io (int argc, char **argv)
{
  const char *cmd = "io";
  struct args a;
  struct vol x;
  struct hc_ioctx ctx;
  uint64_t off = 0, len = 0;
  uint8_t *buf = NULL;
  int rc;

  memset (&ctx, 0, sizeof ctx);
  if ((rc = parse (cmd, io_usage, argc, argv, &a)) >= 0)
    return rc;
  if (argc - optind < 2)
    return cli_usage (cmd, "expected FAST OP … (see --help)");
  const char *fast = argv[optind], *op = argv[optind + 1];
  char **rest = argv + optind + 2;
  int nrest = argc - optind - 2;
  char names[256];
  int k = -1;
  for (unsigned i = 0; i < sizeof io_ops / sizeof io_ops[0]; i++)
    if (strcmp (op, io_ops[i].name) == 0)
      k = (int) i;
  if (k < 0)
    return cli_usage (cmd, "unknown operation '%s' (%s)", op,
                      hc_names (io_op_name, names, sizeof names));
  if (nrest != io_ops[k].operands)
    return cli_usage (cmd, "%s takes %d operand%s (see --help)", op, io_ops[k].operands,
                      io_ops[k].operands == 1 ? "" : "s");
  if (io_ops[k].operands >= 2
      && (hc_parse_size (rest[0], &off, NULL) < 0 || hc_parse_size (rest[1], &len, NULL) < 0))
    return cli_usage (cmd, "'%s %s' is not OFF LEN", rest[0], rest[1]);
  if (a.hint && hc_hint_parse (a.hint, &ctx.hint) < 0)
    return cli_usage (cmd, "--hint: '%s' is not a hint", a.hint);
  struct hc_hint advice = { 0 };
  enum hc_mode mode = 0;
  if (k == 5 && hc_hint_parse (rest[2], &advice) < 0)
    return cli_usage (cmd, "'%s' is not a hint (classes and advice, e.g. metadata, willneed, "
                      "background+dontneed)", rest[2]);
  if (k == 6 && hc_mode_parse (rest[0], &mode) < 0)
    return cli_usage (cmd, "'%s' is not a mode (%s)", rest[0],
                      hc_names (hc_mode_name, names, sizeof names));
  if ((k == 0 || k == 1) && len > (1u << 30))
    return cli_usage (cmd, "at most 1 GiB per read or write");
  if ((k == 0 || k == 1) && !(buf = malloc (len ? len : 1)))
    return cli_fail (cmd, "out of memory");
  if (k == 1) {
    unsigned long long pat = 0;
    if (a.in) {
      if ((rc = io_read_file (a.in, buf, len)) < 0) {
        free (buf);
        return cli_fail (cmd, "%s: %s", a.in, rc == -ENODATA ? "shorter than LEN" : strerror (-rc));
      }
    } else {
      if (a.pattern && (sscanf (a.pattern, "%lli", &pat) != 1 || pat > 255)) {
        free (buf);
        return cli_usage (cmd, "--pattern: '%s' is not a byte", a.pattern);
      }
      memset (buf, (int) pat, len);
    }
  }
  if ((rc = vol_open (cmd, fast, a.c.slow, false, &x)) != 0) {
    free (buf);
    return rc;
  }
  if (off > hc_volume_size (x.v) || len > hc_volume_size (x.v) - off) {
    rc = -ERANGE;
  } else {
    switch (k) {
    case 0: rc = hc_volume_read (x.v, buf, len, off, &ctx); break;
    case 1: rc = hc_volume_write (x.v, buf, len, off, a.fua ? HC_VOL_FUA : 0, &ctx); break;
    case 2: rc = hc_volume_flush (x.v); break;
    case 3: rc = hc_volume_discard (x.v, off, len, &ctx); break;
    case 4: rc = hc_volume_zero (x.v, off, len, a.fua ? HC_VOL_FUA : 0, &ctx); break;
    case 5: rc = hc_volume_advise (x.v, off, len, advice); break;
    case 6: rc = hc_volume_set_mode (x.v, mode); break;
    }
  }
  uint64_t size = hc_volume_size (x.v);
  int crc = hc_volume_close (x.v);
  x.v = NULL;
  vol_close (&x);
  if (rc == -ERANGE) {
    free (buf);
    return cli_usage (cmd, "%" PRIu64 "+%" PRIu64 " is outside the volume (%" PRIu64 " bytes)",
                      off, len, size);
  }
  if (rc < 0 || crc < 0) {
    free (buf);
    return cli_fail (cmd, "%s %s: %s", fast, op, strerror (-(rc < 0 ? rc : crc)));
  }
  if (k == 0) {
    if (a.out) {
      FILE *f = strcmp (a.out, "-") == 0 ? stdout : fopen (a.out, "wb");
      if (!f || fwrite (buf, 1, len, f) != len || (f != stdout && fclose (f) != 0)) {
        free (buf);
        return cli_fail (cmd, "%s: %s", a.out, strerror (errno));
      }
    }
    if (!a.out || strcmp (a.out, "-") != 0)
      printf ("read %" PRIu64 " bytes at %" PRIu64 ": xxh64 %016llx\n", len, off,
              (unsigned long long) XXH64 (buf, len, 0));
  }
  free (buf);
  return 0;
}
