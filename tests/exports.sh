#!/usr/bin/env bash
# Each shared library exports exactly the symbols of its version script,
# each declared in one of its public headers, and every function those
# headers declare; no internal symbol leaks; the pkg-config files describe
# them.  libhintcache: every header but trace.h and replay.h, which are
# libhintcache-trace's.
set -eu
lib=$2
src=$3
. "$(dirname "$0")/functions.sh"
requires nm
dir=$(dirname "$lib")
inc=$src/include/hintcache

# check LIB SYMFILE HEADER...
check() {
  local so=$1 sym=$2; shift 2
  local name; name=$(basename "$so")
  nm -D --defined-only "$so" | awk '$2 == "T" || $2 == "D" || $2 == "B" || $2 == "R" { sub(/@.*/, "", $3); print $3 }' \
    | sort -u > "$tmp/exported"
  grep -oE '\bhc_[a-z0-9_]+\b' "$sym" | sort -u > "$tmp/listed"
  diff -u "$tmp/listed" "$tmp/exported" > "$tmp/diff" || { cat "$tmp/diff"; fail "$name: exports differ from $(basename "$sym")"; }
  while read -r s; do
    grep -qE "\b$s \(" "$@" || fail "$name: $s is exported but not declared in its public headers"
  done < "$tmp/exported"
  ! grep -qE '^hc_(map|sb|kv|parse|read|dir|u64)_' "$tmp/exported" || fail "$name: internal symbols exported"
  grep -hvE '^ *(/\*|\*)' "$@" | grep -oE '\bhc_[a-z0-9_]+ \(' | grep -oE 'hc_[a-z0-9_]+' \
    | sort -u > "$tmp/declared"
  diff -u "$tmp/declared" "$tmp/exported" > "$tmp/diff2" || { cat "$tmp/diff2"; fail "$name: declared and exported differ"; }
  echo "exports: $name: $(wc -l < "$tmp/exported") symbols ok"
}

core=()
for h in "$inc"/*.h; do
  case $(basename "$h") in trace.h|replay.h) ;; *) core+=("$h") ;; esac
done
check "$lib" "$src/src/libhintcache.sym" "${core[@]}"
check "$dir/libhintcache-trace.so" "$src/src/libhintcache-trace.sym" "$inc/trace.h" "$inc/replay.h"
# libhintcache carries neither zlib nor libext2fs (the trace toolkit's and
# the filesystem map's), and the plugin no libext2fs.
! readelf -d "$lib" | grep -qE 'NEEDED.*(libz|ext2fs|com_err)' || fail "libhintcache links zlib or libext2fs"
! readelf -d "$dir/nbdkit-hintcache-plugin.so" | grep -qE 'NEEDED.*(ext2fs|com_err)' \
  || fail "the plugin links libext2fs"
grep -q '^Libs: .*-lhintcache$' "$dir/hintcache.pc" || fail "pkg-config Libs (hintcache)"
grep -q '^Libs: .*-lhintcache-trace$' "$dir/hintcache-trace.pc" || fail "pkg-config Libs (hintcache-trace)"
grep -q '^Requires: hintcache' "$dir/hintcache-trace.pc" || fail "pkg-config Requires (hintcache-trace)"
