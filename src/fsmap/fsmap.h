/* The file system map of the hint daemon (`hintcache hintd`): which byte
 * ranges of a volume hold what, as a class map built from a file system's
 * layout and from path rules, and the difference between two such maps as
 * control-socket operations.
 *
 * Three parts, one file each:
 *
 *   - map.c: range maps (sorted, non-overlapping, merged ranges with a hint
 *     each), a builder that turns overlapping pieces with priorities into a
 *     map, the diff engine (a pure function from two maps to a list of
 *     advise/unadvise operations), applying operations to a map, and
 *     hc_fsmap_scan, which puts a whole scan together;
 *   - rules.c: path rules (a pattern and a hint: "*.idx transaction"):
 *     parsing with line numbers, matching, the built-in defaults, and the walk of a mounted
 *     tree that gives each matching regular file's FIEMAP extents its rule's
 *     hint;
 *   - ext4.c: the layout of an ext2/3/4 file system read with libext2fs:
 *     superblocks, group descriptors, bitmaps, inode tables, directory and
 *     extent-tree blocks (metadata) and the internal journal (journal).
 *
 * Offsets in maps are bytes on the volume: the caller's offset (where the
 * file system's device starts on the volume) plus the byte offset on the
 * device.
 *
 * Internal: not exported from the shared library.  Functions return 0 or a
 * negative errno and never print or exit; what a scan met (unreadable
 * directories, files not yet allocated …) is counted in a stats struct.
 */
#ifndef HC_FSMAP_H
#define HC_FSMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hintcache/classes.h" /* struct hc_parse_error */
#include "hintcache/hint.h"

/* ---------------------------------------------------------------------------
 * Range maps
 */

/* One range of a map: bytes [start, end) hold `hint`. */
struct hc_fsmap_range {
  uint64_t start, end;
  struct hc_hint hint;
};

/* A map: ranges sorted by start, non-empty, non-overlapping, each with a
 * hint that is not the empty hint, and two ranges that touch never have
 * the same hint (they are merged).  The zero value is the empty map. */
struct hc_fsmap {
  struct hc_fsmap_range *r; /* malloc'd */
  size_t n, cap;
};

/* A hint value no real hint equals (class 0xff): a range whose state on
 * the server is not known (a request that failed half-way).  The diff
 * withdraws it like any other hint.  Never sent. */
#define HC_FSMAP_UNKNOWN ((struct hc_hint) { .cls = 0xff })

/* True if two hints are the same value (class, advice and flags). */
bool hc_fsmap_hint_eq (struct hc_hint a, struct hc_hint b);

/* Frees a map's array and empties it (NULL is allowed). */
void hc_fsmap_free (struct hc_fsmap *m);

/* Returns the hint of the byte at off (the empty hint where no range
 * covers it).  O(log n). */
struct hc_hint hc_fsmap_lookup (const struct hc_fsmap *m, uint64_t off);

/* Checks a map's invariants (see struct hc_fsmap).  Returns 0 or -EINVAL. */
int hc_fsmap_check (const struct hc_fsmap *m);

/* Adds up the bytes and ranges of a map per class (index: the hint's class;
 * a hint with an advice and no class counts as unclassified; ranges in
 * HC_FSMAP_UNKNOWN are not counted).  Either array may be NULL. */
void hc_fsmap_count (const struct hc_fsmap *m, uint64_t bytes[HC_CLASS_COUNT],
                     uint64_t ranges[HC_CLASS_COUNT]);

/* ---------------------------------------------------------------------------
 * Building a map from overlapping pieces
 */

/* Priorities of pieces: where pieces overlap, the higher priority wins,
 * and among equal priorities the piece added first. */
enum hc_fsmap_prio {
  HC_FSMAP_PRIO_RULES  = 1, /* files' data by path rules */
  HC_FSMAP_PRIO_LAYOUT = 2, /* the file system's own metadata and journal */
};

struct hc_fsmap_piece {
  uint64_t start, end;
  uint32_t seq; /* order of addition */
  uint8_t prio;
  struct hc_hint hint;
};

/* Pieces being collected; the zero value is an empty builder. */
struct hc_fsmap_builder {
  struct hc_fsmap_piece *p; /* malloc'd */
  size_t n, cap;
};

/* Adds the piece [start, start+len) with `hint` and priority `prio`.  An
 * empty hint is allowed: it means "no hint here" and hides lower-priority
 * pieces.  A piece that continues the previous one (same hint and
 * priority, touching) extends it.  len 0 is a no-op.  Returns 0, -ERANGE
 * if the piece passes 2^64, or -ENOMEM. */
int hc_fsmap_add (struct hc_fsmap_builder *b, uint64_t start, uint64_t len, struct hc_hint hint,
                  unsigned prio);

/* Resolves the builder's pieces into a map (*out is replaced; the builder is
 * emptied but keeps its memory).  O(n log n).  Returns 0 or -ENOMEM (then
 * *out is the empty map and the builder is emptied too). */
int hc_fsmap_build (struct hc_fsmap_builder *b, struct hc_fsmap *out);

/* Frees a builder's memory (NULL is allowed). */
void hc_fsmap_builder_free (struct hc_fsmap_builder *b);

/* ---------------------------------------------------------------------------
 * Differences as control-socket operations
 */

enum hc_fsmap_op_kind {
  HC_FSMAP_ADVISE   = 1, /* "advise START END-START HINT" */
  HC_FSMAP_UNADVISE = 2, /* "unadvise START END-START" */
};

/* What became of an operation once sent (filled by whoever sends it). */
enum hc_fsmap_op_state {
  HC_FSMAP_OP_APPLIED     = 0, /* acknowledged: the server did it */
  HC_FSMAP_OP_NOT_APPLIED = 1, /* refused, or never sent */
  HC_FSMAP_OP_UNKNOWN     = 2, /* the connection failed with it in flight, or
                                  a withdrawal was refused: the range's state
                                  on the server is unknown */
};

struct hc_fsmap_op {
  uint64_t start, end;
  struct hc_hint hint; /* for HC_FSMAP_ADVISE */
  uint8_t kind;        /* enum hc_fsmap_op_kind */
  uint8_t state;       /* enum hc_fsmap_op_state; hc_fsmap_diff sets APPLIED */
};

/* A list of operations; the zero value is empty. */
struct hc_fsmap_ops {
  struct hc_fsmap_op *op; /* malloc'd */
  size_t n, cap;
  uint64_t advised_bytes;   /* sum of the advise operations' lengths */
  uint64_t unadvised_bytes; /* sum of the unadvise operations' lengths */
  uint64_t withdrawn_bytes; /* bytes that had a hint and get none */
};

/* Computes the operations that take a server holding `old` (from us) to
 * holding `new`: wherever a byte's hint differs, it is withdrawn if old had
 * one (unadvise — advise alone would merge with a previous advice) and then
 * advised if new has one.  Operations come run by run (a run: changed
 * bytes without a gap) in ascending order; within a run its unadvises come
 * first, then its advises, each in ascending order.  Touching withdrawals
 * are one unadvise and touching advises of one hint one advise.  Applying the operations in
 * order to `old` (hc_fsmap_apply) gives `new` exactly.  A pure function:
 * *out is replaced.  Returns 0 or -ENOMEM (then *out is empty). */
int hc_fsmap_diff (const struct hc_fsmap *old, const struct hc_fsmap *new,
                   struct hc_fsmap_ops *out);

/* Computes what the server holds after `ops` were sent, in order, to one
 * holding `old`, byte by byte: an applied unadvise leaves no hint; an
 * applied advise leaves its hint where there was none or the same one, and
 * HC_FSMAP_UNKNOWN over a different hint (the server merges class and
 * advice); an operation not applied changes nothing; an unknown one leaves
 * HC_FSMAP_UNKNOWN.  *out is replaced.  Returns 0 or -ENOMEM. */
int hc_fsmap_apply (const struct hc_fsmap *old, const struct hc_fsmap_ops *ops,
                    struct hc_fsmap *out);

/* Frees an operation list and empties it (NULL is allowed). */
void hc_fsmap_ops_free (struct hc_fsmap_ops *ops);

/* ---------------------------------------------------------------------------
 * Path rules (rules.c)
 *
 * One rule per line: PATTERN HINT.  '#' at the start of a line or after a
 * blank starts a comment; blank lines are skipped.  HINT is what
 * hc_hint_parse reads (words joined by '+', ',' or blanks) and must name a
 * class or an advice, and no flags (a range hint stores a class and an
 * advice; flags are facts about single accesses).
 *
 * PATTERN is matched against a regular file's path relative to the mount
 * point, component by component, as gitignore does:
 *   - a leading '/' anchors it at the mount point ("/swapfile");
 *   - without any '/', it matches the file's name in any directory ("*.idx");
 *   - with a '/' elsewhere, it matches a tail of the path that starts at a
 *     component boundary ("pg_wal/x?" matches "a/pg_wal/x1", not
 *     "apg_wal/x1");
 *   - '*' matches any run of characters within one component, '?' one
 *     character (never '/'), '\' makes the next character literal;
 *   - a component that is exactly "**" matches any number of components:
 *     zero or more as the first or a middle component, one or more as the
 *     last (so "/backup/" followed by "**" matches every file under
 *     /backup, but not a file named backup);
 *   - a pattern ending in '/', an empty component ("a//b"), "." or "..", or
 *     a '\' at the end is an error.
 * The first rule that matches decides; a file no rule matches gets no hint.
 */

/* One compiled rule. */
struct hc_fsrule {
  char *pattern;      /* as written (malloc'd) */
  char **seg;         /* its components ("**" for any number); malloc'd */
  size_t nseg;
  struct hc_hint hint; /* hintd's rules: what the rule says */
  unsigned value;     /* rules read with a value reader: what it read */
  unsigned line;      /* where it was read */
};

/* Reads the right-hand side of a rule that is not a hint (the recorder's
 * label rules: "PATTERN LABEL"): the text after the pattern, trimmed and
 * without its comment.  Returns 0 with *value set, or -EINVAL with err
 * filled. */
typedef int hc_fsrule_value_fn (const char *text, unsigned *value, struct hc_parse_error *err);

/* A list of rules; the zero value is the empty list (matches nothing). */
struct hc_fsrules {
  struct hc_fsrule *r;
  size_t n;
};

/* The built-in rules, as rule text with comments (what `hintcache hintd
 * --show-rules` prints). */
const char *hc_fsrules_default_text (void);

/* Parses rule text of `len` bytes into *out (replaced on success).  Returns
 * 0, -EINVAL with err (may be NULL) holding the first bad line's number and
 * why, or -ENOMEM. */
int hc_fsrules_parse (const char *text, size_t len, struct hc_fsrules *out,
                      struct hc_parse_error *err);

/* Reads and parses a rules file (at most 1 MiB), as hc_fsrules_parse.
 * Returns 0, -EINVAL with err filled, or the negative errno of reading it. */
int hc_fsrules_load_file (const char *path, struct hc_fsrules *out, struct hc_parse_error *err);

/* As hc_fsrules_parse and hc_fsrules_load_file, with the right-hand side of
 * each rule read by `value` into its `value` field instead of a hint (the
 * same patterns, comments and errors). */
int hc_fsrules_parse_as (const char *text, size_t len, hc_fsrule_value_fn *value,
                         struct hc_fsrules *out, struct hc_parse_error *err);
int hc_fsrules_load_file_as (const char *path, hc_fsrule_value_fn *value, struct hc_fsrules *out,
                             struct hc_parse_error *err);

/* Returns the index of the first rule matching `path` (relative to the
 * mount point; a leading '/' is ignored), or -1 if none does. */
int hc_fsrules_match (const struct hc_fsrules *rs, const char *path);

/* Frees the rules and empties the list (NULL is allowed). */
void hc_fsrules_free (struct hc_fsrules *rs);

/* ---------------------------------------------------------------------------
 * Scanning
 */

#define HC_FSMAP_TOP 5 /* largest files remembered per class */

/* One of the largest files of a class. */
struct hc_fsmap_topfile {
  char *path;     /* relative to the mount point (malloc'd); NULL if unused */
  uint64_t bytes; /* bytes with a place on the device */
};

/* What a scan found and met.  Zero it before the first scan; free it with
 * hc_fsmap_stats_free (a scan frees and refills it). */
struct hc_fsmap_stats {
  /* The layout (ext4.c), when a device was given. */
  bool layout;              /* a layout scan ran */
  uint32_t block_size;
  uint64_t groups;
  uint64_t inodes;          /* in-use inodes seen */
  uint64_t dirs;            /* directories whose blocks were mapped */
  uint64_t tree_files;      /* files with extent-tree or indirect blocks */
  uint64_t dir_errors;      /* directories (or other inodes) whose blocks
                               could not be read: skipped */
  uint64_t inode_errors;    /* inodes the scan could not read: skipped */
  uint64_t layout_journal;  /* bytes of the internal journal */
  bool external_journal;    /* the journal is on another device: not mapped */
  long ext2_error;          /* the libext2fs error code of a failed layout
                               scan (0: none) */

  /* The tree walk (rules.c). */
  uint64_t walk_dirs;       /* directories read */
  uint64_t walk_files;      /* regular files seen */
  uint64_t matched;         /* regular files a rule matched */
  uint64_t pending;         /* matched files with extents not yet placed
                               (delayed allocation): retried next scan */
  uint64_t pending_bytes;
  uint64_t unreadable_dirs; /* directories that could not be opened or read */
  uint64_t unreadable_files;/* matched files that could not be opened or
                               mapped (FIEMAP) */
  uint64_t other_fs;        /* directories on other file systems: skipped */
  uint64_t rule_hits_bytes; /* bytes of matched files' placed extents */

  /* The result (hc_fsmap_scan). */
  uint64_t bytes[HC_CLASS_COUNT];  /* per class, as hc_fsmap_count */
  uint64_t ranges[HC_CLASS_COUNT];
  uint64_t files[HC_CLASS_COUNT];  /* matched files per class of their rule */
  struct hc_fsmap_topfile top[HC_CLASS_COUNT][HC_FSMAP_TOP]; /* largest first */

  char why[256]; /* what failed, when a scan returns an error */
};

/* Frees the path strings of st->top and zeroes *st (NULL is allowed). */
void hc_fsmap_stats_free (struct hc_fsmap_stats *st);

/* What to scan. */
struct hc_fsmap_opts {
  const char *mount;             /* the mounted tree to walk (NULL: no walk) */
  const char *device;            /* the device or image for the layout scan
                                    (NULL: none) */
  uint64_t offset;               /* where the device starts on the volume */
  const struct hc_fsrules *rules;/* NULL or empty: no files are hinted */
  bool top;                      /* remember each class's largest files */
  /* Called with each directory the walk reads (its absolute path), before
   * its entries; for inotify watches.  May be NULL. */
  void (*on_dir) (void *arg, const char *path);
  void *arg;
};

/* Reads the layout of the ext2/3/4 file system on `device` (opened fresh,
 * read-only, with libext2fs) and adds its metadata and journal, shifted by
 * `offset`, to b at HC_FSMAP_PRIO_LAYOUT:
 *   - metadata: each group's superblock copy, group descriptors and
 *     reserved GDT blocks (or its meta_bg descriptor block), block and inode
 *     bitmaps and inode table (wherever flex_bg put them), the MMP block;
 *     every block of directories, slow symlinks, the resize inode, quota
 *     inodes and the orphan file; the extent-tree node blocks (or indirect
 *     blocks) of every other inode, without reading their leaves; extended
 *     attribute blocks;
 *   - journal: every block of the internal journal inode.
 * Inodes with inline data and fast symlinks have no blocks.  An inode whose
 * blocks cannot be read is skipped and counted (st->dir_errors).  Returns 0,
 * or a negative errno with st->why and st->ext2_error saying why (the
 * device cannot be opened or is not ext2/3/4, …). */
int hc_fsmap_scan_layout (const char *device, uint64_t offset, struct hc_fsmap_builder *b,
                          struct hc_fsmap_stats *st);

/* Called by hc_fsmap_scan_structures with each named structure's device
 * bytes; returns 0 or a negative errno (which ends the scan). */
typedef int hc_fsmap_name_fn (void *arg, uint64_t start, uint64_t len, const char *name);

/* Names the fixed structures of the ext2/3/4 file system on `device`, as the
 * shared traces' objects do, calling name() with each one's bytes (shifted
 * by `offset`), group by group: "superblock(primary g0)" or
 * "superblock(backup gN)", "group_descriptors(gN)", "reserved_gdt(gN)",
 * "block_bitmap(gN)", "inode_bitmap(gN)", "inode_table(gN)" (one call per
 * table, wherever flex_bg placed it).  Returns 0, name()'s error, or a
 * negative errno with st->why when the device cannot be read as ext2/3/4. */
int hc_fsmap_scan_structures (const char *device, uint64_t offset, hc_fsmap_name_fn *name,
                              void *arg, struct hc_fsmap_stats *st);

/* Walks the tree under o->mount (not crossing into other file systems, not
 * following symbolic links) and adds, for each regular file the first
 * matching rule of o->rules names, its placed extents (hc_file_extents,
 * without flushing) shifted by o->offset with the rule's hint, at
 * HC_FSMAP_PRIO_RULES.  Files and directories that cannot be opened are
 * skipped and counted; extents in delayed allocation are counted as
 * pending.  Returns 0, or a negative errno (with st->why) when the mount
 * point itself cannot be read. */
int hc_fsmap_scan_tree (const struct hc_fsmap_opts *o, struct hc_fsmap_builder *b,
                        struct hc_fsmap_stats *st);

/* A whole scan: the layout (if o->device), the tree walk (if o->mount),
 * built into *out (replaced), with st refilled (freed first) and its
 * per-class totals set.  Returns 0, or a negative errno with st->why (then
 * *out is the empty map): a scan that could not read the layout or the
 * mount point fails as a whole, so a caller never takes a partial map for
 * the truth. */
int hc_fsmap_scan (const struct hc_fsmap_opts *o, struct hc_fsmap *out, struct hc_fsmap_stats *st);

/* A short text for a libext2fs error code (as in hc_fsmap_stats.ext2_error):
 * the project's own for the common ones (they say what to do), else
 * libext2fs's message from com_err, else strerror for an errno; NULL for a
 * code nobody knows. */
const char *hc_fsmap_ext2_why (long code);

#endif /* HC_FSMAP_H */
