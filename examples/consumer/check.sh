#!/usr/bin/env bash
# Proves that an installed tdstore is usable from outside the source tree:
#
#   examples/consumer/check.sh [BUILD_DIR]     (default: build/, already built)
#
# 1. `cmake --install BUILD_DIR --prefix TMP` and checks what landed there
#    (binaries, versioned SONAME, headers, CMake package, tdstore.pc, and that
#    the exported target does not leak private libraries);
# 2. builds examples/consumer against TMP with find_package(tdstore), and
#    pkg_config_main.cc with `pkg-config --cflags --libs tdstore` (both at once);
# 3. starts the installed tdstored (embedded redis-server) on a free port and
#    runs both programs and the installed CLI against it; stops it.
# Exits 0 when all of that works; prints the first failure otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d /tmp/tdstore-consumer.XXXXXX)
prefix=$work/prefix
daemon_pid=""

cleanup() {
  if [ -n "$daemon_pid" ]; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "consumer check: FAIL: $*" >&2; exit 1; }
step() { echo "consumer check: $*"; }
start=$SECONDS

# --- 1. install and look at the result -----------------------------------
step "installing $build into a temporary prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log" >&2; fail "cmake --install"; }
for f in bin/tdstored bin/tdstore include/tdstore/client.h include/tdstore/core.h include/common/dtype.h \
         lib/cmake/tdstore/tdstoreConfig.cmake lib/cmake/tdstore/tdstoreConfigVersion.cmake \
         lib/cmake/tdstore/tdstoreTargets.cmake lib/pkgconfig/tdstore.pc; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
lib=""
for f in "$prefix"/lib/libtdstore_client.so.*.*.*; do
  [ -f "$f" ] && lib=$(basename "$f")
done
[ -n "$lib" ] || fail "no versioned lib/libtdstore_client.so.X.Y.Z"
soname=$(objdump -p "$prefix/lib/$lib" | awk '$1 == "SONAME" {print $2}')
if [ -z "$soname" ] || [ ! -e "$prefix/lib/$soname" ] || [ ! -e "$prefix/lib/libtdstore_client.so" ]; then
  fail "SONAME '$soname' or the libtdstore_client.so link is missing"
fi
# Consumers must link torch only: gRPC, protobuf and the static helper
# libraries are private to the shared library.
if grep -E 'INTERFACE_LINK_LIBRARIES.*(tdstore_proto|tdstore_common|grpc|protobuf)' \
     "$prefix"/lib/cmake/tdstore/tdstoreTargets*.cmake; then
  fail "the exported tdstore::client leaks private libraries"
fi
step "installed: $lib (SONAME $soname), headers, CMake package, tdstore.pc"

# --- 2. build both programs against the prefix, in parallel -----------------
step "building examples/consumer (find_package) and pkg_config_main.cc (pkg-config)"
(
  cmake -S "$root/examples/consumer" -B "$work/consumer" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" &&
  cmake --build "$work/consumer"
) >"$work/consumer.log" 2>&1 &
consumer_build=$!
# Torch ships no .pc file: its flags are added by hand (Debian 12 layout, as
# cmake/tdstore.pc.in documents). The rpath lets it run from the prefix.
pc_flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs tdstore) ||
  fail "pkg-config --cflags --libs tdstore"
# shellcheck disable=SC2086  # pc_flags is a list of flags
g++ -std=c++17 -O1 "$root/examples/consumer/pkg_config_main.cc" -o "$work/pkg_config_main" \
  $pc_flags -ltorch_cpu -lc10 -Wl,-rpath,"$prefix/lib" >"$work/pkg_config.log" 2>&1 || {
  cat "$work/pkg_config.log" >&2; fail "compiling with pkg-config flags ($pc_flags)"; }
wait "$consumer_build" || { tail -n 30 "$work/consumer.log" >&2; fail "building the consumer"; }
step "built both ($((SECONDS - start)) s so far)"

# --- 3. run them against the installed daemon --------------------------------
"$prefix/bin/tdstored" --listen 127.0.0.1:0 --ready-file "$work/ready" \
  >"$work/tdstored.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 300); do
  [ -s "$work/ready" ] && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/tdstored.log" >&2; fail "tdstored exited"; }
  sleep 0.1
done
[ -s "$work/ready" ] || fail "tdstored was not ready within 30 s"
addr=$(head -n1 "$work/ready")
step "installed tdstored serving on $addr"

"$work/consumer/consumer" "$addr" || fail "the find_package consumer"
"$work/pkg_config_main" "$addr" || fail "the pkg-config program"
# The installed CLI finds the installed library through its rpath.
"$prefix/bin/tdstore" --addr "$addr" server >/dev/null || fail "the installed tdstore CLI"

kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "tdstored did not stop cleanly (exit $?)"
daemon_pid=""
step "OK in $((SECONDS - start)) s"
