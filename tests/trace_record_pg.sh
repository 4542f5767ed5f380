#!/usr/bin/env bash
# `hintcache trace record` of PostgreSQL: a cluster made on ext4 on a loop
# device, started, loaded and run by pgbench inside the recorded command,
# labelled by the running server's catalog:
#   1. every request on a file of the pgbench tables is `table`, on their
#      primary-key indexes `index`, on pg_wal `wal`, as pg_relation_filepath
#      says at the end of the run (the ground truth, asked by the command
#      itself before it stops the server); each kind is seen;
#   2. no request on a relation's main fork is left `other_file`.
# Needs root, loop devices, tracefs with block events and PostgreSQL's
# server binaries (initdb, pg_ctl, pgbench, psql); exits 77 without them.
set -eu
hc=$1
. "$(dirname "$0")/functions.sh"
[ "$(id -u)" = 0 ] || skip "needs root (tracefs, loop devices, mount)"
for t in losetup mkfs.ext4 runuser python3; do requires $t; done
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] && [ -x "$bin/initdb" ] && [ -x "$bin/pgbench" ] || skip "no PostgreSQL server binaries"
id postgres >/dev/null 2>&1 || skip "no postgres user"
modprobe loop 2>/dev/null || true
losetup -f >/dev/null 2>&1 || skip "no free loop device"
[ -d /sys/kernel/tracing/events/block ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
[ -d /sys/kernel/tracing/events/block ] || skip "no tracefs block events"

img=$tmp/disk.img mnt=$tmp/mnt run=$tmp/run
mkdir -p "$mnt" "$run"
chmod 755 "$tmp"
chmod 777 "$run"
truncate -s 1G "$img"
dev=$(losetup -f --show "$img")
cleanup_fns=("runuser -u postgres -- '$bin/pg_ctl' stop -D '$mnt/pg' -m immediate >/dev/null 2>&1; umount -l '$mnt' 2>/dev/null; losetup -d $dev 2>/dev/null" "${cleanup_fns[@]}")
mkfs.ext4 -q -b 4096 "$dev"
mount "$dev" "$mnt"
mkdir "$mnt/pg"
chown postgres: "$mnt/pg"
runuser -u postgres -- "$bin/initdb" -D "$mnt/pg" > "$run/initdb.log" 2>&1 \
  || fail "initdb: $(tail -5 "$run/initdb.log")"
sync

# The command: start the server (in the memory cgroup), load, run, note the
# truth, stop.
cat > "$run/work.sh" <<EOF
set -e
export PGHOST=$run PGDATABASE=postgres
'$bin/pg_ctl' start -w -D '$mnt/pg' -l '$run/server.log' \
  -o "-k $run -c listen_addresses= -c shared_buffers=16MB -c fsync=on"
'$bin/pgbench' -q -i -s 8 > '$run/init.log' 2>&1
'$bin/pgbench' -T 6 -c 2 > '$run/bench.log' 2>&1
'$bin/psql' -X -A -t -F ' ' -c "SELECT pg_relation_filepath(oid), relkind FROM pg_class
  WHERE relname LIKE 'pgbench_%'" > '$run/truth'
'$bin/pg_ctl' stop -w -D '$mnt/pg' -m fast
EOF
expect_status 0 "$hc" trace record --device "$dev" --mount "$mnt" --memory-limit 128M \
  --snapshot-interval 1 -o "$tmp/t.csv.gz" -- runuser -u postgres -- sh "$run/work.sh"
contains "$out" "lost events 0" "the summary"
[ -s "$run/truth" ] || fail "no ground truth: $(cat "$run/server.log" "$run/init.log" 2>/dev/null | tail -5)"

zcat "$tmp/t.csv.gz" | tail -n +2 > "$tmp/rows"
python3 - "$tmp/rows" "$run/truth" <<'PY' || fail "labels differ from the catalog"
import collections, csv, re, sys
kind = {}
for line in open(sys.argv[2]):
    path, k = line.split()
    kind["/pg/" + path] = "index" if k == "i" else "table"
seen, bad = collections.Counter(), []
for row in csv.reader(open(sys.argv[1])):
    label, obj = row[10], row[11]
    if row[1] not in "RW" or not obj.startswith("/pg/") or obj.endswith("/"):
        continue  # directories (fs_metadata, "path/") are not relations
    main = re.sub(r"\.\d+$", "", obj)
    if main in kind:
        seen[kind[main]] += 1
        if label != kind[main]:
            bad.append(f"{obj} ({kind[main]}) labelled {label}")
    elif obj.startswith("/pg/pg_wal/"):
        seen["wal"] += 1
        if label != "wal":
            bad.append(f"{obj} labelled {label}")
    elif re.fullmatch(r"/pg/base/\d+/\d+(\.\d+)?", obj) and label == "other_file":
        bad.append(f"{obj}: a relation's file labelled other_file")
for k in ("table", "index", "wal"):
    if seen[k] < 5:
        bad.append(f"only {seen[k]} {k} requests")
if bad:
    print("\n".join(bad[:10]), file=sys.stderr)
    sys.exit(1)
print("pgbench's files by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(seen.items())))
PY
echo "trace_record_pg: tables, indexes and WAL labelled as the catalog says"
