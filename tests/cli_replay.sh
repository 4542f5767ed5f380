#!/usr/bin/env bash
# End-to-end test of the trace commands: replay (table, JSON, HTML, rules,
# strict and lenient reading), trace stats and convert (bin and oracle
# round trips give the same replay), and a small demo.
set -eu
hc=$1
src=$3
. "$(dirname "$0")/functions.sh"
requires jq
data=$src/tests/data/traces

# JSON: one object per strategy × policy × size, with the fields promised.
expect_status 0 "$hc" replay "$data/sample.csv" --cache 4,16 --strategy none,io,oracle \
  --policy lru,hintaware --json
n=$(echo "$out" | jq length)
[ "$n" = 10 ] || fail "rows: $n, want 2 sizes × (2 strategies × 2 policies + oracle) = 10"
for f in strategy policy cache_blocks accesses misses read_accesses read_misses \
         flash_bytes_written mean_read_latency_us p99_read_latency_us; do
  [ "$(echo "$out" | jq "[.[] | has(\"$f\")] | all")" = true ] || fail "field $f missing"
done
acc=$(echo "$out" | jq '[.[].accesses] | unique | length')
[ "$acc" = 1 ] || fail "every row sees the same accesses"
bad=$(echo "$out" | jq '[.[] | select(.misses < 0 or .misses > .accesses)] | length')
[ "$bad" = 0 ] || fail "misses out of range"
omin=$(echo "$out" | jq '[.[] | select(.strategy=="oracle" and .cache_blocks==4) | .misses] | .[0]')
rmin=$(echo "$out" | jq '[.[] | select(.cache_blocks==4) | .misses] | min')
[ "$omin" = "$rmin" ] || fail "the oracle ($omin) must have the fewest misses ($rmin)"
# The hint effects in force at the end: all of them for a policy that does
# not weigh evidence, a subset for the default, none named for the oracle.
lru=$(echo "$out" | jq -c '[.[] | select(.policy=="lru") | .hint_effects] | unique')
[ "$lru" = '[["cutoff","probation","admission","placement","demotion","reinsertion","thrift"]]' ] \
  || fail "lru keeps every effect in force: $lru"
ha=$(echo "$out" | jq '[.[] | select(.policy=="hintaware") | (.hint_effects | type == "array")
                        and (.effect_changes | type == "number")] | all')
[ "$ha" = true ] || fail "hintaware rows name their effects"
[ "$(echo "$out" | jq '[.[] | select(.strategy=="oracle") | has("hint_effects")] | any')" = false ] \
  || fail "the oracle has no effects"

# Second-touch promotion: blocks read once (every 4th read; random ones
# beside them, so no sequential cutoff) are not written to flash, 16 hot
# blocks are; the rows name the effect; a policy without it is refused.
{
  echo "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,ioprio_level,comm,pid,label,object"
  for i in $(seq 0 1999); do
    echo "$((i * 4)),R,$(( (1000 + i * 7) * 4096 )),4096,R,be,0,4,cat,1,,"
    for j in 1 2 3; do echo "$((i * 4 + j)),R,$(( ((i * 5 + j) % 16) * 4096 )),4096,R,be,0,4,cat,1,,"; done
  done
} > "$tmp/once.csv"
expect_status 0 "$hc" replay "$tmp/once.csv" --cache 256 --strategy none --json
always=$(echo "$out" | jq '.[0].flash_bytes_written')
expect_status 0 "$hc" replay "$tmp/once.csv" --cache 256 --strategy none --json \
  --promotion second-touch
touch2=$(echo "$out" | jq '.[0].flash_bytes_written')
[ "$touch2" -gt 0 ] && [ $((touch2 * 10)) -lt "$always" ] \
  || fail "second touch writes $touch2 flash bytes, always $always: want under a tenth"
[ "$(echo "$out" | jq -c '.[0].hint_effects | index("second-touch") != null')" = true ] \
  || fail "second-touch not among the effects: $out"
expect_status 1 "$hc" replay "$tmp/once.csv" --cache 256 --policy lru --promotion second-touch
contains "$err" "no second-touch promotion" "lru refused"
expect_status 2 "$hc" replay "$tmp/once.csv" --promotion sometimes
contains "$err" "not always or second-touch" "bad value"
# A flash budget: the trace lasts 8 µs, so the bucket (a minute of the
# budget: 100 blocks of 4 KiB at 589,824,000 bytes a day) is spent at
# once, and then the cache writes what second touch writes, no more.
expect_status 0 "$hc" replay "$tmp/once.csv" --cache 256 --strategy none --json \
  --flash-budget 589824000
budget=$(echo "$out" | jq '.[0].flash_bytes_written')
[ "$budget" -ge $((100 * 4096)) ] && [ "$budget" -le $((100 * 4096 + touch2)) ] \
  || fail "a budget of 100 blocks wrote $budget bytes (second touch alone: $touch2)"
[ "$(echo "$out" | jq -c '.[0].hint_effects | index("second-touch") != null')" = true ] \
  || fail "the spent budget turned second touch on: $out"
expect_status 2 "$hc" replay "$tmp/once.csv" --flash-budget 0
contains "$err" "not a size above 0" "a zero budget"
# Writes of 2,000 blocks, each once: unbudgeted, every one is written to
# flash; on the same budget, the write misses go around the cache once the
# bucket is spent.
{
  echo "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,ioprio_level,comm,pid,label,object"
  for i in $(seq 0 1999); do echo "$i,W,$(( (1000 + i * 7) * 4096 )),4096,W,be,0,4,cp,1,,"; done
} > "$tmp/writes.csv"
expect_status 0 "$hc" replay "$tmp/writes.csv" --cache 4000 --strategy none --json
[ "$(echo "$out" | jq '.[0].flash_bytes_written')" -eq $((2000 * 4096)) ] \
  || fail "unbudgeted, every write is cached: $out"
expect_status 0 "$hc" replay "$tmp/writes.csv" --cache 4000 --strategy none --json \
  --flash-budget 589824000
budget=$(echo "$out" | jq '.[0].flash_bytes_written')
[ "$budget" -ge $((100 * 4096)) ] && [ "$budget" -le $((101 * 4096)) ] \
  || fail "a budget of 100 blocks wrote $budget bytes of 2,000 blocks' writes"

# The table, a percentage size, and the same numbers from the gzip copy.
expect_status 0 "$hc" replay "$data/sample.csv" --cache 50% --policy lru --strategy none
contains "$out" "none     lru" "table row"
t1=$out
expect_status 0 "$hc" replay "$data/sample.csv.gz" --cache 50% --policy lru --strategy none
[ "${out#*$'\n'}" = "${t1#*$'\n'}" ] || fail "gzip input replays differently"

# HTML: one self-contained page with three plots.
expect_status 0 "$hc" replay "$data/sample.csv" --cache 4,8,16 --html "$tmp/r.html"
[ "$(grep -c '<svg' "$tmp/r.html")" = 3 ] || fail "three SVG plots"
grep -q '</html>' "$tmp/r.html" || fail "complete page"

# Malformed lines: a counted warning naming the first, or an error under --strict.
expect_status 0 "$hc" replay "$data/sample_bad.csv" --cache 4 --strategy none --policy lru
contains "$err" "malformed line" "warning"
contains "$err" "the first is line 4" "first bad line"
expect_status 2 "$hc" replay "$data/sample_bad.csv" --cache 4 --strict
contains "$err" "line 4" "strict names the line"
expect_status 1 "$hc" replay "$data/sample_truncated.csv.gz" --cache 4
expect_status 1 "$hc" replay "$tmp/missing.csv" --cache 4
contains "$err" "No such file" "missing trace"

# Sizes, strategies, policies and rules are checked, with reasons.
expect_status 2 "$hc" replay "$data/sample.csv" --cache 0
expect_status 2 "$hc" replay "$data/sample.csv" --cache 5%%
expect_status 2 "$hc" replay "$data/sample.csv" --strategy psychic
expect_status 2 "$hc" replay "$data/sample.csv" --policy mru
contains "$err" "mru" "unknown policy named"
printf '# process rules\ncomm~^tar -> background\nlabel=wal -> journal\n' > "$tmp/p.rules"
expect_status 2 "$hc" replay "$data/sample.csv" --rules "process=$tmp/p.rules"
contains "$err" "p.rules:3" "rule error with its line"
contains "$err" "cannot see field 'label'" "granularity enforced"
printf 'comm~^tar -> background+dontneed\n' > "$tmp/p.rules"
expect_status 0 "$hc" replay "$data/sample.csv" --rules "process=$tmp/p.rules" --strategy process \
  --policy lru --cache 8 --json
[ "$(echo "$out" | jq '.[0].bypasses')" -gt 0 ] || fail "dontneed for tar bypasses: $out"
expect_status 0 "$hc" replay --show-rules io
contains "$out" "label=wal -> journal" "built-in io rules"

# trace stats and convert: bin and oracle replay exactly like the source.
expect_status 0 "$hc" trace stats "$data/sample.csv" --json
[ "$(echo "$out" | jq .requests)" = 24 ] || fail "requests: $out"
[ "$(echo "$out" | jq .format)" = '"csv"' ] || fail "format"
expect_status 0 "$hc" trace stats "$data/blkparse.txt"
contains "$out" "(blkparse)" "blkparse detected"
expect_status 0 "$hc" trace convert "$data/sample.csv" "$tmp/s.bin"
expect_status 0 "$hc" trace convert "$data/sample.csv" "$tmp/s.oracle" --to oracle
expect_status 0 "$hc" replay "$data/sample.csv" --cache 3,9 --strategy none,io,oracle \
  --policy lru,s3fifo,belady --json
want=$(echo "$out" | jq -c '[.[] | [.strategy, .policy, .cache_blocks, .misses, .read_misses]]')
expect_status 0 "$hc" replay "$tmp/s.bin" --cache 3,9 --strategy none,io,oracle \
  --policy lru,s3fifo,belady --json
got=$(echo "$out" | jq -c '[.[] | [.strategy, .policy, .cache_blocks, .misses, .read_misses]]')
[ "$got" = "$want" ] || fail "bin replays differently: $got vs $want"
expect_status 0 "$hc" replay "$data/sample.csv" --cache 3,9 --strategy none --policy lru,belady --json
want=$(echo "$out" | jq -c '[.[] | [.cache_blocks, .accesses, .misses]]')
expect_status 0 "$hc" replay "$tmp/s.oracle" --format oracle --cache 3,9 --strategy none \
  --policy lru,belady --json
got=$(echo "$out" | jq -c '[.[] | [.cache_blocks, .accesses, .misses]]')
[ "$got" = "$want" ] || fail "oracleGeneral replays differently: $got vs $want"
# The labeled CSV written back: byte for byte the source (quoted fields
# too; an empty label, which means unknown, is written 'unknown', and a
# field is quoted only when it must be), plain and gzip-compressed, and from
# the binary form.
sed -E -e 's/^(([^,]*,){10}),/\1unknown,/' -e 's/,"([^,"]*)"$/,\1/' "$data/sample.csv" \
  > "$tmp/s.norm.csv"
expect_status 0 "$hc" trace convert "$data/sample.csv" "$tmp/s2.csv" --to csv
cmp -s "$tmp/s.norm.csv" "$tmp/s2.csv" || fail "csv → csv differs: $(diff "$tmp/s.norm.csv" "$tmp/s2.csv" | head -5)"
expect_status 0 "$hc" trace convert "$tmp/s.bin" "$tmp/s3.csv.gz" --to csv
gzip -t "$tmp/s3.csv.gz" || fail "the .gz output is not gzip"
zcat "$tmp/s3.csv.gz" | cmp -s "$tmp/s.norm.csv" - || fail "bin → csv.gz differs from the source"
expect_status 2 "$hc" trace convert "$data/sample.csv" "$tmp/x" --to msr

# Each command takes its own options: one of the shared table that does not
# apply is refused, not ignored; numbers are checked.
expect_status 2 "$hc" trace stats "$data/sample.csv" --policy lru
contains "$err" "--policy does not apply here" "trace stats --policy"
expect_status 2 "$hc" trace stats "$data/sample.csv" --to csv
expect_status 2 "$hc" trace convert "$data/sample.csv" "$tmp/x" --json
expect_status 2 "$hc" replay "$data/sample.csv" --seed 3
expect_status 2 "$hc" trace stats "$data/sample.csv" extra
expect_status 2 "$hc" trace frobnicate
contains "$err" "stats, convert, record" "trace's commands named"
expect_status 2 "$hc" trace convert "$data/sample.csv" "$tmp/x" --to oracle --block-size 010
expect_status 2 "$hc" demo --scale 1x
expect_status 2 "$hc" demo --seed -1
[ ! -e "$tmp/x" ] || fail "a refused convert wrote its output"

# The demo, small: the summary, the two sentences and the report.
cd "$tmp"
expect_status 0 "$hc" demo --scale 0.02 --quiet
contains "$out" "read miss %" "summary table"
contains "$out" "oracle / belady" "the optimum shown"
contains "$out" "What it means" "first sentence"
contains "$out" "Per-process hints alone" "second sentence"
[ -s report.html ] || fail "report.html written"
text=$out
expect_status 0 "$hc" demo --scale 0.02 --quiet --json --save "$tmp/db.bin"
[ "$(echo "$out" | jq length)" = 39 ] || fail "demo rows"
# The per-process sentence is computed from the rows: process against none
# (hintaware) at the middle size.
want=$(echo "$out" | python3 -c '
import json, sys
rows = json.load(sys.stdin)
size = sorted({r["cache_blocks"] for r in rows})[len({r["cache_blocks"] for r in rows}) // 2]
get = lambda s, p: next(r for r in rows if r["strategy"] == s and r["policy"] == p and r["cache_blocks"] == size)
p, n = get("process", "hintaware"), get("none", "hintaware")
print("change read misses by %+.1f%% and flash writes by %+.0f%%" % (
    100 * (p["read_misses"] / n["read_misses"] - 1),
    100 * (p["flash_bytes_written"] / n["flash_bytes_written"] - 1)))
print("worse than no hints" if p["read_misses"] > n["read_misses"] else "no hints with the same policy")')
while IFS= read -r w; do contains "$text" "$w" "the per-process sentence"; done <<< "$want"
expect_status 0 "$hc" trace stats "$tmp/db.bin"
contains "$out" "(bin)" "saved demo trace"

# Hinted rows against the unhinted row of the same policy and size: the
# share of the gap to the oracle closed, and whether they did worse, in
# JSON (checked against the rows' own read misses) and in the table.
expect_status 0 "$hc" replay "$tmp/db.bin" --cache 2%,5%,10% --strategy none,process,file,io,oracle \
  --policy hintaware,lru --json
rows=$out
bad=$(echo "$rows" | jq '[.[] as $r | select($r.strategy != "none" and $r.strategy != "oracle")
  | (.[] | select(.strategy == "none" and .policy == $r.policy and .cache_blocks == $r.cache_blocks)) as $n
  | (.[] | select(.strategy == "oracle" and .cache_blocks == $r.cache_blocks)) as $o
  | select(($r.worse_than_none != ($r.read_misses > $n.read_misses))
      or (if $n.read_misses > $o.read_misses
          then ($r.gap_closed == null or ((($n.read_misses - $r.read_misses) / ($n.read_misses - $o.read_misses)) - $r.gap_closed | fabs) > 1e-9)
          else $r.gap_closed != null end))] | length')
[ "$bad" = 0 ] || fail "gap_closed or worse_than_none wrong in $bad rows"
[ "$(echo "$rows" | jq '[.[] | select(has("worse_than_none"))] | length')" = 18 ] \
  || fail "every hinted row (3 strategies × 2 policies × 3 sizes) is compared"
[ "$(echo "$rows" | jq '[.[] | select(.strategy == "none" or .strategy == "oracle") | select(has("worse_than_none") or has("gap_closed"))] | length')" = 0 ] \
  || fail "unhinted rows are not compared with themselves"
worse=$(echo "$rows" | jq '[.[] | select(.worse_than_none == true)] | length')
expect_status 0 "$hc" replay "$tmp/db.bin" --cache 2%,5%,10% --strategy none,process,file,io,oracle \
  --policy hintaware,lru
contains "$out" "gap %" "the table's gap column"
if [ "$worse" = 0 ]; then
  contains "$out" "No hinted row has more read misses than its unhinted row (18 compared)" "the verdict"
else
  contains "$out" "Worse than no hints (more read misses than the unhinted row): $worse of 18:" "the verdict"
fi
echo "cli_replay: ok"
