#!/usr/bin/env bash
# Golden miss counts: every strategy × policy at 1 %, 5 % and 10 % of the
# footprint of each shared development trace, replayed as `hintcache
# replay` does, against tests/data/replay-golden.tsv (misses, read misses,
# flash bytes written, and the modeled mean read latency per row).  A
# restructuring must leave every number as it was; a change that means to
# move them regenerates the file (HC_GOLDEN_UPDATE=1) and the diff shows
# what moved.  The traces are not in the repository: without them the test
# is skipped (CI has them).
set -eu
hc=$1
src=$3
. "$(dirname "$0")/functions.sh"
requires jq
traces=$src/../shared/traces
golden=$src/tests/data/replay-golden.tsv
for t in build kv; do
  [ -f "$traces/$t.csv.gz" ] || skip "no shared trace $traces/$t.csv.gz"
done
for t in build kv; do
  "$hc" trace convert "$traces/$t.csv.gz" "$tmp/$t.bin" >/dev/null
  "$hc" replay "$tmp/$t.bin" --cache 1%,5%,10% \
    --policy hintaware,lru,s3fifo,fifo,arc,sieve,2q,wtinylfu,belady --json >"$tmp/$t.json"
  jq -r --arg t "$t" '.[] | [$t, .strategy, .policy, .cache_blocks, .misses, .read_misses,
      .flash_bytes_written, .mean_read_latency_us] | @tsv' "$tmp/$t.json"
done >"$tmp/now.tsv"
if [ -n "${HC_GOLDEN_UPDATE:-}" ]; then
  cp "$tmp/now.tsv" "$golden"
  echo "replay_golden: $golden written ($(wc -l <"$golden") rows)"
  exit 0
fi
[ -f "$golden" ] || fail "$golden is missing (HC_GOLDEN_UPDATE=1 writes it)"
diff -u "$golden" "$tmp/now.tsv" >"$tmp/diff" || fail "replay results moved:
$(head -40 "$tmp/diff")"
echo "replay_golden: $(wc -l <"$golden") rows as golden"
