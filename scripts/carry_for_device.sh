#!/usr/bin/env bash
# Prepares .carry/ (git-ignored) for a device-machine call: the binaries built here, an AOT package of every
# build for sm_90a, so the H200 spends no time in NVRTC, the bench/micro microbenchmarks built with nvcc, and the
# JSON header the Python wheel's build needs there.
# Name `.carry` in the device call's `carry` list, then run
# e.g. `AOT=.carry/pkg90 bash scripts/device.sh .carry/bin tests tune`.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/release}
# The commit shown by `svdq info` / bench CSVs is read at configure time: reconfigure and rebuild the default tree
# so the binaries carried name the commit they were built from.
if [ "$B" = build/release ]; then
  cmake --preset release > /dev/null && cmake --build --preset release -j"$(nproc)" > /dev/null
fi
rm -rf .carry && mkdir -p .carry/bin
cp "$B/svdq" "$B/svdq_gpu_tests" "$B/svdq_units" .carry/bin/
"$B/svdq" aot --arch-list "9.0a" --out .carry/pkg90 > .carry/aot.log
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p .carry/micro
for f in bench/micro/*.cu; do
  "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels "$f" -o ".carry/micro/$(basename "$f" .cu)"
done
# nlohmann/json.hpp for building the Python wheel there (no Debian packages on that machine):
#   pip wheel . --no-build-isolation -C cmake.define.SVDQ_JSON_INCLUDE=$PWD/.carry/include -w .carry/wheel
mkdir -p .carry/include && cp -r /usr/include/nlohmann .carry/include/
du -sh .carry
