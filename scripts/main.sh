#!/usr/bin/env bash
# Sets up, builds and runs the main job: `svdq bench` over the default suite (needs a GPU; says so otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH=/usr/local/cuda/bin:$PATH
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
exec ./build/release/svdq bench "$@"
