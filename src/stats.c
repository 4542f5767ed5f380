/* Names of the statistics' enumerations. */
#include "hintcache/stats.h"

static const char *const bypass_names[HC_BYPASS_COUNT] = {
  [HC_BYPASS_MODE] = "mode",         [HC_BYPASS_ADVICE] = "advice",
  [HC_BYPASS_CLASS] = "class",       [HC_BYPASS_SHARE] = "share",
  [HC_BYPASS_SEQUENTIAL] = "sequential", [HC_BYPASS_PARTIAL] = "partial",
  [HC_BYPASS_FULL] = "full",         [HC_BYPASS_ERROR] = "error",
  [HC_BYPASS_POLICY] = "policy",
};

static const char *const effect_names[HC_FX_KNOBS] = {
  "cutoff", "probation", "admission", "placement", "demotion", "reinsertion", "second-touch",
  "thrift",
};

const char *
hc_effect_name (unsigned i)
{
  return i < HC_FX_KNOBS ? effect_names[i] : NULL;
}

static const char *const way_names[HC_WAY_KNOBS] = { "filler-block", "filler-run",
                                                      "slow-beside" };

const char *
hc_way_name (unsigned i)
{
  return i < HC_WAY_KNOBS ? way_names[i] : NULL;
}

const char *
hc_bypass_name (unsigned reason)
{
  return reason < HC_BYPASS_COUNT ? bypass_names[reason] : NULL;
}
