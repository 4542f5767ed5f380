/* Fuzzes the whole engine through the deterministic simulator
 * (tests/sim.c): clients, the cleaner, the filler and the slow writer
 * interleaved one step at a time, device faults, silent corruption and
 * power cuts, every read checked against the reference model and every
 * recovery against what was durable.
 *
 * The simulator alone draws every choice from seeded generators, so a run
 * of many seeds samples the space blindly.  Here libFuzzer steers it: the
 * input picks the seed and the run's shape, and the rest of it is the
 * simulator's tape, whose bytes are XORed into its draws one by one (which
 * thread runs next, which operation, where the power fails).  Inputs that
 * reach new code in the engine — a recovery branch, a lock retried, a
 * write-back racing a rewrite — are kept and mutated further, which a
 * random seed reaches only by luck.
 *
 * Input: 8 bytes of seed, one byte of phases (1 … 3) and one of clients
 * (1 … 3), then the tape (draws past its end are the seed's alone).  A
 * violation is the simulator's: its message, then abort, which libFuzzer
 * keeps as a crash; `build-fuzz/fuzz/fuzz_sim FILE` replays it exactly.
 */
#define SIM_FUZZ
#include "sim.c"

#include "fuzz.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static bool ready;
  struct fuzz_in in = { data, size };

  if (!ready) {
    for (int i = 0; i < MAX_THREADS; i++)
      pthread_cond_init (&S.cv[i], NULL);
    tracing = getenv ("SIM_TRACE") != NULL;
    ready = true;
  }
  uint64_t seed = fuzz_take (&in, 8);
  unsigned phases = 1 + (unsigned) fuzz_take (&in, 1) % 3;
  unsigned clients = 1 + (unsigned) fuzz_take (&in, 1) % 3;
  tape = in.p;
  tape_n = in.n;
  run_seed (seed, phases, clients);
  tape_n = 0;
  return 0;
}
