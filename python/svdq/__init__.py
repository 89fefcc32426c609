"""svdq: the NVFP4 SVDQuant linear layer, out = BF16(alpha·(deq(A)·deq(B)ᵀ + D·L1ᵀ) + bias), on Hopper (sm_90a) and
any sm_80+ GPU, with FlashInfer's function names and signatures:

    svdq.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias=None, out=None, enable_pdl=None)
    svdq.nvfp4_quantize(x, global_scale, layout="128x4", enable_pdl=None) -> (xq, sf)
    svdq.nvfp4_quantize_smooth(x, pre_quant_scale, global_scale, layout="128x4", enable_pdl=None) -> (xq, sf)
    svdq.svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled, global_scale,
                         bias=None, enable_pdl=None)

Arrays are torch CUDA tensors, CuPy arrays or JAX arrays on a GPU (through DLPack, no copies); results come back in
the caller's type, computed on its current stream (JAX, which names none: on a stream svdq keeps per device, the call
returning once the results are complete). With torch installed the ops are torch custom ops (torch.ops.svdq.*) with
fake implementations, which torch.compile traces; eager calls go straight to the library. svdq.nn holds SVDQuantLinear
and quantize_model; svdq.quant the host-side quantization of weights.
Kernels are compiled at first use with NVRTC and cached on disk (SVDQ_CACHE_DIR).
"""

try:
    from . import _C
except ImportError as e:  # name what is missing instead of a bare loader error
    if "libnvrtc" in str(e):
        raise ImportError(
            "svdq needs NVRTC 13 (libnvrtc.so.13) at run time: install the CUDA 13 toolkit (its lib64 on the loader "
            "path) or the pip wheel nvidia-cuda-nvrtc (cu13); loader said: " + str(e)) from e
    raise
from ._api import (
    LINEAR,
    SWIZZLED,
    batch_invariant,
    device_info,
    gpu_available,
    mm_nvfp4_svdquant,
    nvfp4_quantize,
    nvfp4_quantize_smooth,
    scale_buffer_bytes,
    set_batch_invariant,
    svdquant_linear,
    svdquant_linear_workspace_size,
)

__version__ = _C.version().split(" ")[0]
version = _C.version  # "0.1.0 (commit ...)"

from ._cubin import attach as _attach_cubins  # noqa: E402

cubin_package = _attach_cubins(__version__)  # the cubin wheel's AOT package directory, or None

__all__ = [
    "LINEAR",
    "SWIZZLED",
    "batch_invariant",
    "device_info",
    "gpu_available",
    "mm_nvfp4_svdquant",
    "nvfp4_quantize",
    "nvfp4_quantize_smooth",
    "scale_buffer_bytes",
    "set_batch_invariant",
    "svdquant_linear",
    "svdquant_linear_workspace_size",
    "version",
]
