# Shared helpers for the shell tests (sourced).  Each test runs with `set -eu`
# and exits 0 pass, 1 fail, 77 skip.

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
requires() { command -v "$1" >/dev/null 2>&1 || skip "$1 is not installed"; }

# expect_status WANT CMD...: runs CMD, checks its exit status, keeps its
# stdout in $out and stderr in $err.
expect_status() {
  local want=$1; shift
  local rc=0
  out=$("$@" 2>"$tmp/stderr") || rc=$?
  err=$(cat "$tmp/stderr")
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, want $want; stderr: $err"
}

# contains HAYSTACK NEEDLE WHAT
contains() { case "$1" in *"$2"*) ;; *) fail "$3: '$2' not in: $1" ;; esac; }

tmp=$(mktemp -d)
cleanup_fns=("rm -rf '$tmp'")
cleanup() { for f in "${cleanup_fns[@]}"; do eval "$f" || true; done; }
trap cleanup EXIT
