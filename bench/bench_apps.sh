#!/usr/bin/env bash
# Applications on ext4 over a cached slow disk: what the project exists for,
# end to end.  The slow tier is an NBD export of a file behind nbdkit's
# delay filter (DELAY per request, default 4 ms) and the noparallel filter
# (one request at a time): about 240 requests a second, whatever their
# size.  The file system reaches the export through nbdfuse and a loop
# device, and every application runs in a memory cgroup of MEM (default
# 256M), so that its reads reach the device instead of the page cache.
#
# Configurations, each on a fresh file system:
#   none       the slow export itself
#   filter     nbdkit's cache filter over it (CACHE bytes, 4 KiB blocks,
#              cache-on-read), in write-through: its reclaim, which keeps
#              the cache within cache-max-size, punches out cache blocks
#              whether or not they are dirty (nbdkit 1.32's reclaim.c), so in
#              write-back it loses writes once the cache is full — here the
#              build then read corrupt source files
#   hintcache  the plugin in write-back, a fast file of CACHE bytes of
#              cache blocks, no hints
#   hinted     the same with hintd on the mount (the file system's class
#              map) and every application run through `hintcache run`
#              (the preload library) with a default hint: PostgreSQL and
#              SQLite transaction, the build data, the backup
#              background+dontneed (PostgreSQL runs as its own user, whom
#              the control socket refuses: its hints are hintd's alone)
#
# Applications, one after another on each configuration:
#   pgbench    PostgreSQL (scale 30 × SCALE, about 450 MB), 4 clients for SECONDS:
#              transactions per second
#   sqlite     an SQLite database (WAL, synchronous=FULL) of 1 M × SCALE
#              rows of 200 bytes (about 250 MB); for SECONDS, transactions of 10 random
#              point reads and one update: transactions per second
#   build      configure and build this project's source tree on the
#              volume (make -j2): seconds
#   backup     tar of the SQLite database and the build tree beside
#              pgbench for SECONDS: the backup's MB/s and pgbench's tps
# and, per configuration, the bytes the cache wrote to its fast file
# (the server's write_bytes; none for `none`).
#
# Each application's data is loaded first (not timed), then the page cache
# is dropped and, for PostgreSQL, the server restarted, before the timed
# part.  The goal (issue "Performance users feel"): hintcache, with or
# without hints, beats the cache filter on every application.
#
# Single runs vary more than configurations do on pgbench and SQLite (the
# same code has given SQLite 28 and 606 tx/s), so the configurations can
# be measured ROUNDS times, taking turns (BENCH_APPS_ROUNDS, default 1):
# the table then shows each figure's median (the lower middle one for an
# even count), and a second table each figure's lowest and highest.
#
# Usage: bench_apps.sh PLUGIN [SECONDS [DELAY [MEM [CACHE [SCALE]]]]]
#        (default 60 4ms 256M 1G 1)
#        BENCH_APPS_CONFIGS="…"  a subset of the configurations, in order
#        BENCH_APPS_ROUNDS=R     each configuration R times (default 1)
set -euo pipefail
plugin=${1:?usage: bench_apps.sh PLUGIN [SECONDS [DELAY [MEM [CACHE [SCALE]]]]]}
secs=${2:-60}
delay=${3:-4ms}
mem=${4:-256M}
cache=${5:-1G}
scale=${6:-1}
pg_scale=$(awk -v s="$scale" 'BEGIN { v = int(30 * s); print v < 1 ? 1 : v }')
rows=$(awk -v s="$scale" 'BEGIN { v = int(1000000 * s); print v < 1000 ? 1000 : v }')
src=$(cd "$(dirname "$0")/.." && pwd)
cli=$(dirname "$plugin")/hintcache
[ -x "$cli" ] || { echo "bench_apps: no hintcache CLI beside $plugin" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench_apps: needs root (loop devices, mounts, cgroups)" >&2; exit 1; }
. "$(dirname "$0")/nbd_servers.sh"
nbd_bench_init bench_apps nbdkit libnbd-bin mount e2fsprogs python3 util-linux cmake git postgresql
pg=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$pg" ] && [ -x "$pg/pgbench" ] || { echo "bench_apps: no PostgreSQL binaries" >&2; exit 1; }
mkdir -p "$dir/fuse" "$dir/mnt" "$dir/run"
chmod 755 "$dir"
chown postgres: "$dir/run"        # the server's socket and log
trap 'detach; nbd_bench_cleanup; rmdir "$cg" 2>/dev/null || true' EXIT

# ---- A memory cgroup (v2, or v1's memory controller). --------------------
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cg=/sys/fs/cgroup/hc-bench-apps-$$
  mkdir -p "$cg"
  echo "$mem" > "$cg/memory.max"
elif [ -d /sys/fs/cgroup/memory ]; then
  cg=/sys/fs/cgroup/memory/hc-bench-apps-$$
  mkdir -p "$cg"
  echo "$mem" > "$cg/memory.limit_in_bytes"
else
  echo "bench_apps: no memory cgroup" >&2; exit 1
fi
in_cg() { bash -c 'echo $$ > "$0/cgroup.procs"; exec "$@"' "$cg" "$@"; }

# ---- The volume of a configuration: servers, nbdfuse, loop, ext4. -------
loop= fuse_pid= hintd_pid= cfg=
attach() {                      # attach SOCKET
  nbdfuse "$dir/fuse" "nbd+unix:///?socket=$1" 2>>"$dir/nbdfuse.log" &
  fuse_pid=$!
  for _ in $(seq 100); do [ -f "$dir/fuse/nbd" ] && break; sleep 0.1; done
  loop=$(losetup -f --show "$dir/fuse/nbd")
  mkfs.ext4 -q -F "$loop"
  mount "$loop" "$dir/mnt"
}
detach() {
  [ -n "$hintd_pid" ] && { kill "$hintd_pid" 2>/dev/null; wait "$hintd_pid" 2>/dev/null || true; }
  hintd_pid=
  pg_stop immediate
  mountpoint -q "$dir/mnt" && { umount "$dir/mnt" 2>/dev/null || umount -l "$dir/mnt"; }
  [ -n "$loop" ] && { losetup -d "$loop" 2>/dev/null || true; }
  loop=
  [ -n "$fuse_pid" ] && { fusermount3 -u "$dir/fuse" 2>/dev/null || umount -l "$dir/fuse" 2>/dev/null \
    || true; wait "$fuse_pid" 2>/dev/null || true; }
  fuse_pid=
}
# run CLASS[+ADVICE] CMD…: an application's command in the memory cgroup,
# through the preload library with that default hint when hinted.
run() {
  local hint=$1; shift
  if [ "$cfg" = hinted ]; then
    local opts=(--class "${hint%%+*}")
    [ "$hint" != "${hint#*+}" ] && opts+=(--advice "${hint#*+}")
    in_cg "$cli" run "${opts[@]}" --socket "$dir/hc.ctl" --mount "$dir/mnt" --quiet -- "$@"
  else
    in_cg "$@"
  fi
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
written() {                     # bytes the cache server has written so far
  case $cfg in
    none) echo 0 ;;
    filter) awk '/^write_bytes/ { print $2 }' "/proc/${pid[filter]}/io" ;;
    *) awk '/^write_bytes/ { print $2 }' "/proc/${pid[hc]}/io" ;;
  esac
}

# ---- PostgreSQL. --------------------------------------------------------
export PGHOST=$dir/run PGDATABASE=postgres PGUSER=postgres
pg_up=
pg_start() {
  run transaction runuser -u postgres -- "$pg/pg_ctl" start -w -D "$dir/mnt/pg" -l "$dir/run/pg.log" \
    -o "-k $dir/run -c listen_addresses= -c shared_buffers=16MB" >/dev/null
  pg_up=1
}
pg_stop() {                     # pg_stop [MODE]: fast (a clean checkpoint) by default
  [ -n "$pg_up" ] || return 0
  runuser -u postgres -- "$pg/pg_ctl" stop -w -D "$dir/mnt/pg" -m "${1:-fast}" >/dev/null 2>&1 \
    || true
  pg_up=
}
pgbench_tps() {                 # pgbench_tps LOG
  sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$1" | cut -d. -f1
}

# ---- SQLite. -------------------------------------------------------------
cat > "$dir/run/sqlite.py" <<'PY'
import os, random, sqlite3, sys, time
path, mode, n, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=FULL")
if mode == "load":
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
    db.execute("BEGIN")
    for i in range(n):
        db.execute("INSERT INTO t VALUES (?, ?)", (i, os.urandom(200)))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sys.exit(0)
rng, done, end = random.Random(1), 0, time.monotonic() + secs
while time.monotonic() < end:
    db.execute("BEGIN")
    for _ in range(10):
        db.execute("SELECT v FROM t WHERE id = ?", (rng.randrange(n),)).fetchone()
    db.execute("UPDATE t SET v = ? WHERE id = ?", (os.urandom(200), rng.randrange(n)))
    db.execute("COMMIT")
    done += 1
print(int(done / secs))
PY

# ---- One configuration. ---------------------------------------------------
declare -A result
configure() {                   # configure NAME: servers and a fresh file system
  cfg=$1
  rm -f "$dir/slow.img" "$dir/fast.img"
  truncate -s 16G "$dir/slow.img"
  start slow --filter=noparallel --filter=delay file "$dir/slow.img" rdelay="$delay" wdelay="$delay"
  case $cfg in
    none) attach "$dir/slow.sock" ;;
    filter)
      start filter --filter=cache nbd socket="$dir/slow.sock" cache=writethrough \
        cache-on-read=true cache-max-size="$cache" cache-min-block-size=4K
      attach "$dir/filter.sock" ;;
    hintcache|hinted)
      # The cache blocks come after the metadata: a little more than CACHE.
      truncate -s "$cache" "$dir/fast.img"
      truncate -s +64M "$dir/fast.img"
      start hc "$plugin" fast="$dir/fast.img" slow="nbd+unix:///?socket=$dir/slow.sock" \
        format=true mode=writeback control="$dir/hc.ctl"
      attach "$dir/hc.sock" ;;
  esac
  if [ "$cfg" = hinted ]; then
    "$cli" hintd --mount "$dir/mnt" --device "$loop" --socket "$dir/hc.ctl" --quiet &
    hintd_pid=$!
  fi
}

# cache_state WHAT: for the plugin, one line on what the cache did so far
# (effects in force, read hits and misses, dirty blocks now, commits,
# bypasses by reason), so that a figure far from its usual value can be
# traced to the cache's decisions.
cache_state() {
  case $cfg in hintcache|hinted) ;; *) return 0 ;; esac
  "$cli" stats --socket "$dir/hc.ctl" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
hits = sum(c["read"]["hits"] for c in s["classes"].values())
miss = sum(c["read"]["misses"] for c in s["classes"].values())
byp = {}
for c in s["classes"].values():
    for k in ("read", "write"):
        for why, n in c[k]["bypass"].items():
            if n:
                byp[k + " " + why] = byp.get(k + " " + why, 0) + n
dirty = sum(c["dirty"] for c in s["classes"].values())
print("   cache after %s: effects %s; reads %d hits, %d misses; %d dirty, %d commits; bypassed %s"
      % (sys.argv[1], "+".join(s["hint_effects"]) or "none", hits, miss, dirty, s["commits"],
      ", ".join("%s %d" % kv for kv in sorted(byp.items())) or "nothing"))' "$1" || true
}

measure() {                     # measure NAME
  configure "$1"
  local w0 t0 t1 bytes
  w0=$(written)

  # pgbench
  mkdir -p "$dir/mnt/pg"
  chown postgres: "$dir/mnt/pg"
  runuser -u postgres -- "$pg/initdb" -D "$dir/mnt/pg" >/dev/null 2>&1
  pg_start
  "$pg/pgbench" -q -i -s "$pg_scale" >/dev/null 2>&1
  pg_stop
  drop_caches
  pg_start
  "$pg/pgbench" -c 4 -j 2 -T "$secs" > "$dir/run/pgbench.log" 2>&1
  result[$1.pgbench]=$(pgbench_tps "$dir/run/pgbench.log")
  cache_state pgbench

  # sqlite
  mkdir -p "$dir/mnt/sqlite"
  run transaction python3 "$dir/run/sqlite.py" "$dir/mnt/sqlite/db" load "$rows" 0
  drop_caches
  result[$1.sqlite]=$(run transaction python3 "$dir/run/sqlite.py" "$dir/mnt/sqlite/db" run \
    "$rows" "$secs")
  cache_state sqlite

  # build
  mkdir -p "$dir/mnt/src"
  git -C "$src" archive HEAD | tar -x -C "$dir/mnt/src"
  drop_caches
  t0=$(date +%s.%N)
  run data bash -c "cmake -S '$dir/mnt/src' -B '$dir/mnt/build' -DHC_SANITIZE=OFF >/dev/null \
    && cmake --build '$dir/mnt/build' -j2 >/dev/null"
  t1=$(date +%s.%N)
  result[$1.build]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }')
  cache_state build

  # backup beside pgbench
  drop_caches
  "$pg/pgbench" -c 4 -j 2 -T "$secs" > "$dir/run/pgbench2.log" 2>&1 &
  local bench=$!
  t0=$(date +%s.%N)
  bytes=$(run background+dontneed tar -cf - -C "$dir/mnt" sqlite build | wc -c)
  t1=$(date +%s.%N)
  wait "$bench" || true
  result[$1.backup]=$(awk -v n="$bytes" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / 1e6 / (b - a) }')
  result[$1.beside]=$(pgbench_tps "$dir/run/pgbench2.log")
  result[$1.flash]=$(( ($(written) - w0) >> 20 ))
  cache_state backup

  detach
  stop hc; stop filter; stop slow
}

printf 'slow tier: %s per request, one at a time; cache %s; applications in %s of memory;\n' \
  "$delay" "$cache" "$mem"
printf '%s s per timed run, data scale %s\n\n' "$secs" "$scale"
configs=(${BENCH_APPS_CONFIGS:-none filter hintcache hinted})  # a subset: BENCH_APPS_CONFIGS="filter hinted"
rounds=${BENCH_APPS_ROUNDS:-1}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_apps: BENCH_APPS_ROUNDS must be a positive integer" >&2; exit 2; }
figures=(pgbench sqlite build backup beside flash)
declare -A all lo hi
for r in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    echo "== $c (round $r of $rounds)" >&2
    measure "$c"
    # Each run's figures as soon as they exist (a run stopped part-way
    # keeps them).
    echo "== $c, round $r: pgbench ${result[$c.pgbench]:-} tps, sqlite ${result[$c.sqlite]:-} tx/s," \
      "build ${result[$c.build]:-} s, backup ${result[$c.backup]:-} MB/s beside" \
      "${result[$c.beside]:-} tps, flash ${result[$c.flash]:-} MiB" >&2
    for f in "${figures[@]}"; do all[$c.$f]+="${result[$c.$f]:-} "; done
  done
done
# Each figure over the rounds: median, lowest, highest.
for c in "${configs[@]}"; do
  for f in "${figures[@]}"; do
    read -r "result[$c.$f]" "lo[$c.$f]" "hi[$c.$f]" < <(tr ' ' '\n' <<<"${all[$c.$f]}" | grep . | sort -n \
      | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)], v[1], v[NR]; else print "", "", "" }')
  done
done
[ "$rounds" = 1 ] || echo "medians of $rounds rounds:"
printf '%-10s %12s %12s %10s %12s %12s %12s\n' "" "pgbench tps" "sqlite tx/s" "build s" \
  "backup MB/s" "beside tps" "flash MiB"
for c in "${configs[@]}"; do
  printf '%-10s %12s %12s %10s %12s %12s %12s\n' "$c" "${result[$c.pgbench]:-}" "${result[$c.sqlite]:-}" \
    "${result[$c.build]:-}" "${result[$c.backup]:-}" "${result[$c.beside]:-}" "${result[$c.flash]:-}"
done
if [ "$rounds" != 1 ]; then
  echo
  echo "lowest-highest of $rounds rounds:"
  for c in "${configs[@]}"; do
    printf '%-10s' "$c"
    for f in "${figures[@]}"; do printf ' %12s' "${lo[$c.$f]:-}-${hi[$c.$f]:-}"; done
    echo
  done
fi
echo
for c in hintcache hinted; do
  awk -v c="$c" -v p="${result[$c.pgbench]:-}" -v pf="${result[filter.pgbench]:-}" \
      -v s="${result[$c.sqlite]:-}" -v sf="${result[filter.sqlite]:-}" \
      -v b="${result[$c.build]:-}" -v bf="${result[filter.build]:-}" \
      -v k="${result[$c.backup]:-}" -v kf="${result[filter.backup]:-}" '
    function x(a, b) { return a > 0 && b > 0 ? sprintf("%.2fx", a / b) : "n/a" }
    BEGIN {
      printf "%-9s vs filter: pgbench %s, sqlite %s, build %s (filter time / its time), backup %s\n",
        c, x(p, pf), x(s, sf), x(bf, b), x(k, kf)
    }'
done
