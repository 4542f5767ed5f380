/* `hintcache hint`: the hint model and the transport codecs from the command
 * line.
 *
 *   hint decode CODEC VALUE     what a transport value means
 *   hint encode CODEC HINT      what a transport carries for a hint
 *   hint map HINT               one line per codec: hint-standards §10's row
 *   hint classes                the class table with its attributes
 *
 * Every subcommand takes --json; decode, encode and map take --dir and the
 * device profile options; decode and classes take --config for the class
 * attributes.  A usage error, an unknown name or an invalid wire value exits
 * with status 2 and one line on stderr naming the valid choices.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hintcache/hintcache.h"
#include "cli.h"
#include "commands.h"
#include "json.h"

/* Options shared by the hint subcommands. */
struct hint_opts {
  const char *cmd;         /* "hint decode", … for messages */
  bool json;
  enum hc_dir dir;
  hc_profile *profile;
  hc_classes *classes;
  const char *descriptor;  /* scsi: 32 hex digits */
};

enum { OPT_DIR = 256, OPT_PROFILE, OPT_ATA_LOG, OPT_CONFIG, OPT_DESCRIPTOR };

static const struct option long_opts[] = {
  { "help", no_argument, NULL, 'h' },
  { "json", no_argument, NULL, 'j' },
  { "dir", required_argument, NULL, OPT_DIR },
  { "profile", required_argument, NULL, OPT_PROFILE },
  { "ata-log", required_argument, NULL, OPT_ATA_LOG },
  { "config", required_argument, NULL, OPT_CONFIG },
  { "descriptor", required_argument, NULL, OPT_DESCRIPTOR },
  { NULL, 0, NULL, 0 },
};

static const char profile_help[] =
  "Device profile options (decode, encode, map):\n"
  "  --dir any|read|write     direction of the I/O the hint travels with (default any)\n"
  "  --profile KEY=VALUE      ata.max_priority (3-15, default 15),\n"
  "                           ata.max_priority_behavior (0|1, default 0),\n"
  "                           ata.host_hinted (0|1, default 1), ata.evict (0|1, default 1),\n"
  "                           nvme.placements (0-65535, default 0; 7 or more gives\n"
  "                           each class its own placement)\n"
  "  --ata-log FILE           read the maximum priority level and its behaviour from a\n"
  "                           512-byte dump of the Hybrid Information log (14h)\n";

static const char hint_syntax[] =
  "HINT is a class, an advice, or both joined by '+', e.g. metadata, willneed,\n"
  "background+dontneed.  Classes: @CLASSES@.  Advice: @ADVICE@.\n";

static int
load_ata_log (struct hint_opts *o, const char *path)
{
  uint8_t page[513];
  char why[160];
  FILE *f = fopen (path, "rb");
  size_t n;

  if (!f)
    return cli_fail (o->cmd, "%s: %s", path, strerror (errno));
  n = fread (page, 1, sizeof page, f);
  fclose (f);
  if (n != 512)
    return cli_usage (o->cmd, "%s: the Hybrid Information log is one 512-byte page, got %s%zu "
                      "bytes", path, n > 512 ? "more than " : "", n > 512 ? (size_t) 512 : n);
  if (hc_profile_load_ata_log (o->profile, page, n, why, sizeof why) < 0)
    return cli_usage (o->cmd, "%s: %s", path, why);
  return 0;
}

/* Parses the shared options; leaves the operands in argv[optind …].
 * Returns -1 to go on, or an exit status. */
static int
parse_opts (struct hint_opts *o, int argc, char **argv, const char *usage)
{
  int c, rc;

  optind = 1;
  while ((c = getopt_long (argc, argv, "hj", long_opts, NULL)) != -1) {
    switch (c) {
    case 'h':
      cli_help (stdout, usage);
      return 0;
    case 'j':
      o->json = true;
      break;
    case OPT_DIR:
      if (strcmp (optarg, "any") == 0) o->dir = HC_DIR_ANY;
      else if (strcmp (optarg, "read") == 0) o->dir = HC_DIR_READ;
      else if (strcmp (optarg, "write") == 0) o->dir = HC_DIR_WRITE;
      else return cli_usage (o->cmd, "--dir: '%s' is not one of any, read, write", optarg);
      break;
    case OPT_PROFILE: {
      char *eq = strchr (optarg, '=');
      if (!eq)
        return cli_usage (o->cmd, "--profile: expected KEY=VALUE, got '%s'", optarg);
      *eq = '\0';
      if (hc_profile_set (o->profile, optarg, eq + 1) < 0) {
        char keys[256];
        return cli_usage (o->cmd, "--profile: bad key or value '%s=%s' (keys: %s)", optarg,
                          eq + 1, cli_expand ("@PROFILE_KEYS@", keys, sizeof keys));
      }
      break;
    }
    case OPT_ATA_LOG:
      if ((rc = load_ata_log (o, optarg)) != 0)
        return rc;
      break;
    case OPT_CONFIG: {
      struct hc_parse_error err = { 0 };
      rc = hc_classes_load_file (o->classes, optarg, &err);
      if (rc == -EINVAL)
        return cli_usage (o->cmd, "%s:%u: %s", optarg, err.line, err.msg);
      if (rc < 0)
        return cli_fail (o->cmd, "%s: %s", optarg, strerror (-rc));
      break;
    }
    case OPT_DESCRIPTOR:
      o->descriptor = optarg;
      break;
    default:
      return cli_usage (o->cmd, "bad option; see 'hintcache %s --help'", o->cmd);
    }
  }
  return -1;
}

static const hc_codec *
find_codec (struct hint_opts *o, const char *name, int *rc)
{
  const hc_codec *c = hc_codec_find (name);
  char names[160];

  if (!c)
    *rc = cli_usage (o->cmd, "unknown codec '%s' (codecs: %s)", name,
                     cli_expand ("@CODECS@", names, sizeof names));
  return c;
}

static int
parse_hint (struct hint_opts *o, const char *text, struct hc_hint *h)
{
  char classes[256], advice[128];

  if (hc_hint_parse (text, h) == 0)
    return 0;
  return cli_usage (o->cmd, "'%s' is not a hint (classes: %s; advice: %s; join with '+')", text,
                    cli_expand ("@CLASSES@", classes, sizeof classes),
                    cli_expand ("@ADVICE@", advice, sizeof advice));
}

static const char *
dir_name (enum hc_dir d)
{
  return d == HC_DIR_READ ? "read" : d == HC_DIR_WRITE ? "write" : "any";
}

static void
hex_bytes (const uint8_t *b, unsigned n, char *out)
{
  for (unsigned i = 0; i < n; i++)
    sprintf (out + 2 * i, "%02x", b[i]);
  out[2 * n] = '\0';
}

static void
json_attrs (struct json *j, const struct hc_class_attrs *a)
{
  json_object_begin (j);
  json_kv_uint (j, "priority", a->priority);
  json_kv_bool (j, "admit_read", a->admit_read);
  json_kv_bool (j, "admit_write", a->admit_write);
  json_kv_string (j, "pattern", hc_pattern_name (a->pattern));
  json_kv_bool (j, "latency_sensitive", a->latency_sensitive);
  json_kv_uint (j, "lifetime", a->lifetime);
  json_kv_uint (j, "max_share", a->max_share);
  json_object_end (j);
}

static void
json_flags (struct json *j, unsigned flags)
{
  json_array_begin (j);
  for (unsigned b = 1; b <= HC_HINT_FLAGS_ALL; b <<= 1)
    if (flags & b)
      json_string (j, hc_flag_name (b));
  json_array_end (j);
}

static void
text_flags (unsigned flags, char *buf, size_t len)
{
  buf[0] = '\0';
  for (unsigned b = 1; b <= HC_HINT_FLAGS_ALL; b <<= 1)
    if (flags & b) {
      strncat (buf, buf[0] ? ", " : "", len - strlen (buf) - 1);
      strncat (buf, hc_flag_name (b), len - strlen (buf) - 1);
    }
  if (!buf[0])
    snprintf (buf, len, "none");
}

/* ---------------------------------------------------------------------------
 * hint decode
 */
static const char decode_usage[] =
  "Usage: hintcache hint decode CODEC VALUE [--json] [--dir D] [--descriptor HEX]\n"
  "                             [--profile KEY=VALUE]... [--ata-log FILE] [--config FILE]\n"
  "\n"
  "Decodes what a transport carried into hintcache's class, advice and flags, and shows\n"
  "the class's attributes.  VALUE is decimal or 0x-hex; fadvise takes one value per call,\n"
  "comma-separated (2,5).  scsi takes the GROUP NUMBER and, with --descriptor, the 16\n"
  "bytes of the grouping descriptor that group holds (32 hex digits).\n"
  "Codecs: @CODECS@.\n"
  "An invalid or reserved value is reported with its reason, exit status 2.\n\n";

static int
parse_descriptor (struct hint_opts *o, struct hc_wire *w)
{
  const char *s = o->descriptor;

  if (strlen (s) != 2 * HC_WIRE_BYTES)
    return cli_usage (o->cmd, "--descriptor: expected %d hex digits, got %zu", 2 * HC_WIRE_BYTES,
                      strlen (s));
  for (unsigned i = 0; i < HC_WIRE_BYTES; i++) {
    unsigned v;
    char two[3] = { s[2 * i], s[2 * i + 1], '\0' };
    if (strspn (two, "0123456789abcdefABCDEF") != 2 || sscanf (two, "%x", &v) != 1)
      return cli_usage (o->cmd, "--descriptor: '%s' is not hex", s);
    w->bytes[i] = (uint8_t) v;
  }
  w->nbytes = HC_WIRE_BYTES;
  return -1;
}

static int
run_decode (struct hint_opts *o, int argc, char **argv)
{
  const hc_codec *c;
  struct hc_wire w;
  struct hc_hint h;
  struct hc_class_attrs attrs;
  char why[256], desc[512], text[96], flags[96], wire[96];
  int rc;

  if (argc - optind != 2)
    return cli_usage (o->cmd, "expected CODEC VALUE (see --help)");
  if (!(c = find_codec (o, argv[optind], &rc)))
    return rc;
  if (hc_wire_parse (c, argv[optind + 1], &w) < 0)
    return cli_usage (o->cmd, "'%s' is not a %s value (%s)", argv[optind + 1], hc_codec_name (c),
                      hc_codec_title (c));
  if (o->descriptor) {
    if (c != hc_codec_find ("scsi"))
      return cli_usage (o->cmd, "--descriptor applies to the scsi codec only");
    if ((rc = parse_descriptor (o, &w)) >= 0)
      return rc;
  }
  hc_codec_describe (c, o->profile, &w, desc, sizeof desc);
  hc_wire_format (c, &w, wire, sizeof wire);
  if (hc_codec_decode (c, o->profile, &w, o->dir, &h, why, sizeof why) < 0)
    return cli_usage (o->cmd, "%s %s is invalid: %s", hc_codec_name (c), wire, why);

  hc_hint_format (h, text, sizeof text);
  hc_classes_get (o->classes, h.cls, &attrs);
  if (o->json) {
    struct json j;
    json_init (&j, stdout);
    json_object_begin (&j);
    json_kv_string (&j, "codec", hc_codec_name (c));
    json_key (&j, "value");
    json_array_begin (&j);
    for (unsigned i = 0; i < w.n; i++)
      json_uint (&j, w.v[i]);
    json_array_end (&j);
    json_kv_string (&j, "wire", wire);
    json_kv_string (&j, "description", desc);
    json_kv_string (&j, "hint", text);
    json_kv_string (&j, "class", hc_class_name (h.cls));
    json_kv_uint (&j, "class_id", h.cls);
    json_kv_string (&j, "advice", hc_advice_name (h.advice));
    json_kv_uint (&j, "advice_id", h.advice);
    json_key (&j, "flags");
    json_flags (&j, h.flags);
    json_kv_uint (&j, "packed", hc_hint_pack (h));
    json_key (&j, "attributes");
    json_attrs (&j, &attrs);
    json_key (&j, "note");
    if (why[0])
      json_string (&j, why);
    else
      json_null (&j);
    json_object_end (&j);
    return 0;
  }
  text_flags (h.flags, flags, sizeof flags);
  printf ("%s %s: %s\n", hc_codec_name (c), wire, text);
  printf ("  wire:       %s\n", desc);
  printf ("  class:      %s\n", hc_class_name (h.cls));
  printf ("  advice:     %s\n", hc_advice_name (h.advice));
  printf ("  flags:      %s\n", flags);
  printf ("  attributes: priority %u, admit_read %s, admit_write %s, pattern %s, "
          "latency_sensitive %s, lifetime %u, max_share %u%%\n",
          attrs.priority, attrs.admit_read ? "yes" : "no", attrs.admit_write ? "yes" : "no",
          hc_pattern_name (attrs.pattern), attrs.latency_sensitive ? "yes" : "no", attrs.lifetime,
          attrs.max_share);
  if (why[0])
    printf ("  note:       %s\n", why);
  return 0;
}

/* ---------------------------------------------------------------------------
 * hint encode and hint map
 */
static const char encode_usage[] =
  "Usage: hintcache hint encode CODEC HINT [--json] [--dir D] [--profile KEY=VALUE]...\n"
  "                             [--ata-log FILE]\n"
  "\n"
  "Prints what transport CODEC carries for HINT, and what arrives when the receiver\n"
  "decodes it: the same hint, or which part is lost.\n\n";

static const char map_usage[] =
  "Usage: hintcache hint map HINT [--json] [--dir D] [--profile KEY=VALUE]... [--ata-log FILE]\n"
  "\n"
  "Prints one line per codec: the wire value HINT maps to, what arrives back, and the\n"
  "wire value's meaning (the row of the canonical mapping table).\n\n";

/* One codec's answer for one hint, as encode and map print it. */
struct encoding {
  struct hc_wire wire;
  struct hc_hint back;
  unsigned loss;
  char wire_text[96], desc[512], back_text[96], arrival[160];
};

static void
encode_one (struct hint_opts *o, const hc_codec *c, struct hc_hint h, struct encoding *e)
{
  hc_codec_encode (c, o->profile, h, o->dir, &e->wire);
  hc_codec_roundtrip (c, o->profile, h, o->dir, &e->back, &e->loss);
  hc_wire_format (c, &e->wire, e->wire_text, sizeof e->wire_text);
  if (e->wire.n == 0)
    snprintf (e->wire_text, sizeof e->wire_text, "-");
  hc_codec_describe (c, o->profile, &e->wire, e->desc, sizeof e->desc);
  hc_hint_format (e->back, e->back_text, sizeof e->back_text);
  if (!e->loss) {
    snprintf (e->arrival, sizeof e->arrival, "%s (exact)", e->back_text);
    return;
  }
  snprintf (e->arrival, sizeof e->arrival, "%s (%s%s%s%s%s)", e->back_text,
            !(e->loss & HC_LOSS_CLASS) ? ""
            : e->back.cls == HC_CLASS_UNCLASSIFIED ? "class lost" : "class changed",
            (e->loss & HC_LOSS_CLASS) && (e->loss & ~HC_LOSS_CLASS) ? ", " : "",
            !(e->loss & HC_LOSS_ADVICE) ? ""
            : h.advice == HC_ADVICE_NONE ? "advice added"
            : e->back.advice == HC_ADVICE_NONE ? "advice lost" : "advice changed",
            (e->loss & HC_LOSS_ADVICE) && (e->loss & HC_LOSS_FLAGS) ? ", " : "",
            e->loss & HC_LOSS_FLAGS ? "flags lost" : "");
}

static void
json_encoding (struct json *j, const hc_codec *c, struct hc_hint h, enum hc_dir dir,
               const struct encoding *e)
{
  char text[96], hex[2 * HC_WIRE_BYTES + 1];

  hc_hint_format (h, text, sizeof text);
  json_object_begin (j);
  json_kv_string (j, "codec", hc_codec_name (c));
  json_kv_string (j, "hint", text);
  json_kv_string (j, "dir", dir_name (dir));
  json_key (j, "value");
  json_array_begin (j);
  for (unsigned i = 0; i < e->wire.n; i++)
    json_uint (j, e->wire.v[i]);
  json_array_end (j);
  json_kv_string (j, "wire", e->wire_text);
  json_key (j, "actions");
  json_array_begin (j);
  if (e->wire.actions & HC_WIRE_ACT_HYBRID_EVICT)
    json_string (j, "hybrid_evict");
  if (e->wire.actions & HC_WIRE_ACT_CHANGE_RANGE)
    json_string (j, "hybrid_change_by_lba_range");
  json_array_end (j);
  json_key (j, "descriptor");
  if (e->wire.nbytes) {
    hex_bytes (e->wire.bytes, e->wire.nbytes, hex);
    json_string (j, hex);
  } else
    json_null (j);
  json_kv_string (j, "description", e->desc);
  json_kv_string (j, "arrives_as", e->back_text);
  json_key (j, "loss");
  json_array_begin (j);
  if (e->loss & HC_LOSS_CLASS) json_string (j, "class");
  if (e->loss & HC_LOSS_ADVICE) json_string (j, "advice");
  if (e->loss & HC_LOSS_FLAGS) json_string (j, "flags");
  json_array_end (j);
  json_object_end (j);
}

static int
run_encode (struct hint_opts *o, int argc, char **argv)
{
  const hc_codec *c;
  struct hc_hint h;
  struct encoding e;
  char text[96], hex[2 * HC_WIRE_BYTES + 1];
  int rc;

  if (argc - optind != 2)
    return cli_usage (o->cmd, "expected CODEC HINT (see --help)");
  if (!(c = find_codec (o, argv[optind], &rc)))
    return rc;
  if ((rc = parse_hint (o, argv[optind + 1], &h)) != 0)
    return rc;
  encode_one (o, c, h, &e);
  if (o->json) {
    struct json j;
    json_init (&j, stdout);
    json_encoding (&j, c, h, o->dir, &e);
    return 0;
  }
  hc_hint_format (h, text, sizeof text);
  printf ("%s %s: %s\n", hc_codec_name (c), text, e.wire_text);
  printf ("  wire:       %s\n", e.desc);
  if (e.wire.nbytes) {
    hex_bytes (e.wire.bytes, e.wire.nbytes, hex);
    printf ("  descriptor: %s\n", hex);
  }
  printf ("  arrives as: %s\n", e.arrival);
  return 0;
}

static int
run_map (struct hint_opts *o, int argc, char **argv)
{
  struct hc_hint h;
  struct json j;
  char text[96];
  int rc;

  if (argc - optind != 1)
    return cli_usage (o->cmd, "expected HINT (see --help)");
  if ((rc = parse_hint (o, argv[optind], &h)) != 0)
    return rc;
  hc_hint_format (h, text, sizeof text);
  if (o->json) {
    json_init (&j, stdout);
    json_array_begin (&j);
  } else
    printf ("%s (dir %s):\n  %-8s %-10s %-36s %s\n", text, dir_name (o->dir), "codec", "wire",
            "arrives as", "meaning");
  for (unsigned i = 0; i < HC_CODEC_COUNT; i++) {
    const hc_codec *c = hc_codec_get (i);
    struct encoding e;
    encode_one (o, c, h, &e);
    if (o->json)
      json_encoding (&j, c, h, o->dir, &e);
    else
      printf ("  %-8s %-10s %-36s %s\n", hc_codec_name (c), e.wire_text, e.arrival, e.desc);
  }
  if (o->json)
    json_array_end (&j);
  return 0;
}

/* ---------------------------------------------------------------------------
 * hint classes
 */
static const char classes_usage[] =
  "Usage: hintcache hint classes [--json] [--config FILE]\n"
  "\n"
  "Prints the class table: id, name and performance attributes.  --config applies a\n"
  "class attribute file first (lines 'CLASS.ATTRIBUTE = VALUE'; attributes priority\n"
  "0-15, admit_read, admit_write, pattern @PATTERNS:bars@, latency_sensitive,\n"
  "lifetime 0-5, max_share 0-100), so it also checks such a file.\n\n";

static int
run_classes (struct hint_opts *o, int argc, char **argv)
{
  struct json j;
  (void) argv;

  if (argc - optind != 0)
    return cli_usage (o->cmd, "takes no operands (see --help)");
  if (o->json) {
    json_init (&j, stdout);
    json_array_begin (&j);
  } else
    printf ("%-3s %-13s %4s %-10s %-11s %-10s %-7s %-8s %s\n", "id", "class", "prio",
            "admit_read", "admit_write", "pattern", "latency", "lifetime", "max_share");
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    struct hc_class_attrs a;
    hc_classes_get (o->classes, c, &a);
    if (o->json) {
      json_object_begin (&j);
      json_kv_uint (&j, "id", c);
      json_kv_string (&j, "name", hc_class_name (c));
      json_key (&j, "attributes");
      json_attrs (&j, &a);
      json_object_end (&j);
    } else
      printf ("%-3u %-13s %4u %-10s %-11s %-10s %-7s %-8u %u%%\n", c, hc_class_name (c),
              a.priority, a.admit_read ? "yes" : "no", a.admit_write ? "yes" : "no",
              hc_pattern_name (a.pattern), a.latency_sensitive ? "yes" : "no", a.lifetime,
              a.max_share);
  }
  if (o->json)
    json_array_end (&j);
  return 0;
}

/* ---------------------------------------------------------------------------
 * Dispatch: each subcommand parses the shared options, then runs.
 */
static int
with_opts (const char *cmd, const char *usage, int (*run) (struct hint_opts *, int, char **),
           int argc, char **argv)
{
  struct hint_opts o = { .cmd = cmd };
  char *full;
  int rc;

  if (hc_profile_new (&o.profile) < 0 || hc_classes_new (&o.classes) < 0) {
    hc_profile_free (o.profile);
    return cli_fail (cmd, "out of memory");
  }
  if (asprintf (&full, "%s%s%s", usage, run == run_classes ? "" : profile_help,
                run == run_classes || run == run_decode ? "" : hint_syntax) < 0)
    full = NULL;
  rc = parse_opts (&o, argc, argv, full ? full : usage);
  if (rc < 0)
    rc = run (&o, argc, argv);
  free (full);
  hc_profile_free (o.profile);
  hc_classes_free (o.classes);
  return rc;
}

static int cmd_decode (int argc, char **argv)
{ return with_opts ("hint decode", decode_usage, run_decode, argc, argv); }
static int cmd_encode (int argc, char **argv)
{ return with_opts ("hint encode", encode_usage, run_encode, argc, argv); }
static int cmd_map (int argc, char **argv)
{ return with_opts ("hint map", map_usage, run_map, argc, argv); }
static int cmd_classes (int argc, char **argv)
{ return with_opts ("hint classes", classes_usage, run_classes, argc, argv); }

static const struct cli_command hint_commands[] = {
  { "decode", cmd_decode, "decode a transport's hint value" },
  { "encode", cmd_encode, "encode a hint for a transport" },
  { "map", cmd_map, "show a hint on every transport" },
  { "classes", cmd_classes, "show the class table and its attributes" },
};

int
cmd_hint (int argc, char **argv)
{
  return cli_dispatch ("hint", hint_commands, sizeof hint_commands / sizeof hint_commands[0],
                       argc, argv);
}
