#!/usr/bin/env bash
# Every GPU step, run on the device machine with binaries built here (scripts/carry_for_device.sh fills .carry/).
#   bash scripts/device.sh [BUILD_DIR] STEP...    BUILD_DIR default build/release; no STEP: tune tests sanitizer bench
# Steps (their knobs); logs under $OUT (default ./.out):
#   info       nvidia-smi, svdq info                 verify   svdq verify
#   sass       scripts/sass_check.sh (FILTER, default sm90, FILTER= every build; LOOPS, CUOBJDUMP)
#   tune       svdq tune of CANDIDATES into TABLE (default $OUT/sm_90a.json; UPDATE, TUNE_SHAPES or GRID: --grid)
#   tests      svdq_gpu_tests (TESTS_FILTER, GTEST_ARGS, TESTS_TMO default 540 s)
#   sanitizer, racecheck, synccheck   the GPU tests under compute-sanitizer memcheck / racecheck / synccheck
#              (SANITIZER_FILTER, SAN_TMO default 540 s, SAN_SHARDS: gtest shards run at once, default 1)
#   bench      A/B of route tables ROUTES_A (default none) vs ROUTES_B (default TABLE) (SESSIONS default 2, SHAPES)
#   suite      plain svdq bench of the default suite (BENCH_ARGS)
#   layer      svdq bench --layer (SESSIONS, SHAPES, WORKLOAD, BENCH_ARGS)   quantize   svdq bench --quantize (SESSIONS, QSHAPES)
#   layer_ab   svdq bench --layer of A_BIN (default .carry/branch, its AOT package A_AOT, default .carry/pkg90_branch)
#              and of this build, in the order A B B A (SESSIONS default 1, SHAPES, WORKLOAD, BENCH_ARGS; --no-fp8)
#   workload   svdq bench --workload WORKLOAD (default llm8b-decode; SESSIONS): the GEMM per row, cuBLAS BF16 / FP8
#   random     svdq bench --random RANDOM_SHAPES (default 24) --seed SEED (default: a fresh one, printed): held-out shapes
#              (with ROUTES_A: the A/B of route tables ROUTES_A and ROUTES_B, default TABLE, on those shapes)
#   final      AOT packages with JIT disabled: "8.0 9.0a" serving this device, "8.0 10.0a" not (aot.log)
#   compare    each candidate tuned alone under a time limit (LARGE_BUILDS / LARGE_SHAPES, SMALL_BUILDS /
#              SMALL_SHAPES, TMO default 60 s, REPEATS default 6)
#   ncu        Nsight Compute of svdq's kernels on SHAPE (TAG, SKIP, COUNT, METRICS, SOURCE=1 with SRC_KERNEL,
#              KERNELS, LINES_SHOWN, NCU_BENCH: bench flags such as --layer)
#   python     the wheel built there (or WHEEL, one built elsewhere), tests/python, python -m svdq.bench --overhead
#   models     (after python) with .carry/pywheels (scripts/carry_pywheels.sh): ModelOpt's tiny export made there by
#              its CUDA fake quantizer (tests/data/make_modelopt_tiny.py), svdq's checkpoint GPU tests on it (SQNR in
#              $OUT/modelopt_gpu/checkpoint_sqnr.json), then examples/flux_transformer.py ($OUT/flux.json)
#   micro      the bench/micro binaries in MICRO (default .carry/micro)
#   bits       svdq_bits of this build against OLD_BITS (default .carry/old/svdq_bits): output hashes of the 30 suite
#              shapes must be equal (the old build compiles its own kernels there)
# Every step: OUT, AOT (an AOT package directory -> SVDQ_AOT_DIR; compare and ncu take .carry/pkg90 when AOT is
# unset), SVDQ_JIT_LOG (default 0), SVDQ_FORCE_BUILD and svdq's other variables. Exit status 0: every step passed.

# shellcheck disable=SC2317  # the step_* functions are called as "step_$w"
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

# --- the preamble, once -----------------------------------------------------------------------------------------
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
OUT=$(abs "${OUT:-.out}"); export OUT; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
export PATH=$PATH:/usr/local/cuda/bin   # nvcc, compute-sanitizer, ncu where the PATH lacks them
export SVDQ_JIT_LOG=${SVDQ_JIT_LOG:-0}
if [ -n "${AOT:-}" ]; then SVDQ_AOT_DIR=$(abs "$AOT"); export SVDQ_AOT_DIR; fi
CARRY_AOT=""; [ -d .carry/pkg90 ] && CARRY_AOT=$PWD/.carry/pkg90   # compare / ncu: the carried package by default
# The GEMM builds routed on sm_90a (the table or the heuristic): the swap-AB program on FP16 A for small M, the
# warp-specialized FP16-B forms above.
CANDIDATES=${CANDIDATES:-sm90_swap_m24_s16_dq8_t4,sm90_swap_m72_s16_dq8_t4,sm90_swap_m72_s8_rs,\
sm90_swap_m136_s6_ss,sm90_swap_m136_s6_rs,sm90_ws_n128_s8_b6,sm90_ws_n256_s8_b5_pairs,\
sm90_ws_n256_s6_b4_pairs_pers,sm90_ws_n256_s6_b4_pairs_pers_idle,\
sm90_ws_n256_s6_b4_pairs_pers_sk,sm90_ws_n256_s6_b4_pairs_pers_trans,\
sm90_ws_n256_s6_b4_pairs_pers_splitb,sm90_ws_n256_s6_b4_pairs_pers_splitb_trans}
TABLE=${TABLE:-$OUT/sm_90a.json}
status=0
# failed WHAT RC: a nonzero RC fails the run and is said (124: stopped by its time limit).
failed() { [ "$2" -eq 0 ] && return 0; status=1; echo "$1: exit $2$([ "$2" -eq 124 ] && echo ' (timed out)')"; }

# --- the steps ----------------------------------------------------------------------------------------------------
step_info() {
  { if command -v nvidia-smi > /dev/null; then
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
    else echo "nvidia-smi: not found"; fi
    "$B/svdq" info; } 2>&1 | tee "$OUT/info.log"
}
step_verify() {
  "$B/svdq" verify 2>&1 | tee "$OUT/verify.log" | tail -20; failed verify "${PIPESTATUS[0]}"
}
step_sass() {
  FILTER=${FILTER-sm90} bash scripts/sass_check.sh "$B" > "$OUT/sass.log" 2>&1 || status=1
  cat "$OUT/sass.log"
}
step_tune() {
  "$B/svdq" tune --builds "$CANDIDATES" --repeats 6 --warmup 2 --out "$TABLE" ${UPDATE:+--update "$UPDATE"} \
    ${TUNE_SHAPES:+--shapes "$TUNE_SHAPES"} ${GRID:+--grid "$GRID"} > "$OUT/tune.log" 2> "$OUT/tune.err" || status=1
  [ "$(dirname "$TABLE")" = "$OUT" ] || cp "$TABLE" "$OUT/" 2> /dev/null  # a table written elsewhere: a copy in the logs
  tail -32 "$OUT/tune.log"; tail -3 "$OUT/tune.err"
}
step_tests() {
  # shellcheck disable=SC2086  # GTEST_ARGS: more gtest flags, split into words
  timeout "${TESTS_TMO:-540}" "$B/svdq_gpu_tests" --gtest_filter="${TESTS_FILTER:-*}" ${GTEST_ARGS:-} \
    > "$OUT/gpu_tests.log" 2>&1
  local rc=$?
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|differs" "$OUT/gpu_tests.log" | head -40
  failed tests "$rc"
}
sanitize() {  # sanitize TOOL LOGNAME: the GPU tests under compute-sanitizer; SAN_SHARDS=N: N gtest shards at once
  local n=${SAN_SHARDS:-1} i rc=0 r
  for ((i = 0; i < n; ++i)); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "${SAN_TMO:-540}" compute-sanitizer --tool "$1" \
      --error-exitcode 99 "$B/svdq_gpu_tests" --gtest_filter="${SANITIZER_FILTER:-*}" > "$OUT/$2_$i.log" 2>&1 &
  done
  for ((i = 0; i < n; ++i)); do wait -n; r=$?; [ "$r" -ne 0 ] && rc=$r; done
  for ((i = 0; i < n; ++i)); do
    echo "$1 shard $i/$n:"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  (FAILED|PASSED) |^\[==========\]" "$OUT/$2_$i.log" | tail -6
  done
  if [ "$rc" -ne 0 ]; then failed "$1" "$rc"; cat "$OUT/$2"_*.log | grep -m20 -E "Invalid|Error|Race|Hazard"; fi
}
step_sanitizer() { sanitize memcheck sanitizer; }
step_racecheck() { sanitize racecheck racecheck; }
step_synccheck() { sanitize synccheck synccheck; }
step_bench() {
  "$B/svdq" bench --routes-a "${ROUTES_A:-none}" --routes-b "${ROUTES_B:-$TABLE}" --sessions "${SESSIONS:-2}" \
    ${SHAPES:+--shapes "$SHAPES"} --csv "$OUT/bench_ab.csv" > "$OUT/bench_ab.log" 2> "$OUT/bench_ab.err" || status=1
  cat "$OUT/bench_ab.log"; tail -3 "$OUT/bench_ab.err"
}
step_suite() {
  # shellcheck disable=SC2086  # BENCH_ARGS: more bench flags, split into words
  "$B/svdq" bench --csv "$OUT/bench_suite.csv" ${BENCH_ARGS:-} > "$OUT/bench_suite.log" 2> "$OUT/bench_suite.err"
  local rc=$?
  cat "$OUT/bench_suite.log"; tail -3 "$OUT/bench_suite.err"; failed suite "$rc"
}
step_layer() {
  local tag=bench_layer${WORKLOAD:+_$WORKLOAD}
  # shellcheck disable=SC2086  # BENCH_ARGS: more bench flags (e.g. --timer events: PDL overlap counts), split into words
  "$B/svdq" bench --layer --sessions "${SESSIONS:-2}" ${SHAPES:+--shapes "$SHAPES"} ${WORKLOAD:+--workload "$WORKLOAD"} \
    ${BENCH_ARGS:-} --csv "$OUT/$tag.csv" > "$OUT/$tag.log" 2> "$OUT/bench_layer.err" || status=1
  cat "$OUT/$tag.log"; tail -3 "$OUT/bench_layer.err"
}
step_layer_ab() {
  local a=${A_BIN:-.carry/branch} a_aot=${A_AOT:-.carry/pkg90_branch} who i=0 bin aot
  [ -x "$a/svdq" ] || { echo "layer_ab: no svdq in $a (BRANCH=<commit> bash scripts/carry_for_device.sh)"; status=1; return; }
  for who in A B B A; do
    i=$((i + 1))
    if [ "$who" = A ]; then bin=$a aot=$(abs "$a_aot"); else bin=$B aot=${SVDQ_AOT_DIR:-}; fi
    echo "--- $who: $bin ($(cat "$bin/COMMIT" 2>/dev/null || echo this build))"
    # shellcheck disable=SC2086  # BENCH_ARGS: more bench flags, split into words
    env ${aot:+SVDQ_AOT_DIR="$aot"} "$bin/svdq" bench --layer --no-fp8 --sessions "${SESSIONS:-1}" ${SHAPES:+--shapes "$SHAPES"} \
      ${WORKLOAD:+--workload "$WORKLOAD"} ${BENCH_ARGS:-} --csv "$OUT/layer_ab_${i}_$who.csv" \
      > "$OUT/layer_ab_${i}_$who.log" 2>> "$OUT/layer_ab.err" || status=1
    tail -16 "$OUT/layer_ab_${i}_$who.log"
  done
}
step_workload() {
  local w=${WORKLOAD:-llm8b-decode}
  "$B/svdq" bench --workload "$w" --sessions "${SESSIONS:-2}" --csv "$OUT/bench_workload_$w.csv" \
    > "$OUT/bench_workload_$w.log" 2> "$OUT/bench_workload.err" || status=1
  cat "$OUT/bench_workload_$w.log"; tail -3 "$OUT/bench_workload.err"
}
step_random() {
  # shellcheck disable=SC2086  # the --routes-a/b pair only with ROUTES_A
  "$B/svdq" bench --random "${RANDOM_SHAPES:-24}" ${SEED:+--seed "$SEED"} \
    ${ROUTES_A:+--routes-a "$ROUTES_A" --routes-b "${ROUTES_B:-$TABLE}"} --csv "$OUT/bench_random.csv" \
    > "$OUT/bench_random.log" 2> "$OUT/bench_random.err" || status=1
  cat "$OUT/bench_random.log"; tail -3 "$OUT/bench_random.err"
}
step_quantize() {
  "$B/svdq" bench --quantize --sessions "${SESSIONS:-2}" \
    --shapes "${QSHAPES:-4096x32x3072,4608x32x12288,4608x32x3072,512x32x12288,1x32x4096}" \
    --csv "$OUT/bench_quantize.csv" > "$OUT/bench_quantize.log" 2>&1 || status=1
  cat "$OUT/bench_quantize.log"
}
step_final() {  # AOT packages with JIT disabled: one that serves this device (its failures fail the run), one that cannot
  local W rc; W=$(mktemp -d)
  local J1=(SVDQ_AOT_DIR="$W/p1" SVDQ_DISABLE_JIT=1 SVDQ_CACHE_DIR="$W/c1")
  local J2=(SVDQ_AOT_DIR="$W/p2" SVDQ_DISABLE_JIT=1 SVDQ_CACHE_DIR="$W/c2")
  {
    echo "## svdq aot --arch-list \"8.0 9.0a\""
    "$B/svdq" aot --arch-list "8.0 9.0a" --out "$W/p1" > "$W/aot1.log" 2>/dev/null; failed "aot 8.0 9.0a" $?
    head -3 "$W/aot1.log"
    "$B/svdq" census "$W/p1" --expect --max-size 2GiB > "$W/census.log"; failed census $?
    tail -2 "$W/census.log"
    echo "## ${J1[*]} svdq doctor"; env "${J1[@]}" "$B/svdq" doctor; rc=$?; echo "rc=$rc"; failed doctor "$rc"
    echo "## ${J1[*]} svdq bench (every suite shape, JIT disabled)"
    env "${J1[@]}" "$B/svdq" bench --sessions 1 --repeats 2 --warmup 1 --csv "$W/aot.csv" 2>/dev/null | tail -31
    rc=$?; echo "rc=$rc"; failed "bench (JIT disabled)" "$rc"
    echo "disk cache dir exists after: $([ -e "$W/c1" ] && echo yes || echo no)"
    echo "## svdq aot --arch-list \"8.0 10.0a\""
    "$B/svdq" aot --arch-list "8.0 10.0a" --out "$W/p2" > "$W/aot2.log" 2>/dev/null; head -1 "$W/aot2.log"
    echo "## ${J2[*]} svdq verify --shapes 129x3072x3072:r32:b1"
    env "${J2[@]}" "$B/svdq" verify --shapes 129x3072x3072:r32:b1; echo "rc=$?"
    echo "## ${J2[*]} svdq doctor"; env "${J2[@]}" "$B/svdq" doctor; echo "rc=$?"
  } > "$OUT/aot.log" 2>&1
  tail -60 "$OUT/aot.log"
  rm -rf "$W"
}
step_compare() {  # one process per candidate under a time limit, so a build that hangs costs TMO seconds, not the call
  local -x SVDQ_AOT_DIR=${SVDQ_AOT_DIR:-$CARRY_AOT}
  local g bv sv b rc any=0 W; W=$(mktemp -d)
  : > "$OUT/compare.log"; : > "$OUT/compare.err"
  for g in LARGE SMALL; do
    bv=${g}_BUILDS sv=${g}_SHAPES
    [ -n "${!bv:-}" ] || continue
    any=1; echo "--- $g"
    for b in ${!bv//,/ }; do
      timeout "${TMO:-60}" "$B/svdq" tune --builds "$b" ${!sv:+--shapes "${!sv}"} --repeats "${REPEATS:-6}" --warmup 2 \
        --out "$W/$b.json" > "$W/$b.log" 2>> "$OUT/compare.err"
      rc=$?
      cat "$W/$b.log" >> "$OUT/compare.log"
      failed "$b" "$rc"
      grep -E '^    ' "$W/$b.log" | awk '{print $2}' | paste -sd' ' | sed "s/^/$b: /"
    done
  done
  [ "$any" = 1 ] || { echo "compare: set LARGE_BUILDS (and LARGE_SHAPES) and/or SMALL_BUILDS (SMALL_SHAPES)"; status=1; }
  rm -rf "$W"
}
step_ncu() {  # sections first; METRICS (raw names) in a second pass, so a name this ncu lacks fails that pass only
  local -x SVDQ_AOT_DIR=${SVDQ_AOT_DIR:-$CARRY_AOT}
  [ -n "${SHAPE:-}" ] || { echo "ncu: SHAPE=MxNxK[:rR][:bB] is required"; status=1; return; }
  local tag=${TAG:-ncu}
  # shellcheck disable=SC2086  # NCU_BENCH: more bench flags (e.g. --layer), split into words
  local run=("$B/svdq" bench ${NCU_BENCH:-} --shapes "$SHAPE" --timer events --sessions 1 --repeats 2 --warmup 1 --csv /tmp/ncu_bench.csv)
  local common=(--clock-control none --cache-control all --kernel-name "${KERNELS:-regex:^svdq_}"
                --launch-skip "${SKIP:-0}" --launch-count "${COUNT:-4}")
  ncu "${common[@]}" --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section LaunchStats --section Occupancy -o "$OUT/$tag" "${run[@]}" > "$OUT/$tag.run.log" 2>&1 || status=1
  ncu -i "$OUT/$tag.ncu-rep" --page details > "$OUT/$tag.txt" 2>&1 || status=1
  if [ "${SOURCE:-0}" = 1 ]; then  # per-SASS-instruction warp stall samples of the first GEMM launch
    ncu --clock-control none --cache-control all --kernel-name "${SRC_KERNEL:-regex:^svdq_sm90}" --launch-count 1 \
      --section WarpStateStats --section SourceCounters -o "$OUT/${tag}_src" "${run[@]}" \
      > "$OUT/${tag}_src.run.log" 2>&1 || status=1
    ncu -i "$OUT/${tag}_src.ncu-rep" --page source --csv --print-source sass > "$OUT/${tag}_src.csv" 2>&1 || status=1
  fi
  if [ -n "${METRICS:-}" ]; then
    ncu "${common[@]}" --metrics "$METRICS" "${run[@]}" > "$OUT/${tag}_metrics.txt" 2>&1 || status=1
  fi
  grep -E "^  [A-Za-z_][A-Za-z0-9_]*.*\\(|svdq_|Duration|Throughput|Bank|Active|Busy|Registers|Shared Memory Configuration|  [a-z_]+__" \
    "$OUT/$tag.txt" ${METRICS:+"$OUT/${tag}_metrics.txt"} | head -"${LINES_SHOWN:-150}"
}
step_python() {  # the wheel built there (cp312, abi3) or WHEEL, installed into a scratch dir, the pytest suite
  rm -rf /tmp/svdq_wheel /tmp/svdq_py && mkdir -p /tmp/svdq_wheel
  if [ -n "${WHEEL:-}" ]; then
    cp "$WHEEL" /tmp/svdq_wheel/ && echo "carried wheel $(basename "$WHEEL")" > "$OUT/python_wheel.log" || status=1
  else
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip wheel . --no-build-isolation --no-deps -q -w /tmp/svdq_wheel \
      -C cmake.define.SVDQ_JSON_INCLUDE="$PWD/.carry/include" > "$OUT/python_wheel.log" 2>&1 || status=1
  fi
  python3 -m pip install -q --no-deps --target /tmp/svdq_py /tmp/svdq_wheel/svdq-*.whl >> "$OUT/python_wheel.log" 2>&1 \
    || status=1
  (repo=$PWD; cd /tmp && PYTHONPATH=/tmp/svdq_py SVDQ_BUILD_DIR=$B SVDQ_TEST_OUT=$OUT python3 -m pytest -q -rs \
    "$repo/tests/python" > "$OUT/pytest.log" 2>&1) || status=1
  PYTHONPATH=/tmp/svdq_py python3 -m svdq.bench --overhead >> "$OUT/pytest.log" 2>&1 || status=1
  tail -25 "$OUT/pytest.log"
}
step_models() {  # ModelOpt's export made on the GPU and loaded by svdq; the FLUX.1 transformer example
  if [ ! -d /tmp/svdq_py ] || [ ! -d .carry/pywheels ]; then
    echo "models: needs the python step first and .carry/pywheels (scripts/carry_pywheels.sh)"; status=1; return
  fi
  rm -rf /tmp/svdq_models && python3 -m pip install -q --no-deps --target /tmp/svdq_models .carry/pywheels/*.whl \
    > "$OUT/models.log" 2>&1 || { status=1; tail -5 "$OUT/models.log"; return; }
  local pp=/tmp/svdq_py:/tmp/svdq_models mo=$OUT/modelopt_gpu
  rm -rf "$mo"
  PYTHONPATH=$pp python3 tests/data/make_modelopt_tiny.py "$mo" >> "$OUT/models.log" 2>&1 || status=1
  (repo=$PWD; cd /tmp && PYTHONPATH=$pp SVDQ_MODELOPT_TINY=$mo SVDQ_TEST_OUT=$mo SVDQ_BUILD_DIR=$B \
    python3 -m pytest -q -rs -s "$repo/tests/python/test_checkpoint_gpu.py" -k modelopt >> "$OUT/models.log" 2>&1) \
    || status=1
  PYTHONPATH=$pp timeout "${FLUX_TMO:-480}" python3 examples/flux_transformer.py --out "$OUT/flux.json" \
    >> "$OUT/models.log" 2>&1 || status=1
  tail -40 "$OUT/models.log"
}
step_bits() {  # SPEC §1's release check: the GEMM's output hash per suite shape, this build against OLD's
  local old=${OLD_BITS:-.carry/old/svdq_bits}
  "$B/svdq_bits" > "$OUT/bits_new.txt" 2> "$OUT/bits.err" || status=1
  if [ -x "$old" ]; then
    env -u SVDQ_AOT_DIR "$old" > "$OUT/bits_old.txt" 2>> "$OUT/bits.err" || status=1
    if diff "$OUT/bits_old.txt" "$OUT/bits_new.txt" > "$OUT/bits.diff"; then
      echo "bitwise identical to $(cat "$(dirname "$old")/COMMIT" 2>/dev/null || echo the old build) on $(wc -l < "$OUT/bits_new.txt") suite shapes"
    else
      echo "outputs differ from the old build:"; cat "$OUT/bits.diff"; status=1
    fi
  else
    echo "no old build at $old (OLD=<commit> bash scripts/carry_for_device.sh makes one)"; status=1
  fi
  tail -3 "$OUT/bits.err"
}

step_micro() {
  local m
  for m in "${MICRO:-.carry/micro}"/*; do
    [ -x "$m" ] || { echo "no microbenchmark binaries in ${MICRO:-.carry/micro}"; status=1; continue; }
    "$m" > "$OUT/micro_$(basename "$m").txt" 2>&1 || status=1
    cat "$OUT/micro_$(basename "$m").txt"
  done
}

# --- arguments: [BUILD_DIR] STEP... -------------------------------------------------------------------------------
is_step() { declare -F "step_$1" > /dev/null; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
case ${1:-} in -h|--help) usage; exit 0 ;; esac
B=build/release
if [ $# -gt 0 ] && ! is_step "$1"; then
  [ -d "$1" ] || { echo "device.sh: '$1' is neither a step nor a build directory (--help lists the steps)" >&2; exit 2; }
  B=$1; shift
fi
B=$(abs "$B")
[ $# -gt 0 ] || set -- tune tests sanitizer bench
for w in "$@"; do
  is_step "$w" || { echo "device.sh: unknown step '$w' (--help lists the steps)" >&2; exit 2; }
done

for w in "$@"; do
  echo "=== $w ($(date -u +%T))"
  "step_$w"
done
echo "=== done status=$status"
exit $status
