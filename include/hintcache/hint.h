/* hintcache — the hint model.
 *
 * Every layer of hintcache speaks one vocabulary, taken from the 2014 debate
 * about hybrid drives:
 *
 *   - a CLASS says *why* an I/O happens (metadata, journal, transaction, data,
 *     paging, streaming, background).  The device (here: the cache engine, or
 *     a codec translating for a real transport) decides what that means;
 *   - an ADVICE says *what to do* about a range, with the numeric values of the
 *     2014 RFC (none 0, evict 1, dontneed 2, normal 3, willneed 7; 4–6 are
 *     reserved and rejected with -EINVAL everywhere);
 *   - FLAGS carry facts about one I/O that are neither (sequential, sync, …).
 *
 * A hint is a 4-byte value type.  Hints come from several layers — the I/O
 * itself, a range of the device, a stream (a file or a process), a process,
 * the device default — and hc_hint_resolve() merges them with one documented
 * precedence.
 *
 * Conventions of this library: functions return 0 or a negative errno and
 * never set errno, print or exit.  Names are lower-case snake_case everywhere
 * (CLI, config files, JSON) and are never translated.
 */
#ifndef HINTCACHE_HINT_H
#define HINTCACHE_HINT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* I/O classes.  The numeric ids are stable: they are stored on disk and sent
 * over the control protocol.  0 means "no class given". */
enum hc_class {
  HC_CLASS_UNCLASSIFIED = 0,
  HC_CLASS_METADATA     = 1, /* describes other data: inodes, b-tree inner pages */
  HC_CLASS_JOURNAL      = 2, /* write-ahead log, fs journal: written, rarely read */
  HC_CLASS_TRANSACTION  = 3, /* a caller waits; likely reused soon */
  HC_CLASS_DATA         = 4, /* ordinary file data */
  HC_CLASS_PAGING       = 5, /* swap, page-in faults */
  HC_CLASS_STREAMING    = 6, /* large sequential transfers read once */
  HC_CLASS_BACKGROUND   = 7, /* backup, scrub, rebuild: no urgency, no reuse */
};
#define HC_CLASS_COUNT 8

/* Cache advice, with the numeric values of the RFC's IOPRIO_ADV_* enum.
 * 4, 5 and 6 are reserved and rejected with -EINVAL by every function. */
enum hc_advice {
  HC_ADVICE_NONE     = 0, /* no advice given */
  HC_ADVICE_EVICT    = 1, /* drop from the fast tier now (after writeback) */
  HC_ADVICE_DONTNEED = 2, /* not worth caching; no need to drop it actively */
  HC_ADVICE_NORMAL   = 3, /* the default policy; clears earlier advice */
  HC_ADVICE_WILLNEED = 7, /* needed soon: prefetch and keep */
};
#define HC_ADVICE_LIMIT 8 /* advice values are 0 … 7 (3 bits) */

/* Flags: facts about an access that are neither class nor advice.
 * HC_HINT_SEQUENTIAL and HC_HINT_RANDOM form the "pattern" group, resolved by
 * precedence like class and advice; the other flags are additive. */
enum hc_hint_flag {
  HC_HINT_SEQUENTIAL     = 1u << 0, /* part of a forward sequential access */
  HC_HINT_RANDOM         = 1u << 1, /* random access expected */
  HC_HINT_NOREUSE        = 1u << 2, /* accessed once, then not again */
  HC_HINT_SYNC           = 1u << 3, /* a caller is waiting for this I/O */
  HC_HINT_READAHEAD      = 1u << 4, /* speculative read (prefetch) */
  HC_HINT_INCOMPRESSIBLE = 1u << 5, /* data will not compress */
};
#define HC_HINT_PATTERN (HC_HINT_SEQUENTIAL | HC_HINT_RANDOM)
#define HC_HINT_FLAGS_ALL 0x3fu

/* A hint: class + advice + flags, 4 bytes, passed by value.
 * The zero value {0} is "no hint".  Its packed form (hc_hint_pack) is the
 * representation stored on disk and sent on the wire. */
struct hc_hint {
  uint8_t cls;    /* enum hc_class */
  uint8_t advice; /* enum hc_advice */
  uint16_t flags; /* enum hc_hint_flag bits */
};

/* The layers a hint can come from, highest precedence first. */
enum hc_layer {
  HC_LAYER_IO      = 0, /* the I/O request itself */
  HC_LAYER_RANGE   = 1, /* a hint stored for a byte range of the device */
  HC_LAYER_STREAM  = 2, /* a stream handle's default: a file or a process */
  HC_LAYER_PROCESS = 3, /* the submitting process (e.g. its ioprio bits) */
  HC_LAYER_DEVICE  = 4, /* the device default */
};
#define HC_LAYER_COUNT 5

/* Who stored a range hint.  A source withdraws only the range hints it set
 * itself (hintd's withdrawal of a deleted file does not erase what an
 * administrator advised there, nor the reverse); the administrator's
 * withdrawal (HC_SOURCE_ADMIN, what a plain "unadvise" is) clears all.
 * Stored with each range hint (8 bits, on disk). */
enum hc_hint_source {
  HC_SOURCE_ADMIN   = 0, /* a person or script: hc_volume_advise, "advise" without from= */
  HC_SOURCE_HINTD   = 1, /* hintcache hintd: a filesystem's layout and path rules */
  HC_SOURCE_ADVISE  = 2, /* hintcache advise --file: one file's extents */
  HC_SOURCE_PRELOAD = 3, /* the preload library: files of an unmodified program */
};
#define HC_SOURCE_COUNT 4

/* Where each part of a resolved hint came from (enum hc_layer values, or
 * HC_LAYER_COUNT when no layer said anything). */
struct hc_hint_origin {
  uint8_t cls;
  uint8_t advice;
  uint8_t pattern;
};

/* Returns the lower-case name of a class ("metadata"), or NULL if `cls` is not
 * a class id. */
const char *hc_class_name (unsigned cls);

/* Parses a class name (exact, lower-case) into *cls.  Returns 0, or -EINVAL
 * for an unknown name. */
int hc_class_parse (const char *name, enum hc_class *cls);

/* Returns the lower-case name of an advice value ("dontneed"), or NULL for a
 * reserved or out-of-range value. */
const char *hc_advice_name (unsigned advice);

/* Parses an advice name into *advice.  Returns 0, or -EINVAL. */
int hc_advice_parse (const char *name, enum hc_advice *advice);

/* Returns the name of a hint source ("hintd"), or NULL. */
const char *hc_source_name (unsigned source);

/* Parses a source name into *source.  Returns 0, or -EINVAL. */
int hc_source_parse (const char *name, enum hc_hint_source *source);

/* Returns the name of a single flag bit ("sequential"), or NULL. */
const char *hc_flag_name (unsigned flag);

/* Returns the name of a layer ("io", "range", "stream", "process", "device"),
 * or NULL. */
const char *hc_layer_name (unsigned layer);

/* Checks a hint: class < HC_CLASS_COUNT, advice neither reserved nor out of
 * range, no unknown flag, not both sequential and random.  Returns 0 or
 * -EINVAL. */
int hc_hint_check (struct hc_hint hint);

/* Packs a hint into 32 bits: class in bits 7:0, advice in 15:8, flags in
 * 31:16.  The layout is stable (on-disk and wire format). */
uint32_t hc_hint_pack (struct hc_hint hint);

/* Unpacks and checks a 32-bit hint.  Returns 0, or -EINVAL if the value does
 * not pass hc_hint_check (then *hint is left unchanged). */
int hc_hint_unpack (uint32_t packed, struct hc_hint *hint);

/* Resolves the hint of one I/O from its layers (indexed by enum hc_layer).
 *
 * Precedence: per-I/O > per-range > per-stream > per-process > device default.
 * Class, advice and the pattern group (sequential/random) resolve
 * independently: each is taken from the highest layer that says something
 * (class != unclassified, advice != none, pattern bits != 0), so a layer that
 * says nothing falls through.  The additive flags are the union of all
 * layers.  `origin` (may be NULL) receives the deciding layer of each part.
 * Layers are assumed to have passed hc_hint_check. */
struct hc_hint hc_hint_resolve (const struct hc_hint layer[HC_LAYER_COUNT],
                                struct hc_hint_origin *origin);

/* Parses a hint written as words joined by '+', ',' or blanks: at most one
 * class name, at most one advice name, and any flag names, in any order
 * ("metadata", "willneed", "background+dontneed", "streaming sequential").
 * The empty string and "none" alone are the empty hint.
 * Returns 0, or -EINVAL for an unknown or repeated word, a reserved advice
 * number, or conflicting words. */
int hc_hint_parse (const char *text, struct hc_hint *hint);

/* Formats a hint as hc_hint_parse reads it ("background+dontneed+sequential";
 * "none" for the empty hint) into buf.  Returns the length it needed (like
 * snprintf), or -EINVAL for an invalid hint. */
int hc_hint_format (struct hc_hint hint, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_HINT_H */
