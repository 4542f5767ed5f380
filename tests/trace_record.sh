#!/usr/bin/env bash
# `hintcache trace record` on a real workload: ext4 (4 KiB blocks) on a loop
# device, files read, copied into /backup and synced by a command run in a
# memory cgroup, recorded through tracefs:
#   1. no event lost; the trace reads under --strict and replays;
#   2. labels against ground truth, block by block: every request labelled
#      with a file has all its blocks among that file's blocks as debugfs
#      lists them (other_file, wal for a -wal name, temp under /backup);
#      every read the workload's `cat` issued is labelled with the file it
#      read; no request labelled fs_metadata or journal touches a file's
#      block; the journal's requests carry the journal's blocks; a rule of
#      --rules FILE labels the files it names; a directory's requests
#      (object "path/") hold only its blocks, and a named structure's
#      ("inode_table(g0)", "block_bitmap(g0)", …) only the blocks dumpe2fs
#      gives it; a bad rules file is refused with its line;
#   3. the command ran in the memory cgroup;
#   4. lost events: with a tiny buffer and the recorder stopped (SIGSTOP)
#      through a burst of reads, the loss is reported and the exit status
#      is 3.
# Needs root, loop devices, tracefs with block events, debugfs; exits 77
# without them.
set -eu
hc=$1
. "$(dirname "$0")/functions.sh"
[ "$(id -u)" = 0 ] || skip "needs root (tracefs, loop devices, mount)"
for t in losetup mkfs.ext4 debugfs dumpe2fs jq sqlite3; do requires $t; done
modprobe loop 2>/dev/null || true
losetup -f >/dev/null 2>&1 || skip "no free loop device"
[ -d /sys/kernel/tracing/events/block ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
[ -d /sys/kernel/tracing/events/block ] || skip "no tracefs block events"

img=$tmp/disk.img mnt=$tmp/mnt
mkdir -p "$mnt"
truncate -s 512M "$img"
dev=$(losetup -f --show "$img")
cleanup_fns=("umount -l '$mnt' 2>/dev/null; losetup -d $dev 2>/dev/null" "${cleanup_fns[@]}")
mkfs.ext4 -q -b 4096 "$dev"
mount "$dev" "$mnt"
mkdir -p "$mnt/data" "$mnt/backup"
head -c 24M /dev/urandom > "$mnt/data/big.bin"
head -c 3M /dev/urandom > "$mnt/data/db-wal"
for i in $(seq 1 20); do head -c $((i * 5000)) /dev/urandom > "$mnt/data/small$i"; done
sqlite3 "$mnt/data/s.db" "PRAGMA page_size=4096; CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
  CREATE INDEX tb ON t(b); INSERT INTO t SELECT value, hex(randomblob(200 + value % 3000))
  FROM generate_series(1, 3000);"
cp "$mnt/data/s.db" "$mnt/backup/s.db"
sync
echo 3 > /proc/sys/vm/drop_caches

# 1. Record.
printf '# the rules of this test\n/data/small2*   table   # small2, small20\n' > "$tmp/rules"
printf '*.x  table\n/data/*  nosuchlabel\n' > "$tmp/bad.rules"
expect_status 1 "$hc" trace record --device "$dev" --mount "$mnt" --rules "$tmp/bad.rules" \
  -o "$tmp/never.csv" -- true
contains "$err" "bad.rules, line 2: 'nosuchlabel' is not a label" "a bad rules file"
expect_status 0 "$hc" trace record --device "$dev" --mount "$mnt" --memory-limit 64M \
  --rules "$tmp/rules" \
  --snapshot-interval 0.5 -o "$tmp/t.csv.gz" -- sh -c "
    cat /proc/self/cgroup > '$tmp/cgroup'
    cat '$mnt'/data/* '$mnt'/backup/s.db > /dev/null
    cp '$mnt/data/big.bin' '$mnt/backup/'
    sync"
contains "$out" "2 SQLite databases mapped by page" "the summary"
contains "$out" "lost events 0" "the summary"
expect_status 0 "$hc" trace stats "$tmp/t.csv.gz" --strict --json
st=$out
[ "$(echo "$st" | jq .requests)" -gt 20 ] || fail "too few requests: $st"
expect_status 0 "$hc" replay "$tmp/t.csv.gz" --cache 1000 --strategy none,io --policy lru --json
[ "$(echo "$out" | jq '.[0].accesses')" -gt 1000 ] || fail "the replay: $out"

# 2. Ground truth: each file's blocks, from debugfs.
zcat "$tmp/t.csv.gz" | tail -n +2 > "$tmp/rows"
for f in data/big.bin data/db-wal backup/big.bin $(cd "$mnt" && ls data/small*); do
  debugfs -R "blocks /$f" "$dev" 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+$' \
    | sed "s|\$| /$f|" >> "$tmp/truth"
done
# The database's pages by kind (page n is its n-th block: no holes).
debugfs -R "blocks /data/s.db" "$dev" 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+$' > "$tmp/dbblocks"
sqlite3 -readonly "$mnt/data/s.db" "SELECT d.pageno, d.pagetype, coalesce(s.type, d.name)
  FROM dbstat d LEFT JOIN sqlite_schema s ON s.name = d.name" > "$tmp/dbpages"
for d in / /data/ /backup/ /lost+found/; do
  debugfs -R "blocks $d" "$dev" 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+$' \
    | sed "s|\$| $d|" >> "$tmp/dirs"
done
dumpe2fs "$dev" 2>/dev/null > "$tmp/dumpe2fs"
python3 - "$tmp/rows" "$tmp/truth" "$tmp/dirs" "$tmp/dumpe2fs" "$tmp/dbblocks" "$tmp/dbpages" <<'PY' \
  || fail "labels differ from the ground truth"
import collections, csv, re, sys
# The SQLite database's blocks by page kind.
dbblock = [int(b) for b in open(sys.argv[5])]
kind = {}
for line in open(sys.argv[6]):
    page, ptype, what = line.strip().split("|")
    page = int(page)
    kind[dbblock[page - 1]] = ("catalog" if page == 1 else "toast" if ptype == "overflow"
                               else what if what in ("index", "table") else "catalog")
dbkinds = collections.Counter()
owner = {}
for line in open(sys.argv[2]):
    b, f = line.split()
    owner[int(b)] = f
files = set(owner.values())
dirblocks = {}
for line in open(sys.argv[3]):
    b, d = line.split()
    dirblocks.setdefault(d, set()).add(int(b))
# Each group's structures, as dumpe2fs lists them.
structs, g = {}, None
def span(text):
    a, _, b = text.partition("-")
    return range(int(a), int(b or a) + 1)
for line in open(sys.argv[4]):
    m = re.match(r"Group (\d+):", line)
    if m:
        g = int(m.group(1))
        continue
    if g is None:
        continue
    for what, key in (("superblock", r"(Primary|Backup) superblock at (\d+)"),
                      ("group_descriptors", r"Group descriptors at ([\d-]+)"),
                      ("reserved_gdt", r"Reserved GDT blocks at ([\d-]+)"),
                      ("block_bitmap", r"Block bitmap at (\d+)"),
                      ("inode_bitmap", r"Inode bitmap at (\d+)"),
                      ("inode_table", r"Inode table at ([\d-]+)")):
        m = re.search(key, line)
        if m:
            name = (f"superblock({m.group(1).lower()} g{g})" if what == "superblock"
                    else f"{what}(g{g})")
            structs[name] = set(span(m.group(m.lastindex)))
named, dirs = 0, 0
bad, checked, cat_reads = [], 0, 0
for row in csv.reader(open(sys.argv[1])):
    ts, op, off, ln, flags, pc, ph, pl, comm, pid, label, obj = row
    off, ln = int(off), int(ln)
    if op not in "RW" or ln == 0:
        continue
    blocks = range(off // 4096, (off + ln - 1) // 4096 + 1)
    if obj == "/backup/s.db":
        dbkinds["backup"] += 1
        if label != "temp":
            bad.append(f"{op} {off}+{ln} of /backup/s.db labelled {label}: a rule said temp")
    elif obj == "/data/s.db":
        votes = collections.Counter(kind[b] for b in blocks if b in kind)
        dbkinds[label] += 1
        if not votes or votes[label] != max(votes.values()):
            bad.append(f"{op} {off}+{ln} of s.db labelled {label}; its pages are {dict(votes)}")
    elif obj in files:
        checked += 1
        want = ("wal" if obj.endswith("-wal") else "temp" if obj.startswith("/backup/")
                else "table" if re.fullmatch(r"/data/small2\d*", obj) else "other_file")
        if label != want:
            bad.append(f"{obj}: label {label}, expected {want}")
        wrong = [b for b in blocks if owner.get(b) != obj]
        if wrong:
            bad.append(f"{op} {off}+{ln} labelled {obj}: blocks {wrong[:3]} are {owner.get(wrong[0])}")
    elif label in ("fs_metadata", "journal"):
        hit = [b for b in blocks if b in owner]
        if hit:
            bad.append(f"{op} {off}+{ln} labelled {label} holds block {hit[0]} of {owner[hit[0]]}")
    if obj in structs or obj in dirblocks:
        truth = structs.get(obj) or dirblocks[obj]
        named += obj in structs
        dirs += obj in dirblocks
        if label != "fs_metadata" or not set(blocks) <= truth:
            bad.append(f"{op} {off}+{ln} labelled {label} {obj}: not all its blocks are {obj}'s")
    elif re.fullmatch(r"[a-z_]+\((primary |backup )?g\d+\)|.*/", obj):
        bad.append(f"{op} {off}+{ln}: {obj} is not a structure or directory dumpe2fs/debugfs know")
    if comm == "cat" and op == "R" and any(b in owner for b in blocks):
        cat_reads += 1
        if obj not in files:
            bad.append(f"cat's read {off}+{ln} of {owner.get(blocks[0])} labelled {label} {obj!r}")
if dbkinds["index"] < 1 or dbkinds["table"] < 1 or dbkinds["toast"] < 1 or dbkinds["backup"] < 1:
    bad.append(f"the database's requests by kind: {dict(dbkinds)}")
if checked < 10 or cat_reads < 5 or named < 1 or dirs < 1:
    bad.append(f"only {checked} file requests, {cat_reads} cat reads, {named} structures, "
               f"{dirs} directories")
if bad:
    print("\n".join(bad[:10]), file=sys.stderr)
    sys.exit(1)
print(f"{checked} file requests checked block by block, {cat_reads} reads by cat, "
      f"{named} structure and {dirs} directory requests, SQLite pages {dict(dbkinds)}")
PY
grep -q ',journal,<journal>$' "$tmp/rows" || fail "no journal request (the sync commits)"

# 3. The cgroup.
grep -q "hintcache-record-" "$tmp/cgroup" || fail "the command was not in the memory cgroup: $(cat "$tmp/cgroup")"

# 4. Lost events are reported: a 16 KiB buffer per CPU, the recorder stopped
# while 4,000 direct reads go by.
echo 3 > /proc/sys/vm/drop_caches
"$hc" trace record --device "$dev" --buffer-size 16K --duration 4 -o "$tmp/lossy.csv" \
  > "$tmp/lossy.out" 2> "$tmp/lossy.err" &
rec=$!
sleep 1
kill -STOP $rec
dd if="$dev" of=/dev/null bs=4k count=4000 iflag=direct status=none
kill -CONT $rec
set +e
wait $rec
status=$?
set -e
[ $status = 3 ] || fail "a lossy recording exited $status: $(cat "$tmp/lossy.out" "$tmp/lossy.err")"
grep -q "lost .* events" "$tmp/lossy.err" || fail "no word of the loss: $(cat "$tmp/lossy.err")"
[ -s "$tmp/lossy.csv" ] || fail "the lossy trace was not written"
echo "trace_record: labels match debugfs block by block; $(grep -o 'lost events [0-9]*' "$tmp/lossy.out")"
