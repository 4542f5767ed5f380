#!/usr/bin/env bash
# The systemd units (dist/systemd), as configured in the build tree:
#   1. `systemd-analyze verify` finds nothing to say about any of them;
#   2. their commands, run as systemd would run them (%i, $$ and the
#      configuration's variables expanded; ExecStartPre, ExecStart in the
#      background, ExecStartPost; on stop ExecStop, then SIGTERM to the main
#      process) in the order their dependencies give, take two block files
#      to a mounted, hinted ext4 file system; after a shutdown and a second
#      "boot" the file system comes back with every file intact, and is not
#      made anew.
# This runs the units' commands without systemd as PID 1 (test machines have
# none); what it cannot check is systemd's own ordering at boot.
# Needs root, /dev/fuse, nbdfuse, loop devices, systemd-analyze; exits 77
# without them.
set -eu
hc=$1 plugin=$2
units=$(dirname "$hc")/systemd
. "$(dirname "$0")/functions.sh"
. "$(dirname "$0")/nbd_functions.sh"
[ "$(id -u)" = 0 ] || skip "needs root (loop devices, mount)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
for t in nbdfuse losetup mkfs.ext4 blkid systemd-analyze sha256sum; do requires $t; done
modprobe loop 2>/dev/null || true
losetup -f >/dev/null 2>&1 || skip "no free loop device"
[ -f "$units/hintcache@.service" ] || fail "no configured units in $units"

# 1. systemd's own check.
name=hctest$$
out=$(cd "$units" && systemd-analyze verify "./hintcache@$name.service" \
      "./hintcache-dev@$name.service" "./hintcache-hintd@$name.service" 2>&1) \
  || fail "systemd-analyze verify failed: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"

# 2. The units' commands.
run=/run/hintcache/$name
conf=$tmp/$name.conf
mkdir -p "$tmp/mnt"
truncate -s 64M "$tmp/fast.img"
truncate -s 512M "$tmp/slow.img"
cat > "$conf" <<CONF
FAST=$tmp/fast.img
SLOW=$tmp/slow.img
OPTIONS="mode=writeback format=true"
MOUNT=$tmp/mnt
CONF

# cmds UNIT KEY: the unit's KEY= lines, expanded as systemd expands them,
# with nbdkit given the plugin under test and the tool under test for the
# installed one.
cmds() {
  sed -n "s/^$2=//p" "$units/$1@.service" | sed -e "s/%i/$name/g" -e 's/\$\$/$/g' \
    -e "s|[^ ']*/hintcache hintd |$hc hintd |" \
    -e "s|^\\([^ ]*nbdkit\\) \\(.*\\) hintcache |env LD_PRELOAD=\"$san_preload\" ASAN_OPTIONS=detect_leaks=0 \\1 \\2 $plugin |"
}
declare -A main_pid
# start UNIT: as systemd starts a Type=simple service.
start() {
  local c
  while IFS= read -r c; do (set -a; . "$conf"; eval "$c") || fail "$1: ExecStartPre failed: $c"; done < <(cmds "$1" ExecStartPre)
  c=$(cmds "$1" ExecStart)
  (set -a; . "$conf"; eval "exec $c") >>"$tmp/$1.log" 2>&1 &
  main_pid[$1]=$!
  while IFS= read -r c; do (set -a; . "$conf"; eval "$c") || fail "$1: ExecStartPost failed: $c ($(cat "$tmp/$1.log"))"; done < <(cmds "$1" ExecStartPost)
  kill -0 "${main_pid[$1]}" 2>/dev/null || fail "$1 died: $(cat "$tmp/$1.log")"
}
# stop UNIT: ExecStop, then SIGTERM to the main process, then wait for it.
stop() {
  local c pid=${main_pid[$1]:-}
  while IFS= read -r c; do (set -a; . "$conf"; eval "$c") || true; done < <(cmds "$1" ExecStop)
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$pid" 2>/dev/null || fail "$1 did not stop"
  wait "$pid" 2>/dev/null || true
  main_pid[$1]=
}
shutdown() {
  stop hintcache-hintd
  umount "$tmp/mnt"
  stop hintcache-dev
  stop hintcache
}
cleanup_fns=("shutdown_quietly" "${cleanup_fns[@]}")
shutdown_quietly() {
  for u in hintcache-hintd hintcache-dev hintcache; do
    [ -n "${main_pid[$u]:-}" ] && kill "${main_pid[$u]}" 2>/dev/null
  done
  umount -l "$tmp/mnt" 2>/dev/null
  [ -s "$run/loop" ] && losetup -d "$(cat "$run/loop")" 2>/dev/null
  umount -l "$run/fuse" 2>/dev/null
  rm -rf "$run"
}
boot() {
  start hintcache
  start hintcache-dev
  dev=$(cat "$run/loop")
  [ -b "$dev" ] || fail "no loop device: '$dev'"
  blkid "$dev" >/dev/null || { mkfs.ext4 -q "$dev"; made=$((made + 1)); }
  mount UUID="$(blkid -s UUID -o value "$dev")" "$tmp/mnt" || fail "mount by UUID"
  start hintcache-hintd
}

made=0
boot
mkdir -p "$tmp/mnt/data"
for i in $(seq 1 50); do head -c $((i * 3000)) /dev/urandom > "$tmp/mnt/data/f$i"; done
head -c 8M /dev/urandom > "$tmp/mnt/data/big"
(cd "$tmp/mnt/data" && sha256sum -- *) > "$tmp/sums"
sync
sleep 1
kill -0 "${main_pid[hintcache-hintd]}" || fail "hintd died: $(cat "$tmp/hintcache-hintd.log")"
shutdown
boot
[ $made = 1 ] || fail "the file system was made $made times"
(cd "$tmp/mnt/data" && sha256sum --quiet -c "$tmp/sums") || fail "files changed across the reboot"
"$hc" stats --socket "$run/control.sock" >/dev/null || fail "the control socket does not answer"
shutdown
rm -rf "$run"
echo "systemd_units: verified; two boots, $(wc -l < "$tmp/sums") files intact, made once"
