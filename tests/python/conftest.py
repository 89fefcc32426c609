import os

import pytest

import svdq


def _gpu():
    ok, why = svdq.gpu_available()
    return ok, why


GPU, GPU_WHY = _gpu()

try:
    import torch  # noqa: F401

    TORCH, TORCH_WHY = True, ""
except ImportError as e:  # torch is optional
    TORCH, TORCH_WHY = False, f"torch not importable: {e}"

needs_gpu = pytest.mark.skipif(not GPU, reason=f"no CUDA device: {GPU_WHY}")
needs_torch = pytest.mark.skipif(not TORCH, reason=TORCH_WHY or "torch present")
needs_torch_gpu = pytest.mark.skipif(not (TORCH and GPU), reason=TORCH_WHY or f"no CUDA device: {GPU_WHY}")

BUILD_DIR = os.environ.get("SVDQ_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "release"))
