"""SVDQuant's post-training quantization of a weight, on the host (NumPy; no GPU, no torch):

    x̂ = x · pqs                       (per-input-channel smoothing; pqs = 1 / smooth, rounded to BF16)
    Ŵ = W / pqs = L1 · L2 + R         (L1 L2: the rank-r SVD of the smoothed weight; R: the residual)
    R → NVFP4 with its global scale   (the SPEC §1 quantizer, svdq's host reference: the bytes the GPU would write)
    l2t_smoothed = pqs[:, None] · L2ᵀ (so d = x @ l2t_smoothed uses the raw activations)

and the NVFP4 codecs to read the result back (dequantize, unswizzle) for checks.
"""

from __future__ import annotations

import numpy as np

from . import _C

E2M1_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def bf16_bits(a) -> np.ndarray:
    """float32 -> BF16 bits (uint16), round to nearest even; NaN stays a quiet NaN."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, ((u >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16), rounded)


def bf16_value(bits) -> np.ndarray:
    """BF16 bits (uint16) -> float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def e4m3_value(code) -> np.ndarray:
    """E4M3 (OCP e4m3fn) codes -> float32 (0x7F / 0xFF: NaN)."""
    c = np.asarray(code, dtype=np.uint32)
    e = (c >> 3) & 0xF
    m = c & 7
    normal = np.ldexp(1.0 + m / 8.0, e.astype(np.int32) - 7)
    sub = m * 2.0**-9
    v = np.where(e == 0, sub, normal)
    v = np.where((e == 0xF) & (m == 7), np.nan, v)
    return np.where(c & 0x80, -v, v).astype(np.float32)


def global_scale(amax: float) -> np.float32:
    """The conventional global scale 448 * 6 / amax (1 for an all-zero tensor)."""
    amax = float(amax)
    return np.float32(448.0 * 6.0 / amax) if amax > 0 and np.isfinite(amax) else np.float32(1.0)


def unswizzle(sf, rows: int, k: int) -> np.ndarray:
    """Scales in the 128x4 swizzled layout -> row-major [rows, K/16] (SPEC §1's byte offset formula)."""
    sf = np.frombuffer(bytes(sf), dtype=np.uint8) if not isinstance(sf, np.ndarray) else sf.reshape(-1)
    cols = k // 16
    cp = (cols + 3) // 4 * 4
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    off = (r // 128) * (cp // 4) * 512 + (c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + (c % 4)
    return sf[off]


def quantize(x_bits, gs: float, layout: str = "128x4"):
    """The SPEC §1 quantizer (svdq's host reference) of BF16 bits [M, K] with global scale gs ->
    (codes uint8 [M, K/2], scales uint8: [ceil(M/128)*128, ceil(K/64)*4] swizzled or [M, K/16] linear)."""
    x_bits = np.ascontiguousarray(x_bits, dtype=np.uint16)
    m, k = x_bits.shape
    lay = {"128x4": 0, "linear": 1}[layout]
    q, sf = _C.quantize_reference(x_bits, float(gs), lay)
    q = np.frombuffer(q, dtype=np.uint8).reshape(m, k // 2).copy()
    shape = ((m + 127) // 128 * 128, (k // 16 + 3) // 4 * 4) if lay == 0 else (m, k // 16)
    return q, np.frombuffer(sf, dtype=np.uint8).reshape(shape).copy()


def dequantize(q, sf, rows: int, k: int) -> np.ndarray:
    """deq = e2m1(code) * e4m3(scale) as float32 [rows, K] from codes [rows, K/2] and swizzled scales."""
    q = np.asarray(q, dtype=np.uint8).reshape(rows, k // 2)
    codes = np.empty((rows, k), dtype=np.uint8)
    codes[:, 0::2] = q & 0xF
    codes[:, 1::2] = q >> 4
    scales = e4m3_value(unswizzle(sf, rows, k))
    return E2M1_VALUES[codes] * np.repeat(scales, 16, axis=1)


def check_weight_shape(n: int, k: int, rank: int) -> None:
    """svdquant_weight's rules for a weight [N, K] and a rank (ValueError naming the argument)."""
    if k % 32 or n % 32:
        raise ValueError(f"argument 'weight' [N={n}, K={k}]: N and K must be multiples of 32")
    if rank % 16 or not 16 <= rank <= 256 or rank > min(n, k):
        raise ValueError(f"argument 'rank' = {rank} must be a multiple of 16 in [16, 256] and at most min(N, K)")


def svdquant_weight(weight, rank: int = 32, smooth=None) -> dict:
    """SVDQuant of a weight [N, K] (any float array): the layer's tensors as NumPy arrays.

    smooth: per-input-channel smoothing factors [K] (the activations are divided by them, the weight's columns
    multiplied), or None. rank: a multiple of 16 in [16, 256], at most min(N, K).
    Returns qweight uint8 [N, K/2], wscales uint8 (swizzled), weight_global_scale float32, pre_quant_scale (BF16
    bits [K]), l2t_smoothed (BF16 bits [K, r]) and l1 (float32 [N, r], not yet divided by alpha)."""
    w = np.asarray(weight, dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"argument 'weight' must be 2-D [N, K], got shape {w.shape}")
    n, k = w.shape
    check_weight_shape(n, k, rank)
    if smooth is None:
        pqs_bits = bf16_bits(np.ones(k, dtype=np.float32))
    else:
        s = np.asarray(smooth, dtype=np.float64).reshape(-1)
        if s.shape[0] != k or not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ValueError(f"argument 'smooth' must be {k} positive finite factors")
        pqs_bits = bf16_bits((1.0 / s).astype(np.float32))
    pqs = bf16_value(pqs_bits).astype(np.float64)
    ws = w / pqs[None, :]
    u, sv, vt = np.linalg.svd(ws, full_matrices=False)
    l1 = u[:, :rank] * sv[:rank]
    l2 = vt[:rank, :]
    resid_bits = bf16_bits((ws - l1 @ l2).astype(np.float32))
    gs_w = global_scale(np.max(np.abs(bf16_value(resid_bits))))
    q, sf = quantize(resid_bits, gs_w)
    return {
        "qweight": q,
        "wscales": sf,
        "weight_global_scale": np.float32(gs_w),
        "pre_quant_scale": pqs_bits,
        "l2t_smoothed": bf16_bits((pqs[:, None] * l2.T).astype(np.float32)),
        "l1": l1.astype(np.float32),
    }


def effective_weight(t: dict) -> np.ndarray:
    """The weight [N, K] the quantized layer applies to the raw activations: (L1 L2 + deq(R) / gs_w) * pqs, with L1 L2
    as stored (BF16 l1 and l2t)."""
    q, sf = t["qweight"], t["wscales"]
    n, k = q.shape[0], q.shape[1] * 2
    pqs = bf16_value(t["pre_quant_scale"]).astype(np.float64)
    low = bf16_value(bf16_bits(t["l1"])).astype(np.float64) @ bf16_value(t["l2t_smoothed"]).astype(np.float64).T
    return low + dequantize(q, sf, n, k).astype(np.float64) / float(t["weight_global_scale"]) * pqs[None, :]
