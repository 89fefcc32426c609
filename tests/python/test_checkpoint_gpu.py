"""Checkpoints run on a GPU: ModelOpt's tiny NVFP4_SVD export (tests/data/modelopt_tiny) loaded into the transformers
Llama model it came from, against ModelOpt's fake-quantized forward (SQNR of every layer and of the logits), and a
Nunchaku fp4 layer from the independent packer. Each layer's GPU output is also held to svdq's op computed on the host.
Skipped, with the reason, without torch, transformers or a GPU. With SVDQ_TEST_OUT set, the SQNRs are written there
(checkpoint_sqnr.json) for the record."""
import json
import os

import numpy as np
import pytest

from conftest import TORCH, needs_torch, needs_torch_gpu
from svdq import checkpoint as ck
from svdq import quant
from svdq import _safetensors as st
from test_checkpoint import MO_DIR, REF, nunchaku_layer_file, svdq_op_reference

if TORCH:
    import torch

    import svdq.nn

try:
    import transformers
except ImportError as e:
    transformers, TF_WHY = None, f"transformers not importable: {e}"


def _sqnr(ref, got):
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    return float(20 * np.log10(np.linalg.norm(ref) / np.linalg.norm(got - ref)))


def _bits(t):
    return torch.from_numpy(t.array.view(np.int16).copy()).view(torch.bfloat16)


@needs_torch_gpu
def test_modelopt_export_runs_in_its_model():
    if transformers is None:
        pytest.skip(TF_WHY)
    with open(os.path.join(MO_DIR, "config.json")) as f:
        cfg = transformers.LlamaConfig.from_dict(json.load(f))
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).cuda().eval()
    svdq.nn.load_checkpoint(model, MO_DIR)
    ref, _ = st.read(REF)
    c = ck.load(MO_DIR)
    record = {"layers": {}}
    with torch.no_grad():
        for p, layer in c.layers.items():
            mod = model.get_submodule(p)
            assert isinstance(mod, svdq.nn.SVDQuantLinear)
            x = _bits(ref[p + ".x"]).cuda()
            y = mod(x).double().cpu().numpy()
            host = svdq_op_reference(layer, ref[p + ".x"].array)  # the same op in FP64 on the host
            rel = np.linalg.norm(y - host) / np.linalg.norm(host)
            assert rel < 4e-3, (p, rel)  # the output's BF16 rounding and FP32 sum order
            record["layers"][p] = {"sqnr_vs_modelopt_db": _sqnr(ref[p + ".y"].array, y), "rel_vs_host_op": float(rel)}
        ids = torch.from_numpy(ref["input_ids"].array.astype(np.int64)).cuda()
        logits = model(ids).logits.float().cpu().numpy()
    record["logits_sqnr_vs_modelopt_db"] = _sqnr(ref["logits"].array, logits)
    out = os.environ.get("SVDQ_TEST_OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "checkpoint_sqnr.json"), "w") as f:
            json.dump(record, f, indent=1)
    print(json.dumps(record, indent=1))
    for p, r in record["layers"].items():  # the host op met these on the same inputs (test_checkpoint.py)
        assert r["sqnr_vs_modelopt_db"] > (40 if p.endswith(("o_proj", "down_proj")) else 25), (p, r)
    assert record["logits_sqnr_vs_modelopt_db"] > 15, record["logits_sqnr_vs_modelopt_db"]


@needs_torch_gpu
@pytest.mark.parametrize("wc", [None, "per_channel"])
def test_nunchaku_layer_runs_as_the_op_says(tmp_path, wc):
    """A Nunchaku fp4 layer (independent packer) in a model, on the GPU, against svdq's op on the host; with a
    per-output-channel scale (wcscales) too, for M = 1, 77 and 300 (the programs the router picks there)."""
    f = str(tmp_path / "svdq-fp4_r32-layer.safetensors")
    wcs = None if wc is None else np.exp2(np.random.default_rng(3).integers(-2, 3, 256)).astype(np.float32) * 1.25
    p, _ = nunchaku_layer_file(f, n=256, k=384, r=32, seed=5, wtscale=None if wc else 0.5, wcscales=wcs)
    c = ck.load(f)
    assert ("wcscales" in c.layers[p]) == (wc is not None)
    holder = torch.nn.Module()  # a model holding one nn.Linear under the layer's name
    parent = holder
    for part in p.split(".")[:-1]:
        child = torch.nn.Module()
        parent.add_module(part, child)
        parent = child
    parent.add_module(p.split(".")[-1], torch.nn.Linear(384, 256).to(torch.bfloat16).cuda())
    svdq.nn.load_checkpoint(holder, c, strict=False)
    mod = holder.get_submodule(p)
    assert isinstance(mod, svdq.nn.SVDQuantLinear) and (mod.wcscales is not None) == (wc is not None)
    g = np.random.default_rng(7)
    for m in (1, 77, 300):
        xb = quant.bf16_bits(g.standard_normal((m, 384)).astype(np.float32))
        with torch.no_grad():
            y = mod(torch.from_numpy(xb.view(np.int16)).view(torch.bfloat16).cuda()).double().cpu().numpy()
        host = svdq_op_reference(c.layers[p], xb) + quant.bf16_value(c.layers[p]["bias"].array)[None, :]
        rel = np.linalg.norm(y - host) / np.linalg.norm(host)
        assert rel < 4e-3, (m, rel)


@needs_torch
def test_per_channel_scale_survives_state_dict(tmp_path):
    f = str(tmp_path / "n.safetensors")
    wcs = np.repeat(np.array([0.5, 2.0], np.float32), 128)
    p, _ = nunchaku_layer_file(f, wtscale=None, wcscales=wcs)
    mod = svdq.nn.SVDQuantLinear.from_checkpoint(ck.load(f).layers[p], name=p)
    assert torch.equal(mod.wcscales, torch.from_numpy(wcs))
    fresh = svdq.nn.SVDQuantLinear(384, 256, rank=32)
    assert fresh.wcscales is None and "wcscales" not in fresh.state_dict()
    fresh.load_state_dict(mod.state_dict())
    assert torch.equal(fresh.wcscales, mod.wcscales)


@needs_torch
def test_load_checkpoint_checks_the_model_before_changing_it():
    if transformers is None:
        pytest.skip(TF_WHY)
    with open(os.path.join(MO_DIR, "config.json")) as f:
        d = json.load(f)
    d["intermediate_size"] = 384  # mlp layers no longer fit the checkpoint
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig.from_dict(d)).to(torch.bfloat16)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ck.CheckpointError, match=r"mlp\.(down|gate|up)_proj': checkpoint is \[out"):
        svdq.nn.load_checkpoint(model, MO_DIR)
    assert not any(isinstance(m, svdq.nn.SVDQuantLinear) for m in model.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
