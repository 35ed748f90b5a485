#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time.
#
#   tests/fuzz/run.sh [seconds-per-target]     (default 20)
#
# For each target: first replays every input in tests/fuzz/regressions/<target>/
# (crashes found before, now fixed), then fuzzes a scratch copy of the seed
# corpus tests/fuzz/corpus/<target>/ for the given seconds (the committed
# corpus is never written). Prints one summary line per target. Exits
# non-zero if any target crashes, leaks, trips a sanitizer or breaks an
# invariant; the input that did it is saved under the build directory.
#
# Build directory: ${TDSTORE_FUZZ_BUILD:-build/fuzz}, relative to the repo root.
# Needs clang-14 and libclang-rt-14-dev (deploy/install-deps.sh installs them).
set -euo pipefail

SECONDS_PER_TARGET="${1:-20}"
TARGETS=(fuzz_index_planner fuzz_npy_header fuzz_request_validators)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
BUILD="${TDSTORE_FUZZ_BUILD:-build/fuzz}"
case "$BUILD" in /*) ;; *) BUILD="$REPO/$BUILD" ;; esac
FUZZ_DIR="$REPO/tests/fuzz"

CXX_CLANG="$(command -v clang++-14 || command -v clang++ || true)"
if [ -z "$CXX_CLANG" ]; then
  echo "fuzz: clang++ not found; run deploy/install-deps.sh (clang-14, libclang-rt-14-dev)" >&2
  exit 1
fi

echo "fuzz: building into $BUILD"
mkdir -p "$BUILD"
CXX="$CXX_CLANG" cmake -S "$FUZZ_DIR" -B "$BUILD" -G Ninja >"$BUILD/configure.log" 2>&1 || {
  cat "$BUILD/configure.log" >&2
  exit 1
}
nice -n 10 cmake --build "$BUILD" -j"$(nproc)" >"$BUILD/build.log" 2>&1 || {
  tail -n 50 "$BUILD/build.log" >&2
  exit 1
}

# Symbolized stack traces when llvm-symbolizer is there; every UBSan report
# is fatal (the build also passes -fno-sanitize-recover).
SYMBOLIZER="$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)"
if [ -n "$SYMBOLIZER" ]; then export ASAN_SYMBOLIZER_PATH="$SYMBOLIZER"; fi
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

failed=()
summaries=()
for target in "${TARGETS[@]}"; do
  bin="$BUILD/$target"
  work="$BUILD/run/$target"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  log="$work/log.txt"

  # 1. Regressions: each saved input is run once.
  regressions=("$FUZZ_DIR/regressions/$target"/*)
  if [ -e "${regressions[0]}" ]; then
    if ! "$bin" -artifact_prefix="$work/artifacts/" "${regressions[@]}" >"$work/regressions.txt" 2>&1; then
      tail -n 40 "$work/regressions.txt" >&2
      summaries+=("$target: FAILED a regression input (log: $work/regressions.txt)")
      failed+=("$target")
      continue
    fi
  fi

  # 2. Fuzz a scratch copy of the seeds.
  cp "$FUZZ_DIR/corpus/$target"/* "$work/corpus/"
  dict=()
  if [ -f "$FUZZ_DIR/$target.dict" ]; then dict=(-dict="$FUZZ_DIR/$target.dict"); fi
  started="$(date +%s)"
  if "$bin" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$target")
    tail -n 40 "$log" >&2
  fi
  elapsed=$(($(date +%s) - started))
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  rate="$(awk -v n="${execs:-0}" -v t="$elapsed" 'BEGIN { printf "%d", (t > 0 ? n / t : n) }')"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)"
  ft="$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)"
  corpus_size="$(find "$work/corpus" -type f | wc -l)"
  line="$target: $status, ${execs:-?} execs in ${elapsed}s (${rate}/s), cov ${cov:-?} edges, ft ${ft:-?}, corpus ${corpus_size}"
  if [ "$status" != ok ]; then
    line+=" — crash input in $work/artifacts/, log $log"
  fi
  summaries+=("$line")
done

printf 'fuzz: %s\n' "${summaries[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
