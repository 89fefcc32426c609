"""The package on any machine: import, version, the C++ validation errors as Python exceptions, host arrays refused
before anything runs."""
import re

import numpy as np
import pytest

import svdq
from svdq import _C

from conftest import GPU, TORCH, needs_jax


def test_version_matches_the_library():
    assert re.fullmatch(r"\d+\.\d+\.\d+", svdq.__version__)
    assert svdq.version().startswith(svdq.__version__ + " (commit ")


def test_gpu_available_says_why_not():
    ok, why = svdq.gpu_available()
    assert isinstance(ok, bool)
    assert ok or why  # a reason whenever there is no GPU


def test_workspace_and_scale_sizes():
    # xq, then the swizzled scales at a 256-byte boundary, then d (src/api/ops.cpp's layout)
    m, k, r = 4096, 3072, 32
    sf = svdq.scale_buffer_bytes(m, k)
    assert sf == 4096 * (3072 // 16)
    xq = m * k // 2
    sf_off = (xq + 255) // 256 * 256
    d_off = (sf_off + sf + 255) // 256 * 256
    assert svdq.svdquant_linear_workspace_size(m, k, r) == d_off + m * r * 2
    assert svdq.scale_buffer_bytes(1, 32) == 128 * 4  # padded to 128 rows x 4 columns
    assert svdq.scale_buffer_bytes(3, 64, svdq.LINEAR) == 3 * 4


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: svdq.svdquant_linear_workspace_size(0, 64, 32), r"argument 'm' = 0 must be >= 1"),
        (lambda: svdq.svdquant_linear_workspace_size(4, 48, 32), r"argument 'k' = 48 must be a positive multiple of 32"),
        (lambda: svdq.svdquant_linear_workspace_size(4, 64, 24), r"argument 'rank' = 24 must be a multiple of 16"),
        (lambda: svdq.scale_buffer_bytes(4, 20), r"argument 'k' must be a positive multiple of 16"),
        (lambda: svdq.svdquant_linear_workspace_size(2**62, 2**40, 256), r"overflow|too large"),
    ],
)
def test_rules_are_value_errors_naming_the_argument(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_layout_names_are_checked():
    with pytest.raises(ValueError, match="argument 'layout'"):
        svdq.scale_buffer_bytes(4, 64, "swizzled")


def test_host_arrays_are_refused_by_the_api():
    a = np.zeros((128, 32), np.uint8)
    f = np.ones(1, np.float32)
    x = np.zeros((128, 64), np.uint16)
    with pytest.raises(TypeError, match="argument 'a' is a NumPy array in host memory"):
        svdq.mm_nvfp4_svdquant(a, a, a, a, f, x, x)
    with pytest.raises(TypeError, match="argument 'x' is a NumPy array in host memory"):
        svdq.nvfp4_quantize(x, f)
    with pytest.raises(TypeError, match="argument 'x' is a NumPy array in host memory"):
        svdq.svdquant_linear(x, a, a, f, x[0], x, x, f)


def test_host_arrays_are_refused_by_the_binding_itself():
    a = np.zeros((128, 32), np.uint8)
    f = np.ones(1, np.float32)
    x = np.zeros((128, 64), np.uint16)
    out = np.zeros((128, 128), np.uint16)
    with pytest.raises(TypeError, match=r"mm_nvfp4_svdquant: argument 'a' is a numpy.ndarray in host memory; svdq needs CUDA device memory"):
        _C.mm_nvfp4_svdquant(a, a, a, a, f, x, x, None, out, 0)
    with pytest.raises(TypeError, match=r"svdquant_linear: argument 'x' is a numpy.ndarray in host memory"):
        _C.svdquant_linear(x, a, a, f, x[0], x, x, f, None, out, a, 0)


def test_non_arrays_are_type_errors_naming_the_argument():
    a = np.zeros((128, 32), np.uint8)
    with pytest.raises(TypeError, match=r"nvfp4_quantize: argument 'x' is a builtins.str, not an array"):
        _C.nvfp4_quantize("x", None, a, None, None, 0, 0)
    assert _C.has_exchange_api(a) is False  # NumPy goes through __dlpack__


@needs_jax
def test_jax_host_arrays_are_refused():
    import jax
    import jax.numpy as jnp

    cpu = jax.devices("cpu")[0]
    x = jax.device_put(jnp.zeros((128, 64), jnp.bfloat16), cpu)
    a = jax.device_put(jnp.zeros((128, 32), jnp.uint8), cpu)
    f = jax.device_put(jnp.ones(1, jnp.float32), cpu)
    where = r"is a JAX array on cpu:0 \(host memory\); svdq needs CUDA device memory"
    with pytest.raises(TypeError, match="nvfp4_quantize: argument 'x' " + where):
        svdq.nvfp4_quantize(x, f)
    with pytest.raises(TypeError, match="nvfp4_quantize_smooth: argument 'x' " + where):
        svdq.nvfp4_quantize_smooth(x, x[0], f)
    with pytest.raises(TypeError, match="mm_nvfp4_svdquant: argument 'a' " + where):
        svdq.mm_nvfp4_svdquant(a, a, a, a, f, x, x)
    with pytest.raises(TypeError, match="svdquant_linear: argument 'x' " + where):
        svdq.svdquant_linear(x, a, a, f, x[0], x, x, f)
    # The binding, on svdq's own stream (as the functions call it for JAX) and on a caller's stream.
    with pytest.raises(TypeError, match=r"nvfp4_quantize: argument 'x' is a jax\S* in host memory; svdq needs CUDA"):
        _C.nvfp4_quantize(x, None, f, None, None, 0, None, own_stream=True)
    with pytest.raises(TypeError, match=r"svdquant_linear: argument 'x' is a jax\S* in host memory"):
        _C.svdquant_linear(x, a, a, f, x[0], x, x, f, None, None, None, None, -1, own_stream=True)
    with pytest.raises(TypeError, match=r"mm_nvfp4_svdquant: argument 'a' is a jax\S* in host memory"):
        _C.mm_nvfp4_svdquant(a, a, a, a, f, x, x, None, None, 0)
    with pytest.raises(TypeError, match=r"nvfp4_quantize: argument 'x' is a numpy.ndarray in host memory"):
        _C.nvfp4_quantize(np.zeros((128, 64), np.uint16), None, f, None, None, 0, None, own_stream=True)
    with pytest.raises(TypeError, match=r"nvfp4_quantize: argument 'x' is a builtins.str, not an array"):
        _C.nvfp4_quantize("x", None, f, None, None, 0, None, own_stream=True)


@needs_jax
def test_jax_tracers_are_refused():
    import jax
    import jax.numpy as jnp

    f = jnp.ones(1, jnp.float32)
    with pytest.raises(TypeError, match="nvfp4_quantize: argument 'x' is a JAX tracer: svdq's functions run eagerly"):
        jax.jit(lambda x: svdq.nvfp4_quantize(x, f))(jnp.zeros((128, 64), jnp.bfloat16))


@needs_jax
def test_jax_output_capsule_is_handed_over_once():
    import jax

    from svdq import _api

    host = np.arange(256, dtype=np.uint8).reshape(16, 16)
    capsule = _api._Capsule(host.__dlpack__(), (1, 0))  # (a host array: the GPU path hands over CUDA memory alike)
    assert capsule.__dlpack_device__() == (1, 0)
    y = jax.dlpack.from_dlpack(capsule)
    assert y.dtype == np.uint8 and y.shape == (16, 16)
    assert np.array_equal(np.asarray(y), host)
    with pytest.raises(BufferError, match="handed over already"):
        capsule.__dlpack__()


def test_import_without_jax():
    """svdq imports and refuses host arrays as before where jax cannot be imported."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['jax'] = sys.modules['jaxlib'] = None\n"
            "import numpy as np, svdq\n"
            "try:\n"
            "    svdq.nvfp4_quantize(np.zeros((128, 64), np.uint16), np.ones(1, np.float32))\n"
            "except TypeError as e:\n"
            "    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "argument 'x' is a NumPy array in host memory" in r.stdout, r.stdout


def test_batch_invariant_mode_switches():
    was = svdq.batch_invariant()
    try:
        svdq.set_batch_invariant(True)
        assert svdq.batch_invariant() is True
        svdq.set_batch_invariant(False)
        assert svdq.batch_invariant() is False
        with pytest.raises(TypeError, match="argument 'on' must be a bool"):
            svdq.set_batch_invariant(1)
    finally:
        svdq.set_batch_invariant(was)


def test_batch_invariant_mode_from_the_environment():
    import os
    import subprocess
    import sys

    code = "import svdq; print(svdq.batch_invariant())"
    for value, want in (("1", "True"), ("0", "False"), (None, "False")):
        env = dict(os.environ)
        env.pop("SVDQ_BATCH_INVARIANT", None)
        if value is not None:
            env["SVDQ_BATCH_INVARIANT"] = value
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert r.returncode == 0 and r.stdout.strip() == want, (value, r.stdout, r.stderr)


def test_enable_pdl_must_be_a_bool():
    x = np.zeros((128, 64), np.uint16)
    with pytest.raises(TypeError, match="enable_pdl"):
        svdq.nvfp4_quantize(x, np.ones(1, np.float32), enable_pdl="yes")


def test_unsupported_array_types_are_named():
    with pytest.raises(TypeError, match="arrays of type builtins.list are not supported"):
        svdq.nvfp4_quantize([[0.0] * 64], [1.0])


def test_bench_module_says_what_it_needs():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "svdq.bench"], capture_output=True, text=True)
    assert r.returncode == 2 and "nothing to do" in r.stderr
    r = subprocess.run([sys.executable, "-m", "svdq.bench", "--overhead"], capture_output=True, text=True)
    if TORCH and GPU:  # it has what it needs: it measures
        assert r.returncode == 0 and "host time per call" in r.stdout, r.stdout + r.stderr
    else:
        assert r.returncode == 2 and ("needs torch" in r.stderr or "no CUDA device" in r.stderr)
