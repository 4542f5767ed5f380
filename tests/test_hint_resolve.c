/* The precedence table: per-I/O > per-range > per-stream > per-process >
 * device default; a layer that says nothing falls through; class, advice and
 * pattern resolve independently; the other flags add up. */
#include <string.h>

#include "hintcache/hint.h"
#include "test.h"

#define U HC_CLASS_UNCLASSIFIED
#define N HC_ADVICE_NONE
#define NOLAYER HC_LAYER_COUNT

/* Layers written as hint texts, io first: "" says nothing. */
static const struct {
  const char *name;
  const char *layer[HC_LAYER_COUNT];
  const char *want;
  unsigned cls_from, advice_from, pattern_from;
} cases[] = {
  { "nothing anywhere", { "", "", "", "", "" }, "none", NOLAYER, NOLAYER, NOLAYER },
  { "device default only", { "", "", "", "", "data" }, "data", 4, NOLAYER, NOLAYER },
  { "io beats everything", { "metadata", "journal", "streaming", "background", "data" },
    "metadata", 0, NOLAYER, NOLAYER },
  { "range beats stream", { "", "journal", "streaming", "background", "data" }, "journal", 1,
    NOLAYER, NOLAYER },
  { "stream beats process", { "", "", "streaming", "background", "data" }, "streaming", 2,
    NOLAYER, NOLAYER },
  { "process beats device", { "", "", "", "background", "data" }, "background", 3, NOLAYER,
    NOLAYER },
  { "class and advice from different layers",
    { "", "journal", "", "dontneed", "" }, "journal+dontneed", 1, 3, NOLAYER },
  { "per-I/O class keeps the range's advice",
    { "metadata", "data+willneed", "", "", "" }, "metadata+willneed", 0, 1, NOLAYER },
  { "per-I/O advice keeps the range's class",
    { "evict", "journal+willneed", "", "", "" }, "journal+evict", 1, 0, NOLAYER },
  { "normal is explicit and overrides lower advice",
    { "", "normal", "dontneed", "", "" }, "normal", NOLAYER, 1, NOLAYER },
  { "the RFC's ionice dontneed applies to an unhinted I/O",
    { "", "", "", "dontneed", "" }, "dontneed", NOLAYER, 3, NOLAYER },
  { "a range hint outranks the process's ionice bits",
    { "", "metadata+willneed", "", "dontneed", "" }, "metadata+willneed", 1, 1, NOLAYER },
  { "unclassified at io falls through to the device",
    { "unclassified", "", "", "", "transaction" }, "transaction", 4, NOLAYER, NOLAYER },
  { "pattern resolves by precedence",
    { "random", "", "sequential", "", "" }, "random", NOLAYER, NOLAYER, 0 },
  { "pattern falls through",
    { "sync", "", "streaming+sequential", "", "" }, "streaming+sequential+sync", 2, NOLAYER, 2 },
  { "additive flags are the union",
    { "sync", "readahead", "noreuse", "incompressible", "" },
    "noreuse+sync+readahead+incompressible", NOLAYER, NOLAYER, NOLAYER },
  { "all three parts from three layers",
    { "", "background", "sequential", "dontneed", "data" }, "background+dontneed+sequential", 1,
    3, 2 },
  { "device advice when nobody else speaks",
    { "", "", "metadata", "", "willneed" }, "metadata+willneed", 2, 4, NOLAYER },
};

int
main (void)
{
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct hc_hint layer[HC_LAYER_COUNT], want, got;
    struct hc_hint_origin o;
    char buf[96];

    for (unsigned l = 0; l < HC_LAYER_COUNT; l++)
      CHECK (hc_hint_parse (cases[i].layer[l], &layer[l]) == 0, "%s: layer %u", cases[i].name, l);
    CHECK (hc_hint_parse (cases[i].want, &want) == 0, "%s: want", cases[i].name);
    got = hc_hint_resolve (layer, &o);
    hc_hint_format (got, buf, sizeof buf);
    CHECK (hc_hint_pack (got) == hc_hint_pack (want), "%s: got %s, want %s", cases[i].name, buf,
           cases[i].want);
    CHECK (o.cls == cases[i].cls_from, "%s: class from %u", cases[i].name, o.cls);
    CHECK (o.advice == cases[i].advice_from, "%s: advice from %u", cases[i].name, o.advice);
    CHECK (o.pattern == cases[i].pattern_from, "%s: pattern from %u", cases[i].name, o.pattern);
    CHECK (hc_hint_check (got) == 0, "%s: result is valid", cases[i].name);
    /* origin is optional */
    CHECK (hc_hint_pack (hc_hint_resolve (layer, NULL)) == hc_hint_pack (want), "%s: NULL origin",
           cases[i].name);
  }

  /* Exhaustive property over single-word layers: the class of the result is
   * the class of the first layer that has one. */
  static const char *const words[] = { "", "metadata", "journal", "willneed", "dontneed",
                                       "normal", "sequential", "random", "sync" };
  const unsigned nw = sizeof words / sizeof words[0];
  unsigned idx[HC_LAYER_COUNT] = { 0 };
  for (;;) {
    struct hc_hint layer[HC_LAYER_COUNT], got;
    unsigned want_cls = U, want_adv = N, want_pat = 0, want_add = 0;
    bool cls_done = false, adv_done = false, pat_done = false;
    for (unsigned l = 0; l < HC_LAYER_COUNT; l++) {
      hc_hint_parse (words[idx[l]], &layer[l]);
      if (!cls_done && layer[l].cls) want_cls = layer[l].cls, cls_done = true;
      if (!adv_done && layer[l].advice) want_adv = layer[l].advice, adv_done = true;
      if (!pat_done && (layer[l].flags & HC_HINT_PATTERN))
        want_pat = layer[l].flags & HC_HINT_PATTERN, pat_done = true;
      want_add |= layer[l].flags & ~HC_HINT_PATTERN;
    }
    got = hc_hint_resolve (layer, NULL);
    CHECK (got.cls == want_cls && got.advice == want_adv
           && got.flags == (want_pat | want_add), "combination %u%u%u%u%u", idx[0], idx[1],
           idx[2], idx[3], idx[4]);
    unsigned l = 0;
    while (l < HC_LAYER_COUNT && ++idx[l] == nw)
      idx[l++] = 0;
    if (l == HC_LAYER_COUNT)
      break;
  }
  return test_exit ("test_hint_resolve");
}
