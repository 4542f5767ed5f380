#!/usr/bin/env bash
# Hint sources on a real system: ext4 on a loop device over nbdfuse over the
# plugin, with
#   1. `hintcache hintd`: a file-heavy workload's metadata and journal I/O
#      is classified as such; a copy into /backup ends up background and
#      dontneed (re-classed when its hint arrives, not admitted when read);
#   2. the preload library: `ionice -c2 -n4096 dd` (buffered) is not
#      admitted, the same dd without ionice is; `hintcache run --class`
#      classifies a command's data; posix_fadvise(WILLNEED) prefetches.
# Needs root, /dev/fuse, nbdfuse and loop devices; exits 77 without them.
set -eu
hc=$1 plugin=$2
preload=$(dirname "$plugin")/libhintcache-preload.so
. "$(dirname "$0")/functions.sh"
. "$(dirname "$0")/nbd_functions.sh"
[ "$(id -u)" = 0 ] || skip "needs root (loop devices, mount)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
requires nbdfuse
requires losetup
requires mkfs.ext4
requires ionice
requires python3
[ -f "$preload" ] || fail "no preload library at $preload"
modprobe loop 2>/dev/null || true
losetup -f >/dev/null 2>&1 || skip "no free loop device"

fast=$tmp/fast.img slow=$tmp/slow.img sock=$tmp/nbd.sock ctl=$tmp/ctl.sock fs=$tmp/fs
mkdir -p "$tmp/fuse" "$fs"
truncate -s 96M "$fast"
truncate -s 1G "$slow"
loop= fuse_pid= hintd_pid=
detach() {
  [ -n "$hintd_pid" ] && { kill "$hintd_pid" 2>/dev/null; wait "$hintd_pid" 2>/dev/null || true; }
  hintd_pid=
  mountpoint -q "$fs" && { umount "$fs" 2>/dev/null || umount -l "$fs"; }
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
  loop=
  fusermount3 -u "$tmp/fuse" 2>/dev/null || umount -l "$tmp/fuse" 2>/dev/null || true
}
cleanup_fns=("detach" "${cleanup_fns[@]}")

# stat CLASS PATH... : one number from the live statistics.
stat_of() {
  "$hc" stats --socket "$ctl" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)["classes"]
for k in sys.argv[1:]:
    v = v[k]
print(v)' "$@"
}

start_server a "$sock" fast="$fast" slow="$slow" format=true mode=writeback control="$ctl"
nbdfuse "$tmp/fuse" "$(uri "$sock")" 2>>"$tmp/nbdfuse.log" &
fuse_pid=$!
disown $fuse_pid
for _ in $(seq 100); do [ -f "$tmp/fuse/nbd" ] && break; sleep 0.1; done
loop=$(losetup -f --show "$tmp/fuse/nbd")
mkfs.ext4 -q -F "$loop"
mount "$loop" "$fs"
mkdir -p "$fs/backup" "$fs/src"

# ---- 1. hintd. -------------------------------------------------------------
"$hc" hintd --mount "$fs" --device "$loop" --socket "$ctl" --interval 1 --quiet 2>"$tmp/hintd.log" &
hintd_pid=$!
for _ in $(seq 100); do
  n=$("$hc" control --socket "$ctl" info | sed -n 's/.*range_hints=\([0-9]*\).*/\1/p')
  [ "${n:-0}" -gt 0 ] && break
  sleep 0.1
done
[ "${n:-0}" -gt 0 ] || fail "hintd sent no hints: $(cat "$tmp/hintd.log")
server: $(if alive "$a_pid"; then echo running; else echo gone; fi); its log: $(log_excerpt "$tmp/a.log")"
meta0=$(( $(stat_of metadata read misses) + $(stat_of metadata read hits) + $(stat_of metadata write misses) + $(stat_of metadata write hits) ))
jour0=$(( $(stat_of journal write misses) + $(stat_of journal write hits) ))
# A file-heavy workload: many small files in many directories, synced, then
# listed and read back cold.
for d in $(seq 1 60); do
  mkdir -p "$fs/src/d$d"
  for f in $(seq 1 40); do echo "file $d/$f $(date +%N)" > "$fs/src/d$d/f$f.c"; done
done
sync
echo 3 > /proc/sys/vm/drop_caches
find "$fs/src" -type f | xargs cat > /dev/null
sync
meta1=$(( $(stat_of metadata read misses) + $(stat_of metadata read hits) + $(stat_of metadata write misses) + $(stat_of metadata write hits) ))
jour1=$(( $(stat_of journal write misses) + $(stat_of journal write hits) ))
echo "hintd: metadata I/O $meta0 -> $meta1 blocks, journal writes $jour0 -> $jour1 blocks"
[ $((meta1 - meta0)) -ge 100 ] || fail "metadata I/O not classified: $meta0 -> $meta1"
[ $((jour1 - jour0)) -ge 10 ] || fail "journal writes not classified: $jour0 -> $jour1"

# A copy into /backup: once its extents exist, hintd marks them background
# and dontneed; cached copies are re-classed, re-reads are not admitted.
head -c 24M /dev/urandom > "$tmp/backup.src"
cp "$tmp/backup.src" "$fs/backup/copy"
sync
off=$(python3 - "$fs/backup/copy" <<'PY'
import array, fcntl, struct, sys
fd = open(sys.argv[1], "rb")
buf = bytearray(32 + 56)
struct.pack_into("QQIIII", buf, 0, 0, 2**64 - 1, 0, 0, 1, 0)
fcntl.ioctl(fd, 0xC020660B, buf)               # FS_IOC_FIEMAP, one extent
print(struct.unpack_from("QQQ", buf, 32)[1])   # fe_physical
PY
)
for _ in $(seq 100); do
  h=$("$hc" control --socket "$ctl" "hint $off")
  case $h in *background*) break ;; esac
  sleep 0.1
done
contains "$h" "background" "the backup copy's hint"
contains "$h" "dontneed" "the backup copy's advice"
adm0=$(stat_of background read admissions)
echo 3 > /proc/sys/vm/drop_caches
python3 - "$fs/backup/copy" <<'PY'
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 1 << 20)
off = 0
while os.preadv(fd, [buf], off) > 0:
    off += 1 << 20
PY
adm1=$(stat_of background read admissions)
echo "backup copy: hint '$h', read admissions $adm0 -> $adm1"
[ "$adm1" = "$adm0" ] || fail "backup reads were admitted: $adm0 -> $adm1"
kill "$hintd_pid"
wait "$hintd_pid" || fail "hintd did not exit cleanly on SIGTERM"
hintd_pid=

# ---- 2. The preload library. ----------------------------------------------
export HINTCACHE_SOCKET=$ctl HINTCACHE_MOUNTS=$fs
# In the sanitizer build the library needs the sanitizer runtimes loaded
# first; `hintcache run` puts the library first, so it gets them after.
pl=$preload
if [ -n "$san_preload" ]; then
  pl="${san_preload# } $preload"
  export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0
fi
unadm() { echo $(( $(stat_of unclassified write admissions) )); }
a0=$(unadm)
LD_PRELOAD=$pl ionice -c2 -n4096 dd if=/dev/zero of="$fs/x" bs=1M count=64 status=none
sync
a1=$(unadm)
LD_PRELOAD=$pl dd if=/dev/zero of="$fs/y" bs=1M count=64 status=none
sync
a2=$(unadm)
echo "dd 64 MiB: admitted $((a1 - a0)) blocks under ionice -c2 -n4096, $((a2 - a1)) without"
[ $((a1 - a0)) -le 256 ] || fail "ionice -n4096 data was admitted: $((a1 - a0)) blocks"
[ $((a2 - a1)) -ge 8192 ] || fail "plain data was not admitted: $((a2 - a1)) blocks"

j0=$(( $(stat_of journal write misses) + $(stat_of journal write hits) ))
LD_PRELOAD=${san_preload# } "$hc" run --class journal --socket "$ctl" --mount "$fs" -- \
  dd if=/dev/zero of="$fs/z" bs=1M count=16 status=none
sync
j1=$(( $(stat_of journal write misses) + $(stat_of journal write hits) ))
echo "hintcache run --class journal: journal writes $j0 -> $j1 blocks"
[ $((j1 - j0)) -ge 3500 ] || fail "run --class journal did not classify the data"

# posix_fadvise(WILLNEED) becomes a prefetch: on x, whose blocks the cache
# declined above (y's are cached already, nothing would be fetched).
"$hc" stats --socket "$ctl" --json > "$tmp/s0.json"
p0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prefetched"])' "$tmp/s0.json")
LD_PRELOAD=$pl python3 - "$fs/x" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 8 << 20, os.POSIX_FADV_WILLNEED)
os.close(fd)
PY
for _ in $(seq 50); do
  "$hc" stats --socket "$ctl" --json > "$tmp/s1.json"
  p1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prefetched"])' "$tmp/s1.json")
  [ "$p1" -gt "$p0" ] && break
  sleep 0.1
done
echo "posix_fadvise(WILLNEED): prefetched $p0 -> $p1 blocks"
[ "$p1" -gt "$p0" ] || fail "WILLNEED did not prefetch"

detach
stop_server a
expect_status 0 "$hc" check "$fast"
echo "nbd_hints: ok"
