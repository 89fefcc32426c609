"""On a GPU with JAX (a CUDA jaxlib) and torch: each of the four functions on JAX arrays returns JAX arrays bitwise
equal to the same call on torch tensors of the same data; JAX inputs still being computed are waited for; the outputs
outlive the inputs and feed later JAX work; the errors of JAX calls. Skipped, with the reason, where JAX has no CUDA
device or torch is missing. (The JAX errors that need no GPU are in test_api.py.)"""
import gc

import numpy as np
import pytest

import svdq
from svdq import _C, quant

from conftest import needs_jax_torch_gpu

try:
    import jax
    import jax.numpy as jnp
    import torch
except ImportError:  # the tests below skip with the reason
    jax = jnp = torch = None


def _bf16(rng, shape, scale):
    """Random BF16 values as their bits (uint16)."""
    return quant.bf16_bits((rng.standard_normal(shape) * scale).astype(np.float32))


def _problem(m, n, k, r, seed, bias=True):
    """One layer's arrays on the host (BF16 as uint16 bits), as SVDQuantLinear passes them."""
    rng = np.random.default_rng(seed)
    x = _bf16(rng, (m, k), 0.5)
    pqs = quant.bf16_bits((rng.random(k) + 0.5).astype(np.float32))
    wb = quant.bf16_bits((rng.standard_normal((n, k)) * 0.05).astype(np.float32))
    gs_w = float(quant.global_scale(np.abs(quant.bf16_value(wb)).max()))
    w, wsf = quant.quantize(wb, gs_w)
    xs = quant.bf16_bits(quant.bf16_value(x) * quant.bf16_value(pqs))  # BF16(x * pqs)
    gs_x = float(quant.global_scale(np.abs(quant.bf16_value(xs)).max()))
    return dict(x=x, pqs=pqs, w=w, wsf=wsf, l2t=_bf16(rng, (k, r), 0.01), l1=_bf16(rng, (n, r), 0.01),
                bias=_bf16(rng, (n,), 1.0) if bias else None, gs=np.array([gs_x], np.float32),
                alpha=np.array([1.0 / (gs_x * gs_w)], np.float32), xs=xs)


def _torch(a):
    """A host array as a torch CUDA tensor (uint16 bits as bfloat16)."""
    if a is None:
        return None
    a = np.ascontiguousarray(a)
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(a).cuda()


def _gpu():
    return jax.devices("cuda")[0]


def _jax(a):
    """A host array as a JAX array on the first CUDA device (uint16 bits as jnp.bfloat16)."""
    if a is None:
        return None
    a = np.ascontiguousarray(a)
    return jax.device_put(a.view(jnp.bfloat16) if a.dtype == np.uint16 else a, _gpu())


def _host(y):
    """A result on the host, BF16 as uint16 bits."""
    if isinstance(y, torch.Tensor):
        torch.cuda.synchronize()
        h = (y.view(torch.int16) if y.dtype == torch.bfloat16 else y).cpu().numpy()
    else:
        h = np.asarray(y)
    return h.view(np.uint16) if h.dtype.itemsize == 2 else h


def _is_jax(y, dtype, shape):
    assert isinstance(y, jax.Array), type(y)
    assert y.dtype == dtype and y.shape == tuple(shape), (y.dtype, y.shape, dtype, shape)
    assert y.devices() == {_gpu()}


LAYER = ("x", "w", "wsf", "alpha", "pqs", "l2t", "l1", "gs", "bias")


@needs_jax_torch_gpu
@pytest.mark.parametrize("m,k", [(1, 64), (77, 3104), (129, 3072)])
def test_quantizers_on_jax_arrays_are_bitwise_the_torch_calls(m, k):
    p = _problem(m, 32, k, 16, seed=m + k)
    for layout in (svdq.SWIZZLED, svdq.LINEAR):
        jq, jsf = svdq.nvfp4_quantize(_jax(p["x"]), _jax(p["gs"]), layout=layout)
        tq, tsf = svdq.nvfp4_quantize(_torch(p["x"]), _torch(p["gs"]), layout=layout)
        _is_jax(jq, jnp.uint8, tq.shape)
        _is_jax(jsf, jnp.uint8, tsf.shape)
        assert np.array_equal(_host(jq), _host(tq)) and np.array_equal(_host(jsf), _host(tsf))
        jq, jsf = svdq.nvfp4_quantize_smooth(_jax(p["x"]), _jax(p["pqs"]), _jax(p["gs"]), layout=layout)
        tq, tsf = svdq.nvfp4_quantize_smooth(_torch(p["x"]), _torch(p["pqs"]), _torch(p["gs"]), layout=layout)
        _is_jax(jq, jnp.uint8, tq.shape)
        _is_jax(jsf, jnp.uint8, tsf.shape)
        assert np.array_equal(_host(jq), _host(tq)) and np.array_equal(_host(jsf), _host(tsf))
        # and both are the host reference's bytes
        rq, rsf = quant.quantize(p["xs"], float(p["gs"][0]), layout)
        assert np.array_equal(_host(jq), rq) and np.array_equal(_host(jsf).reshape(-1), rsf.reshape(-1))


@needs_jax_torch_gpu
@pytest.mark.parametrize("m,bias", [(1, False), (129, True), (512, True)])
def test_mm_nvfp4_svdquant_on_jax_arrays_is_bitwise_the_torch_call(m, bias):
    n, k, r = 256, 1024, 32
    p = _problem(m, n, k, r, seed=m, bias=bias)
    xq, xsf = quant.quantize(p["xs"], float(p["gs"][0]))  # A's codes and swizzled scales
    d = _bf16(np.random.default_rng(m + 1), (m, r), 0.5)
    args = (xq, p["w"], xsf, p["wsf"], p["alpha"], d, p["l1"], p["bias"])
    want = _host(svdq.mm_nvfp4_svdquant(*[_torch(a) for a in args]))
    for pdl in (None, False, True):
        y = svdq.mm_nvfp4_svdquant(*[_jax(a) for a in args], enable_pdl=pdl)
        _is_jax(y, jnp.bfloat16, (m, n))
        assert np.array_equal(_host(y), want), pdl


@needs_jax_torch_gpu
@pytest.mark.parametrize("m,bias", [(1, True), (16, False), (129, True), (4096, True)])
def test_svdquant_linear_on_jax_arrays_is_bitwise_the_torch_call(m, bias):
    n, k, r = 256, 3072, 32
    p = _problem(m, n, k, r, seed=m, bias=bias)
    want = _host(svdq.svdquant_linear(*[_torch(p[name]) for name in LAYER]))
    y = svdq.svdquant_linear(*[_jax(p[name]) for name in LAYER])
    _is_jax(y, jnp.bfloat16, (m, n))
    assert np.array_equal(_host(y), want)


@needs_jax_torch_gpu
def test_jax_inputs_still_being_computed_are_waited_for():
    """x comes out of JAX work that is still running when svdq is called (JAX dispatches asynchronously): svdq's
    stream waits for it (`__dlpack__(stream=...)`), so the result is that of the finished x."""
    m, n, k, r = 4096, 256, 3072, 32
    p = _problem(m, n, k, r, seed=11)
    want = _host(svdq.svdquant_linear(*[_torch(p[name]) for name in LAYER]))
    big = jax.device_put(np.full((4096, 4096), 1e-4, np.float32), _gpu())

    @jax.jit
    def late(x, big):  # x again, once some tens of milliseconds of matrix products are done
        z = big
        for _ in range(24):
            z = z @ big
        return jnp.where(jnp.isfinite(jnp.sum(z)), x, jnp.zeros_like(x))

    j = {name: _jax(p[name]) for name in LAYER}
    late(j["x"], big).block_until_ready()  # (compiled outside the timed call)
    for _ in range(3):
        x = late(j["x"], big)
        y = svdq.svdquant_linear(x, *[j[name] for name in LAYER[1:]])
        assert np.array_equal(_host(y), want)


@needs_jax_torch_gpu
def test_jax_outputs_outlive_their_inputs_and_feed_jax():
    m, n, k, r = 129, 256, 1024, 32
    p = _problem(m, n, k, r, seed=5)
    j = {name: _jax(p[name]) for name in LAYER}
    y = svdq.svdquant_linear(*[j[name] for name in LAYER])
    xq, sf = svdq.nvfp4_quantize(j["x"], j["gs"])
    want_y, want_xq, want_sf = _host(y).copy(), _host(xq).copy(), _host(sf).copy()
    del j
    gc.collect()
    for seed in range(20):  # other calls' outputs, let go at once: their memory goes back to svdq's pool and is reused
        q = _problem(m, n, k, r, seed=100 + seed)
        svdq.svdquant_linear(*[_jax(q[name]) for name in LAYER])
        svdq.nvfp4_quantize(_jax(q["x"]), _jax(q["gs"]))
    gc.collect()
    z = (y.astype(jnp.float32) * 2).block_until_ready()
    assert np.array_equal(_host(y), want_y)
    assert np.array_equal(_host(xq), want_xq) and np.array_equal(_host(sf), want_sf)
    assert np.array_equal(np.asarray(z), quant.bf16_value(want_y) * 2)
    y.delete()  # (JAX gives the buffer back: the capsule's deleter returns it to svdq's pool)
    y2 = svdq.svdquant_linear(*[_jax(p[name]) for name in LAYER])
    assert np.array_equal(_host(y2), want_y)


@needs_jax_torch_gpu
def test_jax_call_errors():
    m, n, k, r = 16, 128, 512, 16
    p = _problem(m, n, k, r, seed=1, bias=False)
    j = {name: _jax(p[name]) for name in LAYER if p[name] is not None}
    xq, xsf = svdq.nvfp4_quantize_smooth(j["x"], j["pqs"], j["gs"])
    d = _jax(_bf16(np.random.default_rng(2), (m, r), 0.5))
    mm = (xq, j["w"], xsf, j["wsf"], j["alpha"], d, j["l1"])
    y = svdq.mm_nvfp4_svdquant(*mm)
    # JAX arrays are immutable: no out=, and the binding writes into no array it is given on its own stream
    with pytest.raises(TypeError, match="mm_nvfp4_svdquant: argument 'out' must be None for JAX arrays"):
        svdq.mm_nvfp4_svdquant(*mm, out=y)
    with pytest.raises(TypeError, match="mm_nvfp4_svdquant: argument 'out' must be None: a call on JAX arrays"):
        _C.mm_nvfp4_svdquant(*mm, None, y, None, -1, own_stream=True)
    with pytest.raises(TypeError, match="argument 'stream' must be None"):
        _C.nvfp4_quantize(j["x"], None, j["gs"], None, None, 0, 0, own_stream=True)
    # dtypes and memory kinds, named per argument
    with pytest.raises(TypeError, match="nvfp4_quantize: argument 'x' has dtype float32, expected bfloat16"):
        svdq.nvfp4_quantize(j["x"].astype(jnp.float32), j["gs"])
    host_gs = jax.device_put(p["gs"], jax.devices("cpu")[0])
    with pytest.raises(TypeError, match=r"nvfp4_quantize: argument 'global_scale' is a jax\S* in host memory"):
        svdq.nvfp4_quantize(j["x"], host_gs)
    # a rule of the library: the same ValueError as for torch tensors
    with pytest.raises(ValueError) as on_jax:
        svdq.nvfp4_quantize(_jax(p["x"][:, :48]), j["gs"])
    with pytest.raises(ValueError) as on_torch:
        svdq.nvfp4_quantize(_torch(p["x"][:, :48]), _torch(p["gs"]))
    assert str(on_jax.value) == str(on_torch.value) and "multiple of 32" in str(on_jax.value)
    with pytest.raises(ValueError, match="must have N rows with N a positive multiple of 32"):
        svdq.svdquant_linear(j["x"], j["w"][:48], j["wsf"], j["alpha"], j["pqs"], j["l2t"], j["l1"][:48], j["gs"])
    # a torch CUDA tensor in a JAX call is read through its __dlpack__(stream=...) too
    tq, tsf = svdq.nvfp4_quantize_smooth(j["x"], j["pqs"], _torch(p["gs"]))
    assert np.array_equal(_host(tq), _host(xq)) and np.array_equal(_host(tsf), _host(xsf))
    # a JAX array in a torch call: refused where JAX exports it read-only, else read like any DLPack array
    try:
        t = svdq.nvfp4_quantize_smooth(_torch(p["x"]), _torch(p["pqs"]), j["gs"])
    except TypeError as e:
        assert "argument 'global_scale'" in str(e) and "read-only" in str(e), e
    else:
        assert np.array_equal(_host(t[0]), _host(xq))
