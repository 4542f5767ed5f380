/* The library's version, set by the build. */
#include "hintcache/hintcache.h"

#ifndef HC_VERSION
#define HC_VERSION "unknown"
#endif

const char *
hc_version (void)
{
  return HC_VERSION;
}
