"""FlashInfer's Python signatures over svdq._C: torch, CuPy or JAX arrays in, the caller's array type out.

torch tensors run on torch's current stream (under ``torch.compile`` / ``torch.export`` through svdq's registered
torch ops, so the graph records one op; eager calls go straight to the library, which reads the tensors, allocates the
outputs and finds the stream through torch's DLPack C exchange table); CuPy arrays on CuPy's current stream (BF16
tensors as ``uint16`` arrays: CuPy has no bfloat16). JAX arrays (``jax.Array`` on a CUDA device, BF16 as
``jnp.bfloat16``) name no current stream: a call whose first array is a JAX array runs on a CUDA stream svdq keeps per
device, takes each input through ``__dlpack__(stream=<that stream>)`` (JAX makes the data ready on it), allocates
the outputs from svdq's device memory pool, hands them to JAX as JAX arrays and synchronizes that stream before it
returns: JAX calls are synchronous, and run eagerly (not inside ``jax.jit``). Nothing is copied.
"""

from __future__ import annotations

from . import _C

SWIZZLED = "128x4"
LINEAR = "linear"
_LAYOUTS = {SWIZZLED: 0, LINEAR: 1}


def _framework(x) -> str:
    mod = type(x).__module__
    for name in ("torch", "cupy", "numpy", "jax", "jaxlib"):
        if mod == name or mod.startswith(name + "."):
            return "jax" if name == "jaxlib" else name
    return "other"


def _layout(layout) -> int:
    if layout not in _LAYOUTS:
        raise ValueError(f"argument 'layout' must be one of {sorted(_LAYOUTS)}, got {layout!r}")
    return _LAYOUTS[layout]


def _pdl(enable_pdl) -> int:
    if enable_pdl is None:
        return -1
    if not isinstance(enable_pdl, bool):
        raise TypeError(f"argument 'enable_pdl' must be None or a bool, got {type(enable_pdl).__name__}")
    return int(enable_pdl)


class _Alloc:
    """Allocates outputs in the framework of `like` on its device, and names its current stream; for a JAX array
    (kind "jax"), finds its CUDA device only: svdq._C allocates the outputs of a call on its own stream."""

    def __init__(self, fn: str, like):
        self.kind = _framework(like)
        self.like = like
        if self.kind == "torch":
            import torch

            self.torch = torch
            if like.device.type != "cuda":
                raise TypeError(f"{fn}: argument {_first_arg(fn)!r} is a torch tensor on {like.device}; svdq needs CUDA "
                                "device memory")
            self.stream = torch.cuda.current_stream(like.device).cuda_stream
        elif self.kind == "cupy":
            import cupy

            self.cupy = cupy
            self.stream = cupy.cuda.get_current_stream().ptr
        elif self.kind == "jax":
            self.device = _jax_device(fn, _first_arg(fn), like)
            self.stream = None  # (the call runs on svdq's own stream)
        elif self.kind == "numpy":
            raise TypeError(f"{fn}: argument {_first_arg(fn)!r} is a NumPy array in host memory; svdq needs CUDA "
                            "device memory (a torch CUDA tensor, a CuPy array or a JAX array on a GPU)")
        else:
            raise TypeError(f"{fn}: arrays of type {type(like).__module__}.{type(like).__name__} are not supported; "
                            "pass torch CUDA tensors, CuPy arrays or JAX arrays on a GPU")

    def empty(self, shape, dtype: str):
        if self.kind == "torch":
            t = {"bf16": self.torch.bfloat16, "u8": self.torch.uint8, "f32": self.torch.float32}[dtype]
            return self.torch.empty(shape, dtype=t, device=self.like.device)
        t = {"bf16": "uint16", "u8": "uint8", "f32": "float32"}[dtype]
        with self.cupy.cuda.Device(self.like.device.id):
            return self.cupy.empty(shape, dtype=t)


def _jax_device(fn: str, arg: str, x) -> int:
    """The CUDA device of the JAX array x (a TypeError naming `arg` where x is no concrete JAX array on one GPU)."""
    import jax

    tracer = getattr(getattr(jax, "core", None), "Tracer", ())
    if isinstance(x, tracer):
        raise TypeError(f"{fn}: argument {arg!r} is a JAX tracer: svdq's functions run eagerly on concrete JAX arrays, "
                        "not inside jax.jit, jax.grad or jax.vmap")
    if not isinstance(x, jax.Array):
        raise TypeError(f"{fn}: arrays of type {type(x).__module__}.{type(x).__name__} are not supported; pass torch "
                        "CUDA tensors, CuPy arrays or JAX arrays on a GPU")
    devices = x.devices()
    if len(devices) != 1:
        raise TypeError(f"{fn}: argument {arg!r} is a JAX array spread over {len(devices)} devices; svdq takes arrays "
                        "on one GPU")
    kind, index = x.__dlpack_device__()
    if int(kind) != _DL_CUDA:
        (dev,) = devices
        where = "host memory" if int(kind) == _DL_CPU else f"DLPack device type {int(kind)} memory"
        raise TypeError(f"{fn}: argument {arg!r} is a JAX array on {dev.platform}:{dev.id} ({where}); svdq needs CUDA "
                        "device memory (a JAX array on a GPU)")
    return int(index)


_DL_CPU, _DL_CUDA = 1, 2  # DLPack device types


class _Capsule:
    """One output of a call on svdq's own stream, for jax.dlpack.from_dlpack: the DLPack capsule svdq._C returned
    (device memory from svdq's pool; the capsule's deleter gives it back) and its device. The call synchronized its
    stream before returning, so the data is complete on every stream and the consumer's `stream` needs no wait. The
    capsule is handed out once."""

    __slots__ = ("_capsule", "_device")

    def __init__(self, capsule, device):
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        del stream, max_version  # (complete on every stream; the capsule is DLPack's unversioned one)
        if copy:
            raise BufferError("svdq hands its outputs over without a copy")
        if dl_device is not None and tuple(int(v) for v in dl_device) != self._device:
            raise BufferError(f"svdq's output is on DLPack device {self._device}, not {tuple(dl_device)}")
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise BufferError("svdq's output was handed over already")
        return capsule

    def __dlpack_device__(self):
        return self._device


def _to_jax(capsule, device: int):
    """The JAX array over one output capsule of svdq._C (own_stream=True) on CUDA device `device`: no copy."""
    import jax.dlpack

    return jax.dlpack.from_dlpack(_Capsule(capsule, (_DL_CUDA, device)))


_NATIVE = {}  # array type -> whether svdq._C allocates outputs and finds the stream for it


def _never() -> bool:
    return False


_compiling = _never  # torch.compiler.is_compiling once a torch type was seen: the fast path checks it per call


def _native(x) -> bool:
    """Whether x's framework has a DLPack C exchange table (torch >= 2.10): then svdq._C takes the call whole. The
    answer is kept per type, and the entry points' first line takes eager calls of such types straight to svdq._C."""
    global _compiling
    t = type(x)
    r = _NATIVE.get(t)
    if r is None:
        if _framework(x) == "torch":
            import torch

            _compiling = torch.compiler.is_compiling
        r = _NATIVE[t] = _C.has_exchange_api(x)
    return r


def _first_arg(fn: str) -> str:
    return {"mm_nvfp4_svdquant": "a"}.get(fn, "x")


def _scale_shape(rows: int, k: int, layout: int):
    if layout == 0:
        return ((rows + 127) // 128 * 128, (k // 16 + 3) // 4 * 4)
    return (rows, k // 16)


def _use_torch_op(fn: str, x) -> bool:
    """Whether this call goes through torch.ops.svdq: torch tensors under torch.compile / torch.export, where the
    registered op (with its fake implementation) is what gets traced. Eager calls go straight to the library (the
    custom op's Python dispatch costs tens of µs of host time a call), and _Alloc checks their device."""
    if _framework(x) != "torch":
        return False
    import torch

    if not torch.compiler.is_compiling():
        return False
    if x.device.type != "cuda":  # before the op: its own message would name DLPack's device code
        raise TypeError(f"{fn}: argument {_first_arg(fn)!r} is a torch tensor on {x.device}; svdq needs CUDA device "
                        "memory")
    from . import _torch_ops  # registers the ops on first use

    return _torch_ops.ready


def mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias=None, out=None, enable_pdl=None, wcscales=None):
    """out[m, n] = BF16(alpha * (deq(a) @ deq(b).T + d @ l1.T) + bias[n])  (SPEC §1).

    a uint8 [M, K/2], b uint8 [N, K/2] (packed E2M1), a_sf / b_sf uint8 (E4M3, 128x4 swizzled), alpha float32 [1]
    (device), d bfloat16 [M, r], l1 bfloat16 [N, r], bias bfloat16 [N] or None; returns out bfloat16 [M, N] (or
    writes `out`). wcscales (svdq's addition after FlashInfer's arguments): float32 [N] or None, a per-output-channel
    scale of the main term: out = BF16(alpha * (wcscales[n] * deq(a) @ deq(b).T + d @ l1.T) + bias[n])."""
    if _NATIVE.get(type(a)) and not _compiling():  # an eager torch call: straight to the library
        return _C.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, out, None,
                                    -1 if enable_pdl is None else _pdl(enable_pdl), wcscales=wcscales)
    pdl = _pdl(enable_pdl)
    if _use_torch_op("mm_nvfp4_svdquant", a):
        import torch

        if out is None:
            return torch.ops.svdq.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, pdl, wcscales)
        torch.ops.svdq.mm_nvfp4_svdquant_out(a, b, a_sf, b_sf, alpha, d, l1, bias, out, pdl, wcscales)
        return out
    if _native(a):
        return _C.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, out, None, pdl, wcscales=wcscales)
    alloc = _Alloc("mm_nvfp4_svdquant", a)
    if alloc.kind == "jax":
        if out is not None:
            raise TypeError("mm_nvfp4_svdquant: argument 'out' must be None for JAX arrays (they are immutable): the "
                            "result comes back as a new array")
        y = _C.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, None, None, pdl, own_stream=True,
                                 wcscales=wcscales)
        return _to_jax(y, alloc.device)
    if out is None:
        out = alloc.empty((a.shape[0], b.shape[0]), "bf16")
    _C.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, out, alloc.stream, pdl, wcscales=wcscales)
    return out


def _quantize(fn, x, pqs, global_scale, layout, enable_pdl):
    if _NATIVE.get(type(x)) and not _compiling() and enable_pdl is None:  # an eager torch call: straight to the library
        return _C.nvfp4_quantize(x, pqs, global_scale, None, None, _layout(layout), None)
    lay = _layout(layout)
    pdl = _pdl(enable_pdl)
    del pdl  # one launch, nothing to overlap with
    if _use_torch_op(fn, x):
        import torch

        return torch.ops.svdq.nvfp4_quantize(x, pqs, global_scale, lay)
    if _native(x):
        return _C.nvfp4_quantize(x, pqs, global_scale, None, None, lay, None)
    alloc = _Alloc(fn, x)
    if alloc.kind == "jax":
        xq, sf = _C.nvfp4_quantize(x, pqs, global_scale, None, None, lay, None, own_stream=True)
        return _to_jax(xq, alloc.device), _to_jax(sf, alloc.device)
    m, k = x.shape[0], x.shape[1]
    xq = alloc.empty((m, k // 2), "u8")
    sf = alloc.empty(_scale_shape(m, k, lay), "u8")
    _C.nvfp4_quantize(x, pqs, global_scale, xq, sf, lay, alloc.stream)
    return xq, sf


def nvfp4_quantize(x, global_scale, layout=SWIZZLED, enable_pdl=None):
    """(xq, sf) = the SPEC §1 NVFP4 quantization of x (bfloat16 [M, K], K % 32 == 0) with the device scalar
    global_scale (float32 [1]); xq uint8 [M, K/2], sf uint8 in `layout` ("128x4": [ceil(M/128)*128, ceil(K/64)*4]
    with zero padding; "linear": [M, K/16])."""
    return _quantize("nvfp4_quantize", x, None, global_scale, layout, enable_pdl)


def nvfp4_quantize_smooth(x, pre_quant_scale, global_scale, layout=SWIZZLED, enable_pdl=None):
    """As nvfp4_quantize of BF16(x * pre_quant_scale) (bfloat16 [K]); the product is rounded to BF16 first."""
    return _quantize("nvfp4_quantize_smooth", x, pre_quant_scale, global_scale, layout, enable_pdl)


def svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled, global_scale, bias=None,
                    enable_pdl=None, wcscales=None):
    """The whole SVDQuant layer, y = (x * pqs) @ (R + L1 L2).T + bias, from bfloat16 x [M, K]: one pass over x
    (NVFP4 codes and scales of x * pqs, d = x @ l2t_smoothed), then the fused GEMM. Returns bfloat16 [M, N].
    wcscales: float32 [N] or None, the GEMM's per-output-channel scale of the main term (see mm_nvfp4_svdquant)."""
    if _NATIVE.get(type(x)) and not _compiling():  # an eager torch call: straight to the library
        return _C.svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled,
                                  global_scale, bias, None, None, None, -1 if enable_pdl is None else _pdl(enable_pdl),
                                  wcscales=wcscales)
    pdl = _pdl(enable_pdl)
    if _use_torch_op("svdquant_linear", x):
        import torch

        return torch.ops.svdq.svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed,
                                              l1_scaled, global_scale, bias, pdl, wcscales)
    if _native(x):
        return _C.svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled,
                                  global_scale, bias, None, None, None, pdl, wcscales=wcscales)
    alloc = _Alloc("svdquant_linear", x)
    if alloc.kind == "jax":
        y = _C.svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled, global_scale,
                               bias, None, None, None, pdl, own_stream=True, wcscales=wcscales)
        return _to_jax(y, alloc.device)
    out = alloc.empty((x.shape[0], weight_fp4.shape[0]), "bf16")
    # (no workspace: the library takes it from svdq's stream-ordered pool)
    _C.svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled, global_scale, bias,
                       out, None, alloc.stream, pdl, wcscales=wcscales)
    return out


def svdquant_linear_workspace_size(m: int, k: int, rank: int) -> int:
    """Bytes of device workspace svdquant_linear takes for M rows, K columns and rank r."""
    return _C.svdquant_linear_workspace_size(m, k, rank)


def scale_buffer_bytes(rows: int, k: int, layout=SWIZZLED) -> int:
    """Bytes of a scale buffer for `rows` rows and K columns in `layout`."""
    return _C.scale_buffer_bytes(rows, k, _layout(layout))


def set_batch_invariant(on: bool) -> None:
    """SPEC §1 batch-invariant mode, process-wide: while on, every call routes only programs of the canonical order,
    so an output row does not depend on M or on the other rows. Off by default (SVDQ_BATCH_INVARIANT=1 at start)."""
    if not isinstance(on, bool):
        raise TypeError(f"argument 'on' must be a bool, got {type(on).__name__}")
    _C.set_batch_invariant(on)


def batch_invariant() -> bool:
    """Whether batch-invariant mode is on (set_batch_invariant)."""
    return _C.batch_invariant()


def gpu_available():
    """(True, "") when a CUDA device is usable, else (False, the reason)."""
    return _C.gpu_available()


def device_info() -> dict:
    """The current device: name, compute capability, SMs, L2, driver and runtime versions."""
    return _C.device_info()
