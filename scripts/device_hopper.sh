#!/usr/bin/env bash
# The device run behind the Hopper fast-path issue: tune the sm_90a route table, GPU tests, the tests under
# compute-sanitizer, and the bench comparing the heuristic alone (A) with the tuned table (B).
# Usage: scripts/device_hopper.sh [build_dir] [what...]   what: sass tune tests sanitizer racecheck synccheck bench
# layer quantize micro (default: tune tests sanitizer bench); layer: `svdq bench --layer` (SHAPES, WORKLOAD);
# quantize: `svdq bench --quantize` (QSHAPES); python: build the wheel there, run tests/python and
# `python -m svdq.bench --overhead`; micro runs the bench/micro binaries that scripts/carry_for_device.sh built (MICRO, default
# .carry/micro).
# Environment: TABLE (route table written by tune, default $OUT/sm_90a.json), UPDATE (tune updates this table
# instead of writing a fresh one), TUNE_SHAPES / SHAPES (shape lists for tune / bench; default the suite),
# TESTS_FILTER / SANITIZER_FILTER (gtest filters), ROUTES_A / ROUTES_B (bench A/B tables, default none / TABLE),
# SESSIONS (bench passes), FILTER (sass: build-name substring), AOT (an AOT package directory to load modules from
# instead of compiling them with NVRTC there; scripts/carry_for_device.sh makes one), SAN_TMO (seconds the
# sanitizer step may take, default 540).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/release}; shift || true
WHAT=${*:-tune tests sanitizer bench}
OUT=${OUT:-$PWD/.out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
[ -n "${AOT:-}" ] && export SVDQ_AOT_DIR=$PWD/$AOT
# The GEMM builds routed on sm_90a (the table or the heuristic): the swap-AB program on FP16 A for small M, the
# warp-specialized FP16-B forms above.
CANDIDATES=${CANDIDATES:-sm90_a16_bm24_s16_t4_dq8_g4_p4_x2,sm90_a16_bm72_s16_t4_dq8_g4_p4_x2,sm90_a16_bm72_s8_rs,\
sm90_a16_bm136_s6_ss,sm90_a16_bm136_s6_rs,sm90_ws16_bn128_s8_b6,sm90_ws16_bn256_s8_b5_lean_pairs,\
sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi,sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_idle,\
sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_sk,sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_t,\
sm90_ws16_bn256_s6_b4_lean_pers_split_pairs_epi,sm90_ws16_bn256_s6_b4_lean_pers_split_pairs_epi_t}
TABLE=${TABLE:-$OUT/sm_90a.json}
status=0
for w in $WHAT; do
  echo "=== $w ($(date -u +%T))"
  case $w in
    sass) FILTER=${FILTER:-sm90} bash scripts/sass_check.sh "$B" > "$OUT/sass.log" 2>&1 || status=1
          cat "$OUT/sass.log" ;;
    tune) "$B/svdq" tune --builds "$CANDIDATES" --repeats 6 --warmup 2 --out "$TABLE" ${UPDATE:+--update "$UPDATE"} \
            ${TUNE_SHAPES:+--shapes "$TUNE_SHAPES"} > "$OUT/tune.log" 2> "$OUT/tune.err" || status=1
          tail -32 "$OUT/tune.log" ;;
    tests) "$B/svdq_gpu_tests" --gtest_filter="${TESTS_FILTER:-*}" > "$OUT/gpu_tests.log" 2>&1 || status=1
           grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|differs" "$OUT/gpu_tests.log" | head -40 ;;
    sanitizer)
           timeout ${SAN_TMO:-540} compute-sanitizer --tool memcheck --error-exitcode 99 "$B/svdq_gpu_tests" \
             --gtest_filter="${SANITIZER_FILTER:-*}" > "$OUT/sanitizer.log" 2>&1 || status=1
           grep -E "ERROR SUMMARY|^\[  (FAILED|PASSED) |^\[==========\]" "$OUT/sanitizer.log" | tail -8 ;;
    bench) "$B/svdq" bench --routes-a "${ROUTES_A:-none}" --routes-b "${ROUTES_B:-$TABLE}" --sessions ${SESSIONS:-2} \
             ${SHAPES:+--shapes "$SHAPES"} --csv "$OUT/bench_ab.csv" \
             > "$OUT/bench_ab.log" 2> "$OUT/bench_ab.err" || status=1
           cat "$OUT/bench_ab.log"; tail -3 "$OUT/bench_ab.err" ;;
    racecheck|synccheck)
           timeout ${SAN_TMO:-540} compute-sanitizer --tool $w --error-exitcode 99 "$B/svdq_gpu_tests" \
             --gtest_filter="${SANITIZER_FILTER:-*}" > "$OUT/$w.log" 2>&1 || status=1
           grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  (FAILED|PASSED) |^\[==========\]" "$OUT/$w.log" | tail -8 ;;
    layer) "$B/svdq" bench --layer --sessions ${SESSIONS:-2} ${SHAPES:+--shapes "$SHAPES"} ${WORKLOAD:+--workload "$WORKLOAD"} \
             --csv "$OUT/bench_layer${WORKLOAD:+_$WORKLOAD}.csv" > "$OUT/bench_layer${WORKLOAD:+_$WORKLOAD}.log" 2> "$OUT/bench_layer.err" || status=1
           cat "$OUT/bench_layer${WORKLOAD:+_$WORKLOAD}.log"; tail -3 "$OUT/bench_layer.err" ;;
    quantize) "$B/svdq" bench --quantize --sessions ${SESSIONS:-2} \
             --shapes "${QSHAPES:-4096x32x3072,4608x32x12288,4608x32x3072,512x32x12288,1x32x4096}" \
             --csv "$OUT/bench_quantize.csv" > "$OUT/bench_quantize.log" 2>&1 || status=1
           cat "$OUT/bench_quantize.log" ;;
    python) # the wheel built there (cp312, abi3), installed into a scratch dir, and the pytest suite (torch, CuPy on the GPU)
           rm -rf /tmp/svdq_wheel /tmp/svdq_py && mkdir -p /tmp/svdq_wheel
           python3 -m pip wheel . --no-build-isolation --no-deps -q -w /tmp/svdq_wheel \
             -C cmake.define.SVDQ_JSON_INCLUDE=$PWD/.carry/include > "$OUT/python_wheel.log" 2>&1 || status=1
           python3 -m pip install -q --no-deps --target /tmp/svdq_py /tmp/svdq_wheel/svdq-*.whl >> "$OUT/python_wheel.log" 2>&1 || status=1
           (repo=$PWD; cd /tmp && PYTHONPATH=/tmp/svdq_py SVDQ_BUILD_DIR=$repo/$B python3 -m pytest -q -rs "$repo/tests/python" \
             > "$OUT/pytest.log" 2>&1) || status=1
           PYTHONPATH=/tmp/svdq_py python3 -m svdq.bench --overhead >> "$OUT/pytest.log" 2>&1 || status=1
           tail -25 "$OUT/pytest.log" ;;
    micro) for m in "${MICRO:-.carry/micro}"/*; do
             [ -x "$m" ] || { echo "no microbenchmark binaries in ${MICRO:-.carry/micro}"; status=1; continue; }
             "$m" > "$OUT/micro_$(basename "$m").txt" 2>&1 || status=1
             cat "$OUT/micro_$(basename "$m").txt"
           done ;;
  esac
done
echo "=== done status=$status"
exit $status
