/* Trace readers and writers: the state they share and the ops table each
 * format fills in.
 *
 *   trace.c     opening (plain or gzip, inflated with zlib), format detection, the
 *               buffered input and its line reader, string interning,
 *               malformed-line accounting, rewind, names, and the writer door
 *   csv.c       hintcache's labeled CSV (RFC 4180 quoting)
 *   blkparse.c  blkparse's default text output (Q events)
 *   ftrace.c    block_rq_issue events (trace-cmd report or tracefs text)
 *   msr.c       MSR Cambridge CSV
 *   oracle.c    libCacheSim oracleGeneral (reader, and a writer that holds
 *               the trace in memory to compute next-access times)
 *   bin.c       hintcache's own binary form (reader and streaming writer)
 *
 * Text formats supply `parse`, which turns one line (NUL-terminated, the
 * newline and a trailing CR removed, writable in place) into a request; the
 * core runs the line loop, so line numbers, the line-length bound and the
 * malformed-line accounting live in one place.  Binary formats supply `next`
 * and read the input buffer directly.  `probe` looks at the first bytes
 * (decompressed) and says how sure it is that they are in its format.
 */
#ifndef HC_TRACE_PRIV_H
#define HC_TRACE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <zlib.h>

#include "hintcache/trace.h"
#include "le.h"
#include "util.h"

/* Input is read in chunks of up to this size; binary readers parse
 * straight out of it, so a record costs no system call.  The buffer starts
 * at HC_TRACE_BUF0 (at a regular file's size rounded up to a page when that
 * is less) and doubles at each refill after a read that filled it, up to
 * this: a small input never needs a megabyte.  A writer's output buffer
 * starts at HC_TRACE_WBUF0 and doubles each time it is written out full,
 * up to HC_TRACE_BUF too. */
#define HC_TRACE_BUF ((size_t) 1 << 20)
#define HC_TRACE_BUF0 ((size_t) 128 << 10)
#define HC_TRACE_WBUF0 ((size_t) 4 << 10)
/* The longest text line accepted; a longer one is malformed. */
#define HC_TRACE_LINE_MAX 16384
/* What is read of the input before detection looks at it (all of a
 * shorter input): what the first buffer of a large input holds. */
#define HC_TRACE_HEAD HC_TRACE_BUF0
/* How many lines a text probe parses at most. */
#define HC_TRACE_PROBE_LINES 64

/* What a text parser says about a line. */
enum {
  HC_LINE_REQ = 1,   /* a request: *r is filled */
  HC_LINE_OTHER = 0, /* a valid line of this format that is not a request */
  HC_LINE_EMPTY = 2, /* blank, comment or summary: no evidence either way */
  /* malformed lines return -EINVAL through hc_trace_bad */
};

/* Interned strings: id → text, and a hash index text → id.  Id 0 is the
 * empty string; texts live in an arena so pointers stay put as it grows. */
struct hc_trace_strtab {
  const char **text; /* [id] */
  uint32_t *len;     /* [id] */
  uint32_t *hash;    /* [id]: low bits of the hash, kept for rehashing */
  uint32_t n;        /* ids in use, counting id 0 */
  uint32_t cap;
  uint32_t *slot;    /* index: an id, 0 = empty */
  size_t nslot;      /* a power of two */
  char **blocks;     /* the arena */
  size_t nblocks;
  size_t block_left;
  char *block_pos;
};

struct hc_trace_writer;

/* One trace format. */
struct hc_trace_fmt {
  const char *name;
  enum hc_trace_format format;
  /* How sure (0 = not this format, higher = surer) that head[len], the
   * start of the decompressed input (`whole` if that is all of it; `size`
   * the input's size if known, else -1), is in this format.  NULL for a
   * text format whose first lines parse or not (hc_trace_probe_text). */
  int (*probe) (struct hc_trace *t, const unsigned char *head, size_t len, bool whole,
                int64_t size);
  /* Optional: clears per-read state (at open and at rewind). */
  void (*reset) (struct hc_trace *t);
  /* Text formats: parses one line (HC_LINE_* or -EINVAL via hc_trace_bad). */
  int (*parse) (struct hc_trace *t, char *line, size_t len, struct hc_trace_req *r);
  /* Binary formats: the next request, as hc_trace_next. */
  int (*next) (struct hc_trace *t, struct hc_trace_req *r);
  /* Optional, for speed: decodes up to n of the next requests, as long as
   * they need nothing `next` would do besides decoding (no refill, no other
   * record, nothing malformed, each in range as the door checks), and
   * returns how many (0: the next one takes `next`).  Never fails. */
  size_t (*read) (struct hc_trace *t, struct hc_trace_req *r, size_t n);
  /* Optional: the totals the file records, as hc_trace_totals (called only
   * for an uncompressed regular file). */
  int (*totals) (struct hc_trace *t, struct hc_trace_totals *out);
  /* Writable formats: writes the header, appends a request, finishes. */
  int (*wopen) (struct hc_trace_writer *w);
  /* Strings come from src by id, or (src NULL) as the texts comm and
   * object (NULL for none). */
  int (*write) (struct hc_trace_writer *w, const struct hc_trace_req *r,
                const struct hc_trace *src, const char *comm, const char *object);
  int (*wclose) (struct hc_trace_writer *w);
};

/* What the door checks of every request, whatever its format: a length of
 * at most HC_TRACE_MAX_LENGTH, and an end that does not overflow. */
static inline bool
hc_trace_req_in_range (const struct hc_trace_req *r)
{
  return r->length <= HC_TRACE_MAX_LENGTH && r->offset <= UINT64_MAX - r->length;
}

extern const struct hc_trace_fmt hc_trace_fmt_csv;
extern const struct hc_trace_fmt hc_trace_fmt_blkparse;
extern const struct hc_trace_fmt hc_trace_fmt_ftrace;
extern const struct hc_trace_fmt hc_trace_fmt_msr;
extern const struct hc_trace_fmt hc_trace_fmt_oracle;
extern const struct hc_trace_fmt hc_trace_fmt_bin;

struct hc_trace {
  const struct hc_trace_fmt *fmt;
  struct hc_trace_opts opts;
  int fd;          /* the input, -1 before it is open (also for pread) */
  int64_t size;    /* bytes, when a regular file (else -1) */

  /* How the input is read: undecided until its first bytes are read, then
   * as it is, or inflated (gzip: members one after another). */
  enum { HC_IN_LOOK, HC_IN_PLAIN, HC_IN_GZIP } in_how;
  bool in_eof;        /* read(2) has met the end of the file */
  bool in_broken;     /* a read error or corrupt compressed data: no rewind */
  bool z_init;        /* z is set up (inflateInit2) */
  bool z_member_end;  /* gzip: the last member ended whole */
  int z_error;        /* gzip: what inflate failed with, 0 if nothing */
  z_stream z;         /* gzip: the inflate state; next_in/avail_in in zin */
  unsigned char *zin; /* gzip: compressed input */
  size_t zin_cap;
  bool is_stdin;   /* cannot be rewound */
  uint64_t serial; /* tells readers apart in writers' id caches */

  /* The input buffer: bytes [pos, fill) are unread; buf[cap] is room for
   * the NUL that ends a last line without a newline. */
  char *buf;
  size_t pos, fill, cap;
  bool eof;
  bool filled;    /* input filled the buffer: the next refill grows it */

  uint64_t lineno;        /* lines (text) or records (binary) consumed */
  uint64_t skipped;       /* malformed ones skipped */
  uint64_t first_skipped; /* 1-based number of the first, 0 if none */
  int status;             /* a sticky error, 0 if none */
  bool probing;           /* parsing for detection: intern nothing */
  char reason[160];       /* why the last malformed line was rejected */
  char err[320];
  char *scratch;          /* a line copy for probing: detection only (else NULL),
                           * as long as the head read for it or a line at most */

  struct hc_trace_strtab strs;

  /* Per-format state, cleared by the format's reset. */
  bool blk_summary;    /* blkparse: inside the closing summary */
  bool msr_started;    /* msr: msr_first is set */
  uint64_t msr_first;  /* msr: the first timestamp, 100 ns units */
  bool bin_started;    /* bin: the header has been read */
  bool bin_ended;      /* bin: the end record has been read */
  uint32_t bin_version; /* bin: the header's version */
  uint32_t *bin_map;   /* bin: file string id → reader id */
  uint32_t bin_nmap, bin_mapcap;
  uint64_t bin_count;  /* bin: request records read */
};

struct hc_trace_writer {
  const struct hc_trace_fmt *fmt;
  int fd;
  bool own_fd;        /* false for standard output */
  gzFile gz;          /* a path ending in .gz: the output compressed (owns fd) */
  int err;            /* the first error, sticky */
  uint32_t block_size;
  unsigned char *buf; /* output buffer */
  size_t len, cap;
  uint64_t count;     /* requests (bin) or records (oracle) so far */

  /* bin: the file's strings, and a cache src id → file id + 1 for `src`. */
  struct hc_trace_strtab strs;
  uint64_t src_serial;
  uint32_t *src_map;
  size_t src_mapcap;

  /* bin: the totals written at the end. */
  struct hc_trace_totals totals;
  struct hc_blockset footprint;

  /* oracle: the block of every record, in order. */
  uint64_t *blocks;
  size_t nblocks, blockcap;
};

/* Core services for the formats (trace.c, input.c, strtab.c). */

/* The format of that number (NULL past the last). */
const struct hc_trace_fmt *hc_trace_fmt_of (enum hc_trace_format format);

/* The first input buffer: HC_TRACE_BUF0, or for a regular file of `size`
 * bytes (size < 0: not known) smaller than that, its size rounded up to
 * the next 64 bytes, which holds it whole with room to spare. */
size_t hc_trace_first_cap (int64_t size);

/* The line loop of the text formats: the next request from the lines, with
 * the format's line parser.  Returns 1 (a request in *r), 0 at the end or a
 * negative errno. */
int hc_trace_text_next (struct hc_trace *t, struct hc_trace_req *r);

/* Makes at least `need` (≤ HC_TRACE_BUF) unread bytes available unless the
 * input ends first.  Returns the unread byte count or a negative errno. */
long hc_trace_fill (struct hc_trace *t, size_t need);

/* Records why the current line is malformed; returns -EINVAL. */
int hc_trace_bad (struct hc_trace *t, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* Counts the current line (or record) as malformed, with the reason from
 * hc_trace_bad.  Returns 0 to go on, or -EINVAL under strict. */
int hc_trace_malformed (struct hc_trace *t);

/* Sets the error text; returns rc. */
int hc_trace_fail (struct hc_trace *t, int rc, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Interns s[len] into the reader's table (0 for the empty string, and for
 * anything while probing).  Returns 0 or -ENOMEM. */
int hc_trace_intern (struct hc_trace *t, const char *s, size_t len, uint32_t *id);

/* Scores head[len] for a text format: parses its first complete lines and
 * returns the count of lines that were evidence for it, or 0 when there is
 * none or malformed lines outnumber them. */
int hc_trace_probe_text (struct hc_trace *t, const struct hc_trace_fmt *f,
                         const unsigned char *head, size_t len, bool whole);

/* Parses a kernel rwbs string.  Returns 0 (*op, *bits set), 1 for an N
 * (no data) request (*bits set; with a leading F that is a flush), or
 * -EINVAL. */
int hc_trace_rwbs_parse (const char *s, uint8_t *op, uint16_t *bits);

/* Fills *r from a block-layer event: its rwbs and sector range (512-byte
 * sectors; has_range false when the event printed none), the "[comm]" that
 * ends its line (at or after `comm`, interned), its time and pid.  Returns
 * HC_LINE_REQ, HC_LINE_OTHER for requests without data, or -EINVAL. */
int hc_trace_block_req (struct hc_trace *t, struct hc_trace_req *r, const char *rwbs,
                        uint64_t sector, uint64_t nsect, bool has_range, char *comm,
                        uint64_t ts, uint32_t pid);

/* Parses "seconds[.fraction]" into ns.  Returns 0 or -EINVAL. */
int hc_trace_parse_secs (const char *s, uint64_t *ns);

/* Parses an ioprio class name (none, rt, be, idle).  Returns 0 or -EINVAL. */
int hc_trace_class_parse (const char *s, uint8_t *cls);

/* p past any blanks (spaces and tabs). */
static inline char *
hc_trace_blanks (char *p)
{
  while (*p == ' ' || *p == '\t')
    p++;
  return p;
}

/* Splits off the next blank-separated token of *p, NUL-terminating it in
 * place; NULL when none is left. */
char *hc_trace_token (char **p);

/* The block-layer text formats' tokens: all decimal digits (and not
 * empty); "major,minor"; a decimal token no larger than max (s may be
 * NULL: -EINVAL, as for any other bad token; else 0). */
bool hc_trace_digits (const char *s);
bool hc_trace_is_dev (const char *s);
int hc_trace_number (const char *s, uint64_t max, uint64_t *v);

/* Parses a request's range, "SECTOR + COUNT", at *p and the blanks after
 * it, as blkparse and the block tracepoints print it.  Returns 0 or
 * -EINVAL through hc_trace_bad. */
int hc_trace_sectors (struct hc_trace *t, char **p, uint64_t *sector, uint64_t *nsect);

/* The string table (trace.c), also used by the bin writer. */
int hc_trace_strtab_intern (struct hc_trace_strtab *s, const char *text, size_t len, uint32_t *id,
                            bool *added);
void hc_trace_strtab_free (struct hc_trace_strtab *s);

/* Appends bytes to a writer's output, writing out full buffers. */
int hc_trace_wput (struct hc_trace_writer *w, const void *p, size_t n);

/* Writes out a writer's buffered output. */
int hc_trace_wflush (struct hc_trace_writer *w);

#endif /* HC_TRACE_PRIV_H */
