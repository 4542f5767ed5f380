/* hintcache — transport codecs.
 *
 * A codec translates hintcache's hints to and from one real transport's hint
 * encoding:
 *
 *   rfc2014  the 2014 RFC's advice in ioprio bits 11, 12 and 15
 *   ioprio   today's Linux ioprio (class 15:13, hint 12:3, level 2:0)
 *   rwh      write-life hints, fcntl(F_SET_RW_HINT), values 0 … 5
 *   fadvise  posix_fadvise(2) advice, one value per call
 *   nfs42    NFS 4.2 IO_ADVISE4 bitmap (RFC 7862 §15.5)
 *   nvme     NVMe read/write Dword 13: DSM byte 7:0, DSPEC 31:16
 *   ata      the SATA hybrid information byte (AUXILIARY 23:16)
 *   scsi     GROUP NUMBER, plus the IO advice hints grouping descriptor
 *
 * Codecs are pure functions of integers and buffers: no I/O, no state, safe
 * from any thread.  Where a transport can express a hint, decoding its
 * encoding gives the hint back; where it cannot, hc_codec_roundtrip() says
 * what is lost.  Every possible wire value decodes without crashing: invalid
 * ones give -EINVAL and a reason.  The mapping from classes and advice to each
 * transport is one table in src/codec_map.c (after the proposal in
 * hint-standards §10), parameterised by a device profile.
 *
 * Functions return 0 or a negative errno; they never print, exit or set errno.
 */
#ifndef HINTCACHE_CODEC_H
#define HINTCACHE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "hint.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Codec ids, in the order codecs are listed. */
enum hc_codec_id {
  HC_CODEC_RFC2014 = 0,
  HC_CODEC_IOPRIO,
  HC_CODEC_RWH,
  HC_CODEC_FADVISE,
  HC_CODEC_NFS42,
  HC_CODEC_NVME,
  HC_CODEC_ATA,
  HC_CODEC_SCSI,
};
#define HC_CODEC_COUNT 8

/* Direction of the I/O a hint travels with.  Some transports encode a class
 * differently for reads and writes (NVMe: one-time read vs rare write). */
enum hc_dir {
  HC_DIR_ANY   = 0, /* not known, or advice for a range */
  HC_DIR_READ  = 1,
  HC_DIR_WRITE = 2,
};

/* Follow-up commands a transport needs to honour a hint fully. */
enum hc_wire_action {
  HC_WIRE_ACT_HYBRID_EVICT = 1u << 0, /* ATA: HYBRID EVICT of the range (after the write) */
  HC_WIRE_ACT_CHANGE_RANGE = 1u << 1, /* ATA: HYBRID CHANGE BY LBA RANGE to the top priority */
};

#define HC_WIRE_VALUES 4
#define HC_WIRE_BYTES 16

/* What a transport carries.  Most transports carry one integer (n = 1);
 * fadvise carries one advice per call, so 0 … 2 calls; SCSI also fills
 * `bytes` with the 16-byte grouping descriptor its group number must hold. */
struct hc_wire {
  unsigned n;                   /* values used in v[] */
  uint64_t v[HC_WIRE_VALUES];   /* the wire integers */
  unsigned actions;             /* enum hc_wire_action bits */
  unsigned nbytes;              /* bytes used in bytes[]: 0 or 16 */
  uint8_t bytes[HC_WIRE_BYTES]; /* SCSI: IO advice hints grouping descriptor */
};

/* What a round trip through a transport loses. */
enum hc_loss {
  HC_LOSS_CLASS  = 1u << 0, /* the class came back different */
  HC_LOSS_ADVICE = 1u << 1, /* the advice came back different */
  HC_LOSS_FLAGS  = 1u << 2, /* some flags came back different */
};

/* A codec (opaque; codecs are static and never freed). */
typedef struct hc_codec hc_codec;

/* A device profile: what the device on the other side supports.  The
 * defaults describe a capable device; keys (all optional):
 *
 *   ata.max_priority           3 … 15  MAXIMUM HYBRID PRIORITY LEVEL (M), default 15
 *   ata.max_priority_behavior  0 | 1   1: the device may fail I/O tagged M, so the
 *                                      top priority used is M−1; default 0
 *   ata.host_hinted            0 | 1   tag unhinted data M−1 (host-hinted mode); default 1
 *   ata.evict                  0 | 1   HYBRID EVICT is supported; default 1
 *   nvme.placements            0 … 65535  placement handles (FDP) or streams; with
 *                                      7 or more, each class gets its own
 *                                      (DSPEC = class id); default 0
 */
typedef struct hc_profile hc_profile;

/* Returns the codec with this id, or NULL. */
const hc_codec *hc_codec_get (unsigned id);

/* Finds a codec by name ("nvme").  Returns NULL for an unknown name. */
const hc_codec *hc_codec_find (const char *name);

/* Returns the codec's name. */
const char *hc_codec_name (const hc_codec *codec);

/* Returns a one-line description of the transport. */
const char *hc_codec_title (const hc_codec *codec);

/* Encodes a hint for an I/O of direction `dir`.  `profile` may be NULL (the
 * default profile).  Returns 0 and fills *wire, or -EINVAL if the hint fails
 * hc_hint_check (a reserved advice, an unknown class). */
int hc_codec_encode (const hc_codec *codec, const hc_profile *profile,
                     struct hc_hint hint, enum hc_dir dir, struct hc_wire *wire);

/* Decodes what a transport carried into the hint it stands for.  `dir` is the
 * direction of the command that carried it (HC_DIR_ANY if unknown).  Returns 0
 * and sets *hint, or -EINVAL for a value the transport defines as invalid or
 * reserved; `why` (may be NULL) receives the reason, or on success a note
 * about anything unusual (an empty string if none). */
int hc_codec_decode (const hc_codec *codec, const hc_profile *profile,
                     const struct hc_wire *wire, enum hc_dir dir,
                     struct hc_hint *hint, char *why, size_t whylen);

/* Describes a wire value field by field ("AF=5 frequent writes and reads,
 * AL=3 low, …") into buf.  Returns the length needed, like snprintf, or
 * -EINVAL if the wire does not have the shape this codec uses. */
int hc_codec_describe (const hc_codec *codec, const hc_profile *profile,
                       const struct hc_wire *wire, char *buf, size_t len);

/* Encodes `hint` and decodes the result.  Sets *back to what arrives and
 * *loss to the enum hc_loss bits of what differs (0 = the transport carries
 * the hint exactly).  Returns 0 or -EINVAL for an invalid hint. */
int hc_codec_roundtrip (const hc_codec *codec, const hc_profile *profile,
                        struct hc_hint hint, enum hc_dir dir,
                        struct hc_hint *back, unsigned *loss);

/* Creates a profile holding the defaults.  Returns 0 or -ENOMEM. */
int hc_profile_new (hc_profile **out);

/* Frees a profile (NULL is allowed). */
void hc_profile_free (hc_profile *profile);

/* Sets one profile key (see hc_profile) from its decimal text.  Returns 0, or
 * -EINVAL for an unknown key or a value out of range (nothing changes). */
int hc_profile_set (hc_profile *profile, const char *key, const char *value);

/* Reads one profile key.  Returns 0 and sets *value, or -EINVAL. */
int hc_profile_get (const hc_profile *profile, const char *key, unsigned long *value);

/* Applies the SATA Hybrid Information log (general purpose log 14h, one
 * 512-byte page): the maximum priority level and its behaviour.  Returns 0,
 * or -EINVAL if the page is short, hybrid information is disabled, or the
 * level is unusable (fewer than 3 levels); `why` gets the reason. */
int hc_profile_load_ata_log (hc_profile *profile, const uint8_t *page, size_t len,
                             char *why, size_t whylen);

/* Parses a wire value for a codec from text: decimal or 0x-hex integers
 * separated by commas (fadvise: one per call, "2,5").  Returns 0, or -EINVAL
 * (a bad number, too many values, or a value wider than the transport). */
int hc_wire_parse (const hc_codec *codec, const char *text, struct hc_wire *wire);

/* Formats the integers of a wire as hc_wire_parse reads them (hex for
 * bit-field transports, decimal for enumerations).  Returns the length
 * needed, like snprintf. */
int hc_wire_format (const hc_codec *codec, const struct hc_wire *wire, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_CODEC_H */
