#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer + ASan + UBSan) of the parsers of files a user hands over: arch lists, route
# tables, AOT manifests and the ELF / fatbin / cubin reader behind `svdq census` (tests/fuzz/README.md).
#
#   scripts/fuzz.sh [SECONDS_PER_HARNESS=600] [HARNESS...]      harnesses: arch_list route_table manifest census
#
# Builds into build/fuzz/ with clang++ (no CMake, no GPU, no CUDA library: only the parser sources, the generated
# embedded tables and tests/fuzz/fuzz_stubs.cpp), seeds each corpus from the repository's files (and from an AOT
# package of 9.0a when build/release/svdq can write one), then runs the harnesses FUZZ_PARALLEL (default 2) at a time.
# Corpora grow in build/fuzz/corpus/<harness>/ across runs; tests/fuzz/regressions/<harness>/ inputs are replayed
# as seeds every run. Findings land in build/fuzz/artifacts/<harness>/; logs in build/fuzz/logs/.
# Exit status: 0 when no harness found anything, 1 otherwise (or when the build fails).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${1:-600}
shift || true
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=(arch_list route_table manifest census)
PARALLEL=${FUZZ_PARALLEL:-2}
CXX=${CXX_FUZZ:-clang++}
OUT=build/fuzz
mkdir -p "$OUT"/{obj,bin,gen,seeds,corpus,artifacts,logs}

# --- libFuzzer: ships with clang, but Debian packages its runtime separately ---
probe_libfuzzer() {
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$OUT/probe.cpp"
  "$CXX" -fsanitize=fuzzer,address,undefined "$OUT/probe.cpp" -o "$OUT/probe" > /dev/null 2>&1
}
if ! probe_libfuzzer; then
  echo "fuzz.sh: $CXX cannot link -fsanitize=fuzzer; installing the clang runtime (libclang-rt-14-dev)"
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq libclang-rt-14-dev || $SUDO apt-get install -y -qq libfuzzer-14-dev
  probe_libfuzzer || { echo "fuzz.sh: -fsanitize=fuzzer still does not link" >&2; exit 1; }
fi

# --- build ---
# -fno-sanitize-recover: a UBSan report aborts, so libFuzzer records it as a finding instead of printing and going on.
FLAGS=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -g -O1 -std=c++17
       -I"$ROOT/src" -I"$ROOT/include" -I"$ROOT/kernels" -I"$ROOT/tests/fuzz")
# The generated tables the library embeds (registry and routes need them), written by the same cmake scripts the
# CMakeLists.txt uses; COPY_FILE ONLY_IF_DIFFERENT keeps their timestamps when nothing changed.
cmake -DROOT="$ROOT/kernels" -DOUT="$ROOT/$OUT/gen/embedded_kernels.cpp" -P cmake/embed_kernels.cmake
cmake -DROOT="$ROOT/data/routes" -DOUT="$ROOT/$OUT/gen/embedded_routes.cpp" -P cmake/embed_routes.cmake
LIB_SOURCES=(
  src/package/arch_list.cpp src/package/elf_reader.cpp src/package/fatbin.cpp src/package/elf_census.cpp
  src/package/package.cpp src/package/select.cpp
  src/router/routes.cpp src/router/router.cpp src/registry/registry.cpp
  src/common/error.cpp src/common/env.cpp src/common/json_fields.cpp src/common/knobs.cpp src/common/sha256.cpp
  "$OUT/gen/embedded_kernels.cpp" "$OUT/gen/embedded_routes.cpp" tests/fuzz/fuzz_stubs.cpp
)
# Rebuild an object when its source, any header, this script or the flags changed.
echo "${FLAGS[*]} $CXX" > "$OUT/flags.new"
cmp -s "$OUT/flags.new" "$OUT/flags" || { rm -f "$OUT"/obj/*.o; mv "$OUT/flags.new" "$OUT/flags"; }
compile() {  # source object
  if [ ! -f "$2" ] || [ "$1" -nt "$2" ] ||
     [ -n "$(find src include tests/fuzz -name '*.hpp' -newer "$2" | head -1)" ]; then
    echo "  CXX $1"
    "$CXX" "${FLAGS[@]}" -c "$1" -o "$2"
  fi
}
echo "fuzz.sh: building into $OUT"
OBJS=()
pids=()
for s in "${LIB_SOURCES[@]}"; do
  o="$OUT/obj/$(echo "$s" | tr '/' '_' | sed 's/\.cpp$/.o/')"
  OBJS+=("$o")
  compile "$s" "$o" &
  pids+=($!)
  if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p"; done
rm -f "$OUT/libsvdq_fuzz.a"
ar rcs "$OUT/libsvdq_fuzz.a" "${OBJS[@]}"
for h in "${HARNESSES[@]}"; do
  [ -f "tests/fuzz/fuzz_$h.cpp" ] || { echo "fuzz.sh: no harness tests/fuzz/fuzz_$h.cpp" >&2; exit 1; }
  compile "tests/fuzz/fuzz_$h.cpp" "$OUT/obj/fuzz_$h.o"
  # The archive goes after the harness: only the members a harness needs are linked.
  "$CXX" "${FLAGS[@]}" "$OUT/obj/fuzz_$h.o" "$OUT/libsvdq_fuzz.a" -o "$OUT/bin/fuzz_$h"
done

# --- seeds ---
PKG=$OUT/aot_seed
if [ ! -f "$PKG/build.json" ] && [ -x build/release/svdq ]; then
  echo "fuzz.sh: writing an AOT package of 9.0a for seeds (build/release/svdq aot)"
  timeout 1800 build/release/svdq aot --arch-list 9.0a --out "$PKG" --jobs 1 > "$OUT/logs/aot_seed.log" 2>&1 ||
    { echo "fuzz.sh: svdq aot failed (see $OUT/logs/aot_seed.log); seeding from hand-made inputs only"; rm -rf "$PKG"; }
fi
rm -rf "$OUT/seeds" && mkdir -p "$OUT/seeds"
python3 tests/fuzz/make_seeds.py "$ROOT" "$OUT/seeds" "$PKG"

# --- run ---
run_one() {  # harness
  local h=$1
  mkdir -p "$OUT/corpus/$h" "$OUT/seeds/$h" "$OUT/artifacts/$h" "tests/fuzz/regressions/$h"
  local extra=()
  [ -f "tests/fuzz/dicts/$h.dict" ] && extra+=("-dict=tests/fuzz/dicts/$h.dict")
  # New inputs go to the first directory (the corpus); seeds and regressions are read only.
  local t0=$SECONDS rc=0
  "$OUT/bin/fuzz_$h" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$OUT/artifacts/$h/" "${extra[@]}" \
    "$OUT/corpus/$h" "$OUT/seeds/$h" "tests/fuzz/regressions/$h" > "$OUT/logs/$h.log" 2>&1 || rc=$?
  echo $((SECONDS - t0)) > "$OUT/logs/$h.secs"
  return $rc
}
declare -A RC
echo "fuzz.sh: ${SECS}s per harness, $PARALLEL at a time: ${HARNESSES[*]}"
for h in "${HARNESSES[@]}"; do rm -f "$OUT/artifacts/$h"/* "$OUT/logs/$h".*; done  # findings of this run only
i=0
while [ $i -lt ${#HARNESSES[@]} ]; do
  batch=("${HARNESSES[@]:$i:$PARALLEL}")
  declare -A PID=()
  for h in "${batch[@]}"; do
    run_one "$h" &
    PID[$h]=$!
  done
  for h in "${batch[@]}"; do
    if wait "${PID[$h]}"; then RC[$h]=0; else RC[$h]=$?; fi
  done
  unset PID
  i=$((i + PARALLEL))
done

# --- summary ---
status=0
printf '%-12s %6s %12s %8s %8s %s\n' HARNESS SECS EXECS COV FT FINDINGS
for h in "${HARNESSES[@]}"; do
  log=$OUT/logs/$h.log
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  secs=$(cat "$OUT/logs/$h.secs" 2>/dev/null || true)
  cov=$(grep -oE '^#[0-9]+.*cov: [0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+' | awk '{print $2}' || true)
  ft=$(grep -oE '^#[0-9]+.*ft: [0-9]+' "$log" | tail -1 | grep -oE 'ft: [0-9]+' | awk '{print $2}' || true)
  found=$(find "$OUT/artifacts/$h" -type f | wc -l)
  what="none"
  if [ "${RC[$h]}" != 0 ] || [ "$found" != 0 ]; then
    status=1
    what="rc ${RC[$h]}, $found artifact(s) in $OUT/artifacts/$h: $(grep -m1 -oE 'SUMMARY: [A-Za-z]+: [a-z-]+|FUZZ_CHECK failed at [^ ]+|ERROR: libFuzzer: [a-z -]+' "$log" || echo "see $log")"
  fi
  printf '%-12s %6s %12s %8s %8s %s\n' "$h" "${secs:-?}" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$what"
done
exit $status
