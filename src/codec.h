/* Internal interface of the codecs: the ops table each transport fills in,
 * the device profile's fields, and the mapping table they all read.
 *
 *   codec.c         the registry and the one door (hc_codec_*): contracts are
 *                   checked there, so codecs trust their arguments
 *   codec_map.c     THE mapping table: class and advice rows × transport
 *                   columns, and the rule that combines a class with an advice
 *   profile.c       device profiles
 *   codec/<name>.c  one transport each, exporting one const struct hc_codec
 */
#ifndef HC_CODEC_INTERNAL_H
#define HC_CODEC_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "hintcache/codec.h"
#include "util.h"

struct hc_profile {
  unsigned ata_max;          /* MAXIMUM HYBRID PRIORITY LEVEL, 3 … 15 */
  bool ata_max_behavior;     /* the device may fail I/O tagged ata_max */
  bool ata_host_hinted;      /* tag unhinted data with M−1 */
  bool ata_evict;            /* HYBRID EVICT supported */
  unsigned nvme_placements;  /* placement handles available */
};

/* The default profile, used when a caller passes NULL. */
extern const struct hc_profile hc_profile_default;

/* The name of profile key i ("ata.max_priority"), in the order the keys
 * are documented, or NULL past the last: the keys hc_profile_set and
 * hc_profile_get take, for lists of them in messages (hc_names). */
const char *hc_profile_key_name (unsigned i);

/* Highest ATA priority we tag with: M, or M−1 when tagging M may fail I/O. */
static inline unsigned
hc_profile_ata_top (const struct hc_profile *p)
{
  return p->ata_max_behavior ? p->ata_max - 1 : p->ata_max;
}

/* One transport.  The door in codec.c has checked: the hint passes
 * hc_hint_check; the wire has n <= max_values, every v[i] <= value_max and
 * nbytes of 0 or HC_WIRE_BYTES; the wire to fill is zeroed. */
struct hc_codec {
  const char *name;
  const char *title;
  unsigned max_values;   /* most integers one wire holds */
  uint64_t value_max;    /* largest value of one integer */
  bool hex;              /* print values in hex (bit fields) */

  /* Fills *w for hint h on an I/O of direction dir.  Cannot fail. */
  void (*encode) (const struct hc_profile *p, struct hc_hint h, enum hc_dir dir,
                  struct hc_wire *w);

  /* Decodes *w.  Returns 0 with *h set (and a note in *why if something is
   * unusual), or -EINVAL with the reason in *why.  The returned hint must
   * pass hc_hint_check. */
  int (*decode) (const struct hc_profile *p, const struct hc_wire *w, enum hc_dir dir,
                 struct hc_hint *h, struct hc_sb *why);

  /* Describes *w field by field. */
  void (*describe) (const struct hc_profile *p, const struct hc_wire *w, struct hc_sb *out);
};

extern const struct hc_codec hc_codec_rfc2014, hc_codec_ioprio, hc_codec_rwh, hc_codec_fadvise,
    hc_codec_nfs42, hc_codec_nvme, hc_codec_ata, hc_codec_scsi;

/* ---------------------------------------------------------------------------
 * The mapping table (codec_map.c).  A row says how one class, or one advice,
 * appears on each transport.  Advice rows leave a field at HC_MAP_KEEP where
 * the advice does not change what the class says.
 */
#define HC_MAP_KEEP 0xffu

/* ATA hybrid priority levels, relative to the device's maximum M. */
enum hc_ata_level {
  HC_ATA_NONE = 0,  /* no hint: valid bit clear */
  HC_ATA_P0,        /* V(0): do not keep */
  HC_ATA_P1,        /* V(1): little value */
  HC_ATA_NORMAL,    /* V(M−1): the drive's ordinary level */
  HC_ATA_TOP,       /* V(Mtop): keep */
  HC_ATA_DEFAULT,   /* V(M−1) in host-hinted mode, else none */
};

/* Linux ioprio classes (include/uapi/linux/ioprio.h). */
enum { HC_IOPRIO_NONE = 0, HC_IOPRIO_RT = 1, HC_IOPRIO_BE = 2, HC_IOPRIO_IDLE = 3 };

/* posix_fadvise advice values (x86-64 and most architectures). */
enum {
  HC_FADV_NORMAL = 0, HC_FADV_RANDOM = 1, HC_FADV_SEQUENTIAL = 2,
  HC_FADV_WILLNEED = 3, HC_FADV_DONTNEED = 4, HC_FADV_NOREUSE = 5,
};

/* NFS 4.2 IO_ADVISE_type4 values (bit numbers of the hints bitmap). */
enum {
  HC_NFS_NORMAL = 0, HC_NFS_SEQUENTIAL, HC_NFS_SEQUENTIAL_BACKWARDS, HC_NFS_RANDOM,
  HC_NFS_WILLNEED, HC_NFS_WILLNEED_OPPORTUNISTIC, HC_NFS_DONTNEED, HC_NFS_NOREUSE,
  HC_NFS_READ, HC_NFS_WRITE, HC_NFS_INIT_PROXIMITY,
};
#define HC_NFS_BIT(n) (1u << (n))
/* The bits that say something about caching (replaced by an advice). */
#define HC_NFS_CACHE_BITS                                                                       \
  (HC_NFS_BIT (HC_NFS_NORMAL) | HC_NFS_BIT (HC_NFS_WILLNEED)                                   \
   | HC_NFS_BIT (HC_NFS_WILLNEED_OPPORTUNISTIC) | HC_NFS_BIT (HC_NFS_DONTNEED)                 \
   | HC_NFS_BIT (HC_NFS_NOREUSE))

/* SCSI logical block markup fields, type 0 "access patterns". */
struct hc_scsi_lbm {
  uint8_t ov_fr, rw_fr, wr_se, rd_se; /* descriptor byte 5, 2 bits each */
  uint8_t io_cl, su_io, osi_pr;       /* byte 6: IO CLASS (4 bits), 2, 2 */
  uint8_t acdlu, rlbsr;               /* byte 4: bit 7, bits 5:4 */
};

struct hc_map_row {
  uint8_t rfc;                 /* advice an advice-only transport sends */
  uint8_t ata;                 /* enum hc_ata_level */
  uint8_t ata_act;             /* follow-up (enum hc_wire_action) */
  uint8_t rwh;                 /* RWH lifetime, or KEEP */
  uint8_t nvme_af_read;        /* NVMe access frequency for reads, or KEEP */
  uint8_t nvme_af_write;       /* … for writes, or KEEP */
  uint8_t nvme_al;             /* access latency */
  uint8_t nvme_seq;            /* sequential request */
  uint16_t nfs;                /* IO_ADVISE4 bits */
  uint8_t ioprio_class;        /* or KEEP */
  uint8_t ioprio_level;
  uint8_t fadv[2];             /* posix_fadvise calls, KEEP-terminated */
  uint8_t scsi_ov_fr;          /* advice rows: OVERALL FREQUENCY, or KEEP */
  struct hc_scsi_lbm scsi;     /* class rows: the whole markup */
};

/* Rows by class id and by advice value (reserved advice rows are unused). */
extern const struct hc_map_row hc_map_class[HC_CLASS_COUNT];
extern const struct hc_map_row hc_map_advice[HC_ADVICE_LIMIT];

/* The row of the advice that applies to hint h alongside its class, or NULL:
 * none says nothing, and normal beside a class means "the class's own
 * treatment", so only a bare normal has a row of its own. */
const struct hc_map_row *hc_map_advice_row (struct hc_hint h);

/* Candidate orders for decoding by search: a transport that speaks in
 * advice (ATA, fadvise, NFS) prefers to read a value as advice; one that
 * speaks in classes (NVMe, lifetimes, ioprio) as a class. */
enum hc_prefer { HC_PREFER_CLASS, HC_PREFER_ADVICE };

/* The k-th candidate hint (flags 0) in order `prefer`, for decoders that
 * compare more than the wire integers.  Returns false past the last. */
bool hc_map_candidate (enum hc_prefer prefer, unsigned k, struct hc_hint *h);

/* Finds the preferred hint whose encoding by `codec` (flags 0, direction
 * `dir`) has the same integers as *w.  If `cls` is below HC_CLASS_COUNT only hints of that class are
 * tried.  Returns 0 with *h set, or -ENOENT. */
int hc_map_search (const struct hc_codec *codec, const struct hc_profile *p,
                   const struct hc_wire *w, enum hc_dir dir, enum hc_prefer prefer,
                   unsigned cls, struct hc_hint *h);

#endif /* HC_CODEC_INTERNAL_H */
