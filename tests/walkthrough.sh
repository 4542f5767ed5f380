#!/usr/bin/env bash
# The README's walkthrough ("A filesystem on hintcache"), run as written:
# its start, work and stop blocks are read from README.md and pasted into
# shells as a user would, in a copy of the source tree's layout (build/
# holding the tool and the plugin under test), with /tmp/hc moved to a
# temporary directory:
#   1. start, work; the copied tree's checksums are noted after a sync;
#      then the server is killed (SIGKILL), as by a crash;
#   2. in a new shell, start again (the block clears what the crash left
#      behind): every file checks; stop;
#   3. start again after that clean stop: every file checks, the block did
#      not mkfs over the file system, and fsck -n -f finds it clean; stop.
# Needs root, /dev/fuse, nbdfuse, loop devices, ionice; exits 77 without.
set -eu
hc=$1 plugin=$2 src=$3
. "$(dirname "$0")/functions.sh"
. "$(dirname "$0")/nbd_functions.sh"
[ "$(id -u)" = 0 ] || skip "needs root (loop devices, mount)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
for t in nbdfuse losetup mkfs.ext4 fsck.ext4 blkid ionice sha256sum; do requires $t; done
modprobe loop 2>/dev/null || true
losetup -f >/dev/null 2>&1 || skip "no free loop device"
[ -d /usr/include ] || skip "no /usr/include to copy"

# block NAME: the README's block that starts with '# walkthrough: NAME',
# made to run here.
block() {
  local text
  text=$(awk -v name="$1" '
    $0 == "    # walkthrough: " name { on = 1; next }
    on && /^    / { sub(/^    /, ""); print; next }
    on { exit }' "$src/README.md")
  [ -n "$text" ] || fail "README.md has no '# walkthrough: $1' block"
  printf '%s\n' "$text" | sed -e "s|/tmp/hc|$tmp/hc|g" \
    -e "s|^nbdkit |LD_PRELOAD=\"$san_preload\" ASAN_OPTIONS=detect_leaks=0 nbdkit |" \
    -e "s|^ionice |LD_PRELOAD=\"$san_preload\" $run_asan ionice |"
}
# Under a sanitizer, `hintcache run` puts the (instrumented) preload library
# before the sanitizer runtimes given here, which ASan must be told to accept.
run_asan=ASAN_OPTIONS=detect_leaks=0${san_preload:+:verify_asan_link_order=0}

mkdir -p "$tmp/tree/build"
ln -s "$hc" "$tmp/tree/build/hintcache"
ln -s "$plugin" "$tmp/tree/build/nbdkit-hintcache-plugin.so"
# Whatever a failed run leaves: the daemons, the mounts, the loop device.
leftovers() {
  cd "$tmp/hc" 2>/dev/null || return 0
  [ -e hintd.pid ] && kill "$(cat hintd.pid)" 2>/dev/null
  umount -l mnt nbd 2>/dev/null
  [ -e dev ] && losetup -d "$(cat dev)" 2>/dev/null
  [ -e hc.pid ] && kill -9 "$(cat hc.pid)" 2>/dev/null
  cd /
}
cleanup_fns=("leftovers" "${cleanup_fns[@]}")

# session NAME SCRIPT: runs the script in a new shell from the tree's top,
# as a user who pasted it; its output in $tmp/NAME.log.
session() {
  (cd "$tmp/tree" && bash -c "$2") >"$tmp/$1.log" 2>&1 \
    || fail "$1 failed ($?): $(tail -20 "$tmp/$1.log")"
}
sums=$tmp/sums
check_tree='(cd mnt/src && sha256sum --quiet -c '"$sums"') || { echo "the files changed"; exit 1; }'

# 1. Start, work, note the tree, crash.
session first "$(block start)
$(block work)
sync
(cd mnt/src && find . -type f -exec sha256sum {} + > $sums)
[ \$(wc -l < $sums) -gt 1000 ] || { echo 'too few files copied'; exit 1; }
kill -9 \$(cat hc.pid)
for i in \$(seq 50); do kill -0 \$(cat hc.pid) 2>/dev/null || break; sleep 0.1; done"
grep -q "data .* 16384 " "$tmp/first.log" \
  || fail "the work block's stats show no 16,384 bypassed data writes: $(grep -A9 '^class' "$tmp/first.log" | tail -9)
the preload library said: $(grep 'hintcache-preload' "$tmp/first.log" || echo nothing)"

# 2. After the crash: start again, check, stop.
session second "$(block start)
$check_tree
$(block stop)"

# 3. After a clean stop: start, check, fsck, stop.
session third "$(block start)
$check_tree
kill \$(cat hintd.pid); sleep 0.2; umount mnt
fsck.ext4 -n -f \$dev || { echo 'fsck found errors'; exit 1; }
mount \$dev mnt
\$hc hintd --mount mnt --device \$dev --socket hc.ctl --quiet & echo \$! > hintd.pid
$(block stop)"
[ ! -e "$tmp/hc/hc.pid" ] || ! kill -0 "$(cat "$tmp/hc/hc.pid")" 2>/dev/null \
  || fail "the stop block left the server running"
echo "walkthrough: the README's blocks ran three times (a crash between the first two): $(wc -l < "$sums") files intact, fsck clean"
