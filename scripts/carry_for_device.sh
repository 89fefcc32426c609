#!/usr/bin/env bash
# Prepares .carry/ (git-ignored) for a device-machine call: the binaries built here, an AOT package of every
# build for sm_90a, so the H200 spends no time in NVRTC, the bench/micro microbenchmarks built with nvcc, and the
# JSON header the Python wheel's build needs there; with OLD=<commit>, svdq_bits of that commit (step `bits`); with
# BRANCH=<branch or commit>, its svdq and svdq_gpu_tests in .carry/branch and their AOT package in .carry/pkg90_branch
# (run its steps with `.carry/branch` as the binary directory of scripts/device.sh, or `layer_ab`: its layer bench
# against this build's).
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
cp "$B/svdq" "$B/svdq_gpu_tests" "$B/svdq_units" "$B/svdq_bits" .carry/bin/
"$B/svdq" aot --arch-list "9.0a" --out .carry/pkg90 > .carry/aot.log
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p .carry/micro
for f in bench/micro/*.cu; do
  "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels "$f" -o ".carry/micro/$(basename "$f" .cu)"
done
# nlohmann/json.hpp for building the Python wheel there (no Debian packages on that machine):
#   pip wheel . --no-build-isolation -C cmake.define.SVDQ_JSON_INCLUDE=$PWD/.carry/include -w .carry/wheel
mkdir -p .carry/include && cp -r /usr/include/nlohmann .carry/include/
# OLD=<commit>: svdq_bits built from that commit too (the device step `bits` compares the two builds' outputs).
if [ -n "${OLD:-}" ]; then
  old_tree=$(mktemp -d)/svdq_old
  git worktree add -q --detach "$old_tree" "$OLD"
  cp tools/svdq_bits.cpp "$old_tree/tools/"
  printf '\nadd_executable(svdq_bits tools/svdq_bits.cpp)\ntarget_include_directories(svdq_bits PRIVATE src)\n%s\n%s\n' \
    'target_link_libraries(svdq_bits PRIVATE svdq svdq_bench)' \
    'target_link_options(svdq_bits PRIVATE -static-libstdc++ -static-libgcc)' >> "$old_tree/CMakeLists.txt"
  cmake -S "$old_tree" -B "$old_tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT=/usr/local/cuda > /dev/null
  cmake --build "$old_tree/build" --target svdq_bits -j"$(nproc)" > /dev/null
  mkdir -p .carry/old && cp "$old_tree/build/svdq_bits" .carry/old/ && git rev-parse --short "$OLD" > .carry/old/COMMIT
  git worktree remove --force "$old_tree"
fi
if [ -n "${BRANCH:-}" ]; then
  br_tree=$(mktemp -d)/svdq_branch
  git worktree add -q --detach "$br_tree" "$BRANCH"
  cmake -S "$br_tree" -B "$br_tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT=/usr/local/cuda > /dev/null
  cmake --build "$br_tree/build" --target svdq_cli svdq_gpu_tests -j"$(nproc)" > /dev/null
  mkdir -p .carry/branch && cp "$br_tree/build/svdq" "$br_tree/build/svdq_gpu_tests" .carry/branch/
  git rev-parse --short "$BRANCH" > .carry/branch/COMMIT
  .carry/branch/svdq aot --arch-list "9.0a" --out .carry/pkg90_branch > .carry/aot_branch.log
  git worktree remove --force "$br_tree"
fi
du -sh .carry
