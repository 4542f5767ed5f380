#!/usr/bin/env bash
# The shared library exports exactly the symbols of its version script, each
# declared in a public header; and the pkg-config file describes it.
set -eu
lib=$2
src=$3
. "$(dirname "$0")/functions.sh"
requires nm

nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "D" || $2 == "B" || $2 == "R" { sub(/@.*/, "", $3); print $3 }' \
  | sort -u > "$tmp/exported"
grep -oE '\bhc_[a-z0-9_]+\b' "$src/src/libhintcache.sym" | sort -u > "$tmp/listed"
diff -u "$tmp/listed" "$tmp/exported" > "$tmp/diff" || { cat "$tmp/diff"; fail "exports differ from the version script"; }
while read -r sym; do
  grep -qE "\b$sym \(" "$src"/include/hintcache/*.h || fail "$sym is exported but not declared in a public header"
done < "$tmp/exported"
# No internal symbol leaks.
! grep -qE '^hc_(map|sb|kv|parse|read)_' "$tmp/exported" || fail "internal symbols exported"
# Every function declared in the public headers is exported.
grep -hvE '^ *(/\*|\*)' "$src"/include/hintcache/*.h | grep -oE '\bhc_[a-z0-9_]+ \(' | grep -oE 'hc_[a-z0-9_]+' \
  | sort -u > "$tmp/declared"
diff -u "$tmp/declared" "$tmp/exported" > "$tmp/diff2" || { cat "$tmp/diff2"; fail "declared and exported differ"; }
pc=$(dirname "$lib")/hintcache.pc
grep -q '^Libs: .*-lhintcache' "$pc" || fail "pkg-config Libs"
echo "exports: $(wc -l < "$tmp/exported") symbols ok"
