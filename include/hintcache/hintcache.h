/* hintcache — umbrella header.
 *
 * Include this to get the whole public API of libhintcache:
 *   hint.h     classes, advice, flags, the hint value type and its resolution
 *   classes.h  per-class performance attributes and their config file
 *   codec.h    transport codecs and device profiles
 *   tier.h     storage tiers: file, memory, timing and fault decorators
 *   stats.h    statistics per class, operation and outcome
 *   volume.h   the volume: two tiers made into one hybrid drive
 */
#ifndef HINTCACHE_H
#define HINTCACHE_H

#include "hint.h"
#include "classes.h"
#include "codec.h"
#include "tier.h"
#include "stats.h"
#include "volume.h"
#include "control.h"
#include "extents.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the library's version string ("0.1.0"). */
const char *hc_version (void);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_H */
