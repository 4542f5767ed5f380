/* Recording a block device's requests, as `hintcache trace record` does.
 *
 * Three parts, one file each:
 *   - tracefs.c: a private tracefs instance with the kernel's block_rq_issue
 *     and block_rq_complete events filtered to one device, its trace_pipe
 *     read by a thread while the workload runs, each issue paired with its
 *     completion (its latency), and every lost event counted (the pipe's
 *     "[LOST n EVENTS]" notes and the per-CPU buffers' overruns);
 *   - label.c: what each request touched — the file system's own
 *     structures from its layout (src/fsmap), and files by FIEMAP snapshots
 *     of a mounted tree taken during the run (a block's owner can change:
 *     each request is resolved by the snapshot nearest in time) — as a
 *     label of the shared traces' CSV and an object (a path or a
 *     structure), with path rules giving labels, and SQLite databases'
 *     pages by kind (dbstat) after the run;
 *   - pgcat.c: a PostgreSQL data directory's files by what they hold
 *     (table, index, toast, catalog), from the running server's catalog.
 * Internal to the tool; functions return 0 or a negative errno, never
 * print or exit.
 */
#ifndef HC_RECORD_H
#define HC_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hintcache/trace.h"

/* ---------------------------------------------------------------------------
 * Events (tracefs.c)
 */

/* One request, issued and (if `completed`) completed. */
struct hc_rec_req {
  uint64_t ts_ns;       /* issue time, CLOCK_MONOTONIC ns */
  uint64_t latency_ns;  /* completion minus issue */
  uint64_t sector;      /* 512-byte sectors */
  uint32_t nr_sector;
  uint32_t pid;
  uint16_t rwbs;        /* enum hc_trace_rwbs bits */
  uint8_t op;           /* enum hc_trace_op */
  uint8_t ioprio_class, ioprio_level;
  uint16_t ioprio_hint;
  bool completed;
  char comm[17];
};

/* What one line of trace_pipe says. */
enum hc_rec_line {
  HC_REC_OTHER = 0,  /* nothing to record (another event, a comment) */
  HC_REC_ISSUE,      /* block_rq_issue: *req filled in */
  HC_REC_COMPLETE,   /* block_rq_complete: *req's time, op, sector and count */
  HC_REC_LOST,       /* "CPU:n [LOST k EVENTS]": *lost = k */
};

/* Parses one line of trace_pipe's text (without its newline).  Returns an
 * enum hc_rec_line, or -EINVAL for a block event line it cannot read. */
int hc_rec_parse_line (const char *line, struct hc_rec_req *req, uint64_t *lost);

typedef struct hc_rec hc_rec;

/* Starts recording the block device `device` (a path to it): mounts tracefs
 * at /sys/kernel/tracing if it is not mounted, creates a private instance
 * with `buffer_kb` KiB per CPU (0: 65536), filters both events to the
 * device, turns tracing on and starts the reader thread.  Returns 0,
 * -ENOTBLK (not a block device), -EACCES/-EPERM (not root), -ENOENT (no
 * tracefs or no block events), or another negative errno; `why` says
 * which. */
int hc_rec_start (const char *device, unsigned buffer_kb, hc_rec **out, char *why,
                  size_t whylen);

/* Stops: turns tracing off, reads what is left, joins the thread, reads
 * the per-CPU overrun counts and removes the instance.  Returns 0 or the
 * reader's error. */
int hc_rec_stop (hc_rec *r);

/* The requests recorded, in issue order (valid until hc_rec_free). */
const struct hc_rec_req *hc_rec_reqs (const hc_rec *r, size_t *n);

/* Events lost (0 for a complete trace), and completions that matched no
 * issue (issued before the start). */
uint64_t hc_rec_lost (const hc_rec *r);
uint64_t hc_rec_unmatched (const hc_rec *r);

/* Frees a recorder (stopping it first if needed; NULL allowed). */
void hc_rec_free (hc_rec *r);

/* ---------------------------------------------------------------------------
 * Labels (label.c)
 */

typedef struct hc_labeler hc_labeler;

/* The built-in label rules, as rule text with comments ("PATTERN LABEL",
 * hintd's rule language). */
const char *hc_labeler_default_rules (void);

/* Creates a labeler for the file system on `device` mounted at `mount`
 * (NULL: no files, only the layout), reading its layout now, with the
 * label rules of the file `rules` (NULL: none) before the built-in ones.
 * Returns 0 or a negative errno (`why` says; -EINVAL for a bad rule, with
 * its line). */
int hc_labeler_new (const char *device, const char *mount, const char *rules, hc_labeler **out,
                    char *why, size_t whylen);

/* Takes a FIEMAP snapshot of every regular file and directory under the
 * mount, stamped with the current CLOCK_MONOTONIC time, and asks the
 * catalog of each PostgreSQL data directory found so far what its files
 * hold (pgcat.c).  Returns 0 or a negative errno. */
int hc_labeler_snapshot (hc_labeler *l);

/* Number of snapshots taken, and files in the last one. */
size_t hc_labeler_snapshots (const hc_labeler *l, size_t *files);

/* The label and object of the bytes [off, off+len) of the device at time
 * ts_ns: a file's or directory's by the snapshot nearest in time that has
 * an owner for them (a file labelled by the rules, a directory
 * fs_metadata with its path ending in '/'), else the layout's (fs_metadata
 * with the structure's name, such as "inode_table(g3)", or "<metadata>"
 * for extent-tree blocks; journal "<journal>"), else unknown with no
 * object.  *object stays
 * valid until hc_labeler_free. */
void hc_labeler_resolve (const hc_labeler *l, uint64_t ts_ns, uint64_t off, uint64_t len,
                         uint8_t *label, const char **object);

/* After the run (and the recording: what it reads is not traced): labels
 * every snapshot's paths again with all the PostgreSQL catalogs learnt
 * during the run (a relation created while a snapshot was taken was not
 * in the catalog yet), and maps the pages of every SQLite database in the
 * last snapshot (a file named *.db,
 * *.sqlite, *.sqlite3 or *.db3 with SQLite's header) by kind, with the
 * sqlite3 shell's dbstat table, as the shared traces' labeler did: index
 * and table b-tree pages, overflow pages toast, page 1 (the schema) and
 * other pages catalog; resolving then labels a request on such a file by
 * the kind most of its pages have, unless a rule gave the file a label of
 * its own (a database under /backup stays temp).  A database that cannot be read keeps
 * its file's label.  Returns 0 or -ENOMEM. */
int hc_labeler_finish (hc_labeler *l);

/* The number of SQLite databases hc_labeler_finish mapped. */
size_t hc_labeler_databases (const hc_labeler *l);

/* Frees a labeler (NULL allowed). */
void hc_labeler_free (hc_labeler *l);

/* ---------------------------------------------------------------------------
 * PostgreSQL relations by kind (pgcat.c)
 */

/* Runs argv (argv[0] looked up in PATH, standard error discarded) and reads
 * its standard output into *text (NUL-terminated; at most 64 MiB; free it).
 * Returns 0 when the program exited 0, else a negative errno (-EIO for a
 * failure or too much output). */
int hc_rec_capture (char *const argv[], char **text);

typedef struct hc_pgcat hc_pgcat;

/* A catalog for the data directory `datadir` (absolute), empty until the
 * first refresh.  Returns 0 or -ENOMEM. */
int hc_pgcat_new (const char *datadir, hc_pgcat **out);

/* The data directory, and whether a refresh has succeeded. */
const char *hc_pgcat_datadir (const hc_pgcat *c);
bool hc_pgcat_known (const hc_pgcat *c);

/* Asks the server running on the data directory (postmaster.pid), through
 * psql as the directory's owner, for every database's relations: file
 * number, kind and namespace, added to what earlier refreshes learnt (a
 * file number keeps the kind it was last seen with).  Returns 0, -ENOENT
 * (no server running), or another negative errno (what was read is
 * kept). */
int hc_pgcat_refresh (hc_pgcat *c);

/* The label of a path inside the data directory (`rel`, relative to it,
 * without a leading '/'): 1 with *label set, or 0 when the path is not one
 * PostgreSQL's layout names. */
int hc_pgcat_label (const hc_pgcat *c, const char *rel, uint8_t *label);

/* Frees a catalog (NULL allowed). */
void hc_pgcat_free (hc_pgcat *c);

#endif /* HC_RECORD_H */
