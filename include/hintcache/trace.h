/* hintcache — block I/O traces: readers and writers.
 *
 * A trace is a sequence of block requests.  Readers stream (constant memory
 * in the trace's length), read gzip-compressed input transparently, and
 * detect the format from the content unless told:
 *
 *   csv       the labeled CSV of hintcache's development traces
 *             (ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,
 *             ioprio_hint,ioprio_level,comm,pid,label,object)
 *   blkparse  blkparse's default text output (only Q events are requests)
 *   ftrace    block_rq_issue lines, as printed by `trace-cmd report` or read
 *             from tracefs (trace / trace_pipe)
 *   msr       MSR Cambridge CSV: Timestamp,Hostname,DiskNumber,Type,Offset,
 *             Size,ResponseTime (Timestamp in Windows filetime, 100 ns)
 *   oracle    libCacheSim's oracleGeneral binary: packed records of
 *             u32 time, u64 obj_id, u32 size, i64 next_access_vtime
 *             (each record one object access: read as a read of `size`
 *             bytes at obj_id × block size)
 *   bin       hintcache's own compact binary form, which keeps every field
 *             and replays fastest
 *
 * Malformed lines are skipped and counted (hc_trace_skipped names the
 * first), or with `strict` end the read with -EINVAL.  A truncated or corrupt
 * gzip stream is an error (-EIO), never a crash.
 *
 * Functions return 0 (or 1 where documented) or a negative errno; the
 * reason for the last error is in hc_trace_error.  Not thread-safe per
 * handle.
 */
#ifndef HINTCACHE_TRACE_H
#define HINTCACHE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum hc_trace_format {
  HC_TRACE_AUTO = 0,
  HC_TRACE_CSV,
  HC_TRACE_BLKPARSE,
  HC_TRACE_FTRACE,
  HC_TRACE_MSR,
  HC_TRACE_ORACLE,
  HC_TRACE_BIN,
};
#define HC_TRACE_FORMAT_COUNT 7

/* Request operations. */
enum hc_trace_op {
  HC_TOP_READ = 0,
  HC_TOP_WRITE = 1,
  HC_TOP_DISCARD = 2,
  HC_TOP_FLUSH = 3,
};

/* rwbs modifier flags (the kernel's letters after the op). */
enum hc_trace_rwbs {
  HC_RWBS_PREFLUSH  = 1u << 0, /* leading F */
  HC_RWBS_FUA       = 1u << 1, /* F after the op */
  HC_RWBS_READAHEAD = 1u << 2, /* A */
  HC_RWBS_SYNC      = 1u << 3, /* S */
  HC_RWBS_META      = 1u << 4, /* M */
};

/* Data labels of the labeled CSV (what kind of data a request touched). */
enum hc_trace_label {
  HC_LABEL_NONE = 0, /* the format has no labels */
  HC_LABEL_FS_METADATA,
  HC_LABEL_JOURNAL,
  HC_LABEL_WAL,
  HC_LABEL_INDEX,
  HC_LABEL_TABLE,
  HC_LABEL_TOAST,
  HC_LABEL_CATALOG,
  HC_LABEL_OTHER_FILE,
  HC_LABEL_TEMP,
  HC_LABEL_UNKNOWN,
};
#define HC_LABEL_COUNT 11

/* The longest request, in bytes.  The block layer holds a request's length
 * in 32 bits (blktrace's `bytes`, the request's data length), and so do the
 * other formats' sources; a longer one is a damaged record, which would
 * otherwise have a replay walk billions of blocks. */
#define HC_TRACE_MAX_LENGTH UINT32_MAX

/* One request.  Strings (comm, object) are interned: ids are stable for a
 * reader's lifetime, 0 means "none"; hc_trace_string gives the text.  Every
 * reader checks, in one place, that length ≤ HC_TRACE_MAX_LENGTH and that
 * offset + length does not overflow; a request that fails is malformed. */
struct hc_trace_req {
  uint64_t ts_ns;        /* arrival time, ns (relative; never decreasing in good traces) */
  uint64_t offset;       /* bytes */
  uint64_t length;       /* bytes (0 for flushes) */
  uint8_t op;            /* enum hc_trace_op */
  uint8_t label;         /* enum hc_trace_label */
  uint8_t ioprio_class;  /* 0 none, 1 rt, 2 be, 3 idle */
  uint8_t ioprio_level;  /* 0 … 7 */
  uint16_t ioprio_hint;  /* 0 … 1023 */
  uint16_t rwbs;         /* enum hc_trace_rwbs bits */
  uint32_t pid;
  uint32_t comm;         /* string id */
  uint32_t object;       /* string id */
};

typedef struct hc_trace hc_trace;

struct hc_trace_opts {
  enum hc_trace_format format; /* HC_TRACE_AUTO: detect */
  bool strict;                 /* a malformed line is an error */
  uint32_t block_size;         /* oracle: bytes per object id (default 4096) */
};

/* Names: "csv", "blkparse", "ftrace", "msr", "oracle", "bin" ("auto" for 0). */
const char *hc_trace_format_name (unsigned format);
int hc_trace_format_parse (const char *name, enum hc_trace_format *format);

/* Names of labels ("fs_metadata", …; "" for none) and ops ("R", "W", "D", "F"). */
const char *hc_trace_label_name (unsigned label);
int hc_trace_label_parse (const char *name, enum hc_trace_label *label);
const char *hc_trace_op_name (unsigned op);

/* Opens a trace file ("-" is standard input, which cannot be rewound).
 * Returns 0, -EINVAL (unknown format, nothing recognisable: `why` says),
 * -ENOMEM or the negative errno of open. */
int hc_trace_open (const char *path, const struct hc_trace_opts *o, hc_trace **out, char *why,
                   size_t whylen);

/* Reads the next request.  Returns 1 with *r filled, 0 at the end, or a
 * negative errno (-EINVAL under strict for a malformed line, -EIO for a
 * truncated or corrupt compressed stream or a read error). */
int hc_trace_next (hc_trace *t, struct hc_trace_req *r);

/* Reads up to n requests into r[0 … n−1]: the same requests, checks and
 * errors as n calls of hc_trace_next, at less cost per request in the binary
 * form.  Returns how many were read (1 … n; fewer than n need not mean the
 * end), 0 at the end, or a negative errno as hc_trace_next; an error met
 * after some requests were read is returned by the next call. */
long hc_trace_read (hc_trace *t, struct hc_trace_req *r, size_t n);

/* Restarts from the first request.  Returns 0 or a negative errno. */
int hc_trace_rewind (hc_trace *t);

/* The text of the last error (empty if none). */
const char *hc_trace_error (const hc_trace *t);

/* Lines skipped as malformed so far; *first_line (may be NULL) gets the
 * 1-based number of the first (0 if none). */
uint64_t hc_trace_skipped (const hc_trace *t, uint64_t *first_line);

/* The format being read. */
enum hc_trace_format hc_trace_get_format (const hc_trace *t);

/* A trace's totals, where the file records them (hintcache's binary form
 * does, at its end, counted at the block size it was written with). */
struct hc_trace_totals {
  uint32_t block_size;       /* of block_accesses and footprint_blocks */
  uint64_t requests, reads, writes, discards, flushes;
  uint64_t block_accesses;   /* blocks touched by reads and writes, with repeats */
  uint64_t footprint_blocks; /* distinct blocks read or written */
  uint64_t max_end;          /* the largest offset + length of a read or write */
};

/* Fills *out with the totals the trace records, without reading it: for a
 * regular, uncompressed file in the binary form.  Returns 0, -ENODATA if
 * the trace records none (another format, compressed, a pipe, a file
 * written before totals existed) or -EIO if they are damaged.  Nothing is
 * consumed: hc_trace_next starts where it would have. */
int hc_trace_totals (hc_trace *t, struct hc_trace_totals *out);

/* The text of an interned string ("" for 0 or an unknown id). */
const char *hc_trace_string (const hc_trace *t, uint32_t id);

/* Closes a trace (NULL allowed). */
void hc_trace_close (hc_trace *t);

/* A writer of the formats that can be written: HC_TRACE_BIN (every field),
 * HC_TRACE_CSV (the labeled CSV: every field but the hint-free label
 * "none", written empty, which reads back as unknown) and HC_TRACE_ORACLE
 * (one record per block access of reads and writes, with next-access times;
 * it holds the trace in memory until closed). */
typedef struct hc_trace_writer hc_trace_writer;

/* Creates path ("-": standard output) and writes its header; a path ending
 * in ".gz" is written gzip-compressed.  block_size (0: 4096): oracle's
 * block size (requests are cut into blocks of this size), and the block size
 * the binary form's totals are counted in. */
int hc_trace_writer_open (const char *path, enum hc_trace_format format, uint32_t block_size,
                          hc_trace_writer **out, char *why, size_t whylen);

/* Appends a request; its strings are looked up in `src` (the reader it
 * came from, or NULL for none).  Returns 0, -EINVAL for a request no reader
 * would accept (a value out of range, a length over HC_TRACE_MAX_LENGTH, an
 * offset + length that overflows; nothing is written), or the write's
 * negative errno. */
int hc_trace_write (hc_trace_writer *w, const struct hc_trace_req *r, const hc_trace *src);

/* Appends a request whose strings are given as text (NULL or "" for none),
 * for requests that come from no reader, such as a generator's; r->comm and
 * r->object are ignored. */
int hc_trace_write_strings (hc_trace_writer *w, const struct hc_trace_req *r, const char *comm,
                            const char *object);

/* Finishes the file (oracle: computes next-access times and writes
 * everything) and frees the writer.  Returns 0 or the first error. */
int hc_trace_writer_close (hc_trace_writer *w);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_TRACE_H */
