#!/usr/bin/env bash
# End-to-end test of `hintcache hint`: the issue's acceptance checks, exit
# statuses, --help on every subcommand, and JSON that jq can read.
set -eu
hc=$1
src=${3:-$(dirname "$0")/..}
. "$(dirname "$0")/functions.sh"
requires jq

# ionice -c2 -n4096 means dontneed; 0x4800 means evict.
expect_status 0 "$hc" hint decode rfc2014 0x5000 --json
[ "$(echo "$out" | jq -r .advice)" = dontneed ] || fail "0x5000 is not dontneed: $out"
[ "$(echo "$out" | jq -r .class)" = unclassified ] || fail "class of 0x5000"
[ "$(echo "$out" | jq -r .value[0])" = 20480 ] || fail "value"
expect_status 0 "$hc" hint decode rfc2014 0x4800
contains "$out" "advice:     evict" "0x4800"
expect_status 0 "$hc" hint decode rfc2014 20480
contains "$out" "dontneed" "decimal input"

# Reserved advice: exit 2 with the reason.
for v in 0x8000 0x8800 0x9000 0xc000; do
  expect_status 2 "$hc" hint decode rfc2014 $v
  contains "$err" "reserved" "reserved advice $v"
  [ -z "$out" ] || fail "output on error"
done

# map: one line per codec, eight codecs.
expect_status 0 "$hc" hint map metadata
for c in rfc2014 ioprio rwh fadvise nfs42 nvme ata scsi; do
  [ "$(echo "$out" | grep -c "^  $c ")" = 1 ] || fail "map metadata: no single line for $c"
done
[ "$(echo "$out" | grep -cE '^  (rfc2014|ioprio|rwh|fadvise|nfs42|nvme|ata|scsi) ')" = 8 ] \
  || fail "map metadata: not eight codec lines"
expect_status 0 "$hc" hint map metadata --json
[ "$(echo "$out" | jq length)" = 8 ] || fail "map --json length"
[ "$(echo "$out" | jq -r '.[] | select(.codec=="scsi") | .arrives_as')" = metadata ] \
  || fail "scsi carries metadata"
[ "$(echo "$out" | jq -r '.[] | select(.codec=="ata") | .loss[0]')" = class ] \
  || fail "ata loses the class"

# encode, with profile options.
expect_status 0 "$hc" hint encode ata willneed --json --profile ata.max_priority=7 --dir read
[ "$(echo "$out" | jq -r .wire)" = 0x27 ] || fail "ata willneed at M=7: $out"
expect_status 0 "$hc" hint encode nvme journal --profile nvme.placements=7
contains "$out" "journal: 0x20074" "nvme journal with placements"
contains "$out" "(exact)" "exact arrival"
expect_status 0 "$hc" hint encode scsi background+dontneed --json
[ "$(echo "$out" | jq -r .descriptor)" = 00000000804a54000000000000000000 ] || fail "descriptor"
expect_status 0 "$hc" hint encode fadvise streaming --json
[ "$(echo "$out" | jq -c .value)" = "[2,5]" ] || fail "fadvise streaming calls"

# ATA log dump as a profile: M = 9, MAXIMUM PRIORITY BEHAVIOR set → tag 8.
{ printf '\001\000\377\000\100\300\000\011\000\000\001'; head -c 501 /dev/zero; } > "$tmp/log14.bin"
[ "$(stat -c %s "$tmp/log14.bin")" = 512 ] || fail "log page fixture"
expect_status 0 "$hc" hint encode ata willneed --dir read --ata-log "$tmp/log14.bin"
contains "$out" "willneed: 0x28" "log-bounded priority"
head -c 100 /dev/zero > "$tmp/short.bin"
expect_status 2 "$hc" hint encode ata willneed --ata-log "$tmp/short.bin"
contains "$err" "512-byte" "short log"

# decode with descriptor, and a note.
expect_status 0 "$hc" hint decode scsi 40 --descriptor 00000000108518000000000000000000 --json
[ "$(echo "$out" | jq -r .class)" = metadata ] || fail "scsi descriptor decode"
[ "$(echo "$out" | jq -r .note)" != null ] || fail "note for a foreign group"
expect_status 0 "$hc" hint decode ioprio 0x5000
contains "$out" "RFC" "ioprio notes the RFC collision"

# classes, with and without a config file.
expect_status 0 "$hc" hint classes --json
[ "$(echo "$out" | jq length)" = 8 ] || fail "eight classes"
[ "$(echo "$out" | jq -r '.[1].name')" = metadata ] || fail "class 1 is metadata"
[ "$(echo "$out" | jq -r '.[7].attributes.admit_read')" = false ] || fail "background admit_read"
printf 'metadata.priority = 9\n' > "$tmp/ok.conf"
expect_status 0 "$hc" hint classes --config "$tmp/ok.conf" --json
[ "$(echo "$out" | jq -r '.[1].attributes.priority')" = 9 ] || fail "config applied"
printf '# x\nmetadata.priority = 9\nmetadata.colour = red\n' > "$tmp/bad.conf"
# The example the README shows is shipped, and valid.
expect_status 0 "$hc" hint classes --config "$src/docs/examples/classes.conf" --json
[ "$(echo "$out" | jq -r '.[1].attributes.priority')" = 14 ] || fail "the shipped example applies"
expect_status 2 "$hc" hint classes --config "$tmp/bad.conf"
contains "$err" "bad.conf:3: unknown attribute 'colour'" "line-numbered config error"
expect_status 1 "$hc" hint classes --config "$tmp/missing.conf"
contains "$err" "No such file" "missing config"

# Unknown names: exit 2 and the valid choices.
expect_status 2 "$hc" hint decode sata 1
contains "$err" "rfc2014, ioprio, rwh, fadvise, nfs42, nvme, ata, scsi" "codec list"
expect_status 2 "$hc" hint map hot
contains "$err" "metadata" "class list"
contains "$err" "willneed" "advice list"
expect_status 2 "$hc" hint encode ata reserved1
expect_status 2 "$hc" hint decode ata zero
expect_status 2 "$hc" hint decode ata 0x100
expect_status 2 "$hc" hint decode nvme 0x9
contains "$err" "reserved" "nvme reserved frequency"
expect_status 2 "$hc" hint frobnicate
contains "$err" "decode, encode, map, classes" "subcommand list"
expect_status 2 "$hc" frobnicate
expect_status 2 "$hc"
expect_status 2 "$hc" hint decode rfc2014
expect_status 2 "$hc" hint encode ata willneed --dir sideways
expect_status 2 "$hc" hint encode ata willneed --profile ata.max_priority=99
expect_status 2 "$hc" hint decode rfc2014 1 --bogus

# --help everywhere, exit 0, on stdout.
for args in "--help" "hint --help" "hint decode --help" "hint encode --help" \
            "hint map --help" "hint classes --help"; do
  expect_status 0 "$hc" $args
  contains "$out" "Usage: hintcache" "help for '$args'"
done
# Every command's help is printed as written: no printf escape left in it.
for c in demo replay trace hint format info check clean stats io advise control hintd run; do
  expect_status 0 "$hc" $c --help
  case "$out" in *%%*) fail "help for '$c' prints a literal '%%': $out" ;; esac
done
expect_status 0 "$hc" --version
contains "$out" "hintcache " "version"
echo "cli_hint: ok"
