"""SVDQuant NVFP4 checkpoints in, svdq's layer tensors out (NumPy only: no torch, no GPU).

    ckpt = svdq.checkpoint.load("exported_dir_or_file.safetensors")     # format="auto" | "modelopt" | "nunchaku" | "svdq"
    ckpt.layers["model.layers.0.mlp.down_proj"]["qweight"]             # svdq.checkpoint.Tensor(dtype, bits)
    svdq.checkpoint.convert(src, "model.svdq.safetensors")             # loads later with no conversion

Each quantized linear becomes the tensors of `svdq.nn.SVDQuantLinear` (its state_dict names; see LAYER_TENSORS):
row-major E2M1 codes, 128x4-swizzled E4M3 scales, the low-rank factors l1 [N, r] and l2t_smoothed [K, r], the
smoothing pre_quant_scale [K], and the scalars of svdq's op (alpha, input_global_scale, l1_scaled = l1 / alpha). Every
other tensor (embeddings, norms, layers that are not SVDQuant NVFP4) is kept as it is in `ckpt.others`.

Producers and what the conversion does (docs/checkpoints.md has the whole mapping):
- ModelOpt `quant_algo: "NVFP4_SVD"` (weight, weight_scale [N, K/16] linear, weight_scale_2, input_scale,
  pre_quant_scale, svdquant_lora_a [r, K], svdquant_lora_b [N, r]; the LLM exporter names the factors
  `weight_quantizer._svdquant_lora_a/_b`). Codes and scales are copied / re-swizzled byte for byte; the only
  arithmetic is SPEC §1's fold l2t_smoothed = BF16(pqs[:, None] · lora_aᵀ) and the op's scalars
  (alpha = input_scale · weight_scale_2, input_global_scale = 1 / input_scale, l1_scaled = BF16(lora_b / alpha)).
- Nunchaku fp4 (`svdq-fp4_r*-*.safetensors`: qweight, wscales, smooth_factor / smooth, proj_down / lora_down,
  proj_up / lora_up, bias, wtscale, wcscales), packed by its NunchakuWeightPacker (layout of Nunchaku 1.x,
  packer.py unchanged since 2025-07-14). The packing is undone byte for byte; activations are quantized with global
  scale 1 (Nunchaku has none), alpha = wtscale, pre_quant_scale = BF16(1 / smooth), wcscales kept as the layer's
  per-output-channel scale.
- svdq's own files (metadata format = "svdq"): read as they are.

Every defect is a CheckpointError (a ValueError) naming the tensor and the rule; nothing is returned half-loaded and
`convert` writes its file whole or not at all.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Dict, Iterable, Optional, Tuple

import numpy as np

from . import _safetensors as st
from ._safetensors import CheckpointError, Tensor
from .quant import bf16_bits, bf16_value, unswizzle

FORMAT_VERSION = "1"
FORMATS = ("modelopt", "nunchaku", "svdq")

# svdq's tensors of one layer (SVDQuantLinear's state_dict): name -> dtype. bias and wcscales are optional.
LAYER_TENSORS = {
    "qweight": "U8",  # [N, K/2] E2M1 codes, element 2i in bits 0-3
    "wscales": "U8",  # [ceil(N/128)*128, ceil(K/64)*4] E4M3 bits, 128x4 swizzled
    "weight_global_scale": "F32",  # [1] the weight's global scale (448*6/amax of the residual)
    "pre_quant_scale": "BF16",  # [K] x̂ = x · pqs
    "l2t_smoothed": "BF16",  # [K, r] = pqs[:, None] · L2ᵀ, so d = x @ l2t_smoothed
    "l1": "BF16",  # [N, r]
    "input_global_scale": "F32",  # [1] fixed activation global scale (0: computed from each input)
    "alpha": "F32",  # [1] 1 / (input global scale · weight global scale)
    "l1_scaled": "BF16",  # [N, r] l1 / alpha
}
OPTIONAL_TENSORS = {"bias": "BF16", "wcscales": "F32"}  # bias [N]; wcscales [N] per-output-channel scale


class Checkpoint:
    """layers: {module name: {tensor name: Tensor}} in svdq's layout; others: {name: Tensor} untouched;
    source_format: the producer's format; metadata: the file's string metadata (plus the producer's config)."""

    def __init__(self, layers, others, source_format, metadata):
        self.layers: Dict[str, Dict[str, Tensor]] = layers
        self.others: Dict[str, Tensor] = others
        self.source_format: str = source_format
        self.metadata: Dict[str, str] = metadata

    def rank(self, name: str) -> int:
        return int(self.layers[name]["l1"].shape[1])

    def shape(self, name: str) -> Tuple[int, int]:
        """(out_features N, in_features K) of a layer."""
        q = self.layers[name]["qweight"]
        return int(q.shape[0]), int(q.shape[1]) * 2

    def __repr__(self) -> str:
        return (f"Checkpoint({self.source_format}: {len(self.layers)} SVDQuant layers, {len(self.others)} other "
                "tensors)")


# --------------------------------------------------------------------------------------------------------------------
# Reading sources


def _from_mapping(sd) -> Dict[str, Tensor]:
    """A state_dict (torch tensors, NumPy arrays or Tensor) -> {name: Tensor}. bf16 / float8 torch tensors keep their
    bits; NumPy arrays are taken by dtype (uint16 is U16, not BF16: pass a Tensor("BF16", bits) for BF16)."""
    by_np = {np.dtype(np.uint8): "U8", np.dtype(np.int8): "I8", np.dtype(np.float16): "F16",
             np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.int32): "I32",
             np.dtype(np.int64): "I64", np.dtype(np.uint16): "U16", np.dtype(np.int16): "I16",
             np.dtype(np.bool_): "BOOL"}
    out = {}
    for name, v in sd.items():
        if isinstance(v, Tensor):
            out[name] = v
            continue
        mod = type(v).__module__
        if mod.startswith("torch"):
            out[name] = _from_torch(name, v)
            continue
        a = np.asarray(v)
        if a.dtype not in by_np:
            raise CheckpointError(f"tensor '{name}': unsupported dtype {a.dtype}")
        out[name] = Tensor(by_np[a.dtype], np.ascontiguousarray(a))
    return out


def _from_torch(name: str, v) -> Tensor:
    import torch

    names = {torch.uint8: ("U8", None), torch.int8: ("I8", None), torch.float16: ("F16", None),
             torch.float32: ("F32", None), torch.float64: ("F64", None), torch.int32: ("I32", None),
             torch.int64: ("I64", None), torch.int16: ("I16", None), torch.bool: ("BOOL", None),
             torch.bfloat16: ("BF16", torch.int16)}
    for attr, code in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
        if hasattr(torch, attr):
            names[getattr(torch, attr)] = (code, torch.uint8)
    if v.dtype not in names:
        raise CheckpointError(f"tensor '{name}': unsupported dtype {v.dtype}")
    code, view = names[v.dtype]
    t = v.detach().cpu().contiguous()
    a = (t.view(view) if view is not None else t).numpy()
    return Tensor(code, a.view(st.DTYPES[code]).copy())


def _read_source(src) -> Tuple[Dict[str, Tensor], Dict[str, str], str]:
    """-> (tensors, metadata, where) from a .safetensors file, a directory of them, or a state_dict."""
    if isinstance(src, dict):
        return _from_mapping(src), {}, "state_dict"
    path = os.fspath(src)
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
        if not files:
            raise CheckpointError(f"{path}: no *.safetensors file in this directory")
        meta: Dict[str, str] = {}
        for cfg_name in ("hf_quant_config.json", "config.json"):
            cfg = os.path.join(path, cfg_name)
            if os.path.exists(cfg):
                try:
                    with open(cfg) as f:
                        meta[cfg_name] = json.dumps(json.load(f))
                except (OSError, json.JSONDecodeError) as e:
                    raise CheckpointError(f"{cfg}: cannot read it as JSON: {e}") from e
    elif os.path.isfile(path):
        files, meta = [path], {}
    else:
        raise CheckpointError(f"{path}: no such file or directory")
    tensors: Dict[str, Tensor] = {}
    for f in files:
        t, m = st.read(f)
        for name in t:
            if name in tensors:
                raise CheckpointError(f"{f}: tensor '{name}' is also in another file of {path}")
        tensors.update(t)
        for k, v in m.items():
            meta.setdefault(k, v)
    return tensors, meta, path


def _quant_algo(meta: Dict[str, str]) -> Optional[str]:
    for cfg_name, keys in (("hf_quant_config.json", ("quantization", "quant_algo")),
                           ("config.json", ("quantization_config", "quant_algo"))):
        if cfg_name in meta:
            v = json.loads(meta[cfg_name])
            for k in keys:
                v = v.get(k) if isinstance(v, dict) else None
            if v is not None:
                return str(v)
    return None


def _detect(tensors: Dict[str, Tensor], meta: Dict[str, str], where: str) -> str:
    if meta.get("format") == "svdq":
        return "svdq"
    names = list(tensors)
    found = []
    if _quant_algo(meta) is not None or any(n.endswith(("svdquant_lora_a", "weight_scale_2")) for n in names):
        found.append("modelopt")
    if any(n.endswith(".qweight") for n in names) and any(
            n.endswith((".wscales", ".proj_down", ".lora_down", ".smooth_factor", ".wtscale")) for n in names):
        found.append("nunchaku")
    if any(n.endswith(".l2t_smoothed") for n in names):
        found.append("svdq")
    if len(found) != 1:
        raise CheckpointError(
            f"{where}: cannot tell the checkpoint format from its tensor names ("
            + ("it looks like " + " and ".join(found) if found else "no ModelOpt NVFP4_SVD, Nunchaku fp4 or svdq "
               "tensors found") + "); pass format='modelopt', 'nunchaku' or 'svdq'")
    return found[0]


# --------------------------------------------------------------------------------------------------------------------
# Shared checks and codecs


def _need(t: Dict[str, Tensor], name: str, dtypes: Iterable[str], shape=None) -> Tensor:
    if name not in t:
        raise CheckpointError(f"tensor '{name}' is missing")
    v = t[name]
    dtypes = tuple(dtypes)
    if v.dtype not in dtypes:
        raise CheckpointError(f"tensor '{name}' must be {' or '.join(dtypes)}, got {v.dtype}")
    if shape is not None and v.shape != tuple(shape):
        raise CheckpointError(f"tensor '{name}' must have shape {list(shape)}, got {list(v.shape)}")
    return v


def _float(t: Tensor) -> np.ndarray:
    """A float tensor's values as float32 (exact for BF16 / F16 / F32)."""
    if t.dtype == "BF16":
        return bf16_value(t.array)
    if t.dtype in ("F16", "F32", "F64"):
        return t.array.astype(np.float32)
    raise AssertionError(t.dtype)


def _to_bf16(name: str, t: Tensor) -> np.ndarray:
    """BF16 bits of a float tensor (BF16 as is; F16 / F32 rounded to nearest even), finite required."""
    v = _float(t)
    bad = ~np.isfinite(v)
    if bad.any():
        raise CheckpointError(f"tensor '{name}' holds {int(bad.sum())} NaN/Inf values (first at index "
                              f"{np.argwhere(bad)[0].tolist()}); every value must be finite")
    return t.array.copy() if t.dtype == "BF16" else bf16_bits(v)


def _scalar(name: str, t: Tensor) -> float:
    if t.array.size != 1:
        raise CheckpointError(f"tensor '{name}' must hold one value (shape [] or [1]), got shape {list(t.shape)}")
    v = float(_float(t).reshape(-1)[0])
    if not np.isfinite(v) or v <= 0:
        raise CheckpointError(f"tensor '{name}' = {v} must be a positive finite number")
    return v


def _check_scales(name: str, codes: np.ndarray) -> None:
    """UE4M3 block scales: no NaN codes (0x7F / 0xFF) and no sign bit."""
    nan = (codes & 0x7F) == 0x7F
    if nan.any():
        raise CheckpointError(f"tensor '{name}' holds {int(nan.sum())} NaN scale codes (E4M3 0x7F/0xFF), first at "
                              f"index {np.argwhere(nan)[0].tolist()}")
    neg = (codes & 0x80) != 0
    if neg.any():
        raise CheckpointError(f"tensor '{name}' holds {int(neg.sum())} negative scales, first at index "
                              f"{np.argwhere(neg)[0].tolist()}; NVFP4 block scales are unsigned (UE4M3)")


def swizzle(sf: np.ndarray) -> np.ndarray:
    """Row-major scales [R, C] -> the 128x4 swizzled layout [ceil(R/128)*128, ceil(C/4)*4] (SPEC §1), zero padding."""
    rows, cols = sf.shape
    rp, cp = (rows + 127) // 128 * 128, (cols + 3) // 4 * 4
    padded = np.zeros((rp, cp), dtype=np.uint8)
    padded[:rows, :cols] = sf
    # (r/128, r%128/32, r%32, c/4, c%4) -> (r/128, c/4, r%32, r%128/32, c%4)
    return padded.reshape(rp // 128, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4).reshape(rp, cp)


_FLOATS = ("BF16", "F16", "F32")  # the float dtypes accepted for factors, smoothing, bias and scalars


def _check_rank(what: str, r: int) -> None:
    if r % 16 or not 16 <= r <= 256:
        raise CheckpointError(f"{what}: rank {r} must be a multiple of 16 in [16, 256]")


def _lowrank(tensors: Dict[str, Tensor], name: str, k: int, k_axis: int) -> Tuple[Tensor, int]:
    """A low-rank factor holding K along k_axis and the rank along the other axis -> (tensor, rank), both checked."""
    t = _need(tensors, name, _FLOATS)
    if len(t.shape) != 2 or t.shape[k_axis] != k:
        want = f"[r, K = {k}]" if k_axis == 1 else f"[K = {k}, r]"
        raise CheckpointError(f"tensor '{name}' must be {want}, got shape {list(t.shape)}")
    r = t.shape[1 - k_axis]
    _check_rank(f"tensor '{name}'", r)
    return t, r


def _layer(n: int, k: int, qweight: np.ndarray, sf_linear: np.ndarray, wgs: float, pqs: np.ndarray, l2t: np.ndarray,
           l1: np.ndarray, igs: float, alpha: float, bias: Optional[np.ndarray],
           wcscales: Optional[np.ndarray]) -> Dict[str, Tensor]:
    """svdq's tensors of one layer; l1 / l2t / pqs / bias as BF16 bits."""
    a = np.float32(alpha)
    l1_scaled = bf16_bits(bf16_value(l1) / a)
    out = {
        "qweight": Tensor("U8", np.ascontiguousarray(qweight, dtype=np.uint8)),
        "wscales": Tensor("U8", swizzle(sf_linear)),
        "weight_global_scale": Tensor("F32", np.array([wgs], np.float32)),
        "pre_quant_scale": Tensor("BF16", pqs.astype(np.uint16)),
        "l2t_smoothed": Tensor("BF16", np.ascontiguousarray(l2t, dtype=np.uint16)),
        "l1": Tensor("BF16", np.ascontiguousarray(l1, dtype=np.uint16)),
        "input_global_scale": Tensor("F32", np.array([igs], np.float32)),
        "alpha": Tensor("F32", np.array([a], np.float32)),
        "l1_scaled": Tensor("BF16", l1_scaled),
    }
    if bias is not None:
        out["bias"] = Tensor("BF16", bias.astype(np.uint16))
    if wcscales is not None:
        out["wcscales"] = Tensor("F32", wcscales.astype(np.float32))
    _check_layer_shapes("", out)
    return out


def _check_layer_shapes(prefix: str, t: Dict[str, Tensor]) -> None:
    q = _need(t, prefix + "qweight", ["U8"])
    if len(q.shape) != 2:
        raise CheckpointError(f"tensor '{prefix}qweight' must be 2-D [N, K/2], got shape {list(q.shape)}")
    n, k = q.shape[0], q.shape[1] * 2
    if n % 32 or k % 32 or n == 0 or k == 0:
        raise CheckpointError(f"layer '{prefix[:-1]}': N = {n} and K = {k} must be positive multiples of 32")
    l1 = _need(t, prefix + "l1", ["BF16"])
    if len(l1.shape) != 2 or l1.shape[0] != n:
        raise CheckpointError(f"tensor '{prefix}l1' must be [N = {n}, r], got shape {list(l1.shape)}")
    r = l1.shape[1]
    _check_rank(f"layer '{prefix[:-1]}'", r)
    _need(t, prefix + "wscales", ["U8"], ((n + 127) // 128 * 128, (k // 16 + 3) // 4 * 4))
    _need(t, prefix + "l2t_smoothed", ["BF16"], (k, r))
    _need(t, prefix + "l1_scaled", ["BF16"], (n, r))
    _need(t, prefix + "pre_quant_scale", ["BF16"], (k,))
    for s in ("weight_global_scale", "input_global_scale", "alpha"):
        _need(t, prefix + s, ["F32"], (1,))
    if prefix + "bias" in t:
        _need(t, prefix + "bias", ["BF16"], (n,))
    if prefix + "wcscales" in t:
        _need(t, prefix + "wcscales", ["F32"], (n,))


# --------------------------------------------------------------------------------------------------------------------
# ModelOpt NVFP4_SVD

_MO_A = ("svdquant_lora_a", "weight_quantizer._svdquant_lora_a")
_MO_B = ("svdquant_lora_b", "weight_quantizer._svdquant_lora_b")


def _modelopt(tensors: Dict[str, Tensor], meta: Dict[str, str], where: str, scales: str = "auto"):
    algo = _quant_algo(meta)
    if algo is not None and algo != "NVFP4_SVD":
        raise CheckpointError(f"{where}: quant_algo is {algo!r}; svdq loads ModelOpt checkpoints exported with "
                              "quant_algo 'NVFP4_SVD' (NVFP4_SVDQUANT_DEFAULT_CFG)")
    prefixes = sorted(n[: -len(".weight_scale_2")] for n in tensors if n.endswith(".weight_scale_2"))
    for n in tensors:  # factors or smoothing without the NVFP4 weight they belong to
        for suf in _MO_A + _MO_B + ("pre_quant_scale",):
            if n.endswith("." + suf) and n[: -len(suf) - 1] not in prefixes:
                raise CheckpointError(f"tensor '{n}' has no NVFP4 weight beside it: "
                                      f"'{n[: -len(suf) - 1]}.weight_scale_2' is missing")
    layers, used = {}, set()
    for p in prefixes:
        names = {s: f"{p}.{s}" for s in ("weight", "weight_scale", "weight_scale_2", "input_scale",
                                          "pre_quant_scale", "bias")}
        names["lora_a"] = next((f"{p}.{s}" for s in _MO_A if f"{p}.{s}" in tensors), f"{p}.{_MO_A[0]}")
        names["lora_b"] = next((f"{p}.{s}" for s in _MO_B if f"{p}.{s}" in tensors), f"{p}.{_MO_B[0]}")
        w = _need(tensors, names["weight"], ["U8"])
        if len(w.shape) != 2:
            raise CheckpointError(f"tensor '{names['weight']}' must be 2-D [N, K/2], got shape {list(w.shape)}")
        n, k = w.shape[0], w.shape[1] * 2
        # weight_scale: row-major [N, K/16] (ModelOpt's default) or, exported with enable_swizzle_layout=True (the
        # file does not say so), the 128x4 layout [ceil(N/128)*128, ceil(K/64)*4]: told apart by the shape where it
        # differs, else by `scales`.
        sname, rp, cp = names["weight_scale"], (n + 127) // 128 * 128, (k // 16 + 3) // 4 * 4
        sf = _need(tensors, sname, ["F8_E4M3", "U8"])
        if sf.shape not in ((n, k // 16), (rp, cp)):
            raise CheckpointError(f"tensor '{sname}' must have shape {[n, k // 16]} (row-major) or {[rp, cp]} (128x4 "
                                  f"swizzled), got {list(sf.shape)}")
        swizzled = scales == "128x4" or (scales == "auto" and sf.shape != (n, k // 16))
        if swizzled and sf.shape != (rp, cp):
            raise CheckpointError(f"tensor '{sname}': scales='128x4' needs shape {[rp, cp]}, got {list(sf.shape)}")
        sf_linear = unswizzle(sf.array.view(np.uint8), n, k) if swizzled else sf.array.view(np.uint8)
        _check_scales(sname, sf_linear)
        ws2 = _scalar(names["weight_scale_2"], _need(tensors, names["weight_scale_2"], ["F32", "BF16", "F16"]))
        ins = _scalar(names["input_scale"], _need(tensors, names["input_scale"], ["F32", "BF16", "F16"]))
        if names["pre_quant_scale"] in tensors:
            pqs = _to_bf16(names["pre_quant_scale"], _need(tensors, names["pre_quant_scale"], _FLOATS, (k,)))
            if np.any(bf16_value(pqs) == 0):
                raise CheckpointError(f"tensor '{names['pre_quant_scale']}' holds zeros; smoothing factors must be "
                                      "non-zero")
        else:
            pqs = bf16_bits(np.ones(k, np.float32))
        has_a, has_b = names["lora_a"] in tensors, names["lora_b"] in tensors
        if has_a != has_b:
            missing = names["lora_b"] if has_a else names["lora_a"]
            raise CheckpointError(f"tensor '{missing}' is missing (a layer needs both low-rank factors)")
        if has_a:
            a, r = _lowrank(tensors, names["lora_a"], k, k_axis=1)
            b = _need(tensors, names["lora_b"], _FLOATS, (n, r))
            a_bits, b_bits = _to_bf16(names["lora_a"], a), _to_bf16(names["lora_b"], b)
            # SPEC §1 / FlashInfer: l2t_smoothed = BF16(pqs[:, None] · Aᵀ) (product exact in FP32, one rounding)
            l2t = bf16_bits(bf16_value(pqs)[:, None] * bf16_value(a_bits).T)
        else:  # a layer ModelOpt quantized without the SVD (skip_layers): a zero branch of svdq's smallest rank
            r = 16
            l2t, b_bits = np.zeros((k, r), np.uint16), np.zeros((n, r), np.uint16)
        bias = None
        if names["bias"] in tensors:
            bias = _to_bf16(names["bias"], _need(tensors, names["bias"], _FLOATS, (n,)))
        alpha = float(np.float32(ins) * np.float32(ws2))
        layers[p] = _layer(n, k, w.array, sf_linear, float(np.float32(1.0) / np.float32(ws2)), pqs,
                           l2t, b_bits, float(np.float32(1.0) / np.float32(ins)), alpha, bias, None)
        used.update(v for v in names.values() if v in tensors)
    others = {name: v for name, v in tensors.items() if name not in used}
    return layers, others


def to_modelopt(layer: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """svdq's tensors of one layer -> ModelOpt NVFP4_SVD's (diffusers names): codes and scales byte for byte;
    weight_scale_2 = 1 / weight_global_scale, input_scale = 1 / input_global_scale; svdquant_lora_a =
    BF16(l2t_smoothedᵀ / pqs) (exact where pqs is a power of two); svdquant_lora_b = l1."""
    n, k = layer["qweight"].shape[0], layer["qweight"].shape[1] * 2
    igs = float(layer["input_global_scale"].array[0])
    if igs <= 0:
        raise CheckpointError("to_modelopt: the layer's input_global_scale is 0 (computed from each input); "
                              "ModelOpt's NVFP4_SVD needs a calibrated input_scale")
    pqs = bf16_value(layer["pre_quant_scale"].array)
    out = {
        "weight": Tensor("U8", layer["qweight"].array.copy()),
        "weight_scale": Tensor("F8_E4M3", unswizzle(layer["wscales"].array, n, k).copy()),
        "weight_scale_2": Tensor("F32", np.array(np.float32(1) / layer["weight_global_scale"].array[0], np.float32)),
        "input_scale": Tensor("F32", np.array(np.float32(1) / np.float32(igs), np.float32)),
        "pre_quant_scale": Tensor("BF16", layer["pre_quant_scale"].array.copy()),
        "svdquant_lora_a": Tensor("BF16", bf16_bits(bf16_value(layer["l2t_smoothed"].array).T / pqs[None, :])),
        "svdquant_lora_b": Tensor("BF16", layer["l1"].array.copy()),
    }
    if "bias" in layer:
        out["bias"] = Tensor("BF16", layer["bias"].array.copy())
    if "wcscales" in layer:
        raise CheckpointError("to_modelopt: the layer has a per-output-channel scale (wcscales), which ModelOpt's "
                              "NVFP4_SVD format cannot hold")
    return out


# --------------------------------------------------------------------------------------------------------------------
# Nunchaku fp4 (NunchakuWeightPacker, bits = 4, warp_n = 128; group size 16, E4M3 scales)
#
# qweight, int8 [N, K/2] in shape only: int32 words, word index (((((nt·KT + kt)·8 + np)·8 + nl)·4 + kl)·2 + nps)·2
# + kps holds in nibble rk (bits 4rk..4rk+3) code[n, k], n = 128nt + 16np + 8nps + nl, k = 64kt + 32kps + 8kl + rk.
# Byte b of a word holds rk = 2b (low nibble) and 2b + 1: bytes move whole, and k's even element stays low.
# wscales, float8 [K/16, N] in shape only: flat (((nt·KG + kg)·8 + b)·4 + a)·16 + 4p + j holds the scale of row
# n = 128nt + 32p + 8a + b, group g = 4kg + j.
# Per-channel vectors (bias, smooth, wcscales), [N] or [K]: flat 128nt + 16g8 + 4q + 2h + e holds channel
# 128nt + 16g8 + 8h + 2q + e.
# Low-rank factors, stored [K, r] (down) / [N, r] (up): flat (cp·RP + rp)·256 + 32nl + 8kl + 4nps + 2kps + rk holds
# down: A[16rp + 8nps + nl, 16cp + 8kps + 2kl + rk] (A = [r, K]); up: B[16cp + 8nps + nl, 16rp + 8kps + 2kl + rk].

_NC_QW = (0, 2, 5, 3, 1, 6, 4, 7)  # [NT,KT,np,nl,kl,nps,kps,byte] -> [NT,np,nps,nl,KT,kps,kl,byte]
_NC_SF = (0, 4, 3, 2, 1, 5)  # [NT,KG,b,a,p,j] -> [NT,p,a,b,KG,j]
_NC_VEC = (0, 1, 3, 2, 4)  # [NT,g8,q,h,e] -> [NT,g8,h,q,e]
_NC_DOWN = (1, 4, 2, 0, 5, 3, 6)  # [CP,RP,nl,kl,nps,kps,rk] -> [RP,nps,nl,CP,kps,kl,rk]
_NC_UP = (0, 4, 2, 1, 5, 3, 6)  # [CP,RP,nl,kl,nps,kps,rk] -> [CP,nps,nl,RP,kps,kl,rk]


def nunchaku_unpack_qweight(b: np.ndarray) -> np.ndarray:
    """Nunchaku's packed fp4 weight bytes [N, K/2] -> svdq's row-major codes [N, K/2]."""
    n, k = b.shape[0], b.shape[1] * 2
    v = np.ascontiguousarray(b).view(np.uint8).reshape(n // 128, k // 64, 8, 8, 4, 2, 2, 4)
    return v.transpose(_NC_QW).reshape(n, k // 2).copy()


def nunchaku_pack_qweight(q: np.ndarray) -> np.ndarray:
    """svdq's row-major codes [N, K/2] (N, K multiples of 128) -> Nunchaku's packed bytes [N, K/2]."""
    n, k = q.shape[0], q.shape[1] * 2
    v = np.ascontiguousarray(q, dtype=np.uint8).reshape(n // 128, 8, 2, 8, k // 64, 2, 4, 4)
    return v.transpose(np.argsort(_NC_QW)).reshape(n, k // 2).copy()


def nunchaku_unpack_wscales(s: np.ndarray, n: int, k: int) -> np.ndarray:
    """Nunchaku's packed scales (E4M3 bytes, [K/16, N] in shape) -> row-major [N, K/16]."""
    v = np.ascontiguousarray(s).view(np.uint8).reshape(n // 128, k // 64, 8, 4, 4, 4)
    return v.transpose(_NC_SF).reshape(n, k // 16).copy()


def nunchaku_pack_wscales(sf: np.ndarray) -> np.ndarray:
    n, g = sf.shape
    v = np.ascontiguousarray(sf, dtype=np.uint8).reshape(n // 128, 4, 4, 8, g // 4, 4)
    return v.transpose(np.argsort(_NC_SF)).reshape(g, n).copy()


def nunchaku_unpack_vector(v: np.ndarray) -> np.ndarray:
    c = v.shape[0]
    return np.ascontiguousarray(v).reshape(c // 128, 8, 4, 2, 2).transpose(_NC_VEC).reshape(c).copy()


def nunchaku_pack_vector(v: np.ndarray) -> np.ndarray:
    c = v.shape[0]
    return np.ascontiguousarray(v).reshape(c // 128, 8, 2, 4, 2).transpose(np.argsort(_NC_VEC)).reshape(c).copy()


def nunchaku_unpack_lowrank(v: np.ndarray, down: bool) -> np.ndarray:
    """Packed factor ([K, r] for down, [N, r] for up, in shape) -> A [r, K] (down) or B [N, r] (up)."""
    c, r = v.shape
    x = np.ascontiguousarray(v).reshape(c // 16, r // 16, 8, 4, 2, 2, 2)
    if down:
        return x.transpose(_NC_DOWN).reshape(r, c).copy()
    return x.transpose(_NC_UP).reshape(c, r).copy()


def nunchaku_pack_lowrank(m: np.ndarray, down: bool) -> np.ndarray:
    """A [r, K] (down) or B [N, r] (up) -> Nunchaku's packed factor ([K, r] / [N, r] in shape)."""
    if down:
        r, c = m.shape
        x = np.ascontiguousarray(m).reshape(r // 16, 2, 8, c // 16, 2, 4, 2)
        return x.transpose(np.argsort(_NC_DOWN)).reshape(c, r).copy()
    c, r = m.shape
    x = np.ascontiguousarray(m).reshape(c // 16, 2, 8, r // 16, 2, 4, 2)
    return x.transpose(np.argsort(_NC_UP)).reshape(c, r).copy()


_NC_NAMES = {  # svdq role -> Nunchaku names, new first
    "smooth": ("smooth_factor", "smooth"),
    "down": ("proj_down", "lora_down"),
    "up": ("proj_up", "lora_up"),
}
_NC_IGNORED = ("smooth_factor_orig", "smooth_orig")  # calibration leftovers, unused at inference


def _nunchaku(tensors: Dict[str, Tensor], meta: Dict[str, str], where: str):
    prefixes = sorted(n[: -len(".qweight")] for n in tensors if n.endswith(".qweight"))
    layers, used = {}, set()
    for p in prefixes:
        qn, sn = f"{p}.qweight", f"{p}.wscales"
        q = tensors[qn]
        if q.dtype == "I32" or f"{p}.wzeros" in tensors:
            continue  # an AWQ W4A16 layer (Nunchaku's AdaNorm linears): not SVDQuant, kept in `others`
        if sn not in tensors:
            raise CheckpointError(f"tensor '{sn}' is missing")
        s = tensors[sn]
        if s.dtype in ("BF16", "F16"):
            raise CheckpointError(f"svdq runs NVFP4 checkpoints; this file is INT4 (tensor '{sn}' is {s.dtype}, "
                                  "per-64 INT4 group scales)")
        _need(tensors, qn, ["I8", "U8"])
        if len(q.shape) != 2:
            raise CheckpointError(f"tensor '{qn}' must be 2-D [N, K/2], got shape {list(q.shape)}")
        n, k = q.shape[0], q.shape[1] * 2
        if n % 128 or k % 128:
            raise CheckpointError(f"tensor '{qn}': Nunchaku pads N and K to multiples of 128, got N = {n}, K = {k}")
        _need(tensors, sn, ["F8_E4M3", "U8"], (k // 16, n))
        sf = nunchaku_unpack_wscales(s.array, n, k)
        _check_scales(sn, sf)
        names = {role: next((f"{p}.{c}" for c in cands if f"{p}.{c}" in tensors), f"{p}.{cands[0]}")
                 for role, cands in _NC_NAMES.items()}
        d, r = _lowrank(tensors, names["down"], k, k_axis=0)
        u = _need(tensors, names["up"], _FLOATS, (n, r))
        a = nunchaku_unpack_lowrank(_to_bf16(names["down"], d), down=True)  # [r, K], applied to the raw x
        b = nunchaku_unpack_lowrank(_to_bf16(names["up"], u), down=False)  # [N, r]
        if names["smooth"] in tensors:
            sm = _float(_need(tensors, names["smooth"], _FLOATS, (k,)))
            sm = nunchaku_unpack_vector(sm)
            if not np.all(np.isfinite(sm)) or np.any(sm == 0):
                raise CheckpointError(f"tensor '{names['smooth']}' must hold finite non-zero factors")
            pqs = bf16_bits((np.float32(1) / sm.astype(np.float32)))  # Nunchaku divides x by smooth
        else:
            pqs = bf16_bits(np.ones(k, np.float32))
        alpha = 1.0
        if f"{p}.wtscale" in tensors:
            alpha = _scalar(f"{p}.wtscale", _need(tensors, f"{p}.wtscale", _FLOATS))
        wc = None
        if f"{p}.wcscales" in tensors:
            wcv = nunchaku_unpack_vector(_float(_need(tensors, f"{p}.wcscales", _FLOATS, (n,))))
            if not np.all(np.isfinite(wcv)):
                raise CheckpointError(f"tensor '{p}.wcscales' must hold finite values")
            wc = None if np.all(wcv == 1) else wcv
        bias = None
        if f"{p}.bias" in tensors:
            bias = nunchaku_unpack_vector(_to_bf16(f"{p}.bias", _need(tensors, f"{p}.bias", _FLOATS, (n,))))
        layers[p] = _layer(n, k, nunchaku_unpack_qweight(q.array), sf, 1.0 / alpha, pqs, a.T.copy(), b, 1.0, alpha,
                           bias, wc)
        used.update([qn, sn, f"{p}.wtscale", f"{p}.wcscales", f"{p}.bias", *names.values()])
        used.update(f"{p}.{s}" for s in _NC_IGNORED)
    if not layers:
        raise CheckpointError(f"{where}: no Nunchaku fp4 layer found (qweight with float8 wscales)")
    others = {name: v for name, v in tensors.items() if name not in used}
    return layers, others


def to_nunchaku(layer: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """svdq's tensors of one layer -> Nunchaku fp4's (new names): codes, scales, factors and vectors re-packed byte
    for byte; smooth_factor = BF16(1 / pqs) (exact where pqs is a power of two); wtscale = alpha (BF16)."""
    n, k = layer["qweight"].shape[0], layer["qweight"].shape[1] * 2
    if n % 128 or k % 128:
        raise CheckpointError(f"to_nunchaku: Nunchaku's packing needs N and K multiples of 128, got N = {n}, K = {k}")
    if float(layer["input_global_scale"].array[0]) != 1.0:
        raise CheckpointError("to_nunchaku: Nunchaku quantizes activations with global scale 1; this layer's "
                              f"input_global_scale is {float(layer['input_global_scale'].array[0])}")
    pqs = bf16_value(layer["pre_quant_scale"].array)
    wc = layer["wcscales"].array if "wcscales" in layer else np.ones(n, np.float32)
    bias = layer["bias"].array if "bias" in layer else np.zeros(n, np.uint16)
    return {
        "qweight": Tensor("I8", nunchaku_pack_qweight(layer["qweight"].array).view(np.int8)),
        "wscales": Tensor("F8_E4M3", nunchaku_pack_wscales(unswizzle(layer["wscales"].array, n, k))),
        "smooth_factor": Tensor("BF16", nunchaku_pack_vector(bf16_bits(np.float32(1) / pqs))),
        "proj_down": Tensor("BF16", nunchaku_pack_lowrank(np.ascontiguousarray(layer["l2t_smoothed"].array.T), True)),
        "proj_up": Tensor("BF16", nunchaku_pack_lowrank(layer["l1"].array, False)),
        "wtscale": Tensor("BF16", bf16_bits(np.array([layer["alpha"].array[0]], np.float32))),
        "wcscales": Tensor("BF16", nunchaku_pack_vector(bf16_bits(wc))),
        "bias": Tensor("BF16", nunchaku_pack_vector(bias)),
    }


# --------------------------------------------------------------------------------------------------------------------
# svdq's own format


def _svdq(tensors: Dict[str, Tensor], meta: Dict[str, str], where: str):
    ver = meta.get("format_version")
    if meta.get("format") == "svdq" and ver != FORMAT_VERSION:
        raise CheckpointError(f"{where}: svdq checkpoint format version {ver!r}; this svdq reads version "
                              f"{FORMAT_VERSION!r}")
    prefixes = sorted(n[: -len(".l2t_smoothed")] for n in tensors if n.endswith(".l2t_smoothed"))
    layers, used = {}, set()
    for p in prefixes:
        _check_layer_shapes(p + ".", tensors)
        names = [f"{p}.{s}" for s in (*LAYER_TENSORS, *OPTIONAL_TENSORS) if f"{p}.{s}" in tensors]
        layer = {nm[len(p) + 1:]: tensors[nm] for nm in names}
        n, k = layer["qweight"].shape[0], layer["qweight"].shape[1] * 2
        _check_scales(f"{p}.wscales", unswizzle(layer["wscales"].array, n, k))
        for s in ("pre_quant_scale", "l2t_smoothed", "l1", "l1_scaled", "bias"):
            if s in layer:
                _to_bf16(f"{p}.{s}", layer[s])
        layers[p] = layer
        used.update(names)
    others = {name: v for name, v in tensors.items() if name not in used}
    return layers, others


# --------------------------------------------------------------------------------------------------------------------
# Public entry points


def load(src, format: str = "auto", modelopt_scales: str = "auto") -> Checkpoint:
    """Loads a ModelOpt NVFP4_SVD export (its directory or .safetensors file), a Nunchaku fp4 .safetensors file, an
    svdq checkpoint, or a state_dict (name -> torch tensor / NumPy array / Tensor) into svdq's layout.
    modelopt_scales: the layout of ModelOpt's weight_scale, "linear" (its exporter's default), "128x4" (exported with
    enable_swizzle_layout=True, which the file does not record) or "auto": 128x4 where the shape is the padded one,
    else linear (the two shapes agree when N % 128 == 0 and K % 64 == 0: pass "128x4" for such a swizzled export)."""
    if format != "auto" and format not in FORMATS:
        raise ValueError(f"argument 'format' must be 'auto' or one of {FORMATS}, got {format!r}")
    if modelopt_scales not in ("auto", "linear", "128x4"):
        raise ValueError(f"argument 'modelopt_scales' must be 'auto', 'linear' or '128x4', got {modelopt_scales!r}")
    tensors, meta, where = _read_source(src)
    fmt = _detect(tensors, meta, where) if format == "auto" else format
    if fmt == "modelopt":
        layers, others = _modelopt(tensors, meta, where, modelopt_scales)
    else:
        layers, others = {"nunchaku": _nunchaku, "svdq": _svdq}[fmt](tensors, meta, where)
    if not layers:
        raise CheckpointError(f"{where}: no {fmt} SVDQuant layer found")
    source = meta.get("source_format", fmt) if fmt == "svdq" else fmt
    return Checkpoint(layers, others, source, meta)


def save(ckpt: Checkpoint, dst: str) -> None:
    """Writes a Checkpoint as an svdq safetensors file (metadata: format, format_version, source_format, rank)."""
    tensors = dict(ckpt.others)
    for p, layer in ckpt.layers.items():
        _check_layer_shapes("", layer)
        for s, v in layer.items():
            if f"{p}.{s}" in tensors:
                raise CheckpointError(f"tensor '{p}.{s}' is both a layer tensor and another tensor")
            tensors[f"{p}.{s}"] = v
    ranks = sorted({ckpt.rank(p) for p in ckpt.layers})
    meta = {"format": "svdq", "format_version": FORMAT_VERSION, "source_format": ckpt.source_format,
            "rank": ",".join(str(r) for r in ranks)}
    for cfg_name in ("config.json", "hf_quant_config.json"):
        if cfg_name in ckpt.metadata:
            meta[cfg_name] = ckpt.metadata[cfg_name]
    st.write(dst, tensors, meta)


def convert(src, dst: str, format: str = "auto", modelopt_scales: str = "auto") -> Checkpoint:
    """load(src, format, modelopt_scales) and save it to dst (an svdq safetensors file that loads without
    conversion)."""
    ckpt = load(src, format, modelopt_scales)
    save(ckpt, dst)
    return ckpt


__all__ = ["Checkpoint", "CheckpointError", "FORMAT_VERSION", "LAYER_TENSORS", "OPTIONAL_TENSORS", "Tensor", "convert",
           "load", "save", "swizzle", "to_modelopt", "to_nunchaku"]
