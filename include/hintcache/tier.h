/* hintcache — storage tiers.
 *
 * A tier is one device the volume stores blocks on: the fast tier (flash)
 * or the slow tier (disk).  Every implementation sits behind one small ops
 * table, and every call passes through one door (hc_tier_read, …) that checks
 * the contract before dispatching:
 *
 *   - offsets and lengths are multiples of HC_SECTOR_SIZE (512);
 *   - the range lies inside the tier (off + len <= hc_tier_size);
 *   - only known flags are passed (HC_TIER_FUA);
 *   - a zero length is a successful no-op, except that an empty write with
 *     HC_TIER_FUA is a flush (as an empty FUA write is to a disk) and
 *     returns what the flush returns.
 *
 * Violations return -EINVAL without reaching the implementation, whatever
 * the length.
 *
 * Implementations:
 *   file     a regular file or block device (pread/pwrite, optional O_DIRECT)
 *   nbd      an export of an NBD server, through libnbd (a remote slow tier)
 *   memory   RAM, for tests and simulation
 * Decorators, stacked on any tier (they never own or close the tier below):
 *   timing   adds modeled service time (HDD: seek by distance, rotation,
 *            transfer, sequential detection; NAND: read and program latency)
 *            without sleeping, for the simulator and tests
 *   faulty   injects errors (the Nth call, or a fraction of calls; EIO or
 *            ENOSPC; transient or permanent), and power cuts: writes since
 *            the tier's last flush are lost, kept or torn per 512-byte
 *            sector, as a seeded random generator decides
 *
 * Thread safety: file, nbd and memory tiers may be called from many threads
 * at once, on distinct or overlapping ranges.  Where two concurrent writes
 * overlap, what the overlap then holds is unspecified: the bytes of either,
 * possibly mixed (a memory tier copies with memcpy; a file or an NBD server
 * promises no atomicity beyond the sector).  A caller that cares orders
 * them, as the volume does with its stripe locks.  The decorators
 * serialise their own bookkeeping with a mutex.
 *
 * Functions return 0 or a negative errno; they never print or exit.
 */
#ifndef HINTCACHE_TIER_H
#define HINTCACHE_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HC_SECTOR_SIZE 512u

typedef struct hc_tier hc_tier;

/* Capabilities (hc_tier_caps). */
enum hc_tier_cap {
  HC_CAP_FUA        = 1u << 0, /* writes can be forced to stable media one by one */
  HC_CAP_DISCARD    = 1u << 1, /* discard releases space (reads then return zeros) */
  HC_CAP_ROTATIONAL = 1u << 2, /* seeks cost time (a disk) */
  HC_CAP_PERSISTENT = 1u << 3, /* contents survive closing the tier */
  HC_CAP_PREFETCH   = 1u << 4, /* hc_tier_prefetch works: the tier reads ahead into a cache of
                                  its own (a file read through the page cache) */
};

/* Write flags. */
enum hc_tier_write_flag {
  HC_TIER_FUA = 1u << 0, /* on stable media before returning */
};

/* Open flags for hc_tier_open_file, hc_tier_open_nbd and hc_tier_open. */
enum hc_tier_open_flag {
  HC_TIER_READONLY = 1u << 0,
  HC_TIER_DIRECT   = 1u << 1, /* O_DIRECT: buffers and offsets must then be
                                 aligned to the device's logical block size */
  HC_TIER_CLAIM    = 1u << 2, /* files: a claim no other process can share while it
                                 lasts — flock, exclusive (shared when read-only), and
                                 O_EXCL on a block device opened read-write; taken
                                 or the open fails with -EBUSY.  NBD: ignored */
};

/* ---- The door: every tier I/O passes through these. ---- */

/* Reads len bytes at off into buf. */
int hc_tier_read (hc_tier *t, void *buf, size_t len, uint64_t off);

/* Writes len bytes from buf at off; flags are enum hc_tier_write_flag bits.
 * With len 0 and HC_TIER_FUA, flushes (hc_tier_flush). */
int hc_tier_write (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags);

/* Makes every completed write durable. */
int hc_tier_flush (hc_tier *t);

/* Releases [off, off+len): later reads of it return zeros. */
int hc_tier_discard (hc_tier *t, uint64_t off, uint64_t len);

/* Starts reading [off, off+len) ahead of a reader, without waiting for it,
 * into a cache the tier keeps (the page cache, for a file): later reads of
 * the range are then served from memory.  Advisory: the data a read returns
 * never depends on it.  Returns 0, -EOPNOTSUPP if the tier has no such
 * cache (no HC_CAP_PREFETCH: a caller wanting readahead keeps a copy of its
 * own), or another negative errno. */
int hc_tier_prefetch (hc_tier *t, uint64_t off, uint64_t len);

/* Writes zeros over [off, off+len), efficiently where the tier can. */
int hc_tier_zero (hc_tier *t, uint64_t off, uint64_t len);

/* Size in bytes (a multiple of HC_SECTOR_SIZE). */
uint64_t hc_tier_size (const hc_tier *t);

/* enum hc_tier_cap bits. */
unsigned hc_tier_caps (const hc_tier *t);

/* A short description ("file:/dev/sdb", "memory", "faulty(memory)"). */
const char *hc_tier_name (const hc_tier *t);

/* A name of the device under the tier that stays the same when the device
 * moves (a block device's first /dev/disk/by-id name, e.g.
 * "wwn-0x5000c500a1b2c3d4"), or "" when there is none (files, memory, NBD
 * exports, block devices without udev names).  Decorators report the
 * identity of the tier below. */
const char *hc_tier_identity (const hc_tier *t);

/* Closes a tier and frees it (NULL is allowed).  A decorator does not close
 * the tier below it. */
void hc_tier_close (hc_tier *t);

/* ---- Implementations. ---- */

/* Opens a regular file or block device.  The size is the file's size (or
 * the device's) rounded down to a multiple of HC_SECTOR_SIZE.  Returns 0, or
 * the negative errno of open/fstat; -EINVAL if it is neither a regular file
 * nor a block device; -EBUSY if HC_TIER_CLAIM was asked and another holds
 * the file (or the device is mounted or claimed). */
int hc_tier_open_file (const char *path, unsigned flags, hc_tier **out);

/* Names who holds a claim on the file at `path` (for the message after
 * -EBUSY): "process PID (COMM)" from the kernel's lock table, or "another
 * process" if none can be named.  Writes a NUL-terminated string. */
void hc_tier_file_holder (const char *path, char *buf, size_t len);

/* Creates a zero-filled RAM tier of `size` bytes (a multiple of
 * HC_SECTOR_SIZE).  Returns 0, -EINVAL or -ENOMEM. */
int hc_tier_new_memory (uint64_t size, hc_tier **out);

/* Creates a RAM tier of `size` bytes whose contents start as the first
 * `size` bytes of the file `fd` (at least that long; e.g. a memfd holding a
 * snapshot), mapped privately: writes change this tier only, never the file,
 * and pages are copied only when first written, so many tiers can start from
 * one image cheaply.  The file must not change while such tiers exist.  The
 * tier does not keep `fd`.  Returns 0, -EINVAL, -ENOMEM or the negative
 * errno of fstat or mmap. */
int hc_tier_new_memory_image (int fd, uint64_t size, hc_tier **out);

/* Opens an export of an NBD server through libnbd, given an NBD URI
 * ("nbd://host[:port]/[export]", "nbd+unix:///[export]?socket=PATH", and the
 * other forms libnbd accepts: schemes nbd, nbds, nbd+unix, nbds+unix,
 * nbd+vsock, nbds+vsock).  The size is the export's (rounded down to
 * HC_SECTOR_SIZE).  The tier is read-only with HC_TIER_READONLY or when the
 * server says so (writes, zero and discard then return -EROFS);
 * HC_TIER_DIRECT is accepted and ignored.  Capabilities follow what the
 * server advertises: FUA, discard (only where the server can write zeros,
 * since NBD's trim does not promise zeros on read), rotational; always
 * persistent.  Reads and writes are split at the server's maximum request
 * size (at most 32 MiB).  Calls from many threads are spread over up to
 * four connections when the server allows multi-conn, else serialised on
 * one.  A flush flushes every connection.  Returns 0, -EINVAL (not an NBD
 * URI, unknown flags, or an export needing more than 512-byte alignment),
 * -EPROTONOSUPPORT (libnbd built without URI support), or the errno of the
 * failed connection, with `why` saying what failed. */
int hc_tier_open_nbd (const char *uri, unsigned flags, hc_tier **out, char *why, size_t whylen);

/* Sets the deadline of each command of an NBD tier (default 30 s): a call
 * whose reply is later fails with -ETIMEDOUT, and its connection is
 * abandoned (the others go on; with none left, calls fail at once).
 * Returns 0, or -EINVAL if t is not an NBD tier or ms is 0. */
int hc_tier_nbd_set_timeout (hc_tier *t, unsigned ms);

/* Opens what `spec` names: an NBD URI (nbd://, nbd+unix://, nbds://, …) as
 * with hc_tier_open_nbd, anything else as a file or block device as with
 * hc_tier_open_file.  Returns 0 or a negative errno, with `why` saying what
 * failed (for a file, "PATH: reason"). */
int hc_tier_open (const char *spec, unsigned flags, hc_tier **out, char *why, size_t whylen);

/* ---- Timing decorator. ---- */

/* Parameters of the timing model.  A tier is modeled as a disk when
 * rotational is set, else as flash. */
struct hc_timing_params {
  bool rotational;
  /* disk */
  double rpm;             /* e.g. 7200 */
  double seek_min_ms;     /* track-to-track seek */
  double seek_max_ms;     /* full-stroke seek */
  double disk_mb_s;       /* media transfer rate, MB/s (10^6 bytes) */
  /* flash */
  double read_us;         /* page read latency */
  double program_us;      /* page program latency */
  double flash_mb_s;      /* transfer rate, MB/s */
};

/* Fills *p with the defaults for a 7200 rpm disk (rotational) or a SATA
 * flash device (!rotational). */
void hc_timing_defaults (struct hc_timing_params *p, bool rotational);

/* The mean time a read at a random place waits before its data moves, in
 * transfers of `block` bytes: on a disk a seek over a random distance
 * (E√d = 8/15 of the stroke's root for two uniform places) and half a
 * revolution; on flash the page read latency.  What a miss that starts a
 * request of its own costs beyond its block (the default disk, 4 KiB
 * blocks: about 568).  Returns 0 if p is not valid or block is 0. */
double hc_timing_request_blocks (const struct hc_timing_params *p, uint32_t block);

/* A pure timing model (no data, no I/O), shared by the decorator and the
 * trace replayer. */
typedef struct hc_timing_model hc_timing_model;

/* Creates a model for a device of `capacity` bytes.  Returns 0, -EINVAL or
 * -ENOMEM. */
int hc_timing_model_new (const struct hc_timing_params *p, uint64_t capacity,
                         hc_timing_model **out);

/* Frees a model (NULL is allowed). */
void hc_timing_model_free (hc_timing_model *m);

/* Returns the modeled service time in microseconds of one I/O, and moves the
 * model's state (head position, sequential run) past it.  `write` selects
 * program vs read latency on flash; len may be 0 (a flush: 0 µs). */
double hc_timing_model_io (hc_timing_model *m, bool write, uint64_t off, uint64_t len);

/* Wraps `lower` in a timing decorator.  Returns 0, -EINVAL or -ENOMEM. */
int hc_tier_new_timing (hc_tier *lower, const struct hc_timing_params *p, hc_tier **out);

/* Modeled time accumulated by a timing decorator, in microseconds, by
 * operation; any pointer may be NULL.  Returns -EINVAL if `t` is not a
 * timing decorator. */
int hc_tier_timing_get (const hc_tier *t, double *read_us, double *write_us,
                        uint64_t *reads, uint64_t *writes);

/* ---- Fault decorator. ---- */

/* Operations a fault rule applies to (bits). */
enum hc_fault_op {
  HC_FAULT_READ    = 1u << 0,
  HC_FAULT_WRITE   = 1u << 1,
  HC_FAULT_FLUSH   = 1u << 2,
  HC_FAULT_DISCARD = 1u << 3, /* discard and zero */
};

/* A fault rule.  Calls of the selected operations are counted from 1; call
 * number `nth` fails (nth = 0: no count trigger), and so does each other
 * call with probability `fraction` (0 … 1, from the decorator's seeded
 * generator).  With `persistent`, every call after the first failure fails
 * too.  The failing call returns -err (EIO or ENOSPC) and does nothing. */
struct hc_fault_rule {
  unsigned ops;       /* enum hc_fault_op bits */
  uint64_t nth;
  double fraction;
  int err;            /* positive errno: EIO, ENOSPC */
  bool persistent;
};

/* A power domain: tiers that lose power together.  Each write to a tier in
 * the domain counts; when the count reaches the armed cut point, that write
 * and every later I/O of every tier in the domain fail with -EIO ("the power
 * is off") until hc_power_cut_apply. */
typedef struct hc_power hc_power;

/* Creates a power domain whose choices come from `seed`.  Returns 0 or
 * -ENOMEM. */
int hc_power_new (uint64_t seed, hc_power **out);

/* Frees a domain (NULL allowed).  Tiers attached to it must be closed first. */
void hc_power_free (hc_power *pw);

/* Arms a cut at the `cut_at`-th write counted from now (1 = the next one);
 * 0 disarms. */
void hc_power_arm (hc_power *pw, uint64_t cut_at);

/* Writes counted so far in the domain. */
uint64_t hc_power_writes (const hc_power *pw);

/* True once the power has been cut. */
bool hc_power_is_cut (const hc_power *pw);

/* Cuts now (if not cut already), then decides the fate of every write since
 * each tier's last flush, per 512-byte sector: each sector ends up holding
 * one of the versions written to it since the flush, or its content before
 * them (so a multi-sector write can be torn).  The surviving contents are
 * written to the tiers below.  Afterwards the decorators pass I/O through
 * again (the power is back).  Returns 0 or the first error from below. */
int hc_power_cut_apply (hc_power *pw);

/* Wraps `lower` in a fault decorator; `pw` (may be NULL) attaches it to a
 * power domain; `seed` seeds its fraction generator.  Returns 0 or -ENOMEM. */
int hc_tier_new_faulty (hc_tier *lower, hc_power *pw, uint64_t seed, hc_tier **out);

/* Replaces the decorator's rule (a zeroed rule injects nothing) and resets
 * its call counter.  Returns -EINVAL if `t` is not a fault decorator or the
 * rule is malformed. */
int hc_tier_faulty_set (hc_tier *t, const struct hc_fault_rule *rule);

/* Errors injected so far. */
uint64_t hc_tier_faulty_injected (const hc_tier *t);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_TIER_H */
