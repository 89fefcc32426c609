#!/usr/bin/env bash
# Compiles every build's unit with nvcc for sm_90a, prints ptxas resources, and counts SASS instructions that
# matter (tensor-core ops, local-memory traffic); LOOPS=1 also lists each kernel's loops holding HGMMA or STS with
# their instruction counts (scripts/sass_loops.py). Needs cuobjdump (CUOBJDUMP=<path>; present on the device machine,
# not in the CPU toolkit: the triton wheel's backends/nvidia/bin/cuobjdump also works). SASS_DIR=<dir> keeps each
# build's SASS there as <build>.sass (compare two trees' dirs with `diff -r`: a restructuring that leaves every file
# equal changed no instruction of any build).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build/release}
tmp=$(mktemp -d)
"$BUILD/svdq_units" "$tmp" || exit 1   # writes one .cu per build (rendered unit)
status=0
for f in "$tmp"/*.cu; do
  n=$(basename "$f" .cu)
  [[ -n "${FILTER:-}" && "$n" != *$FILTER* ]] && continue  # FILTER=<substring>: only those builds
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -Xptxas -v -cubin -o "$tmp/$n.cubin" "$f" 2>&1 |
    grep -E "registers|spill" | sed "s/^/$n: /"
  "${CUOBJDUMP:-cuobjdump}" -sass "$tmp/$n.cubin" > "$tmp/$n.sass" || { status=1; continue; }
  [ -n "${SASS_DIR:-}" ] && mkdir -p "$SASS_DIR" && cp "$tmp/$n.sass" "$SASS_DIR/$n.sass"
  printf '%s: HMMA=%s HGMMA=%s LDSM=%s LDL/STL=%s\n' "$n" "$(grep -c HMMA "$tmp/$n.sass")" "$(grep -c HGMMA "$tmp/$n.sass")" \
    "$(grep -c LDSM "$tmp/$n.sass")" "$(grep -cE '\bLDL|\bSTL' "$tmp/$n.sass")"
  if [ "${LOOPS:-0}" = 1 ]; then python3 scripts/sass_loops.py "$tmp/$n.sass" || status=1; fi
done
exit $status   # 1 when a unit did not compile or disassemble
