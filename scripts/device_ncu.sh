#!/usr/bin/env bash
# Nsight Compute profile of svdq's own kernels (the FP16 copies and the GEMM) for one bench shape, on the device
# machine; reports and their text dumps under $OUT.
# Usage: SHAPE=129x3072x3072:r32:b0 [TAG=name] [SVDQ_FORCE_BUILD=id] [SKIP=n] [COUNT=n] [METRICS=a,b,...]
#        bash scripts/device_ncu.sh [bin_dir]
#   SKIP / COUNT: svdq launches to skip / profile (default 0 / 4: the warm-up op and one timed op, copy + GEMM each).
#   SOURCE=1: a third pass, per-instruction stall samples (SourceCounters) as CSV, <TAG>_src.csv.
#   The sections run first; METRICS (raw metric names) in a second pass, so a name this ncu lacks fails that pass only.
#   KERNELS: the ncu --kernel-name filter (default regex:^svdq_, svdq's kernels only; e.g. regex:. to profile the
#   cuBLAS baselines of the same bench run beside them).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-.carry/bin}
OUT=${OUT:-$PWD/.out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
[ -d .carry/pkg90 ] && export SVDQ_AOT_DIR=$PWD/.carry/pkg90
: "${SHAPE:?SHAPE=MxNxK[:rR][:bB] is required}"
TAG=${TAG:-ncu}
run=("$B/svdq" bench --shapes "$SHAPE" --timer events --sessions 1 --repeats 2 --warmup 1 --csv /tmp/ncu_bench.csv)
common=(--clock-control none --cache-control all --kernel-name "${KERNELS:-regex:^svdq_}" --launch-skip "${SKIP:-0}"
        --launch-count "${COUNT:-4}")
status=0
ncu "${common[@]}" --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --section LaunchStats --section Occupancy -o "$OUT/$TAG" "${run[@]}" > "$OUT/$TAG.run.log" 2>&1 || status=1
ncu -i "$OUT/$TAG.ncu-rep" --page details > "$OUT/$TAG.txt" 2>&1 || status=1
if [ "${SOURCE:-0}" = 1 ]; then  # per-SASS-instruction warp stall samples of the first GEMM launch
  ncu --clock-control none --cache-control all --kernel-name "regex:^svdq_sm90" --launch-count 1 \
    --section WarpStateStats --section SourceCounters -o "$OUT/${TAG}_src" "${run[@]}" \
    > "$OUT/${TAG}_src.run.log" 2>&1 || status=1
  ncu -i "$OUT/${TAG}_src.ncu-rep" --page source --csv --print-source sass > "$OUT/${TAG}_src.csv" 2>&1 || status=1
fi
if [ -n "${METRICS:-}" ]; then
  ncu "${common[@]}" --metrics "$METRICS" "${run[@]}" > "$OUT/${TAG}_metrics.txt" 2>&1 || status=1
fi
grep -E "^  [A-Za-z_][A-Za-z0-9_]*.*\\(|svdq_|Duration|Throughput|Bank|Active|Busy|Registers|Shared Memory Configuration|  [a-z_]+__" \
  "$OUT/$TAG.txt" ${METRICS:+"$OUT/${TAG}_metrics.txt"} | head -${LINES_SHOWN:-150}
exit $status
