/* hintcache — the control socket: range hints and live management for a
 * running volume, from unmodified applications and tools.
 *
 * A server (hc_control_start) listens on a Unix stream socket created with
 * mode 0600, and serves each connection in its own thread.  A connecting
 * peer is checked with SO_PEERCRED: only root and the server's own
 * effective user are served; anyone else gets one error line and is
 * disconnected.
 *
 * The protocol, version 1.  Lines of ASCII ending in '\n' (a '\r' before it
 * is ignored), at most HC_CONTROL_LINE bytes with the newline.  The server
 * speaks first, with a greeting:
 *
 *     hintcache-control 1
 *
 * A client that is not root or the server's effective user gets instead
 * "error EPERM …" and is disconnected; one over the server's limit of
 * clients (32) gets "error EBUSY …".
 *
 * Then every request line gets exactly one reply line, in order:
 *
 *     ok[ PAYLOAD]
 *     error ERRNO-NAME MESSAGE          e.g. "error EINVAL unknown class 'x'"
 *
 * Requests (printable ASCII words separated by single or multiple spaces;
 * numbers are decimal, or hexadecimal with 0x, optionally with one K, M, G
 * or T suffix — either case — meaning powers of 1024; OFF and LEN are bytes
 * and the range must lie inside the volume, LEN not 0):
 *
 *     version                 ok 1
 *     advise OFF LEN HINT [from=SOURCE]
 *                             store/apply a range hint: HINT is a class, an
 *                             advice or both, as hc_hint_parse reads them
 *                             ("journal", "willneed", "background+dontneed");
 *                             SOURCE (hc_source_parse: admin, hintd, advise,
 *                             preload; default admin) owns it from then on;
 *                             hc_volume_advise_from
 *     unadvise OFF LEN [from=SOURCE]
 *                             withdraw the range hints there that SOURCE
 *                             stored (admin, the default: all of them);
 *                             hc_volume_unadvise_from
 *     hint OFF                ok HINT — the range hint stored for OFF, as
 *                             hc_hint_format writes it ("unclassified"
 *                             when none)
 *     stats                   ok KEY=VALUE … — hc_stats, as hc_stats_format
 *                             writes it
 *     info                    ok KEY=VALUE … — size, block_size, cache_blocks,
 *                             mode, policy, range_hints
 *     clean                   ok — every dirty block written back
 *     mode MODE               ok — hc_volume_set_mode (writethrough,
 *                             writeback, writearound, passthrough)
 *     quit                    ok, then the server closes the connection
 *
 * Anything else — an unknown command, a missing or extra word, a bad
 * number, a range outside the volume, a hint naming neither a class nor an
 * advice, a line that is too long (E2BIG; the rest of it is discarded), a
 * NUL or other control byte — gets an error reply and the connection goes
 * on.  A reply never spans lines.  Error names: EINVAL for a malformed
 * request, ERANGE for a number too large or a range outside the volume,
 * E2BIG for a long line, otherwise the errno of the volume call that failed
 * (ENOSPC: the range table is full; EROFS …).
 *
 * Functions return 0 or a negative errno and never print or exit.
 */
#ifndef HINTCACHE_CONTROL_H
#define HINTCACHE_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "stats.h"
#include "volume.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HC_CONTROL_VERSION 1
/* The longest request or reply line, newline included: room for every
 * counter of hc_stats at its largest value. */
#define HC_CONTROL_LINE 16384

/* ---- The server. ---- */

typedef struct hc_control hc_control;

/* Executes one request line (without its newline: a '\r' left in it is a
 * control byte and an error) against a volume and writes the reply line
 * (without a newline) into reply[len] (len ≥ HC_CONTROL_LINE; a shorter
 * buffer gets a truncated reply).  Returns 0, 1 when the request was "quit",
 * or -EINVAL (and no reply) if reply is NULL or len is 0.  Every input,
 * however malformed, yields a reply; this is the whole protocol apart from
 * the socket, for tests and fuzzing. */
int hc_control_exec (hc_volume *v, const char *line, char *reply, size_t len);

/* Listens on a Unix socket at `path` (a stale socket file nobody listens on
 * is replaced; any other existing file is refused with -EEXIST) and serves
 * it from a thread until hc_control_stop.  Returns 0, or a negative errno
 * with `why` saying what failed. */
int hc_control_start (hc_volume *v, const char *path, hc_control **out, char *why,
                      size_t whylen);

/* Stops listening, disconnects every client, joins the threads and removes
 * the socket file (NULL is allowed).  Call before closing the volume. */
void hc_control_stop (hc_control *c);

/* ---- A client. ---- */

typedef struct hc_control_client hc_control_client;

/* Connects to a server and reads its greeting (waiting at most 10 s for
 * it).  Returns 0, -EPROTO (not a hintcache control socket, or a version
 * this client does not speak), -EACCES (the server refused this user, or
 * the socket file's mode did), -EBUSY (too many clients), or the errno of
 * connect; `why` says which. */
int hc_control_connect (const char *path, hc_control_client **out, char *why, size_t whylen);

/* Sends one request line (no newline) and reads the reply.  Returns 0 with
 * the payload after "ok" (possibly empty) in reply[len]; a negative errno
 * from an "error" reply with its message in reply[len] (-EIO for an error
 * name this client does not know); -EPIPE or -EIO if the connection failed;
 * -EPROTO for a reply that is neither; -EINVAL (a newline in the line) or
 * -E2BIG (longer than HC_CONTROL_LINE - 1) without sending anything.  A
 * reply longer than reply[len] is cut to fit (reply may be NULL if len is
 * 0). */
int hc_control_request (hc_control_client *c, const char *line, char *reply, size_t len);

/* How hc_control_open connects, and what the client does with its socket. */
struct hc_control_options {
  /* Connecting waits at most this many milliseconds (the socket is then
   * nonblocking, and a server whose backlog is full refuses at once);
   * negative: as long as it takes. */
  int connect_ms;
  /* Then the greeting is awaited at most this many milliseconds; negative:
   * as long as it takes. */
  int greeting_ms;
  /* Above 0: the socket gets the lowest free fd at or above this
   * (F_DUPFD_CLOEXEC), if there is one, so that it stays out of the way
   * of a program that uses low fds by number. */
  int fd_min;
  /* How the client closes its socket (NULL: close).  A library that
   * interposes close passes the real one. */
  int (*close_fd) (int fd);
  /* The longest reply line, newline included (0: HC_CONTROL_LINE); the
   * client's buffers are twice this.  A longer reply fails the call. */
  size_t line_max;
};

/* Connects as hc_control_connect does, with opt's timeouts and hooks (NULL:
 * those of hc_control_connect).  Never waits past opt's deadlines.  Returns
 * 0 or the same errors as hc_control_connect (-ETIMEDOUT when connecting
 * took too long); on failure the socket is closed with opt->close_fd, and
 * `why` says what failed without naming the path ("cannot connect: …",
 * "no greeting (no reply in time)", "not a hintcache control socket (it
 * said '…')"), for a caller that names the socket itself. */
int hc_control_open (const char *path, const struct hc_control_options *opt,
                     hc_control_client **out, char *why, size_t whylen);

/* Called by hc_control_batch for each reply, in order: i counts from 0;
 * status is 0 for "ok[ PAYLOAD]", a negative errno for "error ENAME …"
 * (-EIO for a name this client does not know, or none); line is the reply
 * line as received, without its newline. */
typedef void (*hc_control_on_reply) (void *arg, unsigned i, int status, const char *line);

/* Sends requests[len] — request lines, each ending in '\n' — at once, then
 * reads one reply per line, all by timeout_ms milliseconds from the call
 * (negative: no deadline), never waiting past it (a server that takes no
 * requests or sends no replies costs the timeout, no more).  on_reply (if
 * not NULL) gets each reply as it is read.  Returns 0 when every reply
 * came; -EINVAL (no newline at the end) or -E2BIG (a line longer than
 * HC_CONTROL_LINE - 1) without sending anything; otherwise the connection
 * failed, the replies after the last one given to on_reply are lost and the
 * connection is out of step (close it): -ETIMEDOUT (the server took the
 * requests or replied too slowly), -EPIPE (the server closed), -EMSGSIZE
 * (a reply longer than the client's line_max), -EPROTO (a reply neither ok
 * nor error), -EIO or the errno of send, with `why` saying which ("the
 * server takes no requests", "no reply in time", "the server closed the
 * connection", "a reply that is neither ok nor error: '…'", …). */
int hc_control_batch (hc_control_client *c, const char *requests, size_t len, int timeout_ms,
                      hc_control_on_reply on_reply, void *arg, char *why, size_t whylen);

/* The socket under a connection: its fd, and the device and inode fstat
 * gave for it when it connected — a program that closes fds it does not
 * know, or dup2s another file over them, can take the fd away; then its
 * fstat no longer shows this device and inode. */
struct hc_control_id {
  int fd;
  dev_t dev;
  ino_t ino;
};

/* Fills *id.  Returns 0, or -EINVAL for a NULL argument. */
int hc_control_identity (const hc_control_client *c, struct hc_control_id *id);

/* Closes the connection (NULL is allowed), with the close function of its
 * options. */
void hc_control_close (hc_control_client *c);

/* Frees the connection without closing its fd (NULL is allowed): for when
 * the fd is no longer the client's (closed by someone else, or another
 * file put there). */
void hc_control_abandon (hc_control_client *c);

/* ---- Statistics as text (the "stats" payload). ---- */

/* Writes s as space-separated KEY=VALUE words in decimal into buf[len],
 * NUL-terminated: first the volume's counters, always (cache_blocks,
 * free_blocks, pending_blocks, commits, flushes, prefetched, errors_fast,
 * errors_checksum, hint_effects, effect_changes, meta_flash_bytes, ways),
 * then each class's counters that are not zero: CLASS.OP.hits,
 * CLASS.OP.misses, CLASS.OP.admissions, CLASS.OP.bytes,
 * CLASS.OP.bypass.REASON (OP read or write, REASON as hc_bypass_name),
 * CLASS.evictions, CLASS.writebacks, CLASS.hint_hits,
 * CLASS.flash_bytes_written, CLASS.blocks, CLASS.dirty — e.g.
 * "metadata.read.hits=12 metadata.read.bypass.sequential=3".  Returns the
 * length, or -ENOSPC if it does not fit (HC_CONTROL_LINE - 4 bytes always
 * do). */
int hc_stats_format (const struct hc_stats *s, char *buf, size_t len);

/* Parses what hc_stats_format writes back into *s; counters not named are
 * zero, and unknown keys are skipped, so newer servers can add some.
 * Returns 0, or -EINVAL (leaving *s unchanged) for a word that is not
 * KEY=NUMBER or for an empty text. */
int hc_stats_parse (const char *text, struct hc_stats *s);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_CONTROL_H */
