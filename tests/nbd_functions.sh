# Helpers for the NBD end-to-end tests (sourced after functions.sh).
# $plugin is the built nbdkit-hintcache-plugin.so.

requires nbdkit
# nbdsh runs "python3 -m nbd": the Debian python3 that has libnbd's module.
export PATH=/usr/bin:$PATH

# start_server NAME SOCKET ARGS...: starts nbdkit with the plugin in the
# foreground (in the background of this shell), waits until the socket
# answers, and records the pid in ${NAME}_pid.  Stopped at exit.
start_server() {
  local name=$1 sock=$2; shift 2
  rm -f "$sock"
  # (leak checking is off in nbdkit: its own allocations are not ours to check)
  LD_PRELOAD=$san_preload ASAN_OPTIONS=detect_leaks=0 nbdkit -f -U "$sock" "$plugin" "$@" \
    2>>"$tmp/$name.log" &
  local pid=$!
  eval "${name}_pid=$pid"
  cleanup_fns+=("kill $pid 2>/dev/null; wait $pid 2>/dev/null")
  for _ in $(seq 100); do
    [ -S "$sock" ] && nbdinfo --size "nbd+unix:///?socket=$sock" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || fail "server $name died: $(cat "$tmp/$name.log")"
    sleep 0.1
  done
  fail "server $name did not start: $(cat "$tmp/$name.log")"
}

# stop_server NAME [SIGNAL]: stops it (TERM: a clean shutdown) and waits;
# a server that has not exited after 20 s (nbdkit waits for connected
# clients) fails the test, and so does a sanitizer report in its log (its
# exit status is not looked at: a KILLed server has none worth reading).
stop_server() {
  local pid; eval "pid=\${$1_pid}"
  kill -"${2:-TERM}" "$pid" 2>/dev/null || true
  for _ in $(seq 200); do alive "$pid" || break; sleep 0.1; done
  alive "$pid" && { kill -KILL "$pid"; fail "server $1 did not stop"; }
  wait "$pid" 2>/dev/null || true
  ! grep -q 'Sanitizer' "$tmp/$1.log" || fail "server $1: sanitizer report: $(cat "$tmp/$1.log")"
}

# alive PID: running (not exited, not a zombie waiting to be reaped).  The
# stat file is read once: the shell may reap the process between two looks.
alive() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  [ -n "$s" ] && [ "${s%% *}" != Z ]
}

# A plugin built with a sanitizer (AddressSanitizer + UBSan, or
# ThreadSanitizer) needs its runtime loaded first into nbdkit, which is not
# built with it.
san_preload=
if ldd "$plugin" 2>/dev/null | grep -q libasan; then
  for lib in libasan.so libubsan.so; do
    san_preload="$san_preload $(gcc -print-file-name=$lib)"
  done
elif ldd "$plugin" 2>/dev/null | grep -q libtsan; then
  san_preload=" $(gcc -print-file-name=libtsan.so)"
fi

# log_excerpt LOG: a server log's first sanitizer or error report, else its
# last lines (for a failure message).
log_excerpt() {
  if grep -q "WARNING: \|ERROR: " "$1"; then sed -n '/WARNING: \|ERROR: /,$p' "$1" | head -60
  else tail -40 "$1"; fi
}

uri() { echo "nbd+unix:///${2:-}?socket=$1"; }
