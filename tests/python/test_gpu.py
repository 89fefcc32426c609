"""On a GPU with torch (and CuPy where installed): the torch ops against the C++ entry points and the host reference,
fake-tensor shapes, torch.compile, CUDA graphs, opcheck, SVDQuantLinear and its state_dict. Skipped, with the reason,
where there is no GPU or no torch."""
import os
import pathlib
import re
import tempfile

import numpy as np
import pytest

import svdq
from svdq import _C, quant

from conftest import needs_torch, needs_torch_gpu

try:
    import torch

    import svdq.nn
except ImportError:  # torch is optional: the tests below skip with the reason
    torch = None


def _problem(m, n, k, r, seed=0, bias=True):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn((m, k), generator=g) * 0.5).to(torch.bfloat16)
    pqs = (torch.rand((k,), generator=g) + 0.5).to(torch.bfloat16)
    w = (torch.randn((n, k), generator=g) * 0.05).to(torch.float32)
    wb = quant.bf16_bits(w.numpy())
    gs_w = quant.global_scale(np.abs(quant.bf16_value(wb)).max())
    q, sf = quant.quantize(wb, gs_w)
    l2t = (torch.randn((k, r), generator=g) * 0.01).to(torch.bfloat16)
    l1 = (torch.randn((n, r), generator=g) * 0.01).to(torch.bfloat16)
    b = (torch.randn((n,), generator=g)).to(torch.bfloat16) if bias else None
    xs = (x.float() * pqs.float()).to(torch.bfloat16).float().abs().max().item()
    gs_x = float(quant.global_scale(xs))
    alpha = 1.0 / (gs_x * float(gs_w))
    dev = "cuda"
    return dict(
        x=x.to(dev), pqs=pqs.to(dev), w=torch.from_numpy(q).to(dev), wsf=torch.from_numpy(sf).to(dev),
        l2t=l2t.to(dev), l1=l1.to(dev), bias=None if b is None else b.to(dev),
        gs=torch.tensor([gs_x], dtype=torch.float32, device=dev), alpha=torch.tensor([alpha], dtype=torch.float32, device=dev),
        w_f32=w, gs_w=float(gs_w),
    )


@needs_torch_gpu
@pytest.mark.parametrize("m,k", [(1, 64), (77, 3104), (129, 3072), (4096, 3072)])
def test_quantize_is_byte_identical_to_the_host_reference(m, k):
    g = torch.Generator().manual_seed(m + k)
    x = (torch.randn((m, k), generator=g) * 3).to(torch.bfloat16)
    pqs = (torch.rand((k,), generator=g) + 0.5).to(torch.bfloat16)
    gs = torch.tensor([37.5], dtype=torch.float32)
    for layout in (svdq.SWIZZLED, svdq.LINEAR):
        xq, sf = svdq.nvfp4_quantize_smooth(x.cuda(), pqs.cuda(), gs.cuda(), layout=layout)
        sm = (x.float() * pqs.float()).to(torch.bfloat16)
        rq, rsf = quant.quantize(sm.view(torch.int16).numpy().view(np.uint16), 37.5, layout)
        assert np.array_equal(xq.cpu().numpy(), rq)
        assert np.array_equal(sf.cpu().numpy().reshape(-1), rsf.reshape(-1))


@needs_torch_gpu
def test_torch_ops_are_bitwise_the_cpp_entry_points():
    p = _problem(129, 256, 3072, 32)
    y = svdq.svdquant_linear(p["x"], p["w"], p["wsf"], p["alpha"], p["pqs"], p["l2t"], p["l1"], p["gs"], p["bias"])
    out = torch.empty_like(y)
    ws = torch.empty(_C.svdquant_linear_workspace_size(129, 3072, 32), dtype=torch.uint8, device="cuda")
    _C.svdquant_linear(p["x"], p["w"], p["wsf"], p["alpha"], p["pqs"], p["l2t"], p["l1"], p["gs"], p["bias"], out, ws,
                       torch.cuda.current_stream().cuda_stream, -1)
    torch.cuda.synchronize()
    assert torch.equal(y.view(torch.int16), out.view(torch.int16))
    # mm_nvfp4_svdquant: the torch op (allocating) and the out= form against the binding, same inputs.
    xq, sf = svdq.nvfp4_quantize_smooth(p["x"], p["pqs"], p["gs"])
    d = (p["x"].float() @ p["l2t"].float()).to(torch.bfloat16)
    mm = svdq.mm_nvfp4_svdquant(xq, p["w"], sf, p["wsf"], p["alpha"], d, p["l1"], p["bias"])
    mm_out = torch.full_like(mm, float("nan"))
    svdq.mm_nvfp4_svdquant(xq, p["w"], sf, p["wsf"], p["alpha"], d, p["l1"], p["bias"], out=mm_out)
    direct = torch.full_like(mm, float("nan"))
    _C.mm_nvfp4_svdquant(xq, p["w"], sf, p["wsf"], p["alpha"], d, p["l1"], p["bias"], direct,
                         torch.cuda.current_stream().cuda_stream, -1)
    torch.cuda.synchronize()
    assert torch.equal(mm.view(torch.int16), direct.view(torch.int16))
    assert torch.equal(mm_out.view(torch.int16), direct.view(torch.int16))


@needs_torch_gpu
def test_layer_output_against_a_float64_reference():
    p = _problem(64, 256, 1024, 32, seed=3)
    alpha = p["alpha"].item()
    # l1 with 1/alpha folded in (SPEC §1: the low-rank term comes out unscaled), as SVDQuantLinear passes it.
    l1s = (p["l1"].double() / alpha).to(torch.bfloat16)
    y = svdq.svdquant_linear(p["x"], p["w"], p["wsf"], p["alpha"], p["pqs"], p["l2t"], l1s, p["gs"], p["bias"]).double().cpu()
    x = p["x"].double().cpu()
    xs = (p["x"].float() * p["pqs"].float()).to(torch.bfloat16).cpu()
    wdeq = torch.from_numpy(quant.dequantize(p["w"].cpu().numpy(), p["wsf"].cpu().numpy(), 256, 1024)).double() / p["gs_w"]
    gs_x = p["gs"].item()
    xq, xsf = quant.quantize(quant.bf16_bits(xs.float().numpy()), gs_x)
    xdeq = torch.from_numpy(quant.dequantize(xq, xsf, 64, 1024)).double() / gs_x
    d = (x @ p["l2t"].double().cpu()).to(torch.bfloat16).double()
    tail = alpha * (d @ l1s.double().cpu().T) + p["bias"].double().cpu()
    # The whole chain in FP64 on the host reference's codes and BF16 d: only the output's BF16 rounding and the
    # order of the FP32 sums differ.
    chain = xdeq @ wdeq.T + tail
    assert (y - chain).norm() / chain.norm() < 4e-3, (y - chain).norm() / chain.norm()
    # Against unquantized activations: NVFP4's own error (about 9 % RMS per element on these inputs, 5.6-6.1 % of
    # the output here).
    ref = xs.double() @ wdeq.T + alpha * ((x @ p["l2t"].double().cpu()) @ l1s.double().cpu().T) + p["bias"].double().cpu()
    assert (y - ref).norm() / ref.norm() < 0.10


@needs_torch_gpu
def test_fake_shapes_and_opcheck():
    from torch._subclasses.fake_tensor import FakeTensorMode

    p = _problem(33, 128, 256, 16, seed=5)
    args = (p["x"], p["w"], p["wsf"], p["alpha"], p["pqs"], p["l2t"], p["l1"], p["gs"], p["bias"], -1)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        y = torch.ops.svdq.svdquant_linear(*fake)
        assert tuple(y.shape) == (33, 128) and y.dtype == torch.bfloat16
    torch.library.opcheck(torch.ops.svdq.svdquant_linear.default, args)
    xq_args = (p["x"], p["pqs"], p["gs"], 0)
    torch.library.opcheck(torch.ops.svdq.nvfp4_quantize.default, xq_args)


@needs_torch_gpu
def test_svdquant_linear_module_compile_graph_and_state_dict():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3072, 3072, bias=True).to(torch.bfloat16).cuda()
    with torch.no_grad():
        lin.weight[:, :16] *= 30  # outlier channels
    m = svdq.nn.SVDQuantLinear.from_linear(lin, rank=32, input_amax=4.0)
    x = (torch.randn(256, 3072, device="cuda") * 0.5).to(torch.bfloat16)
    y = m(x)
    ref = lin(x).float()
    sqnr = 20 * torch.log10(ref.norm() / (y.float() - ref).norm())
    assert sqnr > 20, sqnr
    compiled = torch.compile(m, fullgraph=True)
    assert torch.equal(compiled(x).view(torch.int16), y.view(torch.int16))
    g = torch.cuda.CUDAGraph()
    static_x = x.clone()
    m(static_x)  # warm-up (kernel compile, workspace) outside the capture
    with torch.cuda.graph(g):
        static_y = m(static_x)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_y.view(torch.int16), y.view(torch.int16))
    x2 = (torch.randn(256, 3072, device="cuda") * 0.5).to(torch.bfloat16)
    y2 = m(x2)
    for want, src in ((y2, x2), (y, x), (y2, x2)):  # replays on other inputs: no state left from the replay before
        static_x.copy_(src)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_y.view(torch.int16), want.view(torch.int16))
    from safetensors.torch import load_file, save_file

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "layer.safetensors")
        save_file({k: v.contiguous() for k, v in m.state_dict().items()}, path)
        m2 = svdq.nn.SVDQuantLinear(3072, 3072, rank=32, bias=True, device="cuda")
        m2.load_state_dict(load_file(path, device="cuda"))
        assert not m2._dynamic
        assert torch.equal(m2(x).view(torch.int16), y.view(torch.int16))


@needs_torch_gpu
def test_from_linear_on_the_gpu_matches_the_host_path():
    """A CUDA weight is quantized on the GPU (FP32 SVD, svdq's quantizer), a host weight by NumPy (FP64 SVD): the
    same smoothing bytes, the same quality, and (the quantizer being the same) nearly all codes equal."""
    torch.manual_seed(1)
    lin = torch.nn.Linear(1024, 512, bias=False).to(torch.bfloat16)
    with torch.no_grad():
        lin.weight[:, :8] *= 30
    smooth = torch.rand(1024) + 0.5
    host = svdq.nn.SVDQuantLinear.from_linear(lin, rank=32, smooth=smooth)
    gpu = svdq.nn.SVDQuantLinear.from_linear(lin.cuda(), rank=32, smooth=smooth)
    assert torch.equal(host.pre_quant_scale.view(torch.int16), gpu.pre_quant_scale.cpu().view(torch.int16))
    same = (host.qweight == gpu.qweight.cpu()).float().mean().item()
    assert same > 0.98, same
    w = lin.weight.float().cpu()

    def sqnr(m):
        t = {k: getattr(m, k).cpu() for k in ("qweight", "wscales", "pre_quant_scale", "l2t_smoothed")}
        eff = quant.effective_weight({"qweight": t["qweight"].numpy(), "wscales": t["wscales"].numpy(),
                                      "weight_global_scale": float(m.weight_global_scale),
                                      "pre_quant_scale": t["pre_quant_scale"].view(torch.int16).numpy().view(np.uint16),
                                      "l2t_smoothed": t["l2t_smoothed"].view(torch.int16).numpy().view(np.uint16),
                                      "l1": m.l1.float().cpu().numpy()})
        return float(20 * np.log10(np.linalg.norm(w) / np.linalg.norm(eff - w.numpy())))

    assert abs(sqnr(host) - sqnr(gpu)) < 0.2, (sqnr(host), sqnr(gpu))


@needs_torch_gpu
def test_quantize_model_swaps_the_linears_it_is_given():
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256), torch.nn.Linear(256, 10))
    model = model.to(torch.bfloat16).cuda()
    svdq.nn.quantize_model(model, rank=16)
    assert isinstance(model[0], svdq.nn.SVDQuantLinear) and isinstance(model[2], svdq.nn.SVDQuantLinear)
    assert isinstance(model[3], torch.nn.Linear) and not isinstance(model[3], svdq.nn.SVDQuantLinear)  # 10 % 32 != 0
    y = model(torch.randn(8, 256, device="cuda", dtype=torch.bfloat16))
    assert y.shape == (8, 10) and torch.isfinite(y.float()).all()


@needs_torch_gpu
def test_cupy_arrays_round_trip():
    cupy = pytest.importorskip("cupy")
    p = _problem(16, 128, 512, 16, seed=9, bias=False)
    y = svdq.svdquant_linear(p["x"], p["w"], p["wsf"], p["alpha"], p["pqs"], p["l2t"], p["l1"], p["gs"])
    cp = {k: cupy.from_dlpack(v.view(torch.int16) if v.dtype == torch.bfloat16 else v) for k, v in p.items()
          if isinstance(v, torch.Tensor) and v.is_cuda}
    yc = svdq.svdquant_linear(cp["x"], cp["w"], cp["wsf"], cp["alpha"], cp["pqs"], cp["l2t"], cp["l1"], cp["gs"])
    assert isinstance(yc, cupy.ndarray) and yc.dtype == cupy.uint16
    cupy.cuda.get_current_stream().synchronize()
    assert np.array_equal(cupy.asnumpy(yc), y.view(torch.int16).cpu().numpy().view(np.uint16))


@needs_torch
def test_host_tensors_are_refused():
    # (through torch's DLPack C exchange table where torch has one, else through the Python-side check)
    x = torch.zeros((128, 64), dtype=torch.bfloat16)
    msg = r"argument 'x' is a torch(\.Tensor in host memory| tensor on cpu); svdq needs CUDA device memory"
    with pytest.raises(TypeError, match="nvfp4_quantize: " + msg):
        svdq.nvfp4_quantize(x, torch.ones(1))
    with pytest.raises(TypeError, match="svdquant_linear: " + msg):
        svdq.svdquant_linear(x, x, x, x, x, x, x, x)


@needs_torch
def test_torch_arrays_take_the_exchange_table_where_torch_has_one():
    table = any(hasattr(torch.Tensor, n) for n in ("__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"))
    assert svdq._C.has_exchange_api(torch.zeros(1)) == table
    assert svdq._C.has_exchange_api(torch.nn.Parameter(torch.zeros(1))) == table  # subclasses inherit it


@needs_torch
def test_torch_ops_are_registered():
    import svdq.nn  # noqa: F401

    for name in ("mm_nvfp4_svdquant", "mm_nvfp4_svdquant_out", "nvfp4_quantize", "svdquant_linear"):
        assert hasattr(torch.ops.svdq, name)


@needs_torch_gpu
def test_readme_example_runs_as_written(capsys):
    """The README's Python example, executed as it stands there."""
    readme = pathlib.Path(__file__).resolve().parents[2] / "README.md"
    block = re.search(r"```python\n(.*?)```", readme.read_text(), re.S)
    assert block, "README.md has no python example"
    exec(compile(block.group(1), "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2, printed
    rel = float(re.search(r"[0-9.]+(?:e-?[0-9]+)?", printed[0].replace("tensor(", "")).group(0))
    assert rel < 0.5, printed[0]  # (the layer's accuracy is checked against FP64 above; this is the example's sanity)
