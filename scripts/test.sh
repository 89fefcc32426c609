#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite: the C++ tests (CPU tests always; GPU tests skip with a reason without
# a GPU), then the Python package: a wheel built from this tree, installed into a fresh virtual environment, and its
# pytest suite (torch / GPU tests skip with the reason where torch or a GPU is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH=/usr/local/cuda/bin:$PATH
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
ctest --preset release "$@"
if ! build/release/svdq info >/dev/null 2>&1; then
  echo "test.sh: no usable CUDA device here: the GPU tests (ctest label gpu) were skipped one by one, not run;" \
       "the GPU cases of the pytest suite below skip the same way"
fi

# Python (pinned build and test dependencies from PyPI).
PY=${PYTHON:-python3}
rm -rf build/venv build/wheel
"$PY" -m venv build/venv
build/venv/bin/pip install -q --disable-pip-version-check numpy==2.4.6 pytest==9.2.0 nanobind==3.1.0 \
  scikit-build-core==1.1.2
build/venv/bin/pip wheel . -w build/wheel --no-build-isolation --no-deps -q --disable-pip-version-check
build/venv/bin/pip install -q --no-deps --force-reinstall --disable-pip-version-check build/wheel/svdq-*.whl
# From build/, so `import svdq` is the installed wheel, not python/svdq.
cd build && SVDQ_BUILD_DIR=$PWD/release SVDQ_WHEEL_DIR=$PWD/wheel venv/bin/python -m pytest -q -rs ../tests/python
