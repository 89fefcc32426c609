#!/usr/bin/env bash
# Compares candidate builds on the H200 in one call: `svdq tune` of each candidate alone (its median on each shape,
# same method as bench; a candidate that hangs is stopped after TMO seconds) for a large-M and a small-M group,
# then the GPU tests (stopped after TESTS_TMO seconds). Logs under $OUT.
# Usage (binaries and package from scripts/carry_for_device.sh):
#   LARGE_BUILDS=a,b LARGE_SHAPES=... SMALL_BUILDS=c,d SMALL_SHAPES=... bash scripts/device_compare.sh [bin_dir] [tests]
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-.carry/bin}; shift || true
OUT=${OUT:-$PWD/.out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
[ -d .carry/pkg90 ] && export SVDQ_AOT_DIR=$PWD/.carry/pkg90
status=0
for g in LARGE SMALL; do
  bv=${g}_BUILDS sv=${g}_SHAPES
  [ -n "${!bv:-}" ] || continue
  echo "=== tune $g ($(date -u +%T))"
  # One process per candidate under a time limit, so a build that hangs costs TMO seconds, not the call.
  for b in ${!bv//,/ }; do
    timeout ${TMO:-60} "$B/svdq" tune --builds "$b" --shapes "${!sv}" --repeats ${REPEATS:-6} --warmup 2 \
      --out /tmp/tune_$b.json > /tmp/tune_$b.log 2>> "$OUT/tune.err"
    rc=$?
    cat /tmp/tune_$b.log >> "$OUT/tune.log"
    [ $rc -eq 0 ] || { status=1; echo "$b: exit $rc$([ $rc -eq 124 ] && echo ' (timed out)')"; }
    grep -E '^    ' /tmp/tune_$b.log | awk '{print $2}' | paste -sd' ' | sed "s/^/$b: /"
  done
done
if [ "${1:-}" = tests ]; then
  echo "=== tests ($(date -u +%T))"
  timeout ${TESTS_TMO:-300} "$B/svdq_gpu_tests" --gtest_filter="${TESTS_FILTER:-*}" > "$OUT/gpu_tests.log" 2>&1 || status=1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|differs" "$OUT/gpu_tests.log" | head -40
fi
echo "=== done status=$status ($(date -u +%T))"
exit $status
