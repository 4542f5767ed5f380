#!/usr/bin/env bash
# The NBD benchmark matrix: fio (--ioengine=nbd) through the hintcache plugin
# against references measured in the same run, cell by cell:
#
#   pattern    4 KiB random, 64 KiB random, 1 MiB sequential
#   direction  read, write
#   depth      QD1, QD16
#   state      hits     the working set (WS) placed first, by writes or by
#                       two sequential passes of 1 MiB read misses (the two
#                       placements are separate rows), written back — afresh
#                       for each cell, so that no cell measures the copies a
#                       write cell before it scattered;
#              misses   a region never read, through a freshly formatted
#                       cache: every request misses and is admitted;
#              bypass   the same region on the export `background+dontneed`:
#                       every request is declined
#   mode       write-through, write-back
#
# The references: `nbdkit file` on a fast file of its own (hits: the flash
# served raw, the ceiling of a hit path) or on the slow file (misses and bypass:
# the disk served raw), and the nbdkit cache filter on the slow file in the
# same mode (cache-on-read=true, so that it caches what hintcache caches),
# placed the same way.  Each figure is the best of ROUNDS runs, the three
# servers taking turns; each miss and bypass run starts with freshly
# started caches (hintcache formatted again, the filter with an empty
# cache file).  Hit runs last SECONDS (after 1 s of ramp); miss and bypass
# runs read or write a fixed amount of the cold region once (no block
# twice), so that they cannot turn into hits.  Files live in /var/tmp and
# are pinned in the page cache while measuring (vmtouch): the "slow" and
# "fast" files are the same medium here, so the ratios measure the
# software, not the devices.  Every run starts after `sync`: otherwise the
# dirty pages the run before left (up to 512 MiB of writes) are written
# out by the kernel during the next run, whichever server it measures, and
# the server that runs first in each round pays for the last round's
# writes.
#
# Prints one row per cell: hintcache, the reference, the cache filter, the
# two ratios and the goal (hits >= 0.90x file; misses >= 0.50x; bypass >=
# 0.90x; write-through 1 MiB QD16 write misses >= 0.80x; every cell >= 1.00x
# the filter), "below" where a goal is not met, and the work hintcache's
# trials had handed to helper threads at the end of its last run of the
# cell (`stats`' trial_ways: fills on the filler, write-through's slow
# writes beside the fast ones; "-": none).  With --tsv FILE, the rows also
# go to FILE as tab-separated values.
#
# Usage: bench_matrix.sh PLUGIN [--seconds S] [--rounds R] [--only REGEX] [--tsv FILE]
#   --seconds S   length of a hit run (default 3)
#   --rounds R    runs per figure, best kept (default 3)
#   --only REGEX  only the cells whose label matches (e.g. 'misses|bypass', '1M')
set -euo pipefail
plugin=
secs=3
rounds=3
only=
tsv=
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) secs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --tsv) tsv=$2; shift 2 ;;
    -h|--help) sed -n '2,47p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_matrix: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) plugin=$1; shift ;;
  esac
done
[ -n "$plugin" ] && [ -f "$plugin" ] || { echo "usage: bench_matrix.sh PLUGIN [options] (see --help)" >&2; exit 2; }
cli=$(dirname "$plugin")/hintcache
[ -x "$cli" ] || { echo "bench_matrix: no hintcache CLI beside $plugin" >&2; exit 1; }
. "$(dirname "$0")/nbd_servers.sh"
nbd_bench_init bench_matrix nbdkit fio vmtouch jq libnbd-bin

ws=256M                  # the working set, at offset 0; fits the fast tier
cold_off=1024M           # the cold region of miss and bypass runs
truncate -s 1G "$dir/fast.img" "$dir/fast-raw.img"   # the cache's, the raw reference's
# The slow file holds data everywhere (a hole would be read for free).
dd if=/dev/zero of="$dir/slow.img" bs=1M count=2048 status=none
vmtouch -q -t "$dir/slow.img"
vmtouch -q -l -d "$dir/slow.img" >/dev/null 2>&1
pid[vmtouch]=$(pgrep -n vmtouch || true)

start_hintcache() {      # start_hintcache MODE: a freshly formatted cache
  start hintcache "$plugin" fast="$dir/fast.img" slow="$dir/slow.img" format=discard \
    mode="$1" seq-cutoff=0 control="$dir/control.sock"
}

start_filter() {         # start_filter MODE: an empty cache
  start filter --filter=cache file "$dir/slow.img" cache="$1" cache-on-read=true
}

fio_run() {              # fio_run NAME EXPORT RW BS QD OFFSET SIZE IO_SIZE -> a number
  local name=$1 export=$2 rw=$3 bs=$4 qd=$5 off=$6 size=$7 io=$8 timed=()
  [ "$io" = timed ] && timed=(--time_based --runtime="$secs" --ramp_time=1) && io=$size
  sync
  fio --name=b --ioengine=nbd --uri="nbd+unix:///$export?socket=$dir/$name.sock" --rw="$rw" \
      --bs="$bs" --iodepth="$qd" --numjobs=1 --offset="$off" --size="$size" --io_size="$io" \
      "${timed[@]}" --randrepeat=0 --output-format=json --output="$dir/fio.json" >"$dir/fio.out" 2>&1 \
    || { echo "bench_matrix: fio failed on $name: $(tail -3 "$dir/fio.out")" >&2; exit 1; }
  case $bs in
    1M) jq '[.jobs[0].read.bw_bytes, .jobs[0].write.bw_bytes] | add / 1000000 | floor' "$dir/fio.json" ;;
    *) jq '[.jobs[0].read.iops, .jobs[0].write.iops] | add | floor' "$dir/fio.json" ;;
  esac
}

place() {                # place NAME HOW: the working set, by writes or by read misses
  local uri="nbd+unix:///?socket=$dir/$1.sock"
  if [ "$2" = writes ]; then
    fio --name=p --ioengine=nbd --uri="$uri" --rw=write --bs=1M --iodepth=16 --size=$ws \
        --output-format=json >/dev/null 2>&1
  else
    for _ in 1 2; do
      fio --name=p --ioengine=nbd --uri="$uri" --rw=read --bs=1M --iodepth=16 --size=$ws \
          --output-format=json >/dev/null 2>&1
    done
  fi
}

# The work hintcache's trials hand to helper threads now ("-": none).
ways() {
  "$cli" stats --socket "$dir/control.sock" --json | jq -r '.trial_ways | join(",") | if . == "" then "-" else . end'
}

# A miss or bypass run's amount: enough requests to measure, few enough
# that the cold region is never read twice (and the cache never fills).
cold_io() {              # cold_io BS QD
  case $1:$2 in
    4k:1) echo 16M ;; 4k:*) echo 64M ;; 64k:*) echo 256M ;; *) echo 512M ;;
  esac
}

patterns=("4K random:rand:4k" "64K random:rand:64k" "1M sequential::1M")
printf 'nbd benchmark matrix: fio --ioengine=nbd, best of %s, hits %s s per run, working set %s\n\n' \
  "$rounds" "$secs" "$ws"
printf '%-48s %10s %10s %10s %8s %8s  %-7s %-6s %s\n' cell hintcache reference "cache filt" "vs ref" \
  "vs filt" goal met ways
[ -z "$tsv" ] || printf 'cell\tunit\thintcache\treference\tfilter\tvs_ref\tvs_filter\tgoal\tmet\tways\n' >"$tsv"
below=0

row() {                  # row LABEL UNIT H REF C GOAL WAYS
  local label=$1 unit=$2 h=$3 f=$4 c=$5 goal=$6 w=$7 vr vc met=yes
  vr=$(awk "BEGIN { printf \"%.2f\", $f ? $h / $f : 0 }")
  vc=$(awk "BEGIN { printf \"%.2f\", $c ? $h / $c : 0 }")
  awk "BEGIN { exit !($vr >= $goal && $vc >= 1.0) }" || { met=no; below=$((below + 1)); }
  printf '%-48s %10s %10s %10s %7sx %7sx  >= %-4s %-6s %s\n' "$label ($unit)" "$h" "$f" "$c" "$vr" \
    "$vc" "$goal" "$([ $met = yes ] && echo '' || echo 'below')" "$w"
  [ -z "$tsv" ] || printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$unit" "$h" "$f" "$c" \
    "$vr" "$vc" "$goal" "$met" "$w" >>"$tsv"
}

wanted() { [ -z "$only" ] || grep -qE -- "$only" <<<"$1"; }

start file-fast file "$dir/fast-raw.img"
start file-slow file "$dir/slow.img"
for mode in writethrough writeback; do
  # ---- Hits, for each placement: place once, then every hit cell. ----
  for how in writes reads; do
    cells=()
    for p in "${patterns[@]}"; do
      IFS=: read -r pname rand bs <<<"$p"
      for d in read write; do
        for qd in 1 16; do
          label="$mode hits placed by $how: $pname $d QD$qd"
          wanted "$label" && cells+=("$label|$rand$d|$bs|$qd")
        done
      done
    done
    [ ${#cells[@]} -gt 0 ] || continue
    declare -A best=()
    for _ in $(seq "$rounds"); do
      for cell in "${cells[@]}"; do
        IFS='|' read -r label rw bs qd <<<"$cell"
        # Each cell from a fresh placement: a write cell before it would
        # leave the working set dirty and its copies scattered.
        start_hintcache "$mode"; start_filter "$mode"
        place hintcache "$how"; place filter "$how"; place file-fast writes
        [ "$mode" = writeback ] && "$cli" clean --socket "$dir/control.sock" >/dev/null
        for s in hintcache file-fast filter; do
          x=$(fio_run "$s" "" "$rw" "$bs" "$qd" 0 "$ws" timed)
          [ "$x" -gt "${best[$label/$s]:-0}" ] && best[$label/$s]=$x
          [ $s = hintcache ] && best[$label/ways]=$(ways)
        done
      done
    done
    for cell in "${cells[@]}"; do
      IFS='|' read -r label rw bs qd <<<"$cell"
      unit=IOPS; [ "$bs" = 1M ] && unit=MB/s
      row "$label" "$unit" "${best[$label/hintcache]}" "${best[$label/file-fast]}" \
        "${best[$label/filter]}" 0.90 "${best[$label/ways]}"
    done
    unset best
  done

  # ---- Misses (admitted) and bypass (declined): a fresh cache per run. ----
  for state in misses bypass; do
    export=; [ $state = bypass ] && export=background+dontneed
    for p in "${patterns[@]}"; do
      IFS=: read -r pname rand bs <<<"$p"
      for d in read write; do
        for qd in 1 16; do
          label="$mode $state: $pname $d QD$qd"
          wanted "$label" || continue
          io=$(cold_io "$bs" "$qd")
          h=0 f=0 c=0 w=-
          for _ in $(seq "$rounds"); do
            start_hintcache "$mode"; start_filter "$mode"
            x=$(fio_run hintcache "$export" "$rand$d" "$bs" "$qd" "$cold_off" 512M "$io")
            [ "$x" -gt "$h" ] && h=$x
            w=$(ways)
            x=$(fio_run file-slow "" "$rand$d" "$bs" "$qd" "$cold_off" 512M "$io")
            [ "$x" -gt "$f" ] && f=$x
            x=$(fio_run filter "" "$rand$d" "$bs" "$qd" "$cold_off" 512M "$io")
            [ "$x" -gt "$c" ] && c=$x
          done
          goal=0.50
          [ $state = bypass ] && goal=0.90
          [ $state = misses ] && [ $mode = writethrough ] && [ $d = write ] && [ "$bs" = 1M ] \
            && [ "$qd" = 16 ] && goal=0.80
          unit=IOPS; [ "$bs" = 1M ] && unit=MB/s
          row "$label" "$unit" "$h" "$f" "$c" "$goal" "$w"
        done
      done
    done
  done
done
echo
echo "$below cell(s) below a goal"
