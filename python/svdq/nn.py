"""torch modules: SVDQuantLinear (a quantized nn.Linear whose forward is svdquant_linear) and quantize_model."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch

from . import _torch_ops  # noqa: F401  (registers torch.ops.svdq)
from . import quant
from ._api import nvfp4_quantize, svdquant_linear

_Q = 448.0 * 6.0


class SVDQuantLinear(torch.nn.Module):
    """y = x̂ @ (R + L1 L2)ᵀ + bias with x̂ = x · pre_quant_scale; R in NVFP4, L1 L2 the rank-r BF16 branch.

    Buffers (all in state_dict, so the module round-trips through safetensors):
      qweight uint8 [N, K/2], wscales uint8 (128x4 swizzled), weight_global_scale float32 [1],
      pre_quant_scale bfloat16 [K], l2t_smoothed bfloat16 [K, r], l1 bfloat16 [N, r] (not divided by alpha),
      input_global_scale float32 [1] (0: the activations' global scale is computed from each input, 448·6/amax),
      alpha float32 [1] and l1_scaled bfloat16 [N, r] (precomputed for a fixed input scale), bias bfloat16 [N], and
      wcscales float32 [N] where the layer has a per-output-channel scale of the main term (Nunchaku; else None).
    """

    def __init__(self, in_features: int, out_features: int, rank: int = 32, bias: bool = True, device=None):
        super().__init__()
        if in_features % 32 or out_features % 32:
            raise ValueError(f"SVDQuantLinear: in_features ({in_features}) and out_features ({out_features}) must be "
                             "multiples of 32")
        if rank % 16 or not 16 <= rank <= 256:
            raise ValueError(f"SVDQuantLinear: rank ({rank}) must be a multiple of 16 in [16, 256]")
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        k, n = in_features, out_features
        rows, cols = (n + 127) // 128 * 128, (k // 16 + 3) // 4 * 4
        u8, bf, f32 = torch.uint8, torch.bfloat16, torch.float32
        self.register_buffer("qweight", torch.zeros((n, k // 2), dtype=u8, device=device))
        self.register_buffer("wscales", torch.zeros((rows, cols), dtype=u8, device=device))
        self.register_buffer("weight_global_scale", torch.ones(1, dtype=f32, device=device))
        self.register_buffer("pre_quant_scale", torch.ones(k, dtype=bf, device=device))
        self.register_buffer("l2t_smoothed", torch.zeros((k, rank), dtype=bf, device=device))
        self.register_buffer("l1", torch.zeros((n, rank), dtype=bf, device=device))
        self.register_buffer("input_global_scale", torch.zeros(1, dtype=f32, device=device))
        self.register_buffer("alpha", torch.ones(1, dtype=f32, device=device))
        self.register_buffer("l1_scaled", torch.zeros((n, rank), dtype=bf, device=device))
        self.register_buffer("bias", torch.zeros(n, dtype=bf, device=device) if bias else None)
        self.register_buffer("wcscales", None)
        self._dynamic = True

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}, "
                f"bias={self.bias is not None}, input_scale={'dynamic' if self._dynamic else 'fixed'}")

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, rank: int = 32, smooth=None,
                    input_amax: Optional[float] = None) -> "SVDQuantLinear":
        """SVDQuant post-training quantization of `linear` (see svdq.quant.svdquant_weight): smoothing by `smooth`
        (per input channel, the activations divided by it), the rank-`rank` SVD of the smoothed weight in BF16, the
        residual in NVFP4 with its global scale. input_amax: the calibrated max |x · pre_quant_scale| of the
        activations (fixes the activation global scale, alpha and l1_scaled); None computes it from each input.
        A weight on a CUDA device is quantized there (torch's SVD in FP32, the residual by svdq.nvfp4_quantize: the
        same quantizer, byte for byte, as the host's); one in host memory by NumPy (FP64 SVD)."""
        dev = linear.weight.device
        if dev.type == "cuda":
            t = _svdquant_weight_cuda(linear.weight.detach(), rank, smooth)
        else:
            w = linear.weight.detach().to(torch.float64).cpu().numpy()
            s = None if smooth is None else torch.as_tensor(smooth).detach().to(torch.float64).cpu().numpy()
            t = quant.svdquant_weight(w, rank=rank, smooth=s)
        m = cls(linear.in_features, linear.out_features, rank=rank, bias=linear.bias is not None, device=dev)
        with torch.no_grad():
            if isinstance(t["qweight"], torch.Tensor):  # (quantized on the GPU)
                for name in ("qweight", "wscales", "pre_quant_scale", "l2t_smoothed", "l1"):
                    getattr(m, name).copy_(t[name])
            else:
                m.qweight.copy_(torch.from_numpy(t["qweight"]))
                m.wscales.copy_(torch.from_numpy(t["wscales"]))
                m.pre_quant_scale.copy_(torch.from_numpy(t["pre_quant_scale"].view(np.int16)).view(torch.bfloat16))
                m.l2t_smoothed.copy_(torch.from_numpy(t["l2t_smoothed"].view(np.int16)).view(torch.bfloat16))
                m.l1.copy_(torch.from_numpy(t["l1"]).to(torch.bfloat16))
            m.weight_global_scale.fill_(float(t["weight_global_scale"]))
            if linear.bias is not None:
                m.bias.copy_(linear.bias.detach().to(torch.bfloat16))
        if input_amax is not None:
            m.set_input_amax(input_amax)
        return m

    @classmethod
    def from_checkpoint(cls, layer: dict, device=None, name: str = "layer") -> "SVDQuantLinear":
        """A layer of svdq.checkpoint.load(...).layers ({tensor name: svdq.checkpoint.Tensor}, svdq's layout) as a
        module on `device`. A fixed input_global_scale (> 0) keeps the activations' global scale fixed, as the
        producer calibrated it; 0 computes it from each input."""
        from . import checkpoint as ck

        n, k2 = layer["qweight"].shape
        m = cls(2 * k2, n, rank=int(layer["l1"].shape[1]), bias="bias" in layer, device=device)
        if "wcscales" in layer:
            m.wcscales = torch.ones(n, dtype=torch.float32, device=device)
        sd = {s: _torch_tensor(v) for s, v in layer.items()}
        missing = [s for s in ck.LAYER_TENSORS if s not in sd]
        if missing:
            raise ck.CheckpointError(f"{name}: tensors {missing} are missing")
        m.load_state_dict(sd, strict=True)
        return m

    def set_input_amax(self, input_amax: Optional[float]) -> None:
        """Fixes the activations' global scale at 448·6 / input_amax (None: compute it from each input)."""
        with torch.no_grad():
            if input_amax is None:
                self.input_global_scale.zero_()
                self._dynamic = True
                return
            if not input_amax > 0:
                raise ValueError(f"argument 'input_amax' must be positive, got {input_amax}")
            gs = float(np.float32(_Q / float(input_amax)))
            self.input_global_scale.fill_(gs)
            self.alpha.copy_(1.0 / (self.input_global_scale * self.weight_global_scale))
            self.l1_scaled.copy_((self.l1.float() / self.alpha).to(torch.bfloat16))
            self._dynamic = False

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if prefix + "wcscales" in state_dict and self.wcscales is None:  # a layer with a per-channel scale
            self.wcscales = torch.ones(self.out_features, dtype=torch.float32, device=self.qweight.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        gs = state_dict.get(prefix + "input_global_scale")
        if gs is not None:
            self._dynamic = not bool(gs.detach().cpu().reshape(-1)[0] > 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"SVDQuantLinear: input has {x.shape[-1]} features, expected {self.in_features}")
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features).to(torch.bfloat16).contiguous()
        if self._dynamic:
            xs = (x2.float() * self.pre_quant_scale.float()).abs().amax().clamp_min(1e-30).reshape(1)
            gs = _Q / xs
            alpha = 1.0 / (gs * self.weight_global_scale)
            l1_scaled = (self.l1.float() / alpha).to(torch.bfloat16)
        else:
            gs, alpha, l1_scaled = self.input_global_scale, self.alpha, self.l1_scaled
        y = svdquant_linear(x2, self.qweight, self.wscales, alpha, self.pre_quant_scale, self.l2t_smoothed, l1_scaled,
                            gs, self.bias, wcscales=self.wcscales)
        return y.reshape(*lead, self.out_features)


def _svdquant_weight_cuda(weight: torch.Tensor, rank: int, smooth) -> dict:
    """svdq.quant.svdquant_weight's steps on the weight's CUDA device: the same smoothing, the SVD in FP32 (torch;
    the factors are stored in BF16, and the residual is taken in FP64 from the factors found), BF16 residual and the
    SPEC §1 quantizer (svdq.nvfp4_quantize), the factors as BF16 tensors there."""
    n, k = weight.shape
    quant.check_weight_shape(n, k, rank)
    dev = weight.device
    w = weight.to(torch.float64)
    if smooth is None:
        pqs = torch.ones(k, dtype=torch.bfloat16, device=dev)
    else:
        s = torch.as_tensor(smooth).detach().to(device=dev, dtype=torch.float64).reshape(-1)
        if s.shape[0] != k or not bool(torch.isfinite(s).all()) or bool((s <= 0).any()):
            raise ValueError(f"argument 'smooth' must be {k} positive finite factors")
        pqs = (1.0 / s).to(torch.float32).to(torch.bfloat16)  # (round to nearest even, as quant.bf16_bits)
    pqs64 = pqs.to(torch.float64)
    ws = w / pqs64[None, :]
    u, sv, vt = torch.linalg.svd(ws.to(torch.float32), full_matrices=False)
    l1 = (u[:, :rank] * sv[:rank]).to(torch.float64)
    l2 = vt[:rank, :].to(torch.float64)
    resid = (ws - l1 @ l2).to(torch.float32).to(torch.bfloat16)
    gs_w = quant.global_scale(float(resid.float().abs().max()))
    qweight, wscales = nvfp4_quantize(resid.contiguous(), torch.tensor([float(gs_w)], dtype=torch.float32, device=dev))
    return {
        "qweight": qweight,
        "wscales": wscales,
        "weight_global_scale": gs_w,
        "pre_quant_scale": pqs,
        "l2t_smoothed": (pqs64[:, None] * l2.T).to(torch.float32).to(torch.bfloat16),
        "l1": l1.to(torch.float32).to(torch.bfloat16),
    }


def _torch_tensor(t) -> torch.Tensor:
    """svdq.checkpoint.Tensor (dtype name, NumPy bits) -> a CPU torch tensor of that dtype, bits kept."""
    a = np.ascontiguousarray(t.array)
    if t.dtype == "BF16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    if t.dtype in ("F8_E4M3", "F8_E5M2"):
        return torch.from_numpy(a.copy()).view(torch.float8_e4m3fn if t.dtype == "F8_E4M3" else torch.float8_e5m2)
    if t.dtype in ("U16", "U32", "U64"):
        a = a.view({"U16": np.int16, "U32": np.int32, "U64": np.int64}[t.dtype])
    return torch.from_numpy(a.copy())


def load_checkpoint(model: torch.nn.Module, src, format: str = "auto", strict: bool = True, device=None):
    """Loads an SVDQuant NVFP4 checkpoint (svdq.checkpoint.load: a ModelOpt NVFP4_SVD export, a Nunchaku fp4 file, an
    svdq file or a state_dict) into `model`: every checkpoint layer replaces the nn.Linear of that name by an
    SVDQuantLinear (same in/out features required), every other tensor is loaded into the model's parameters and
    buffers. strict: the checkpoint and the model must name the same tensors. Nothing in the model changes unless
    every layer and tensor fits. Returns the model."""
    from . import checkpoint as ck

    c = src if isinstance(src, ck.Checkpoint) else ck.load(src, format=format)
    if device is None:
        device = next((p.device for p in model.parameters()), None)
    new = {}
    for name, layer in c.layers.items():
        try:
            old = model.get_submodule(name)
        except AttributeError:
            raise ck.CheckpointError(f"layer '{name}' of the checkpoint names no module of the model") from None
        if not isinstance(old, (torch.nn.Linear, SVDQuantLinear)):
            raise ck.CheckpointError(f"layer '{name}': the model's module is a {type(old).__name__}, not nn.Linear")
        n, k = c.shape(name)
        if (old.out_features, old.in_features) != (n, k):
            raise ck.CheckpointError(f"layer '{name}': checkpoint is [out {n}, in {k}], the model's nn.Linear is "
                                     f"[out {old.out_features}, in {old.in_features}]")
        new[name] = SVDQuantLinear.from_checkpoint(layer, device=device, name=name)
    others = {k2: _torch_tensor(v) for k2, v in c.others.items()}
    quantized = tuple(n + "." for n in new)
    expected = {k2 for k2 in model.state_dict() if not k2.startswith(quantized)}
    if strict:
        extra, missing = sorted(set(others) - expected), sorted(expected - set(others))
        if extra or missing:
            raise ck.CheckpointError(f"the checkpoint and the model do not match (strict=True): checkpoint tensors "
                                     f"the model lacks: {extra[:8]}; model tensors the checkpoint lacks: "
                                     f"{missing[:8]}")
    current = model.state_dict()
    for k2 in sorted(set(others) & expected):
        if tuple(others[k2].shape) != tuple(current[k2].shape):
            raise ck.CheckpointError(f"tensor '{k2}': checkpoint shape {list(others[k2].shape)}, the model's "
                                     f"{list(current[k2].shape)}")
    for name, mod in new.items():
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, mod)
    model.load_state_dict({k2: v for k2, v in others.items() if k2 in expected}, strict=False)
    return model


def quantize_model(model: torch.nn.Module, rank: int = 32,
                   filter: Optional[Callable[[str, torch.nn.Linear], bool]] = None) -> torch.nn.Module:
    """Replaces, in place, every nn.Linear of `model` for which filter(name, module) is true (default: those whose
    in and out features are multiples of 32) by SVDQuantLinear.from_linear(module, rank). Returns the model."""
    chosen = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and not isinstance(mod, SVDQuantLinear):
            ok = filter(name, mod) if filter is not None else (mod.in_features % 32 == 0 and mod.out_features % 32 == 0)
            if ok:
                chosen.append(name)
    for name in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, SVDQuantLinear.from_linear(getattr(parent, child), rank=rank))
    return model
