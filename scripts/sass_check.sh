#!/usr/bin/env bash
# Compiles every build's unit with nvcc for sm_90a, prints ptxas resources, and counts SASS instructions that
# matter (tensor-core ops, local-memory traffic). Needs cuobjdump (present on the device machine, not on CPU CI).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
tmp=$(mktemp -d)
"$BUILD/svdq_units" "$tmp"   # writes one .cu per build (rendered unit)
for f in "$tmp"/*.cu; do
  n=$(basename "$f" .cu)
  [[ -n "${FILTER:-}" && "$n" != *$FILTER* ]] && continue  # FILTER=<substring>: only those builds
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -Xptxas -v -cubin -o "$tmp/$n.cubin" "$f" 2>&1 |
    grep -E "registers|spill" | sed "s/^/$n: /"
  cuobjdump -sass "$tmp/$n.cubin" > "$tmp/$n.sass"
  printf '%s: HMMA=%s HGMMA=%s LDSM=%s LDL/STL=%s\n' "$n" "$(grep -c HMMA "$tmp/$n.sass")" "$(grep -c HGMMA "$tmp/$n.sass")" \
    "$(grep -c LDSM "$tmp/$n.sass")" "$(grep -cE '\bLDL|\bSTL' "$tmp/$n.sass")"
done
