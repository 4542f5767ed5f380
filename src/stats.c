/* Names of the statistics' enumerations. */
#include "hintcache/stats.h"

static const char *const bypass_names[HC_BYPASS_COUNT] = {
  [HC_BYPASS_MODE] = "mode",         [HC_BYPASS_ADVICE] = "advice",
  [HC_BYPASS_CLASS] = "class",       [HC_BYPASS_SHARE] = "share",
  [HC_BYPASS_SEQUENTIAL] = "sequential", [HC_BYPASS_PARTIAL] = "partial",
  [HC_BYPASS_FULL] = "full",         [HC_BYPASS_ERROR] = "error",
  [HC_BYPASS_POLICY] = "policy",
};

const char *
hc_bypass_name (unsigned reason)
{
  return reason < HC_BYPASS_COUNT ? bypass_names[reason] : NULL;
}
