#!/usr/bin/env bash
# One device-machine session: GPU tests, the same tests under compute-sanitizer, `svdq verify`, `svdq bench`.
# Runs binaries built on the CPU machine (carried build dir); logs go to $OUT (or ./.out).
# Usage: scripts/gpu_session.sh [build_dir] [what...]   what: info sass tests sanitizer verify bench (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}; shift || true
WHAT=${*:-info sass tests sanitizer verify bench}
OUT=${OUT:-$PWD/.out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
export SVDQ_JIT_LOG=${SVDQ_JIT_LOG:-0}
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
status=0
step() { echo "=== $1 ($(date -u +%T))"; }
for w in $WHAT; do
  case $w in
    info) step info; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/info.log"
          "$BUILD/svdq" info 2>&1 | tee -a "$OUT/info.log" ;;
    sass) step "sass"; bash scripts/sass_check.sh "$BUILD" 2>&1 | tee "$OUT/sass.log" ;;
    tests) step "gpu tests"; "$BUILD/svdq_gpu_tests" ${GTEST_ARGS:-} 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|error" | head -60
           [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
    sanitizer) step "compute-sanitizer memcheck"
           "$CS" --tool memcheck --error-exitcode 99 "$BUILD/svdq_gpu_tests" --gtest_filter="${SANITIZER_FILTER:-*}" \
             > "$OUT/sanitizer.log" 2>&1; rc=$?
           grep -E "ERROR SUMMARY|^\[  (FAILED|PASSED) |^\[==========\]" "$OUT/sanitizer.log" | tail -8
           [ $rc -eq 0 ] || { status=1; echo "sanitizer rc=$rc"; grep -m20 -E "Invalid|Error" "$OUT/sanitizer.log"; } ;;
    verify) step verify; "$BUILD/svdq" verify 2>&1 | tee "$OUT/verify.log" | tail -20; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
    bench) step bench; "$BUILD/svdq" bench --csv "$OUT/bench.csv" ${BENCH_ARGS:-} > "$OUT/bench.log" 2> "$OUT/bench.err"
           rc=$?; cat "$OUT/bench.log"; tail -3 "$OUT/bench.err"; [ $rc -eq 0 ] || status=1 ;;
  esac
done
echo "=== done status=$status"
exit $status
