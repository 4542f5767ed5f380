/* Codec throughput: nanoseconds per encode and per decode for every codec,
 * over all class × advice pairs, and each decoder's cost relative to the
 * cheapest (rfc2014, a direct bit extraction), measured in the same run.
 *
 * Decoders that search the mapping table (ata, nvme, nfs42, …) try up to 40
 * candidates; this shows what that costs, for the day a hot path (the
 * preload library, the NBD frontend) decodes per request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hintcache/codec.h"

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const uint8_t advices[] = { 0, 1, 2, 3, 7 };

int
main (int argc, char **argv)
{
  long rounds = argc > 1 ? atol (argv[1]) : 20000;
  struct hc_wire wires[HC_CLASS_COUNT * 5];
  double dec_ns[HC_CODEC_COUNT], enc_ns[HC_CODEC_COUNT];
  volatile unsigned sink = 0;

  printf ("%-8s %12s %12s %16s\n", "codec", "encode ns", "decode ns", "decode vs rfc2014");
  for (unsigned ci = 0; ci < HC_CODEC_COUNT; ci++) {
    const hc_codec *c = hc_codec_get (ci);
    unsigned n = 0;
    double t0, t1;

    t0 = now ();
    for (long r = 0; r < rounds; r++)
      for (unsigned cls = 0; cls < HC_CLASS_COUNT; cls++)
        for (unsigned a = 0; a < 5; a++) {
          struct hc_hint h = { .cls = cls, .advice = advices[a] };
          hc_codec_encode (c, NULL, h, HC_DIR_READ, &wires[cls * 5 + a]);
        }
    t1 = now ();
    enc_ns[ci] = (t1 - t0) * 1e9 / (rounds * HC_CLASS_COUNT * 5.0);

    t0 = now ();
    for (long r = 0; r < rounds; r++)
      for (n = 0; n < HC_CLASS_COUNT * 5; n++) {
        struct hc_hint h;
        hc_codec_decode (c, NULL, &wires[n], HC_DIR_READ, &h, NULL, 0);
        sink += h.cls + h.advice;
      }
    t1 = now ();
    dec_ns[ci] = (t1 - t0) * 1e9 / (rounds * HC_CLASS_COUNT * 5.0);
  }
  for (unsigned ci = 0; ci < HC_CODEC_COUNT; ci++)
    printf ("%-8s %12.1f %12.1f %15.1fx\n", hc_codec_name (hc_codec_get (ci)), enc_ns[ci],
            dec_ns[ci], dec_ns[ci] / dec_ns[HC_CODEC_RFC2014]);
  (void) sink;
  return 0;
}
