#!/usr/bin/env bash
# `hintcache control` prints a server's error replies as the server wrote
# them: for every errno name the control protocol knows (read from
# src/control/errnames.c, the one table), a fake server (python3, on a Unix
# socket) answers a request with "error NAME …" and the tool must print the
# same name and exit 1.  It once printed glibc's name instead of the
# protocol's, so errno 95 came back as EOPNOTSUPP for a server's ENOTSUP.
set -eu
hc=$1 src=$3
. "$(dirname "$0")/functions.sh"
requires python3

names=$(grep -o 'E ([A-Z0-9]*)' "$src/src/control/errnames.c" | sed 's/E (\(.*\))/\1/')
[ "$(echo "$names" | wc -l)" -ge 20 ] || fail "errno table not found in errnames.c"

sock=$tmp/control.sock
/usr/bin/python3 - "$sock" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(4)
while True:
    conn, _ = s.accept()
    conn.sendall(b"hintcache-control 1\n")
    buf = b""
    while True:
        data = conn.recv(65536)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            name = line.split(b" ")[-1]
            if line == b"quit":
                conn.close()
                sys.exit(0)
            conn.sendall(b"error " + name + b" said the fake server\n")
    conn.close()
PY
server=$!
cleanup_fns+=("kill $server 2>/dev/null")
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "the fake server did not start"

n=0
for name in $names; do
  expect_status 1 "$hc" control --socket "$sock" "info $name"
  [ "$out" = "error $name said the fake server" ] \
    || fail "the server wrote $name, the tool printed: $out"
  n=$((n + 1))
done
echo "cli_control: $n errno names printed as the server wrote them"
