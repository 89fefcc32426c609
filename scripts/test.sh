#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (CPU tests always; GPU tests skip with a reason without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH=/usr/local/cuda/bin:$PATH
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
ctest --preset release "$@"
