#!/usr/bin/env bash
# The device run behind the closing notes of the foundation and packaging issues: GPU tests, the same under
# compute-sanitizer, AOT packages with JIT disabled (one that serves this device, one that cannot), the full bench.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/release}
OUT=${OUT:-$PWD/.out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
bash scripts/gpu_session.sh "$B" info tests sanitizer
W=$(mktemp -d)
{
  echo "## svdq aot --arch-list \"8.0 9.0a\""; "$B/svdq" aot --arch-list "8.0 9.0a" --out "$W/p1" 2>/dev/null | head -3
  "$B/svdq" census "$W/p1" --expect --max-size 2GiB | tail -2
  J="SVDQ_AOT_DIR=$W/p1 SVDQ_DISABLE_JIT=1 SVDQ_CACHE_DIR=$W/c1"
  echo "## $J svdq doctor"; env $J "$B/svdq" doctor; echo "rc=$?"
  echo "## $J svdq bench (every suite shape, JIT disabled)"
  env $J "$B/svdq" bench --sessions 1 --repeats 2 --warmup 1 --csv "$W/aot.csv" 2>/dev/null | tail -31; echo "rc=$?"
  echo "disk cache dir exists after: $([ -e "$W/c1" ] && echo yes || echo no)"
  echo "## svdq aot --arch-list \"8.0 10.0a\""; "$B/svdq" aot --arch-list "8.0 10.0a" --out "$W/p2" 2>/dev/null | head -1
  J2="SVDQ_AOT_DIR=$W/p2 SVDQ_DISABLE_JIT=1 SVDQ_CACHE_DIR=$W/c2"
  echo "## $J2 svdq verify --shapes 129x3072x3072:r32:b1"; env $J2 "$B/svdq" verify --shapes 129x3072x3072:r32:b1; echo "rc=$?"
  echo "## $J2 svdq doctor"; env $J2 "$B/svdq" doctor; echo "rc=$?"
} > "$OUT/aot.log" 2>&1
tail -60 "$OUT/aot.log"
echo "## full bench"
"$B/svdq" bench --csv "$OUT/bench_full.csv" > "$OUT/bench_full.log" 2> "$OUT/bench_full.err"; echo "bench rc=$?"
cat "$OUT/bench_full.log"
