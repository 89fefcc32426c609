#!/usr/bin/env bash
# Prepares .carry/ (git-ignored) for a device-machine call: the binaries built here and an AOT package of every
# build for sm_90a, so the H200 spends no time in NVRTC. Name `.carry` in the device call's `carry` list, then run
# e.g. `AOT=.carry/pkg90 bash scripts/device_hopper.sh .carry/bin tests tune`.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/release}
rm -rf .carry && mkdir -p .carry/bin
cp "$B/svdq" "$B/svdq_gpu_tests" "$B/svdq_units" .carry/bin/
"$B/svdq" aot --arch-list "9.0a" --out .carry/pkg90 > .carry/aot.log
du -sh .carry
