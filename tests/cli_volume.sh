#!/usr/bin/env bash
# End-to-end test of the volume commands on real files: format, io, info,
# stats, check, clean; refusals with one clear line and a non-zero exit;
# corruption found by check; a failed command changes nothing.
set -eu
hc=$1
. "$(dirname "$0")/functions.sh"
requires jq
requires truncate

f=$tmp/fast.img s=$tmp/slow.img
truncate -s 32M "$f"
truncate -s 128M "$s"
# The slow tier holds data at its very end (a GPT backup header, the end of
# a filesystem): the volume is all of it, and format writes none of it.
head -c 4096 /dev/urandom | dd of="$s" bs=4096 seek=$((128 * 256 - 1)) conv=notrunc status=none
tail_sum=$(tail -c 4096 "$s" | md5sum)

expect_status 0 "$hc" format --fast "$f" --slow "$s" --mode writeback --block-size 8k
contains "$out" "cache blocks of 8192 bytes" "format summary"
[ "$(tail -c 4096 "$s" | md5sum)" = "$tail_sum" ] || fail "format wrote into the slow tier"
[ "$(stat -c %s "$s")" = $((128 << 20)) ] || fail "format changed the slow tier's size"
expect_status 0 "$hc" info "$f" --json
[ "$(echo "$out" | jq -r .volume_bytes)" = $((128 << 20)) ] || fail "the volume is the whole slow tier"
expect_status 0 "$hc" io "$f" read $(((128 << 20) - 4096)) 4096 --out "$tmp/end"
[ "$(md5sum < "$tmp/end")" = "$tail_sum" ] || fail "the slow tier's last block reads through the volume"
expect_status 1 "$hc" format --fast "$f" --slow "$s"
contains "$err" "already holds a hintcache volume" "no accidental reformat"
expect_status 2 "$hc" format --fast "$f" --slow "$s" --force --block-size 3000
contains "$err" "block size 3000" "bad block size"
expect_status 2 "$hc" format --fast "$f" --slow "$s" --force --mode sideways
expect_status 2 "$hc" format --fast "$f"

# Write with a hint, read back through the cache and from the slow tier.
head -c 300000 /dev/urandom > "$tmp/data"
expect_status 0 "$hc" io "$f" write 12345 300000 --in "$tmp/data" --hint metadata
expect_status 0 "$hc" io "$f" read 12345 300000 --out "$tmp/back"
cmp "$tmp/data" "$tmp/back" || fail "read back differs"
expect_status 0 "$hc" info "$f" --json
[ "$(echo "$out" | jq -r .mode)" = writeback ] || fail "mode"
[ "$(echo "$out" | jq -r .classes.metadata.dirty)" -gt 30 ] || fail "metadata dirty: $out"
[ "$(echo "$out" | jq -r .clean_shutdown)" = true ] || fail "closed cleanly"
# Not yet on the slow tier (write-back); clean puts it there.
if dd if="$s" bs=1 skip=12345 count=300000 status=none | cmp -s - "$tmp/data"; then
  fail "write-back data reached the slow tier before cleaning"
fi
expect_status 0 "$hc" clean "$f"
contains "$out" "0 dirty" "clean"
dd if="$s" bs=1 skip=12345 count=300000 status=none | cmp - "$tmp/data" || fail "after clean"

expect_status 0 "$hc" stats "$f" --json
[ "$(echo "$out" | jq -r .classes.metadata.write.admissions)" -gt 30 ] || fail "stats persisted"
[ "$(echo "$out" | jq -r .classes.metadata.writebacks)" -gt 30 ] || fail "writebacks counted"
# A volume just opened has the default's starting effects, unchanged.
[ "$(echo "$out" | jq -c .hint_effects)" = '["probation","reinsertion"]' ] || fail "hint effects: $out"
[ "$(echo "$out" | jq .effect_changes)" = 0 ] || fail "effect changes: $out"
# A volume file's statistics come from a volume opened without helper threads.
[ "$(echo "$out" | jq -c .trial_ways)" = '[]' ] || fail "trial ways: $out"
# The metadata's flash, in whole 4 KiB pages, kept across the closes.
m=$(echo "$out" | jq .meta_flash_bytes)
[ "$m" -gt 0 ] && [ $((m % 4096)) = 0 ] || fail "metadata's flash: $out"
expect_status 0 "$hc" stats "$f"
contains "$out" "hint effects in force: probation, reinsertion (changed 0 times" "stats text names the effects"
contains "$out" "metadata's flash: " "stats text gives the metadata's flash"
contains "$out" "work on helper threads, as the trials chose: none" "stats text gives the trials' ways"
expect_status 0 "$hc" io "$f" advise 0 1M background+dontneed
expect_status 0 "$hc" io "$f" mode writethrough
expect_status 0 "$hc" info "$f"
contains "$out" "mode        writethrough" "mode persisted"
expect_status 0 "$hc" check "$f"
contains "$out" "ok" "check ok"

# Refusals.
expect_status 2 "$hc" io "$f" read 127M 2M
contains "$err" "outside the volume" "range check"
expect_status 2 "$hc" io "$f" frob 0 1
expect_status 2 "$hc" io "$f" advise 0 1 hot
expect_status 2 "$hc" io "$f" read 0
expect_status 1 "$hc" info "$tmp/nothing"
contains "$err" "No such file" "missing file"
truncate -s 1M "$tmp/blank"
expect_status 1 "$hc" info "$tmp/blank"
contains "$err" "not a hintcache volume" "blank file"

# A different slow tier is refused and nothing changes: one of the same
# size with other contents (its first sector, always sampled, differs), one
# of another size.
head -c 1M /dev/urandom > "$tmp/other.img"
truncate -s 128M "$tmp/other.img"
before=$(md5sum < "$f")
expect_status 1 "$hc" info "$f" --slow "$tmp/other.img"
contains "$err" "contents differ from when this volume was closed" "wrong slow tier"
truncate -s 127M "$tmp/other.img"
expect_status 1 "$hc" info "$f" --slow "$tmp/other.img"
contains "$err" "is 133169152 bytes, this volume's was 134217728 bytes" "slow tier of another size"
[ "$(md5sum < "$f")" = "$before" ] || fail "a failed open changed the fast tier"

# Corruption: one byte of the table (of the current checkpoint copy, which
# the superblock names).  check finds it; open refuses.
le64() { od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }
copy=$(od -An -t u4 -j 384 -N 4 "$f" | tr -d ' ')
printf '\x99' | dd of="$f" bs=1 seek=$((8192 + copy * $(le64 "$f" 376) + 100)) conv=notrunc status=none
expect_status 1 "$hc" check "$f"
contains "$err" "table sector 0 is corrupt" "check names the corrupt sector"
expect_status 1 "$hc" io "$f" read 0 4096
contains "$err" "corrupt" "open refuses"
# check --repair salvages it: the data written and cleaned above is on the
# slow tier, so nothing is lost; the volume opens again and checks clean.
expect_status 2 "$hc" info "$f" --repair
expect_status 0 "$hc" check "$f" --repair
contains "$out" "repaired (salvaged, then formatted anew)" "repair report"
contains "$out" "1 table sectors" "the damage is named"
expect_status 0 "$hc" check "$f"
expect_status 0 "$hc" io "$f" read 12345 300000 --out "$tmp/back"
cmp "$tmp/data" "$tmp/back" || fail "data after the repair"
expect_status 0 "$hc" check "$f" --repair
contains "$out" "ok, nothing to repair" "a healthy volume is left alone"

# Formatting never destroys what may be a volume, nor dirty data, unless told.
f=$tmp/fast2.img s=$tmp/slow2.img
truncate -s 16M "$f"
truncate -s 64M "$s"
expect_status 0 "$hc" format --fast "$f" --slow "$s" --mode writeback
expect_status 0 "$hc" io "$f" write 0 65536 --in "$tmp/data"
expect_status 1 "$hc" format --fast "$f" --slow "$s" --force
contains "$err" "16 dirty blocks" "--force refuses dirty data"
printf '\x99' | dd of="$f" bs=1 seek=100 conv=notrunc status=none   # superblock A
expect_status 0 "$hc" check "$f"
contains "$out" "superblock A is damaged (B is used)" "check names the damaged copy"
expect_status 0 "$hc" info "$f"
contains "$out" "damaged     superblock A" "info names the damaged copy"
expect_status 0 "$hc" io "$f" read 0 65536 --out "$tmp/back"
cmp "$tmp/back" <(head -c 65536 "$tmp/data") || fail "data read from a volume with a damaged superblock"
expect_status 0 "$hc" check "$f"
[ "$out" = "$f: ok" ] || fail "a read-write open rewrites the damaged superblock: $out"
printf '\x99' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
printf '\x99' | dd of="$f" bs=1 seek=$((4096 + 100)) conv=notrunc status=none   # and B
expect_status 1 "$hc" format --fast "$f" --slow "$s"
contains "$err" "may hold a hintcache volume" "both superblocks damaged: not formatted"
expect_status 1 "$hc" format --fast "$f" --slow "$s" --force
contains "$err" "--discard-dirty" "the way out is named"
expect_status 2 "$hc" format --fast "$f" --slow "$s" --discard-dirty
expect_status 0 "$hc" format --fast "$f" --slow "$s" --force --discard-dirty --mode writeback
expect_status 0 "$hc" io "$f" write 0 65536 --in "$tmp/data"
expect_status 0 "$hc" clean "$f"
expect_status 0 "$hc" format --fast "$f" --slow "$s" --force
contains "$out" "formatted" "--force replaces a clean volume"
# Data checksums: chosen at format, shown by info, and a flipped byte of a
# cached block is caught (the copy is clean: the slow tier's data is read).
expect_status 0 "$hc" info "$f" --json
[ "$(echo "$out" | jq -r .checksums)" = false ] || fail "no checksums by default"
expect_status 0 "$hc" format --fast "$f" --slow "$s" --force --checksums --mode writethrough
expect_status 0 "$hc" info "$f"
contains "$out" "data checksums" "info names the checksums"
expect_status 0 "$hc" io "$f" write 0 65536 --in "$tmp/data"
data_off=$(od -An -t u8 -j 136 -N 8 "$f" | tr -d ' ')
printf '\x5a' | dd of="$f" bs=1 seek=$((data_off + 100)) conv=notrunc status=none
expect_status 0 "$hc" io "$f" read 0 65536 --out "$tmp/back"
cmp "$tmp/back" <(head -c 65536 "$tmp/data") || fail "a damaged cached block was served"
expect_status 0 "$hc" stats "$f" --json
[ "$(echo "$out" | jq -r .checksum_errors)" -ge 1 ] || fail "the checksum error is counted: $out"

# A volume is opened by one process at a time: another holder is named.
requires flock
flock -o "$f" sleep 30 &
holder=$!
for i in $(seq 50); do grep -q " $holder " /proc/locks 2>/dev/null && break; sleep 0.1; done
expect_status 1 "$hc" io "$f" read 0 4096
contains "$err" "in use by process $holder (flock)" "the holder is named"
expect_status 1 "$hc" clean "$f"
expect_status 1 "$hc" format --fast "$f" --slow "$s" --force --discard-dirty
contains "$err" "in use by" "no format under a live volume"
pkill -P $holder sleep || true; wait $holder 2>/dev/null || true
expect_status 0 "$hc" io "$f" read 0 4096

# A repair that loses data says which blocks, and exits 3.
f=$tmp/fast3.img s=$tmp/slow3.img
truncate -s 16M "$f"
truncate -s 64M "$s"
expect_status 0 "$hc" format --fast "$f" --slow "$s" --mode writeback
expect_status 0 "$hc" io "$f" write 0 65536 --in "$tmp/data"
copy=$(od -An -t u4 -j 384 -N 4 "$f" | tr -d ' ')
printf '\x99' | dd of="$f" bs=1 seek=$((8192 + copy * $(le64 "$f" 376) + 100)) conv=notrunc status=none
expect_status 3 "$hc" check "$f" --repair
contains "$out" "possibly lost: the latest writes of 16 volume blocks of 4096 bytes: 0-15" \
  "the lost blocks are named"
expect_status 0 "$hc" check "$f"

for c in format info check clean stats io; do
  expect_status 0 "$hc" $c --help
  contains "$out" "Usage: hintcache $c" "help for $c"
done
echo "cli_volume: ok"
