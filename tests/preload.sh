#!/usr/bin/env bash
# The preload library's failure modes (the issue: "no socket, socket closed
# mid-run, bad replies … showing the program's output unchanged").
#
# A workload of ordinary programs — dd (also sparse, appending, from a pipe),
# cp (also sparse, and -p), shell appends and a python3 program doing
# write/pwrite/writev, sparse writes, ftruncate, fallocate, posix_fadvise,
# copy_file_range, sendfile, dup/dup2, F_SET_RW_HINT, futimens, failing calls
# (errno), threads, forked children and a spawned program — runs once without
# the library (the reference) and then under LD_PRELOAD=libhintcache-preload.so
# against a fake control server (python3, on a Unix socket) in each mode:
#
#   ok           the right greeting, "ok" to every request (logged)
#   none         no socket file at all
#   stale        a socket file nobody listens on (connection refused)
#   close        the greeting, then the connection closes: at once, after
#                one request or after answering two
#   garbage      the greeting, then junk replies: unknown words, binary,
#                over-long lines, a line without its newline
#   badgreeting  a wrong greeting (then "ok" to anything, which must not come)
#   silent       accepts and never says anything
#   refuse       the greeting, then "error ERANGE …" to every request
#
# each once with HINTCACHE_CLASS=journal and once under `ionice -c2 -n4096`
# (the RFC's dontneed) with HINTCACHE_QUIET=1 (and, with no socket, once
# with a bad HINTCACHE_CLASS: still one warning per process).  Every run must
# give the reference's exit status, stdout and stderr (apart from the library's
# warnings), the same files with the same sizes and contents, and no more
# disk space than the reference once the programs have exited (the library
# gives back what it preallocated past the end of file); stderr holds at most
# one warning line per process, none with HINTCACHE_QUIET=1; a server that
# never answers costs at most a few hundred milliseconds per process.  With
# the `ok` server the hints must actually arrive ("advise OFF LEN journal",
# dontneed under ionice, willneed from posix_fadvise, "unadvise" for the
# preallocation given back), and HINTCACHE_STATS must count them.  Then
# `hintcache run` is checked the same way, and its usage errors.
#
# Warnings go to stderr, which the library keeps quiet when it is a file on a
# hinted file system (it could be the program's data): here stderr is always
# a pipe.
set -eEuo pipefail
trap 'echo "preload: FAIL: line $LINENO: $BASH_COMMAND exited $?" >&2' ERR
hc=$1 lib=$2 srcdir=$3
. "$srcdir/tests/functions.sh"
fail() { echo "preload: FAIL: $*" >&2; exit 1; }
skip() { echo "preload: SKIP: $*" >&2; exit 77; }
requires python3
requires sha256sum
requires timeout
[ -x "$hc" ] || fail "no hintcache tool at $hc"
[ -f "$lib" ] || fail "no preload library at $lib"
# The workload runs in other directories.
hc=$(realpath "$hc") lib=$(realpath "$lib")
export PYTHONDONTWRITEBYTECODE=1
unset HINTCACHE_SOCKET HINTCACHE_MOUNTS HINTCACHE_CLASS HINTCACHE_ADVICE HINTCACHE_QUIET \
  HINTCACHE_STATS HINTCACHE_PRELOAD LD_PRELOAD

# The sanitized library needs the sanitizer runtimes loaded first, in the
# commands under test only.
san_libs=
if ldd "$lib" 2>/dev/null | grep libasan >/dev/null; then
  for l in libasan.so libubsan.so; do
    p=$(gcc -print-file-name=$l 2>/dev/null) || true
    [ -f "$p" ] || skip "the library is sanitized but $l was not found"
    san_libs="$san_libs $p"
  done
  san_libs=${san_libs# }
elif ldd "$lib" 2>/dev/null | grep libtsan >/dev/null; then
  san_libs=$(gcc -print-file-name=libtsan.so 2>/dev/null) || true
  [ -f "$san_libs" ] || skip "the library is built with ThreadSanitizer but libtsan.so was not found"
fi
if [ -n "$san_libs" ]; then
  libenv=(LD_PRELOAD="$san_libs $lib" ASAN_OPTIONS=detect_leaks=0)
  # `hintcache run` puts the library first in LD_PRELOAD, before the
  # runtimes: ASan must be told not to insist on coming first.
  runenv=(LD_PRELOAD="$san_libs" ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0)
else
  libenv=(LD_PRELOAD="$lib")
  runenv=()
fi

ms() { echo $(($(date +%s%N) / 1000000)); }

# The interpreter itself (python3 may be a wrapper script, which would run
# under the library too, and whose pid is not the server's).
python=$(python3 -c 'import sys; print(sys.executable)')
[ -x "$python" ] || fail "python3's executable: '$python'"

# ---- The file system must have what the library uses. ----------------------
[ ${#tmp} -lt 80 ] || skip "the temporary directory's path is too long for a Unix socket: $tmp"
"$python" - "$tmp/probe" <<'EOF' || skip "no fallocate(KEEP_SIZE) or FIEMAP where $tmp is"
import ctypes, fcntl, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
if libc.fallocate(fd, 1, 0, 65536) != 0:          # FALLOC_FL_KEEP_SIZE
    sys.exit(1)
# struct fiemap: start, length, flags, mapped, count, reserved; one extent
buf = bytearray(struct.pack('QQIIII', 0, 1 << 62, 0, 0, 1, 0) + bytes(56))
try:
    fcntl.ioctl(fd, 0xC020660B, buf)               # FS_IOC_FIEMAP
except OSError:
    sys.exit(1)
sys.exit(0 if struct.unpack_from('QQIIII', buf)[3] == 1 else 1)
EOF
rm -f "$tmp/probe"

# ---- The fake control server. ----------------------------------------------
cat > "$tmp/server.py" <<'EOF'
# server.py MODE SOCKET LOG: a fake hintcache control server.
import os, socket, sys, threading, time

mode, path, logpath = sys.argv[1:4]
GREETING = b"hintcache-control 1\n"
# Wrong greetings, one per connection in turn.
BAD_GREETINGS = [b"hintcache-control 2\n", b"SSH-2.0-OpenSSH_9.2\n", b"\n",
                 b"x" * 5000 + b"\n", b"hintcache-control 1"]
# Junk replies, one kind per connection in turn; None: a reply without its
# newline, and then nothing.
JUNK = [b"frobnicate\n", b"\xff\xfe\x00\x01garbage\x7f\n", b"y" * 3000 + b"\n",
        b"okay\n", b"error\n", b"OK\n", None, b"\n"]
lock = threading.Lock()
log = open(logpath, "ab", buffering=0)


def lines(conn):
    buf = b""
    while True:
        data = conn.recv(65536)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            with lock:
                log.write(line + b"\n")
            yield line


def serve(conn, k):
    try:
        if mode == "silent":
            while conn.recv(65536):
                pass
            return
        conn.sendall(BAD_GREETINGS[k % len(BAD_GREETINGS)] if mode == "badgreeting"
                     else GREETING)
        # close: in turn, right after the greeting (the client's send meets
        # a closed socket: no SIGPIPE may kill it), after one request, and
        # after answering two.
        if mode == "close" and k % 3 == 0:
            return
        answered = 0
        for line in lines(conn):
            if mode in ("ok", "badgreeting"):
                conn.sendall(b"ok\n")
            elif mode == "refuse":
                conn.sendall(b"error ERANGE range 0+4096 is outside the volume (1048576 bytes)\n")
            elif mode == "close":
                if k % 3 == 1 or answered == 2:
                    return
                conn.sendall(b"ok\n")
                answered += 1
            elif mode == "garbage":
                junk = JUNK[k % len(JUNK)]
                conn.sendall(junk if junk is not None else b"ok")
    except OSError:
        pass
    finally:
        conn.close()


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
if mode == "stale":
    open(path + ".ready", "w").close()
    while True:
        time.sleep(60)
s.listen(64)
open(path + ".ready", "w").close()
for k in range(1 << 30):
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn, k), daemon=True).start()
EOF

server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
}
cleanup_fns=("stop_server" "${cleanup_fns[@]}")

# start_server MODE: sets $sock (and $slog, the requests it received).
start_server() {
  sock=$tmp/$1.sock slog=$tmp/$1.requests
  rm -f "$sock" "$sock.ready"
  : > "$slog"
  [ "$1" = none ] && return 0
  "$python" "$tmp/server.py" "$1" "$sock" "$slog" 2>>"$tmp/server.log" &
  server_pid=$!
  for _ in $(seq 200); do
    [ -e "$sock.ready" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "the $1 server died: $(cat "$tmp/server.log")"
    sleep 0.05
  done
  fail "the $1 server did not start"
}

# ---- The workload. ---------------------------------------------------------
head -c $((4 << 20)) /dev/urandom > "$tmp/src.bin"
# Data with runs of zeros, for the sparse copies: 64 KiB of data, 192 KiB of
# zeros, … (cp --sparse=always and dd conv=sparse seek over the zeros).
"$python" - "$tmp/src.bin" "$tmp/zeros.bin" <<'EOF2'
import sys
src = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as f:
    for i in range(16):
        f.write(src[i << 16:(i + 1) << 16] + bytes(192 << 10))
EOF2

cat > "$tmp/work.py" <<'EOF'
# work.py SOURCE: system calls the library interposes, with deterministic
# output (results, errors, sizes, holes, errno after success).
import ctypes, errno, fcntl, hashlib, os, struct, subprocess, sys, threading

src = open(sys.argv[1], "rb").read()
libc = ctypes.CDLL(None, use_errno=True)
libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.write.restype = ctypes.c_ssize_t
libc.pwrite.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_longlong]
libc.pwrite.restype = ctypes.c_ssize_t
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
libc.ftruncate.argtypes = [ctypes.c_int, ctypes.c_longlong]
NEW = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
RW = os.O_RDWR | os.O_CREAT | os.O_TRUNC


def say(*a):
    print(*a, flush=True)


def name(e):
    return errno.errorcode.get(e, str(e))


def attempt(what, f, *a):
    try:
        say(what, "ok", f(*a))
    except OSError as e:
        say(what, name(e.errno))


def holes(fd):
    out, off, size = [], 0, os.fstat(fd).st_size
    while off < size:
        try:
            d = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            break
        h = os.lseek(fd, d, os.SEEK_HOLE)
        out.append((d, h))
        off = h
    return out


# Sequential writes, small then vectored.
fd = os.open("seq.bin", RW, 0o644)
n = sum(os.write(fd, src[i:i + 4096]) for i in range(0, 1 << 20, 4096))
n += os.writev(fd, [src[:1000], src[1000:70000], b"", src[70000:200000]])
os.fsync(fd)
say("seq", n)
# posix_fadvise: forwarded, not forwarded, and wrong.
for adv in ("WILLNEED", "DONTNEED", "NOREUSE", "SEQUENTIAL", "RANDOM", "NORMAL"):
    attempt("fadvise " + adv, os.posix_fadvise, fd, 0, 0, getattr(os, "POSIX_FADV_" + adv))
attempt("fadvise range", os.posix_fadvise, fd, 4096, 65536, os.POSIX_FADV_WILLNEED)
attempt("fadvise past the end", os.posix_fadvise, fd, 100 << 20, 4096, os.POSIX_FADV_WILLNEED)
attempt("fadvise bad advice", os.posix_fadvise, fd, 0, 0, 99)
attempt("fadvise negative", os.posix_fadvise, fd, 0, -1, os.POSIX_FADV_WILLNEED)
attempt("fadvise bad fd", os.posix_fadvise, 999, 0, 0, os.POSIX_FADV_WILLNEED)
r, w = os.pipe()
attempt("fadvise pipe", os.posix_fadvise, r, 0, 0, os.POSIX_FADV_WILLNEED)
os.close(r)
os.close(w)
os.close(fd)

# pwrites in scattered order.
fd = os.open("scattered.bin", RW, 0o644)
for k in [(i * 37) % 64 for i in range(64)]:
    os.pwrite(fd, src[k * 16384:(k + 1) * 16384], k * 16384)
os.close(fd)

# Sparse: holes between writes and far past the end; they must stay holes.
fd = os.open("sparse.bin", RW, 0o644)
os.pwrite(fd, src[:4096], 0)
os.pwrite(fd, src[4096:8192], 100 << 10)
os.pwrite(fd, src[8192:13192], 10 << 20)
os.lseek(fd, 3 << 20, os.SEEK_SET)
os.writev(fd, [src[:100], src[100:7000], b"xyz"])
say("sparse", os.fstat(fd).st_size, holes(fd))
os.close(fd)

# ftruncate: shrink, write on (a hole), grow, write inside.
fd = os.open("trunc.bin", RW, 0o644)
os.write(fd, src[:2 << 20])
os.ftruncate(fd, 300000)
os.write(fd, src[:50000])
os.ftruncate(fd, 5 << 20)
os.pwrite(fd, src[:8192], 1 << 20)
say("trunc", os.fstat(fd).st_size, holes(fd))
os.close(fd)

# The program's own preallocation (before writing) is its business.
fd = os.open("own-prealloc.bin", NEW, 0o644)
say("fallocate", libc.fallocate(fd, 1, 0, 1 << 20))
for i in range(0, 200000, 10000):
    os.write(fd, src[i:i + 10000])
os.close(fd)

# Times the program sets before closing (cp -p, tar, rsync -t) stand.
fd = os.open("mtime.bin", NEW, 0o644)
os.write(fd, src[:300000])
os.utime(fd, ns=(1000000000123456789, 1000000000987654321))
os.close(fd)
say("mtime", os.stat("mtime.bin").st_mtime_ns)

# errno: a successful call leaves it alone, failing ones set their own.
fd = os.open("errno.bin", NEW, 0o644)
buf = ctypes.create_string_buffer(src[:8192], 8192)
for e in (0, errno.ENOENT, 12345):
    ctypes.set_errno(e)
    say("write", libc.write(fd, buf, 8192), "errno", ctypes.get_errno())
    ctypes.set_errno(e)
    say("pwrite", libc.pwrite(fd, buf, 4096, 1 << 20), "errno", ctypes.get_errno())
for what, call in (("bad fd", lambda: libc.write(-1, buf, 10)),
                   ("NULL buffer", lambda: libc.write(fd, None, 10)),
                   ("negative offset", lambda: libc.pwrite(fd, buf, 10, -5)),
                   ("fallocate 0 bytes", lambda: libc.fallocate(fd, 0, 0, 0)),
                   ("ftruncate -1", lambda: libc.ftruncate(fd, -1))):
    ctypes.set_errno(0)
    say(what, call(), name(ctypes.get_errno()))
ro = os.open("errno.bin", os.O_RDONLY)
ctypes.set_errno(0)
say("read-only fd", libc.write(ro, buf, 10), name(ctypes.get_errno()))
os.close(ro)
os.close(fd)

# dup, F_DUPFD, dup2 over a written fd, O_APPEND by F_SETFL, close_range.
fd = os.open("dup.bin", NEW, 0o644)
os.write(fd, src[:300000])
fd2 = os.dup(fd)
os.write(fd2, src[:5000])
fd3 = fcntl.fcntl(fd, fcntl.F_DUPFD, 50)
os.write(fd3, src[5000:9000])
other = os.open("dup-other.bin", NEW, 0o644)
os.write(other, src[:70000])
os.dup2(other, fd)
os.write(fd, src[:3000])
os.close(fd2)
os.closerange(fd3, fd3 + 1)
fcntl.fcntl(other, fcntl.F_SETFL, fcntl.fcntl(other, fcntl.F_GETFL) | os.O_APPEND)
os.lseek(other, 0, os.SEEK_SET)
os.write(other, b"appended\n")
os.close(other)
os.close(fd)

# A per-file hint (kernels without F_SET_RW_HINT say EINVAL).
fd = os.open("rwhint.bin", NEW, 0o644)
attempt("F_SET_RW_HINT", lambda: fcntl.fcntl(fd, 1036, struct.pack("Q", 5)) and None)
for i in range(0, 600000, 50000):
    os.write(fd, src[i:i + 50000])
os.close(fd)

# copy_file_range and sendfile.
a = os.open("seq.bin", os.O_RDONLY)
b = os.open("cfr.bin", NEW, 0o644)
n = 0
while (k := os.copy_file_range(a, b, 300000)):
    n += k
say("copy_file_range", n)
os.close(b)
c = os.open("sendfile.bin", NEW, 0o644)
n = off = 0
while (k := os.sendfile(c, a, off, 256 << 10)):
    off += k
    n += k
say("sendfile", n)
os.close(c)
os.close(a)

# Threads: their own files, and their own parts of a shared one.
shared = os.open("threads.bin", RW, 0o644)


def worker(t):
    own = os.open("thread%d.bin" % t, NEW, 0o644)
    for i in range(64):
        piece = src[(t * 64 + i) * 4096:(t * 64 + i + 1) * 4096]
        os.write(own, piece)
        os.pwrite(shared, piece, (t * 64 + i) * 4096)
    os.close(own)


threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
os.close(shared)

# A forked child writes and appends, then the parent appends; another child
# exits through Python's normal exit; a spawned one is a program.
log = os.open("shared.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
os.write(log, b"parent before fork\n")
pid = os.fork()
if pid == 0:
    cf = os.open("child.bin", NEW, 0o644)
    for i in range(0, 1 << 20, 65536):
        os.write(cf, src[i:i + 65536])
    os.close(cf)
    for i in range(100):
        os.write(log, b"child %d\n" % i)
    os.close(log)
    os._exit(9)
say("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
for i in range(100):
    os.write(log, b"parent %d\n" % i)
pid = os.fork()
if pid == 0:
    cf = os.open("child2.bin", NEW, 0o644)
    os.write(cf, src[:777777])
    sys.exit(4)
say("child2", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
r = subprocess.run(["dd", "if=" + sys.argv[1], "of=spawned.bin", "bs=32k", "count=20",
                    "status=none"], stdin=subprocess.DEVNULL)
say("spawned", r.returncode)
os.close(log)

for f in sorted(os.listdir(".")):
    with open(f, "rb") as fh:
        say(f, os.stat(f).st_size, hashlib.sha256(fh.read()).hexdigest())
sys.exit(42)
EOF

cat > "$tmp/workload.sh" <<'EOF'
# workload.sh SOURCE WORK.PY PYTHON ZEROS, in the directory to write to.
src=$1 py=$2 python=$3 zeros=$4
dd if="$src" of=dd64k.bin bs=64k count=40 status=none; echo "dd 64k: $?"
dd if="$src" of=dd4k.bin bs=4k count=1500 status=none; echo "dd 4k: $?"
dd if="$src" of=dd4k.bin bs=4k count=100 skip=10 seek=3000 conv=notrunc status=none
echo "dd seek: $?"
dd if="$src" of=dd4k.bin bs=4k count=10 oflag=append conv=notrunc status=none
echo "dd append: $?"
cat "$src" | dd of=piped.bin bs=8k count=64 iflag=fullblock status=none; echo "piped: $?"
cp dd64k.bin cp.bin; echo "cp: $?"
cp -p "$src" cp-p.bin; echo "cp -p: $? $(stat -c %y cp-p.bin)"
cp missing.bin nowhere.bin; echo "cp missing: $?"
cp --sparse=always "$zeros" cp-sparse.bin; echo "cp sparse: $?"
dd if="$zeros" of=dd-sparse.bin bs=16k conv=sparse status=none; echo "dd sparse: $?"
i=0
while [ $i -lt 300 ]; do echo "line $i" >> appended.txt; i=$((i + 1)); done
echo "appended: $?"
head -c 123457 "$src" > head.bin; echo "head: $?"
"$python" "$py" "$src"; echo "python: $?"
exit 3
EOF

# run NAME [PREFIX…]: runs the workload in a fresh $tmp/NAME with PREFIX
# (a command that runs the rest: env, ionice, hintcache run …); stdout in
# NAME.out, stderr through a pipe in NAME.err, exit status in NAME.rc,
# milliseconds taken in NAME.ms.
run() {
  local name=$1 rc t0
  shift
  rm -rf "${tmp:?}/$name"
  mkdir "$tmp/$name"
  t0=$(ms)
  set +o pipefail
  (cd "$tmp/$name" && exec timeout -k 5 120 "$@" \
    sh "$tmp/workload.sh" "$tmp/src.bin" "$tmp/work.py" "$python" "$tmp/zeros.bin") \
    2>&1 >"$tmp/$name.out" | cat >"$tmp/$name.err"
  rc=${PIPESTATUS[0]}
  set -o pipefail
  echo $(($(ms) - t0)) > "$tmp/$name.ms"
  echo "$rc" > "$tmp/$name.rc"
  [ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "$name: the workload did not finish in 120 s"
}

warn_re='^hintcache-preload\[[0-9]+\]: '

# The reference, without the library.
run ref
(cd "$tmp/ref" && find . -type f | sort) > "$tmp/ref.files"
[ -s "$tmp/ref.files" ] || fail "the reference run wrote nothing"
[ "$(cat "$tmp/ref.rc")" = 3 ] || fail "the reference run exited $(cat "$tmp/ref.rc"): $(cat "$tmp/ref.err")"
grep -q '^python: 42$' "$tmp/ref.out" || fail "the python workload failed: $(cat "$tmp/ref.out" "$tmp/ref.err")"
grep -q 'missing.bin' "$tmp/ref.err" || fail "the reference run's stderr: $(cat "$tmp/ref.err")"
while read -r f; do
  echo "$(stat -c '%s %b' "$tmp/ref/$f") $(sha256sum < "$tmp/ref/$f" | cut -c1-64) $f"
done < "$tmp/ref.files" > "$tmp/ref.sums"
echo "preload: reference: $(wc -l < "$tmp/ref.files") files, $(cat "$tmp/ref.ms") ms"

# Blocks a file may have beyond the reference's (512-byte units): an extent
# tree block or two, as the extents may be cut differently (a hole or
# preallocation not given back is far more).
slack=16

# same NAME [quiet]: NAME's results are the reference's; the library's
# warnings are at most one per process (none if quiet).
same() {
  local name=$1 quiet=${2:-} f s b sum rs rb rsum pids
  [ "$(cat "$tmp/$name.rc")" = "$(cat "$tmp/ref.rc")" ] \
    || fail "$name: exit status $(cat "$tmp/$name.rc"), $(cat "$tmp/ref.rc") without the library; stderr: $(head -c 2000 "$tmp/$name.err")"
  cmp -s "$tmp/ref.out" "$tmp/$name.out" \
    || fail "$name: stdout differs from the run without the library: $(diff "$tmp/ref.out" "$tmp/$name.out" | head -20 || true)"
  grep -aEv "$warn_re" "$tmp/$name.err" > "$tmp/$name.err.rest" || true
  cmp -s "$tmp/ref.err" "$tmp/$name.err.rest" \
    || fail "$name: stderr differs from the run without the library: $(diff "$tmp/ref.err" "$tmp/$name.err.rest" | head -20 || true)"
  (cd "$tmp/$name" && find . -type f | sort) > "$tmp/$name.files"
  cmp -s "$tmp/ref.files" "$tmp/$name.files" \
    || fail "$name: other files than without the library: $(diff "$tmp/ref.files" "$tmp/$name.files" || true)"
  while read -r rs rb rsum f; do
    read -r s b < <(stat -c '%s %b' "$tmp/$name/$f")
    sum=$(sha256sum < "$tmp/$name/$f" | cut -c1-64)
    [ "$s" = "$rs" ] || fail "$name: $f has $s bytes, $rs without the library"
    [ "$sum" = "$rsum" ] || fail "$name: $f has other contents than without the library"
    [ "$b" -le $((rb + slack)) ] \
      || fail "$name: $f takes $b blocks of 512 bytes, $rb without the library (preallocation not given back?)"
  done < "$tmp/ref.sums"
  pids=$(grep -aEo "$warn_re" "$tmp/$name.err" | sort | uniq -d || true)
  [ -z "$pids" ] || fail "$name: more than one warning from a process: $(grep -aE "$warn_re" "$tmp/$name.err")"
  if [ -n "$quiet" ] && grep -aEq "$warn_re" "$tmp/$name.err"; then
    fail "$name: warnings with HINTCACHE_QUIET=1: $(grep -aE "$warn_re" "$tmp/$name.err")"
  fi
  return 0
}

# counters NAME: the sums of HINTCACHE_STATS's counters, as "sent=N …".
counters() {
  [ -s "$tmp/$1.stats" ] || fail "$1: HINTCACHE_STATS wrote nothing"
  awk '{ for (i = 3; i <= NF; i++) { split($i, kv, "="); sum[kv[1]] += kv[2] } }
       END { printf "sent=%d refused=%d dropped=%d kept=%d\n", sum["sent"], sum["refused"], sum["dropped"], sum["kept"] }' \
    "$tmp/$1.stats"
}
counter() { counters "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# Whether `ionice -c2 -n4096` works here (the RFC's bits in the I/O
# priority); without it, the process's advice comes from HINTCACHE_ADVICE.
if ionice -c2 -n4096 true 2>/dev/null; then
  dontneed=(ionice -c2 -n4096)
  dontneed_env=()
else
  echo "preload: ionice -c2 -n4096 does not work here; HINTCACHE_ADVICE=dontneed instead"
  dontneed=()
  dontneed_env=(HINTCACHE_ADVICE=dontneed)
fi

# What each mode's warning says (any one of these).
declare -A why=(
  [none]='cannot connect'
  [stale]='cannot connect'
  [close]='closed the connection|no reply in time|sending failed'
  [garbage]='neither ok nor error|too long|no reply in time'
  [badgreeting]='not a hintcache control socket|no greeting'
  [silent]='no greeting'
  [refuse]='refused a hint'
)

for mode in ok none stale close garbage badgreeting silent refuse; do
  start_server $mode
  # 1. The process's class from the environment; warnings shown.
  run $mode-journal env "${libenv[@]}" HINTCACHE_SOCKET="$sock" HINTCACHE_MOUNTS="$tmp" \
    HINTCACHE_CLASS=journal HINTCACHE_STATS="$tmp/$mode-journal.stats"
  same $mode-journal
  cp "$slog" "$tmp/$mode-journal.requests"
  : > "$slog"
  # 2. The RFC's dontneed in the I/O priority; quiet.
  run $mode-dontneed env "${libenv[@]}" HINTCACHE_SOCKET="$sock" HINTCACHE_MOUNTS="$tmp" \
    HINTCACHE_QUIET=1 HINTCACHE_STATS="$tmp/$mode-dontneed.stats" "${dontneed_env[@]}" \
    "${dontneed[@]}"
  same $mode-dontneed quiet
  cp "$slog" "$tmp/$mode-dontneed.requests"
  stop_server
  if [ $mode = none ]; then
    # 3. A bad class (a warning from every process) and an advice (hints,
    # whose failure would be a second warning).
    run none-badclass env "${libenv[@]}" HINTCACHE_SOCKET="$sock" HINTCACHE_MOUNTS="$tmp" \
      HINTCACHE_CLASS=bogus HINTCACHE_ADVICE=dontneed
    same none-badclass
    grep -aE "$warn_re" "$tmp/none-badclass.err" | grep -aq "HINTCACHE_CLASS 'bogus' is not a class" \
      || fail "none-badclass: no warning about the class: $(head -3 "$tmp/none-badclass.err")"
    echo "preload: none (bad class): same results, one warning per process at most: $(grep -ac 'not a class' "$tmp/none-badclass.err" || true) about the class"
  fi

  c=$(counters $mode-journal)
  nwarn=$(grep -aEc "$warn_re" "$tmp/$mode-journal.err" || true)
  case $mode in
  ok)
    [ "$nwarn" = 0 ] || fail "ok: warnings: $(grep -E "$warn_re" "$tmp/$mode-journal.err")"
    [ "$(counter $mode-journal sent)" -gt 0 ] && [ "$(counter $mode-journal refused)" = 0 ] \
      && [ "$(counter $mode-journal dropped)" = 0 ] || fail "ok: counters $c"
    [ "$(counter $mode-dontneed sent)" -gt 0 ] || fail "ok (dontneed): counters $(counters $mode-dontneed)"
    r=$tmp/ok-journal.requests
    bad=$(grep -Ev '^(advise [0-9]+ [1-9][0-9]* [a-z+]+|unadvise [0-9]+ [1-9][0-9]*) from=preload$' "$r" "$tmp/ok-dontneed.requests" | head -5) || true
    [ -z "$bad" ] || fail "ok: malformed requests: $bad"
    grep -Eq '^advise [0-9]+ [0-9]+ journal from=preload$' "$r" || fail "ok: no 'advise OFF LEN journal' with HINTCACHE_CLASS=journal"
    grep -Eq '^advise [0-9]+ [0-9]+ ([a-z]+\+)?willneed from=preload$' "$r" || fail "ok: no willneed from posix_fadvise(WILLNEED)"
    grep -Eq '^unadvise [0-9]+ [0-9]+ from=preload$' "$r" || fail "ok: no unadvise for the preallocation given back"
    grep -Eq '^advise [0-9]+ [0-9]+ dontneed from=preload$' "$tmp/ok-dontneed.requests" \
      || fail "ok: no 'advise OFF LEN dontneed' under ${dontneed[*]:-HINTCACHE_ADVICE=dontneed}"
    # (posix_fadvise NOREUSE is journal, by the fadvise codec: journal+dontneed.)
    if grep -Eq '^advise [0-9]+ [0-9]+ journal from=preload$' "$tmp/ok-dontneed.requests"; then
      fail "ok: journal hints without a class: $(grep -E ' journal from=preload$' "$tmp/ok-dontneed.requests" | head -3)"
    fi
    echo "preload: ok: same results; $(wc -l < "$r") requests ($(grep -c '^advise.* journal from=preload$' "$r" || true) journal, $(grep -c '^unadvise' "$r" || true) unadvise, willneed; $(grep -c 'dontneed from=preload$' "$tmp/ok-dontneed.requests" || true) dontneed under ${dontneed[*]:-HINTCACHE_ADVICE}); $c"
    ;;
  *)
    [ "$nwarn" -gt 0 ] || fail "$mode: no warning"
    grep -aE "$warn_re" "$tmp/$mode-journal.err" | grep -aEvq "${why[$mode]}" \
      && fail "$mode: unexpected warning: $(grep -aE "$warn_re" "$tmp/$mode-journal.err" | grep -aEv "${why[$mode]}" | head -3)"
    [ $mode = close ] || [ "$(counter $mode-journal sent)" = 0 ] \
      || fail "$mode: hints counted as sent: $c"
    if [ $mode = refuse ]; then
      [ "$(counter $mode-journal refused)" -gt 0 ] || fail "$mode: nothing refused: $c"
    else
      [ "$(counter $mode-journal dropped)" -gt 0 ] || fail "$mode: nothing dropped: $c"
    fi
    if [ $mode = badgreeting ] && [ -s "$tmp/$mode-journal.requests" ]; then
      fail "$mode: requests sent after a wrong greeting: $(head -3 "$tmp/$mode-journal.requests")"
    fi
    echo "preload: $mode: same results, $nwarn warning(s), one per process at most, none when quiet; $c; $(cat "$tmp/$mode-journal.ms")+$(cat "$tmp/$mode-dontneed.ms") ms"
    ;;
  esac
  # A server that does not answer costs little: the library waits 100 ms to
  # connect or 250 ms for a reply, then tries again after 1 s, 2 s, …
  for v in journal dontneed; do
    t=$(cat "$tmp/$mode-$v.ms")
    [ "$t" -lt $(($(cat "$tmp/ref.ms") + 20000)) ] \
      || fail "$mode-$v: the workload took $t ms, $(cat "$tmp/ref.ms") ms without the library"
  done
done

# ---- A signal handler that writes while the process forks. ----------------
# fork holds the library's lock from its prepare handler to its parent
# handler; a signal taken meanwhile on the forking thread (the kernel
# restarts the fork after the handler) whose handler writes — libuv's
# SIGCHLD handler in cmake, CPython's to its wakeup pipe — must not wait for
# that lock (it did: cmake hung under `hintcache run`).  A 50 µs timer makes
# that happen in most of 200 forks.
cat > "$tmp/forks.py" <<'EOF2'
import os, signal, sys
n = int(sys.argv[1])
r, w = os.pipe()
os.set_blocking(r, False)
os.set_blocking(w, False)
signal.set_wakeup_fd(w, warn_on_full_buffer=False)  # the C handler write()s here
signal.signal(signal.SIGALRM, lambda *a: None)
signal.signal(signal.SIGCHLD, lambda *a: None)
signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.00005)
for i in range(n):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    try:
        os.read(r, 4096)
    except BlockingIOError:
        pass
signal.setitimer(signal.ITIMER_REAL, 0, 0)
print("forks:", n)
EOF2
out=$(cd "$tmp" && timeout -k 5 60 env "${libenv[@]}" HINTCACHE_SOCKET="$tmp/no-socket" \
  HINTCACHE_MOUNTS="$tmp" HINTCACHE_CLASS=journal HINTCACHE_QUIET=1 "$python" "$tmp/forks.py" 200) \
  || fail "forks with a writing signal handler: status $? (124: it hung in fork)"
[ "$out" = "forks: 200" ] || fail "forks with a writing signal handler: '$out'"
echo "preload: 200 forks with a signal handler writing inside them: no hang"

# ---- hintcache run. --------------------------------------------------------
# It finds the library next to itself; make sure that is the one under test.
if ! [ "$(dirname "$hc")/libhintcache-preload.so" -ef "$lib" ]; then
  runenv+=(HINTCACHE_PRELOAD="$lib")
fi
start_server ok
run hcrun-ok env "${runenv[@]}" "$hc" run --class journal --socket "$sock" --mount "$tmp" \
  --stats "$tmp/hcrun-ok.stats" --
same hcrun-ok
if grep -Eq "$warn_re" "$tmp/hcrun-ok.err"; then fail "hcrun-ok: warnings: $(cat "$tmp/hcrun-ok.err")"; fi
grep -Eq '^advise [0-9]+ [0-9]+ journal from=preload$' "$slog" || fail "hintcache run --class journal: no journal hints arrived"
[ "$(counter hcrun-ok sent)" -gt 0 ] || fail "hintcache run: counters $(counters hcrun-ok)"
echo "preload: hintcache run (ok): same results, $(grep -c 'journal from=preload$' "$slog" || true) journal hints"
# The advice in the I/O priority alone is a hint enough (the help says it wins).
if [ ${#dontneed[@]} -gt 0 ]; then
  : > "$slog"
  run hcrun-ionice env "${runenv[@]}" "${dontneed[@]}" "$hc" run --socket "$sock" --mount "$tmp" --
  same hcrun-ionice
  grep -Eq '^advise [0-9]+ [0-9]+ dontneed from=preload$' "$slog" \
    || fail "${dontneed[*]} hintcache run: no dontneed hints arrived: $(head -3 "$slog")"
  echo "preload: ${dontneed[*]} hintcache run (no --class/--advice): $(grep -c 'dontneed from=preload$' "$slog" || true) dontneed hints"
fi
stop_server
start_server none
run hcrun-none env "${runenv[@]}" "$hc" run --class background --advice dontneed \
  --socket "$sock" --mount "$tmp" --stats "$tmp/hcrun-none.stats" --
same hcrun-none
grep -Eq "$warn_re.*cannot connect" "$tmp/hcrun-none.err" || fail "hintcache run (none): no warning"
run hcrun-quiet env "${runenv[@]}" "$hc" run --class journal --socket "$sock" --mount "$tmp" --quiet --
same hcrun-quiet quiet
echo "preload: hintcache run (no socket): same results, $(grep -Ec "$warn_re" "$tmp/hcrun-none.err" || true) warning(s); none with --quiet"

# Usage errors and the command's own status.
hcrun() { env "${runenv[@]}" "$hc" run "$@"; }
expect_status 2 hcrun
expect_status 2 hcrun --class journal --socket "$sock" --mount "$tmp"
expect_status 2 hcrun --class bogus --socket "$sock" --mount "$tmp" -- true
contains "$err" "bogus" "hintcache run --class bogus"
expect_status 2 hcrun --advice bogus --socket "$sock" --mount "$tmp" -- true
expect_status 2 hcrun --socket "$sock" --mount "$tmp" -- true
expect_status 2 hcrun --class journal --socket "$sock" --mount "$tmp/nonexistent" -- true
expect_status 127 hcrun --class journal --socket "$sock" --mount "$tmp" -- "$tmp/no-such-command"
expect_status 127 hcrun --class journal --socket "$sock" --mount "$tmp" -- no-such-command-hc
expect_status 126 hcrun --class journal --socket "$sock" --mount "$tmp" -- "$tmp/work.py"
expect_status 5 hcrun --class journal --socket "$sock" --mount "$tmp" --quiet -- sh -c 'echo out; exit 5'
[ "$out" = out ] || fail "hintcache run: the command's stdout: '$out'"
echo "preload: hintcache run: usage errors exit 2, a missing command 127, not executable 126, the command's status otherwise"
stop_server

echo "preload: ok"
