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

# JAX takes 75 % of a GPU's memory at its first use unless told otherwise: the torch tests beside it need some.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
try:
    import jax

    JAX, JAX_WHY = True, ""
except ImportError as e:  # jax is optional
    jax = None
    JAX, JAX_WHY = False, f"jax not importable: {e}"


def _jax_gpu():
    if not JAX:
        return False, JAX_WHY
    if not GPU:
        return False, f"no CUDA device: {GPU_WHY}"
    try:
        if jax.devices("cuda"):
            return True, ""
    except Exception as e:  # a CPU-only jaxlib (RuntimeError: unknown backend), a broken plugin
        return False, f"jax has no CUDA backend: {e}"
    return False, "jax lists no CUDA device"


JAX_GPU, JAX_GPU_WHY = _jax_gpu()

needs_gpu = pytest.mark.skipif(not GPU, reason=f"no CUDA device: {GPU_WHY}")
needs_torch = pytest.mark.skipif(not TORCH, reason=TORCH_WHY or "torch present")
needs_torch_gpu = pytest.mark.skipif(not (TORCH and GPU), reason=TORCH_WHY or f"no CUDA device: {GPU_WHY}")
needs_jax = pytest.mark.skipif(not JAX, reason=JAX_WHY or "jax present")
needs_jax_torch_gpu = pytest.mark.skipif(not (JAX_GPU and TORCH), reason=JAX_GPU_WHY or TORCH_WHY or "present")

BUILD_DIR = os.environ.get("SVDQ_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "release"))
