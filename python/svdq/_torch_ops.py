"""svdq's ops as torch custom ops (torch.library), with fake implementations: torch.compile(fullgraph=True) traces
them as single nodes and CUDA graphs capture them. Work goes on torch's current stream of the input's device.

    torch.ops.svdq.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, pdl, wcscales=None) -> out
    torch.ops.svdq.mm_nvfp4_svdquant_out(a, b, a_sf, b_sf, alpha, d, l1, bias, out, pdl, wcscales=None) -> None
    torch.ops.svdq.nvfp4_quantize(x, pre_quant_scale, global_scale, layout) -> (xq, sf)
    torch.ops.svdq.svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled,
                                   global_scale, bias, pdl, wcscales=None) -> out

pdl: -1 = SVDQ_PDL decides, 0 / 1 = off / on for the call; layout: 0 = 128x4 swizzled, 1 = linear; wcscales: the
optional per-output-channel scale (float32 [N]) of the main term.
"""

from __future__ import annotations

from typing import Optional, Tuple

ready = False

try:
    import torch
    from torch import Tensor
except ImportError:  # pragma: no cover - torch is optional
    torch = None

if torch is not None and hasattr(torch, "library") and hasattr(torch.library, "custom_op"):
    from . import _C
    from ._api import _scale_shape

    # torch with a DLPack C exchange table (>= 2.10): svdq._C allocates the outputs and finds the current stream.
    _NATIVE = _C.has_exchange_api(torch.empty(0))

    def _stream(t: Tensor) -> int:
        return torch.cuda.current_stream(t.device).cuda_stream

    @torch.library.custom_op("svdq::mm_nvfp4_svdquant", mutates_args=())
    def mm_nvfp4_svdquant(a: Tensor, b: Tensor, a_sf: Tensor, b_sf: Tensor, alpha: Tensor, d: Tensor, l1: Tensor,
                          bias: Optional[Tensor], pdl: int, wcscales: Optional[Tensor] = None) -> Tensor:
        if _NATIVE:
            return _C.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, None, None, pdl, wcscales=wcscales)
        out = torch.empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16, device=a.device)
        _C.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, out, _stream(a), pdl, wcscales=wcscales)
        return out

    @mm_nvfp4_svdquant.register_fake
    def _(a, b, a_sf, b_sf, alpha, d, l1, bias, pdl, wcscales=None):
        return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)

    @torch.library.custom_op("svdq::mm_nvfp4_svdquant_out", mutates_args=("out",))
    def mm_nvfp4_svdquant_out(a: Tensor, b: Tensor, a_sf: Tensor, b_sf: Tensor, alpha: Tensor, d: Tensor, l1: Tensor,
                              bias: Optional[Tensor], out: Tensor, pdl: int,
                              wcscales: Optional[Tensor] = None) -> None:
        _C.mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, out, None if _NATIVE else _stream(a), pdl,
                             wcscales=wcscales)

    @mm_nvfp4_svdquant_out.register_fake
    def _(a, b, a_sf, b_sf, alpha, d, l1, bias, out, pdl, wcscales=None):
        return None

    @torch.library.custom_op("svdq::nvfp4_quantize", mutates_args=())
    def nvfp4_quantize(x: Tensor, pre_quant_scale: Optional[Tensor], global_scale: Tensor,
                       layout: int) -> Tuple[Tensor, Tensor]:
        if _NATIVE:
            return _C.nvfp4_quantize(x, pre_quant_scale, global_scale, None, None, layout, None)
        m, k = x.shape[0], x.shape[1]
        xq = torch.empty((m, k // 2), dtype=torch.uint8, device=x.device)
        sf = torch.empty(_scale_shape(m, k, layout), dtype=torch.uint8, device=x.device)
        _C.nvfp4_quantize(x, pre_quant_scale, global_scale, xq, sf, layout, _stream(x))
        return xq, sf

    @nvfp4_quantize.register_fake
    def _(x, pre_quant_scale, global_scale, layout):
        m, k = x.shape[0], x.shape[1]
        return (x.new_empty((m, k // 2), dtype=torch.uint8), x.new_empty(_scale_shape(m, k, layout), dtype=torch.uint8))

    @torch.library.custom_op("svdq::svdquant_linear", mutates_args=())
    def svdquant_linear(x: Tensor, weight_fp4: Tensor, weight_sf: Tensor, alpha: Tensor, pre_quant_scale: Tensor,
                        l2t_smoothed: Tensor, l1_scaled: Tensor, global_scale: Tensor, bias: Optional[Tensor],
                        pdl: int, wcscales: Optional[Tensor] = None) -> Tensor:
        if _NATIVE:
            return _C.svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled,
                                      global_scale, bias, None, None, None, pdl, wcscales=wcscales)
        out = torch.empty((x.shape[0], weight_fp4.shape[0]), dtype=torch.bfloat16, device=x.device)
        _C.svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled, global_scale, bias,
                           out, None, _stream(x), pdl, wcscales=wcscales)  # (the workspace: svdq's pool)
        return out

    @svdquant_linear.register_fake
    def _(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled, global_scale, bias, pdl,
          wcscales=None):
        return x.new_empty((x.shape[0], weight_fp4.shape[0]), dtype=torch.bfloat16)

    ready = True
