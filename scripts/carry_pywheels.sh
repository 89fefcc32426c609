#!/usr/bin/env bash
# Puts into .carry/pywheels (git-ignored; run after scripts/carry_for_device.sh, which empties .carry) the Python
# wheels the device step `models` installs there and the device image lacks: NVIDIA ModelOpt with the dependencies
# its quantization needs, and diffusers (torch, transformers, safetensors, numpy, scipy, ... are in the image).
# Pinned to the versions tests/data/modelopt_tiny was made with; pure-Python or cp312 manylinux x86_64 wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
dest=.carry/pywheels
rm -rf "$dest" && mkdir -p "$dest"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d "$dest" \
  nvidia-modelopt==0.47.0 diffusers==0.42.1 omegaconf==2.4.0 pulp==3.3.2 pydantic==2.14.4 pydantic-core==2.50.5 \
  annotated-types==0.8.0 typing-inspection==0.4.5 importlib-metadata==10.2.0
ls "$dest"
du -sh "$dest"
