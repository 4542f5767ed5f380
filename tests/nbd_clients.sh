#!/usr/bin/env bash
# The nbdkit plugin with real NBD clients:
#   - libnbd (nbdsh): random writes, reads, flushes, trims, zeroes and cache
#     requests at any alignment, checked against a model of the disk;
#   - per-class exports tag their I/O (the volume's statistics by class), an
#     unknown export is refused with the list of classes, connections
#     negotiating at once each get their own export's description;
#   - multi-conn: a flush on one connection makes another's completed writes
#     durable (the server is SIGKILLed and restarted to prove it);
#   - a slow tier served by a second nbdkit (libnbd);
#   - nbdcopy 256 MiB in and out, qemu-img convert and compare, fio with
#     --ioengine=nbd and crc32c verification.
set -eu
hc=$1 plugin=$2
. "$(dirname "$0")/functions.sh"
. "$(dirname "$0")/nbd_functions.sh"
requires nbdsh
requires nbdinfo

fast=$tmp/fast.img slow=$tmp/slow.img sock=$tmp/nbd.sock
truncate -s 64M "$fast"
truncate -s 384M "$slow"

# ---- The model test. -----------------------------------------------------
start_server a "$sock" fast="$fast" slow="$slow" format=true mode=writeback
# A second server, or a tool, cannot open the live volume: the first holds it.
if LD_PRELOAD=$san_preload ASAN_OPTIONS=detect_leaks=0 nbdkit -f -U "$tmp/second.sock" "$plugin" fast="$fast" 2>"$tmp/second.log"; then
  fail "a second server opened a live volume"
fi
contains "$(cat "$tmp/second.log")" "in use by process $a_pid" "the second server names the first"
expect_status 1 "$hc" clean "$fast"
contains "$err" "in use by process $a_pid" "clean names the server"
cat > "$tmp/model.py" <<'PY'
import random
random.seed(20261203)
size = h.get_size()
span = 320 << 20          # more than the fast tier: blocks get evicted
assert size >= span, size
model = bytearray(span)
def check(off, n):
    got = h.pread(n, off)
    if got != model[off:off + n]:
        i = next(k for k in range(n) if got[k] != model[off + k])
        raise SystemExit("mismatch at %d (+%d): got %d want %d" % (off, i, got[i], model[off + i]))
ops = {"write": 0, "read": 0, "trim": 0, "zero": 0, "cache": 0, "flush": 0}
for step in range(2500):
    r = random.random()
    off = random.randrange(span - 1)
    n = min(random.choice([1, 7, 512, 4096, 4096, 12288, 65536, 262144, random.randrange(1, 300000)]),
            span - off)
    if r < 0.45:
        data = random.randbytes(n)
        h.pwrite(data, off, nbd.CMD_FLAG_FUA if random.random() < 0.1 else 0)
        model[off:off + n] = data
        ops["write"] += 1
    elif r < 0.75:
        check(off, n)
        ops["read"] += 1
    elif r < 0.82:
        h.trim(n, off)
        model[off:off + n] = bytes(n)
        ops["trim"] += 1
    elif r < 0.89:
        h.zero(n, off)
        model[off:off + n] = bytes(n)
        ops["zero"] += 1
    elif r < 0.95:
        h.cache(n, off)
        ops["cache"] += 1
    else:
        h.flush()
        ops["flush"] += 1
for off in range(0, span, 4 << 20):
    check(off, 4 << 20)
print("model ok", ops)
PY
out=$(nbdsh -u "$(uri "$sock")" -c "exec(open('$tmp/model.py').read())") || fail "model test: $out"
contains "$out" "model ok" "model test"
echo "$out"
# Everything written is read back the same after a clean restart.
nbdsh -u "$(uri "$sock")" -c "open('$tmp/before', 'wb').write(h.pread(64 << 20, 0))"
stop_server a
start_server a "$sock" fast="$fast"          # the slow tier is the recorded one
nbdsh -u "$(uri "$sock")" -c "open('$tmp/after', 'wb').write(h.pread(64 << 20, 0))"
cmp "$tmp/before" "$tmp/after" || fail "data changed across a restart"

# ---- Per-class exports. --------------------------------------------------
nbdinfo --list "$(uri "$sock")" > "$tmp/list" 2>&1 || fail "list exports: $(cat "$tmp/list")"
for c in metadata journal background; do contains "$(cat "$tmp/list")" "export=\"$c\"" "export $c listed"; done
nbdsh -u "$(uri "$sock" metadata)" -c 'h.pwrite(b"m" * (1 << 20), 200 << 20); h.flush()'
nbdsh -u "$(uri "$sock" background+dontneed)" -c 'h.pread(1 << 20, 100 << 20)'
if nbdsh -u "$(uri "$sock" nonsense)" -c 'pass' 2>"$tmp/err"; then fail "unknown export accepted"; fi
contains "$(cat "$tmp/a.log")" "unknown export 'nonsense'" "refusal logged"
contains "$(cat "$tmp/a.log")" "metadata, journal" "refusal lists the classes"
# Connections that negotiate at once each get their own export's description.
cat > "$tmp/describe.py" <<PY
import nbd, threading
bad = []
def connect(name):
    for _ in range(4):
        h = nbd.NBD(); h.set_full_info(True); h.set_export_name(name)
        h.connect_unix("$sock")
        d = h.get_export_description()
        if d != "hintcache volume, class " + name:
            bad.append(d)
        h.shutdown()
ts = [threading.Thread(target=connect, args=(n,)) for n in ["metadata", "journal"] * 4]
[t.start() for t in ts]
[t.join() for t in ts]
print("descriptions ok" if not bad else "wrong descriptions: %r" % bad[:3])
PY
out=$(/usr/bin/python3 "$tmp/describe.py" 2>&1) || fail "descriptions: $out"
contains "$out" "descriptions ok" "concurrent export descriptions"
stop_server a
expect_status 0 "$hc" stats "$fast" --json
echo "$out" > "$tmp/stats.json"
if command -v jq >/dev/null; then
  [ "$(jq '.classes.metadata.write.misses + .classes.metadata.write.hits' "$tmp/stats.json")" -ge 256 ] \
    || fail "metadata writes counted: $out"
  [ "$(jq '.classes.background.read.misses' "$tmp/stats.json")" -ge 256 ] \
    || fail "background reads counted: $out"
  [ "$(jq '.classes.background.read.admissions' "$tmp/stats.json")" = 0 ] \
    || fail "background+dontneed reads not admitted: $out"
fi

# ---- Multi-conn: a flush on one connection covers another's writes. ------
start_server a "$sock" fast="$fast" mode=writeback
cat > "$tmp/multiconn.py" <<PY
import nbd
a = nbd.NBD(); a.connect_uri("$(uri "$sock")")
b = nbd.NBD(); b.connect_uri("$(uri "$sock")")
assert a.can_multi_conn() and b.can_multi_conn()
a.pwrite(b"A" * 65536, 300 << 20)      # completed on connection a, not flushed
b.flush()                               # flushed through connection b
print("flushed")
PY
/usr/bin/python3 "$tmp/multiconn.py" | grep -q flushed || fail "multi-conn script"
stop_server a KILL
start_server a "$sock" fast="$fast"
got=$(nbdsh -u "$(uri "$sock")" -c 'print(h.pread(65536, 300 << 20) == b"A" * 65536)')
[ "$got" = True ] || fail "a write flushed from another connection was lost in a crash"
stop_server a

# ---- A slow tier served over NBD. ----------------------------------------
truncate -s 128M "$tmp/remote.img"
rsock=$tmp/remote.sock
rm -f "$rsock"
nbdkit -f -U "$rsock" file "$tmp/remote.img" 2>>"$tmp/remote.log" &
remote_pid=$!
cleanup_fns+=("kill $remote_pid 2>/dev/null")
for _ in $(seq 50); do [ -S "$rsock" ] && break; sleep 0.1; done
truncate -s 32M "$tmp/fast2.img"
start_server b "$tmp/b.sock" fast="$tmp/fast2.img" slow="$(uri "$rsock")" format=true mode=writeback
nbdsh -u "$(uri "$tmp/b.sock")" -c 'h.pwrite(b"remote!" * 1000, 5 << 20); h.flush()'
stop_server b                     # dirty data stays on the fast tier across a clean close
expect_status 0 "$hc" clean "$tmp/fast2.img"   # the recorded slow tier is the NBD URI
grep -q "remote!" "$tmp/remote.img" || fail "data did not reach the remote slow tier"
start_server b "$tmp/b.sock" fast="$tmp/fast2.img"
got=$(nbdsh -u "$(uri "$tmp/b.sock")" -c 'print(h.pread(7000, 5 << 20) == b"remote!" * 1000)')
[ "$got" = True ] || fail "read back through the NBD slow tier"
stop_server b

# ---- nbdcopy, qemu-img, fio. ----------------------------------------------
start_server a "$sock" fast="$fast" mode=writeback
if command -v nbdcopy >/dev/null; then
  head -c 256M /dev/urandom > "$tmp/in.bin"
  nbdcopy "$tmp/in.bin" "$(uri "$sock")" || fail "nbdcopy in"
  nbdcopy "$(uri "$sock")" - | head -c 256M > "$tmp/out.bin" || true
  [ "$(sha256sum < "$tmp/in.bin")" = "$(sha256sum < "$tmp/out.bin")" ] || fail "nbdcopy round trip"
  echo "nbdcopy: 256 MiB in and out, checksums match"
  rm -f "$tmp/out.bin"
else
  echo "SKIP part: nbdcopy is not installed"
fi
if command -v qemu-img >/dev/null; then
  # An image exactly as large as the slow tier fits: the export is all of
  # it (its last MiB carries data too).
  [ "$(nbdinfo --size "$(uri "$sock")")" = "$(stat -c %s "$slow")" ] \
    || fail "the export is $(nbdinfo --size "$(uri "$sock")") bytes, the slow tier $(stat -c %s "$slow")"
  truncate -s "$(stat -c %s "$slow")" "$tmp/q.raw"
  head -c 48M /dev/urandom | dd of="$tmp/q.raw" bs=1M seek=100 conv=notrunc status=none
  head -c 1M /dev/urandom | dd of="$tmp/q.raw" bs=1M seek=383 conv=notrunc status=none
  qemu-img convert -n -f raw -O raw "$tmp/q.raw" "$(uri "$sock")" || fail "qemu-img convert"
  qemu-img compare -f raw -F raw "$tmp/q.raw" "$(uri "$sock")" || fail "qemu-img compare"
  printf 'x' | dd of="$tmp/q.raw" bs=1 seek=$((120 << 20)) conv=notrunc status=none
  if qemu-img compare -q -f raw -F raw "$tmp/q.raw" "$(uri "$sock")"; then
    fail "qemu-img compare missed a changed byte"
  fi
  echo "qemu-img: convert and compare agree"
else
  echo "SKIP part: qemu-img is not installed"
fi
if command -v fio >/dev/null && fio --enghelp 2>/dev/null | grep -qw nbd; then
  fio --name=verify --ioengine=nbd --uri="$(uri "$sock")" --rw=randwrite --bs=4k --size=64M \
      --iodepth=16 --verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 \
      --output="$tmp/fio.txt" \
    || fail "fio verify: $(cat "$tmp/fio.txt")"
  grep -q "err= 0" "$tmp/fio.txt" || fail "fio errors: $(cat "$tmp/fio.txt")"
  echo "fio: 64 MiB of random 4k writes at QD16 verified with crc32c"
else
  echo "SKIP part: fio with the nbd engine is not installed"
fi
stop_server a
expect_status 0 "$hc" check "$fast"

# ---- promotion=second-touch: a block read once is not cached. ------------
if LD_PRELOAD=$san_preload ASAN_OPTIONS=detect_leaks=0 nbdkit -f -U "$tmp/p.sock" "$plugin" \
     fast="$fast" promotion=sometimes 2>"$tmp/badpromo.log"; then
  fail "promotion=sometimes was accepted"
fi
contains "$(cat "$tmp/badpromo.log")" "expected always or second-touch" "a bad promotion is refused"
if LD_PRELOAD=$san_preload ASAN_OPTIONS=detect_leaks=0 nbdkit -f -U "$tmp/p.sock" "$plugin" \
     fast="$fast" flash-budget=0 2>"$tmp/badpromo.log"; then
  fail "flash-budget=0 was accepted"
fi
contains "$(cat "$tmp/badpromo.log")" "bytes per day, above 0" "a zero budget is refused"
truncate -s 64M "$tmp/fast-promo.img"
start_server p "$tmp/p.sock" fast="$tmp/fast-promo.img" slow="$slow" format=true mode=writeback \
  promotion=second-touch
nbdsh -u "$(uri "$tmp/p.sock")" -c '
want = open("'"$slow"'", "rb").read(4096)
for i in range(3):
    assert h.pread(4096, 0) == want, "read %d" % i
' || fail "second-touch reads"
stop_server p
expect_status 0 "$hc" stats "$tmp/fast-promo.img" --json
[ "$(echo "$out" | jq .classes.unclassified.read.bypass.policy)" = 1 ] \
  && [ "$(echo "$out" | jq .classes.unclassified.read.admissions)" = 1 ] \
  && [ "$(echo "$out" | jq .classes.unclassified.read.hits)" = 1 ] \
  || fail "second touch: the first read refused, the second admitted, the third a hit: $out"
echo "nbd_clients: ok"
