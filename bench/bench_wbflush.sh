#!/usr/bin/env bash
# What a write-back backlog costs an application that flushes: a database
# commits with an fsync, and in write-back an fsync should cost the fast
# tier alone, whether or not the cleaner is writing back meanwhile.
#
#   slow tier  an NBD export of a file behind nbdkit's delay filter (DELAY
#              per request, default 4 ms) and the noparallel filter (one
#              request at a time), as in bench_slowdisk.sh
#   cache      the plugin in write-back, 64 MB of cache blocks
#   commits    4 KiB random writes at QD1 over 4 MiB (cached after a first
#              pass), each followed by a flush (fio --fsync=1), for SECONDS
#
# measured twice on a fresh volume: alone (the reference), then right after
# 48 MiB of scattered 4 KiB writes (12,288 dirty blocks in as many runs,
# about 50 s of write-back at 4 ms a write), while the cleaner writes them
# back.  Prints, per plugin given, the commits per second of each and
# their ratio; the goal is a ratio near 1.
#
# Usage: bench_wbflush.sh PLUGIN... [-- SECONDS [DELAY]]   (default 15 4ms)
set -euo pipefail
plugins=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do plugins+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#plugins[@]} -gt 0 ] || { echo "usage: bench_wbflush.sh PLUGIN... [-- SECONDS [DELAY]]" >&2; exit 2; }
secs=${1:-15}
delay=${2:-4ms}
. "$(dirname "$0")/nbd_servers.sh"
nbd_bench_init bench_wbflush nbdkit fio jq libnbd-bin

commits() {              # commits URI -> commits per second
  fio --name=commit --ioengine=nbd --uri="$1" --rw=randwrite --bs=4k --iodepth=1 --fsync=1 \
      --offset=0 --size=4M --time_based --runtime="$secs" --output-format=json \
      --output="$dir/commit.json" >/dev/null 2>&1
  jq -r '.jobs[0].write.iops | floor' "$dir/commit.json"
}

printf '%-50s %12s %14s %7s\n' "plugin" "alone /s" "backlog /s" "ratio"
for p in "${plugins[@]}"; do
  rm -f "$dir/slow.img" "$dir/fast.img"
  truncate -s 2G "$dir/slow.img"
  truncate -s 80M "$dir/fast.img"
  start slow --filter=noparallel --filter=delay file "$dir/slow.img" rdelay="$delay" wdelay="$delay"
  start hc "$p" fast="$dir/fast.img" slow="nbd+unix:///?socket=$dir/slow.sock" format=true \
    mode=writeback
  uri="nbd+unix:///?socket=$dir/hc.sock"
  fio --name=warm --ioengine=nbd --uri="$uri" --rw=write --bs=64k --offset=0 --size=4M \
      --output=/dev/null >/dev/null 2>&1
  alone=$(commits "$uri")
  fio --name=backlog --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --iodepth=16 \
      --offset=1G --size=512M --io_size=48M --randrepeat=0 --output=/dev/null >/dev/null 2>&1
  busy=$(commits "$uri")
  printf '%-50s %12s %14s %7s\n' "$p" "$alone" "$busy" \
    "$(awk -v a="$alone" -v b="$busy" 'BEGIN { printf "%.2f", a ? b / a : 0 }')"
  stop hc
  stop slow
done
