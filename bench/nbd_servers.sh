# Sourced by the NBD benchmarks: a scratch directory and nbdkit servers in
# it, all stopped (and the directory removed) when the script exits.
#
#   nbd_bench_init NAME PACKAGE...  installs the Debian packages that are
#                                 missing (scripts/lib.sh), makes $dir (NAME
#                                 in its name), arms the cleanup
#   start SERVER ARGS...          (re)starts nbdkit ARGS on $dir/SERVER.sock,
#                                 waiting until it serves
#   stop SERVER
declare -A pid

nbd_bench_init() {
  bench_name=$1; shift
  . "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
  ensure_packages "$@" || { echo "$bench_name: could not install $*" >&2; exit 1; }
  dir=$(mktemp -d "/var/tmp/hc-$bench_name.XXXXXX")
  mkdir -p "$dir/tmp"
  trap nbd_bench_cleanup EXIT
}

nbd_bench_cleanup() {
  for p in "${pid[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}

stop() {
  [ -n "${pid[$1]:-}" ] || return 0
  kill "${pid[$1]}" 2>/dev/null || true
  wait "${pid[$1]}" 2>/dev/null || true
  unset "pid[$1]"
}

start() {
  local name=$1; shift
  stop "$name"
  rm -f "$dir/$name.sock"
  TMPDIR="$dir/tmp" nbdkit -f -U "$dir/$name.sock" "$@" 2>"$dir/$name.log" &
  pid[$name]=$!
  for _ in $(seq 100); do
    nbdinfo --size "nbd+unix:///?socket=$dir/$name.sock" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$bench_name: $name did not start: $(cat "$dir/$name.log")" >&2; exit 1
}
