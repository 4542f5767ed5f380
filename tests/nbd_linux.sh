#!/usr/bin/env bash
# Linux end to end: ext4 on a loop device over nbdfuse over the plugin.
#   1. mkfs, mount, write files, sync, SIGKILL the server, restart it:
#      mount (replaying ext4's journal): every file's checksum matches and
#      fsck -n is clean;
#   2. `hintcache advise --file` on a file in that filesystem keeps its
#      blocks cached through a flood of random reads (visible in stats);
#   3. a sequential reader whose requests nbdfuse spreads over its
#      connections is read ahead from an NBD slow tier, and so is one on a
#      connection of its own beside a busy random reader on another, and
#      one whose requests come interleaved with a random reader's on the
#      same connection.
# Needs root, /dev/fuse, nbdfuse and loop devices; exits 77 without them.
set -eu
hc=$1 plugin=$2
. "$(dirname "$0")/functions.sh"
. "$(dirname "$0")/nbd_functions.sh"
[ "$(id -u)" = 0 ] || skip "needs root (loop devices, mount)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
requires nbdfuse
requires losetup
requires mkfs.ext4
requires python3
modprobe loop 2>/dev/null || true
losetup -f >/dev/null 2>&1 || skip "no free loop device"

fast=$tmp/fast.img slow=$tmp/slow.img sock=$tmp/nbd.sock ctl=$tmp/ctl.sock
mkdir -p "$tmp/fuse" "$tmp/fs"
truncate -s 48M "$fast"
truncate -s 512M "$slow"

loop= fuse_pid=
attach() {                      # nbdfuse, then a loop device on its file
  # (nbdfuse aborts when the server is killed under it: expected, so its
  # job is disowned to keep the shell quiet about it)
  nbdfuse "$tmp/fuse" "$(uri "$sock")" 2>>"$tmp/nbdfuse.log" &
  fuse_pid=$!
  disown $fuse_pid
  for _ in $(seq 100); do [ -f "$tmp/fuse/nbd" ] && break; sleep 0.1; done
  [ -f "$tmp/fuse/nbd" ] || fail "nbdfuse did not start: $(cat "$tmp/nbdfuse.log")"
  loop=$(losetup -f --show "$tmp/fuse/nbd")
}
detach() {
  mountpoint -q "$tmp/fs" && { umount "$tmp/fs" 2>/dev/null || umount -l "$tmp/fs"; }
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
  loop=
  fusermount3 -u "$tmp/fuse" 2>/dev/null || fusermount -u "$tmp/fuse" 2>/dev/null \
    || umount -l "$tmp/fuse" 2>/dev/null || true
  for _ in $(seq 50); do [ -n "$fuse_pid" ] && kill -0 "$fuse_pid" 2>/dev/null || break; sleep 0.1; done
}
cleanup_fns=("detach" "${cleanup_fns[@]}")

# ---- 1. Crash and recover under a real filesystem. -----------------------
start_server a "$sock" fast="$fast" slow="$slow" format=true mode=writeback control="$ctl"
attach
mkfs.ext4 -q -F "$loop"
mount "$loop" "$tmp/fs"
mkdir -p "$tmp/fs/data"
for i in $(seq 1 120); do
  head -c $(( (i * 7919) % 400000 + 1 )) /dev/urandom > "$tmp/fs/data/f$i"
done
head -c 24M /dev/urandom > "$tmp/fs/data/big"
(cd "$tmp/fs/data" && sha256sum -- *) > "$tmp/sums"
sync
stop_server a KILL                 # no clean close: the journal must carry it
detach
start_server a "$sock" fast="$fast" control="$ctl"
attach
# The file system is checked as the kernel recovers it: mounting replays
# ext4's journal (a read-only fsck before that would skip the replay and
# report metadata that jbd2 had not yet written in place -- ext4's own
# crash contract, not the volume's).  Then every file, then fsck.
mount "$loop" "$tmp/fs"
(cd "$tmp/fs/data" && sha256sum -c --quiet "$tmp/sums") || fail "checksums after a crash"
umount "$tmp/fs"
fsck.ext4 -n -f "$loop" > "$tmp/fsck.txt" 2>&1 || fail "fsck after a crash: $(cat "$tmp/fsck.txt")"
mount "$loop" "$tmp/fs"
echo "crash under ext4: journal replayed, fsck clean, $(wc -l < "$tmp/sums") files match"

# ---- 2. advise --file keeps a file's blocks cached. -----------------------
head -c 8M /dev/urandom > "$tmp/fs/hot"
head -c 72M /dev/urandom > "$tmp/fs/flood"
sync
# Write back what the files left dirty: a victim search steps past dirty
# blocks, and each step around the main FIFO spends a credit of every
# clean block in it, so a cache full of dirty data would measure the
# cleaner's pace, not the advice.
expect_status 0 "$hc" clean --socket "$ctl"
# willneed: advice is obeyed (a class alone is weighed by the cache's
# evidence, and nothing here shows it what the file is worth).
expect_status 0 "$hc" advise --socket "$ctl" --mount "$tmp/fs" --file "$tmp/fs/hot" metadata+willneed
contains "$out" "-> metadata+willneed" "advise --file summary"
# A file elsewhere is refused: its extents are offsets on another device.
expect_status 1 "$hc" advise --socket "$ctl" --mount "$tmp/fs" --file "$0" background+dontneed
contains "$err" "is not on the file system mounted at" "a file off the volume is refused"
expect_status 2 "$hc" advise --socket "$ctl" --file "$tmp/fs/hot" metadata
contains "$err" "--file needs --mount" "--mount is required with --file"
echo "$out"
# Read the hot file through the volume, then flood the cache with one pass
# in random order over a file 1.6 times the fast tier: every unadvised
# block is evicted, and the advised ones must stay whichever way the
# evidence turns probation.  With it on, the flood never reaches the main
# FIFO; with it off, the flood goes through the main FIFO about twice,
# within the three passes willneed's credit lasts (a flood 3.5 times the
# tier, once used here, outlasted it when the evidence turned probation
# off early; test_cache_dir checks that bound exactly).  Each
# block is read once, so the flood's misses do not depend on what the page
# cache keeps (re-reads that the loop device's page cache, on the nbdfuse
# file, absorbed on a quiet machine reached the volume when another
# program dropped caches meanwhile).  O_DIRECT skips ext4's page cache;
# dropping caches empties the loop device's.
echo 3 > /proc/sys/vm/drop_caches
cat > "$tmp/readdirect.py" <<'PY'
import mmap, os, random, sys
path, order = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
n = os.fstat(fd).st_size // 4096
buf = mmap.mmap(-1, 4096)
blocks = list(range(n))
if order == "random":
    random.seed(7)
    random.shuffle(blocks)
for b in blocks:
    os.preadv(fd, [buf], b * 4096)
PY
python3 "$tmp/readdirect.py" "$tmp/fs/hot" seq
expect_status 0 "$hc" stats --socket "$ctl" --json
before=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["classes"]["metadata"]["blocks"])')
[ "$before" -ge 2000 ] || fail "the advised file's blocks are cached as metadata: $before"
echo 3 > /proc/sys/vm/drop_caches
python3 "$tmp/readdirect.py" "$tmp/fs/flood" random
expect_status 0 "$hc" stats --socket "$ctl" --json
after=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["classes"]["metadata"]["blocks"])')
flood=$(echo "$out" | python3 -c 'import json,sys; c=json.load(sys.stdin)["classes"]["unclassified"]; print(c["read"]["misses"])')
echo "advised blocks cached: $before before a flood of $flood random misses, $after after"
[ "$after" -ge $((before * 9 / 10)) ] || fail "advised blocks evicted by the flood: $before -> $after"
# Withdrawn, the hint no longer classifies new reads of the file.
expect_status 0 "$hc" advise --socket "$ctl" --mount "$tmp/fs" --file "$tmp/fs/hot" --withdraw
umount "$tmp/fs"
detach
stop_server a
expect_status 0 "$hc" check "$fast"

# ---- 3. One reader over several connections is read ahead. ----------------
# nbdfuse sends one reader's requests over its four connections in turn.
# The volume must still see one sequential run and read the slow tier (an
# NBD export here, which keeps no cache the volume could lean on) ahead of
# it in large requests, not one slow request per client request.  The
# slow export's log filter counts the reads that reach it.
slowsock=$tmp/slow.sock
head -c 80M /dev/urandom > "$tmp/slow2.img"
truncate -s 256M "$tmp/slow2.img"
truncate -s 32M "$tmp/fast2.img"
nbdkit -f -U "$slowsock" --filter=log file "$tmp/slow2.img" logfile="$tmp/slow-requests.log" \
  2>>"$tmp/slow.log" &
slow_pid=$!
# (KILL: nbdkit waits for its clients to go, and the plugin is one)
cleanup_fns+=("kill -KILL $slow_pid 2>/dev/null; wait $slow_pid 2>/dev/null")
for _ in $(seq 100); do nbdinfo --size "$(uri "$slowsock")" >/dev/null 2>&1 && break; sleep 0.1; done
start_server b "$sock" fast="$tmp/fast2.img" slow="$(uri "$slowsock")" format=true
attach
slow_reads() { grep -c ' Read ' "$tmp/slow-requests.log" || true; }
r0=$(slow_reads)
dd if="$tmp/fuse/nbd" of="$tmp/head.bin" bs=256K count=256 iflag=direct status=none
r1=$(slow_reads)
cmp "$tmp/head.bin" <(head -c 64M "$tmp/slow2.img") || fail "the 64 MiB read through nbdfuse differ"
pieces=$(( 64 * 1024 / 128 ))      # FUSE's requests are at most 128 KiB
echo "64 MiB read through nbdfuse's connections: $((r1 - r0)) slow-tier reads for $pieces requests"
[ $((r1 - r0)) -le $((pieces / 4)) ] \
  || fail "a sequential reader over several connections was not read ahead: $((r1 - r0)) slow reads"

# A sequential reader on a connection of its own keeps its run while a
# random reader on another connection sends 20 requests between each two of
# its own (on the region read above): the connection's own run finds it.
cat > "$tmp/two_readers.py" <<'PY'
import random, sys
import nbd
uri, base, shared = sys.argv[1], int(sys.argv[2]) << 20, sys.argv[3] == "one"
rnd, seq = nbd.NBD(), nbd.NBD()
rnd.connect_uri(uri)
if shared:
    seq = rnd
else:
    seq.connect_uri(uri)
random.seed(5)
for i in range(256):
    seq.pread(256 << 10, base + (i << 18))
    for _ in range(20):
        rnd.pread(4096, random.randrange(16384) << 12)
PY
# two_readers MIB one|two: the slow tier's reads of [MIB, MIB + 64) MiB
two_readers() {
  local l0
  l0=$(wc -l < "$tmp/slow-requests.log")
  python3 "$tmp/two_readers.py" "$(uri "$sock")" "$1" "$2" || fail "the two readers"
  sed -n "$((l0 + 1)),\$p" "$tmp/slow-requests.log" | grep ' Read ' \
    | python3 -c 'import re, sys
lo = int(sys.argv[1]) << 20
print(sum(1 for l in sys.stdin
          if lo <= int(re.search(r"offset=(0x[0-9a-f]+)", l).group(1), 16) < lo + (64 << 20)))' "$1"
}
seq_reads=$(two_readers 128 two)
echo "64 MiB read on one connection beside 5,120 random reads on another: $seq_reads slow-tier reads for 256 requests"
[ "$seq_reads" -le 64 ] || fail "a sequential reader beside a random one was not read ahead: $seq_reads slow reads"

# Both readers on one connection, as the kernel's NBD client sends every
# process's requests: the connection's own run breaks at every random
# read, and only the volume's run table can find the sequential reader —
# with 20 random requests between two of its own, more than the 16 runs it
# holds, so only if random requests cannot displace an established run.
seq_reads=$(two_readers 192 one)
echo "64 MiB read interleaved with 5,120 random reads on one connection: $seq_reads slow-tier reads for 256 requests"
[ "$seq_reads" -le 64 ] || fail "a sequential reader interleaved with a random one was not read ahead: $seq_reads slow reads"
detach
stop_server b
echo "nbd_linux: ok"
