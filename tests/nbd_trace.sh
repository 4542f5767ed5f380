#!/usr/bin/env bash
# The plugin's trace=FILE: every request served is recorded as labeled CSV
# (gzip-compressed), with its export's hint, and the file reads and replays
# as the requests sent.  Three connections (exports "metadata", "" and
# "background+dontneed") send known requests through nbdsh; after a clean
# stop the trace has exactly those requests (by op, bytes, label, object),
# and a replay counts exactly their blocks.
set -eu
hc=$1 plugin=$2
. "$(dirname "$0")/functions.sh"
. "$(dirname "$0")/nbd_functions.sh"
requires nbdsh
requires jq

fast=$tmp/fast.img slow=$tmp/slow.img sock=$tmp/nbd.sock trace=$tmp/served.csv.gz
truncate -s 16M "$fast"
truncate -s 64M "$slow"
start_server a "$sock" fast="$fast" slow="$slow" format=true mode=writeback trace="$trace"

nbdsh -c - <<PY || fail "nbdsh failed"
import nbd
def conn(name):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix("$sock")
    return h
m = conn("metadata")
for i in range(4):
    m.pwrite(b"m" * 4096, i * 65536, nbd.CMD_FLAG_FUA if i == 0 else 0)
for i in range(3):
    m.pread(4096, i * 65536)
m.flush()
m.trim(8192, 1 << 20)
m.zero(4096, 2 << 20)
d = conn("")
d.pread(65536, 4 << 20)
d.pread(65536, 8 << 20)
b = conn("background+dontneed")
b.pwrite(b"b" * 131072, 16 << 20)
for h in (m, d, b):
    h.shutdown()
PY
stop_server a
[ -s "$trace" ] || fail "no trace written"
gzip -t "$trace" || fail "the trace is not gzip"

expect_status 0 "$hc" trace stats "$trace" --json --strict
st=$out
[ "$(echo "$st" | jq .format)" = '"csv"' ] || fail "format: $st"
[ "$(echo "$st" | jq .requests)" = 13 ] || fail "13 requests sent: $st"
[ "$(echo "$st" | jq -c '[.ops.R.requests, .ops.R.bytes, .ops.W.requests, .ops.W.bytes, .ops.D.requests, .ops.D.bytes, .ops.F.requests]')" \
  = "[5,143360,6,151552,1,8192,1]" ] || fail "ops: $(echo "$st" | jq -c .ops)"
[ "$(echo "$st" | jq -c '[.labels.fs_metadata, .labels.unknown, .labels.temp]')" = "[10,2,1]" ] \
  || fail "labels: $(echo "$st" | jq -c .labels)"
zcat "$trace" | grep -Eq ',W,0,4096,WF,none,0,0,nbd,[0-9]+,fs_metadata,metadata$' \
  || fail "the FUA write's row: $(zcat "$trace" | head -3)"
zcat "$trace" | grep -Eq ',F,0,0,FF,none,0,0,nbd,[0-9]+,fs_metadata,metadata$' || fail "the flush's row"
zcat "$trace" | grep -Eq ',W,16777216,131072,W,none,0,0,nbd,[0-9]+,temp,background[+]dontneed$' \
  || fail "the hinted export's row"

# Replayed: every block of the reads and writes, once each request.
expect_status 0 "$hc" replay "$trace" --cache 1000 --strategy none,io --policy lru --json
[ "$(echo "$out" | jq -c '[.[0].read_accesses, .[0].write_accesses]')" = "[35,37]" ] \
  || fail "replayed accesses: $(echo "$out" | jq -c '.[0] | [.read_accesses, .write_accesses]')"
echo "nbd_trace: 13 requests recorded with their exports' hints; replay counts 72 block accesses"
