"""Host-side SVDQuant quantization of weights (svdq.quant): the codecs against the C++ reference, and the point of
the low-rank branch: on weights with outlier channels it beats plain NVFP4 of the same weight."""
import numpy as np
import pytest

from svdq import quant


def rng(seed):
    return np.random.default_rng(seed)


def test_bf16_rounding_is_nearest_even():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-9, -2.5, np.inf, 0.0, -0.0], np.float32)
    b = quant.bf16_bits(x)
    assert list(b) == [0x3F80, 0x3F80, 0x3F81, 0xC020, 0x7F80, 0x0000, 0x8000]
    assert np.array_equal(quant.bf16_value(b)[:4], np.array([1.0, 1.0, 1.0078125, -2.5], np.float32))
    assert quant.bf16_bits(np.array([np.nan], np.float32))[0] & 0x7FC0 == 0x7FC0


def test_e4m3_decodes_every_code():
    v = quant.e4m3_value(np.arange(256))
    assert v[0x7E] == 448 and v[0xFE] == -448 and np.isnan(v[0x7F]) and np.isnan(v[0xFF])
    assert v[0x01] == 2.0**-9 and v[0x08] == 2.0**-6 and v[0x38] == 1.0


def test_quantize_then_dequantize_is_within_half_a_step():
    x = rng(1).standard_normal((130, 96)).astype(np.float32)
    bits = quant.bf16_bits(x)
    xv = quant.bf16_value(bits)
    gs = quant.global_scale(np.abs(xv).max())
    q, sf = quant.quantize(bits, gs)
    assert q.shape == (130, 48) and sf.shape == (256, 8)
    assert not quant.unswizzle(sf, 256, 96)[130:].any()  # zero padding rows
    deq = quant.dequantize(q, sf, 130, 96) / gs
    # E2M1 steps are at most 2 (between 4 and 6) at a block scale of amax/6: half a step is amax/6 per block.
    amax = np.abs(xv.reshape(130, 6, 16)).max(axis=2)
    err = np.abs(deq - xv).reshape(130, 6, 16).max(axis=2)
    assert np.all(err <= amax / 6 * 1.07 + 1e-12)


def test_linear_and_swizzled_scales_agree():
    bits = quant.bf16_bits(rng(2).standard_normal((200, 64)).astype(np.float32))
    _, sw = quant.quantize(bits, 100.0, "128x4")
    _, lin = quant.quantize(bits, 100.0, "linear")
    assert np.array_equal(quant.unswizzle(sw, 200, 64), lin)


def outlier_weight(n, k, seed):
    r = rng(seed)
    w = r.standard_normal((n, k)) * 0.02
    cols = r.choice(k, 8, replace=False)
    w[:, cols] *= 40.0  # outlier input channels, as in real LLM / DiT layers
    return w


def test_low_rank_branch_beats_plain_nvfp4_on_outlier_channels():
    w = outlier_weight(256, 512, 3)
    t = quant.svdquant_weight(w, rank=32)
    err_svd = np.linalg.norm(quant.effective_weight(t) - w)
    bits = quant.bf16_bits(w.astype(np.float32))
    gs = quant.global_scale(np.abs(quant.bf16_value(bits)).max())
    q, sf = quant.quantize(bits, gs)
    err_plain = np.linalg.norm(quant.dequantize(q, sf, 256, 512) / gs - w)
    assert err_svd < 0.5 * err_plain, (err_svd, err_plain)
    sqnr = 20 * np.log10(np.linalg.norm(w) / err_svd)
    assert sqnr > 20


def test_smoothing_is_folded_exactly():
    w = outlier_weight(64, 128, 4)
    smooth = np.exp(rng(5).uniform(-1, 1, 128))
    t = quant.svdquant_weight(w, rank=16, smooth=smooth)
    pqs = quant.bf16_value(t["pre_quant_scale"])
    assert np.all(np.abs(pqs - 1 / smooth) <= np.abs(1 / smooth) * 2**-8)
    # The effective weight acts on raw x: close to w whatever the smoothing.
    assert np.linalg.norm(quant.effective_weight(t) - w) < 0.1 * np.linalg.norm(w)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(weight=np.zeros((64, 48)), rank=16), "multiples of 32"),
        (dict(weight=np.zeros((64, 64)), rank=24), "argument 'rank'"),
        (dict(weight=np.zeros((32, 64)), rank=48), "argument 'rank'"),
        (dict(weight=np.zeros((64, 64)), rank=16, smooth=np.zeros(64)), "argument 'smooth'"),
        (dict(weight=np.zeros(64), rank=16), "2-D"),
    ],
)
def test_bad_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        quant.svdquant_weight(**kwargs)
