# Shared by scripts/demo, scripts/test, scripts/fuzz and scripts/bench (sourced).
#
# ensure_packages installs the Debian packages that are missing, running
# `apt-get update` first only when something is missing.  build configures
# and builds one build tree.

# What building needs, and what the test suite needs on top (everything a
# test or a part of one needs, so that none is skipped: e2fsprogs for
# test_fsmap:layout, chromium for test_report:browser).
HC_BUILD_PACKAGES="gcc libc6-dev make cmake pkg-config libxxhash-dev zlib1g-dev libnbd-dev nbdkit-plugin-dev libext2fs-dev"
HC_TEST_PACKAGES="jq binutils nbdkit libnbd-bin python3-libnbd python3-prometheus-client qemu-utils fio fuse3 e2fsprogs systemd postgresql sqlite3 chromium"
# What fuzzing needs on top of building: clang and its runtimes (libFuzzer
# and the sanitizers, in Debian 12's clang 14).
HC_FUZZ_PACKAGES="clang libclang-rt-dev"

ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "Installing missing packages: ${missing[*]}" >&2
  local sudo=
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# build DIR BUILD_TYPE [CMAKE_ARGS...]
build() {
  local dir=$1 type=$2
  shift 2
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" "$@" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
}
