#!/usr/bin/env bash
# Installs what svdq needs to build on a fresh Debian machine with the CUDA 13.0 toolkit already present.
# Debian packages only (GoogleTest, nlohmann-json, CLI11, cmake, ninja). Idempotent.
set -euo pipefail
need=()
for p in cmake ninja-build g++ libgtest-dev nlohmann-json3-dev libcli11-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need[@]}"
fi
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "setup: the CUDA toolkit (nvcc, NVRTC, cuBLAS, CUPTI) is required under /usr/local/cuda" >&2; exit 1; }
