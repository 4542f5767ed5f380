#!/usr/bin/env bash
# A cache in front of a disk-like slow tier, with two readers at once:
#
#   slow tier  an NBD export of a 3 GiB file behind nbdkit's delay filter
#              (DELAY per request, default 4 ms) and the noparallel filter
#              (one request at a time per connection): about 240 requests a
#              second per connection, whatever their size, as a disk seeking
#              between two streams gives
#   zipf       4 KiB random reads at QD16, Zipf-distributed (theta 1.2) over
#              the first 1.8 GB: a hot set a 300 MB fast tier can hold
#   seq        a sequential reader of 256 KiB requests at QD1 over the last
#              GiB, beside it
#
# through, in turn:
#   none       the slow export itself (each reader its own connection)
#   filter     nbdkit's cache filter (256 MB cache, 4 KiB blocks,
#              cache-on-read) over the slow export
#   hintcache  the plugin, 300 MB fast tier, the slow export as its slow
#              tier, defaults otherwise
#
# Each configuration first warms with the zipf reader alone (WARM seconds),
# then runs both for SECONDS and prints each reader's requests per second.
# The goals (issue "Performance users feel"): through hintcache the
# sequential reader gets at least what it gets with no cache, and the zipf
# reader at least 5x what it gets through the filter.
#
# Usage: bench_slowdisk.sh PLUGIN [SECONDS [WARM [DELAY]]]   (default 30 30 4ms)
set -euo pipefail
plugin=${1:?usage: bench_slowdisk.sh PLUGIN [SECONDS [WARM [DELAY]]]}
secs=${2:-30}
warm=${3:-30}
delay=${4:-4ms}
. "$(dirname "$0")/nbd_servers.sh"
nbd_bench_init bench_slowdisk nbdkit fio jq libnbd-bin

dd if=/dev/zero of="$dir/slow.img" bs=1M count=3072 status=none
truncate -s 400M "$dir/fast.img"       # 300 MB of cache blocks after the metadata

start slow --filter=noparallel --filter=delay file "$dir/slow.img" rdelay="$delay" wdelay="$delay"
slow_uri="nbd+unix:///?socket=$dir/slow.sock"

zipf_job() {             # zipf_job URI
  echo "--name=zipf --ioengine=nbd --uri=$1 --rw=randread --bs=4k --iodepth=16"
  echo "--random_distribution=zipf:1.2 --offset=0 --size=1800M --randrepeat=0"
}
seq_job() {
  echo "--name=seq --ioengine=nbd --uri=$1 --rw=read --bs=256k --iodepth=1 --offset=2G --size=1G"
}

measure() {              # measure NAME URI -> "zipf_iops seq_rps"
  local uri=$2
  # shellcheck disable=SC2046
  fio $(zipf_job "$uri") --time_based --runtime="$warm" --output=/dev/null >/dev/null 2>&1
  # shellcheck disable=SC2046
  fio --time_based --runtime="$secs" --output-format=json --output="$dir/$1.json" \
      $(zipf_job "$uri") $(seq_job "$uri") >/dev/null 2>&1
  jq -r '[(.jobs[] | select(.jobname == "zipf") | .read.iops | floor),
          (.jobs[] | select(.jobname == "seq") | .read.iops | floor)] | @tsv' "$dir/$1.json"
}

printf 'slow tier: %s per request, one at a time per connection; %s s warm, %s s measured\n\n' \
  "$delay" "$warm" "$secs"
printf '%-10s %14s %14s\n' "" "zipf 4K IOPS" "seq 256K req/s"
read -r zn sn <<<"$(measure none "$slow_uri")"
printf '%-10s %14s %14s\n' none "$zn" "$sn"

start filter --filter=cache nbd socket="$dir/slow.sock" cache-on-read=true cache-max-size=256M \
  cache-min-block-size=4K
read -r zf sf <<<"$(measure filter "nbd+unix:///?socket=$dir/filter.sock")"
printf '%-10s %14s %14s\n' filter "$zf" "$sf"
stop filter

start hintcache "$plugin" fast="$dir/fast.img" slow="$slow_uri" format=true
read -r zh sh <<<"$(measure hintcache "nbd+unix:///?socket=$dir/hintcache.sock")"
printf '%-10s %14s %14s\n' hintcache "$zh" "$sh"
stop hintcache

echo
awk -v zh="$zh" -v zf="$zf" -v sh="$sh" -v sn="$sn" 'BEGIN {
  printf "hintcache vs filter, zipf: %.2fx (goal >= 5)%s\n", zh / zf, (zh >= 5 * zf ? "" : "  below")
  printf "hintcache vs none, seq:    %.2fx (goal >= 1)%s\n", sh / sn, (sh >= sn ? "" : "  below")
}'
