#!/usr/bin/env bash
# NBD serving benchmark: fio (--ioengine=nbd) against, in one run,
#   hintcache   the plugin, write-back, every request a hit (the working set
#               fits the fast tier and was written through it first, then
#               written back)
#   file        `nbdkit file` on a fast file of its own, written the same way
#               (the flash served raw: the ceiling a cache's hit path can reach)
#   cache       `nbdkit --filter=cache file` on the slow file (nbdkit's own
#               cache, write-back, all hits after the same prefill)
# for 4 KiB random reads at QD1 and QD16 and 1 MiB sequential reads and
# writes at QD16, and prints each figure with the ratios against file and
# the cache filter.  Files are pinned in the page cache with vmtouch while
# measuring (an idle page cache gets evicted on this kind of machine).
# Each figure is the best of ROUNDS runs (default 3), the three servers
# taking turns, so that a noisy neighbour's burst on a shared machine
# does not decide a ratio.
#
# Usage: bench_nbd.sh PLUGIN [SECONDS_PER_RUN [ROUNDS]]   (default 10, 3)
set -euo pipefail
plugin=$1
secs=${2:-10}
rounds=${3:-3}
cli=$(dirname "$plugin")/hintcache           # the CLI built beside the plugin
[ -x "$cli" ] || { echo "bench_nbd: no hintcache CLI beside $plugin"; exit 1; }
. "$(dirname "$0")/../scripts/lib.sh"
ensure_packages nbdkit fio vmtouch jq libnbd-bin || { echo "bench_nbd: could not install its tools"; exit 1; }
dir=$(mktemp -d /var/tmp/hc-bench-nbd.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
ws=512M                                   # working set: fits the fast tier
# The raw reference gets a fast file of its own: its write run must not
# land in the volume the plugin is serving.
truncate -s 1G "$dir/fast.img" "$dir/fast-raw.img"
truncate -s 2G "$dir/slow.img"
mkdir -p "$dir/tmp"

start() {                                 # start NAME ARGS...
  local name=$1; shift
  rm -f "$dir/$name.sock"
  TMPDIR="$dir/tmp" nbdkit -f -U "$dir/$name.sock" "$@" 2>"$dir/$name.log" &
  pids+=($!)
  for _ in $(seq 100); do
    nbdinfo --size "nbd+unix:///?socket=$dir/$name.sock" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench_nbd: $name did not start: $(cat "$dir/$name.log")"; exit 1
}

run_fio() {                               # run_fio NAME RW BS QD -> prints a number
  local name=$1 rw=$2 bs=$3 qd=$4
  fio --name=b --ioengine=nbd --uri="nbd+unix:///?socket=$dir/$name.sock" --rw="$rw" --bs="$bs" \
      --iodepth="$qd" --numjobs=1 --size=$ws --time_based --runtime="$secs" --ramp_time=2 \
      --randrepeat=0 --norandommap --output-format=json --output="$dir/fio.json" >/dev/null 2>&1
  case $rw in
    randread) jq '.jobs[0].read.iops | floor' "$dir/fio.json" ;;
    read) jq '.jobs[0].read.bw_bytes / 1000000 | floor' "$dir/fio.json" ;;
    write) jq '.jobs[0].write.bw_bytes / 1000000 | floor' "$dir/fio.json" ;;
  esac
}

prefill() {                               # write the working set through a server
  fio --name=fill --ioengine=nbd --uri="nbd+unix:///?socket=$dir/$1.sock" --rw=write --bs=1M \
      --iodepth=16 --size=$ws --output-format=json > /dev/null 2>&1
}

# No sequential cutoff: the 1 MiB runs must be cached like the rest (all hits).
start hintcache "$plugin" fast="$dir/fast.img" slow="$dir/slow.img" format=true mode=writeback \
  seq-cutoff=0 control="$dir/control.sock"
start file file "$dir/fast-raw.img"
start cache --filter=cache file "$dir/slow.img" cache=writeback
for s in hintcache file cache; do prefill $s; done
# Start from a written-back cache, as a volume that has been idle is: the
# read runs then measure hits, not hits beside the prefill's write-back
# (the write run makes its own dirty data, and pays for its write-back).
"$cli" clean --socket "$dir/control.sock" >/dev/null
vmtouch -q -t "$dir/fast.img" "$dir/fast-raw.img" "$dir/slow.img"
vmtouch -q -l -d "$dir/fast.img" "$dir/fast-raw.img" "$dir/slow.img" >/dev/null 2>&1
pids+=($(pgrep -n vmtouch || true))
# The cache filter keeps its blocks in an unlinked temporary file: pin that too.
cpid=$(pgrep -f -n "nbdkit -f -U $dir/cache.sock" || true)
for fd in /proc/"$cpid"/fd/*; do
  case $(readlink "$fd" 2>/dev/null) in
    "$dir/tmp/"*) vmtouch -q -t -l -d "$fd" >/dev/null 2>&1 && pids+=($(pgrep -n vmtouch)) ;;
  esac
done

printf 'nbd serving benchmark: fio --ioengine=nbd, best of %s runs of %s s, working set %s (all hits)\n\n' \
  "$rounds" "$secs" "$ws"
printf '%-26s %12s %12s %12s %10s %10s\n' workload hintcache "nbdkit file" "cache filter" \
  "vs file" "vs filter"
for w in "4K randread QD1:randread:4k:1:IOPS" "4K randread QD16:randread:4k:16:IOPS" \
         "1M read QD16:read:1M:16:MB/s" "1M write QD16:write:1M:16:MB/s"; do
  IFS=: read -r label rw bs qd unit <<< "$w"
  h=0 f=0 c=0
  for _ in $(seq "$rounds"); do
    x=$(run_fio hintcache "$rw" "$bs" "$qd"); [ "$x" -gt "$h" ] && h=$x
    x=$(run_fio file "$rw" "$bs" "$qd"); [ "$x" -gt "$f" ] && f=$x
    x=$(run_fio cache "$rw" "$bs" "$qd"); [ "$x" -gt "$c" ] && c=$x
  done
  goal=""
  [ "$label" = "4K randread QD16" ] && goal="  (goals: >= 0.90, >= 1.30)" || goal="  (goal: >= 0.90 vs file)"
  printf '%-26s %12s %12s %12s %9.2fx %9.2fx%s\n' "$label ($unit)" "$h" "$f" "$c" \
    "$(awk "BEGIN { print $h / $f }")" "$(awk "BEGIN { print $h / $c }")" "$goal"
done
