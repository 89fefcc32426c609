"""python -m svdq.bench: what a Python caller pays.

  --overhead            host time per call (torch tensors in, no CUDA graph, no synchronization inside the loop)
                        of svdquant_linear, mm_nvfp4_svdquant and nvfp4_quantize_smooth
  --workload NAME       SPEC §6 rows (flux1-1024, llm8b-decode, llm8b-prefill): the svdq layer (SVDQuantLinear,
                        fixed input scale) against torch.nn.functional.linear in BF16, CUDA-event medians with the L2
                        flushed before each timed call, and the weighted totals
  --chart FILE.png      with --workload: a bar chart of svdq / BF16 per row (needs matplotlib)

The C++ benchmark (`svdq bench --layer --workload NAME`) is the reference measurement (kernel-active time through
CUPTI); this one is what the Python API costs end to end, host included.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

WORKLOADS = {
    "flux1-1024": [(m, n, k, True, c) for m, c in ((4096, 19), (512, 19), (4608, 38))
                   for n, k in ((9216, 3072), (3072, 3072), (12288, 3072), (3072, 12288))],
    "llm8b-decode": [(m, n, k, False, 1) for m in (1, 16)
                     for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336))],
    "llm8b-prefill": [(m, n, k, False, 1) for m in (128, 512, 2048)
                      for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336))],
}


def _layer(torch, n, k, bias, rank=32):
    import svdq.nn

    lin = torch.nn.Linear(k, n, bias=bias).to(torch.bfloat16).cuda()
    return lin, svdq.nn.SVDQuantLinear.from_linear(lin, rank=rank, input_amax=4.0)


def overhead(torch, m=1, n=512, k=512, rounds=30, calls=50) -> dict:
    """Host time per call: `calls` calls between synchronizations (few enough that the launch queue never fills, on a
    shape small enough that the GPU keeps up: else the loop would wait for the GPU and time its work), median of
    `rounds` rounds."""
    import svdq

    lin, layer = _layer(torch, n, k, True)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    xq, sf = svdq.nvfp4_quantize_smooth(x, layer.pre_quant_scale, layer.input_global_scale)
    d = torch.zeros(m, layer.rank, device="cuda", dtype=torch.bfloat16)
    ops = {
        "svdquant_linear": lambda: svdq.svdquant_linear(x, layer.qweight, layer.wscales, layer.alpha,
                                                        layer.pre_quant_scale, layer.l2t_smoothed, layer.l1_scaled,
                                                        layer.input_global_scale, layer.bias),
        "mm_nvfp4_svdquant": lambda: svdq.mm_nvfp4_svdquant(xq, layer.qweight, sf, layer.wscales, layer.alpha, d,
                                                            layer.l1_scaled, layer.bias),
        "nvfp4_quantize_smooth": lambda: svdq.nvfp4_quantize_smooth(x, layer.pre_quant_scale, layer.input_global_scale),
        "torch.nn.functional.linear": lambda: torch.nn.functional.linear(x, lin.weight, lin.bias),
        # Where the time goes: the extension alone (arrays, allocation, stream, C++ validation, routing, launches)
        # and a bare call into it.
        "svdq._C.svdquant_linear": lambda: svdq._C.svdquant_linear(
            x, layer.qweight, layer.wscales, layer.alpha, layer.pre_quant_scale, layer.l2t_smoothed, layer.l1_scaled,
            layer.input_global_scale, layer.bias, None, None, None, -1),
        "svdq._C.has_exchange_api": lambda: svdq._C.has_exchange_api(x),
    }
    out = {}
    for name, fn in ops.items():
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        per_call = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            per_call.append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
        out[name] = statistics.median(per_call)
    return out


def _time(torch, fn, flush, reps=20) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        flush.zero_()
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return statistics.median(samples)


def workload(torch, name: str, chart: str | None = None):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows, tot_s, tot_b = [], 0.0, 0.0
    for m, n, k, bias, count in WORKLOADS[name]:
        lin, layer = _layer(torch, n, k, bias)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            layer(x), lin(x)
        s = _time(torch, lambda: layer(x), flush)
        b = _time(torch, lambda: torch.nn.functional.linear(x, lin.weight, lin.bias), flush)
        rows.append((m, n, k, count, s, b))
        tot_s += s * count
        tot_b += b * count
        print(f"{m:6d} {n:6d} {k:6d} x{count:<3d}  svdq {s:9.2f} us   bf16 {b:9.2f} us   ratio {s / b:.3f}", flush=True)
        del lin, layer
    print(f"weighted total: svdq {tot_s:.1f} us, bf16 {tot_b:.1f} us, ratio {tot_s / tot_b:.3f}")
    if chart:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise SystemExit(f"--chart needs matplotlib: {e}")
        labels = [f"{m}x{n}x{k}" for m, n, k, *_ in rows]
        fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.6), 4))
        ax.bar(labels, [s / b for *_, s, b in rows])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_ylabel("svdq layer / BF16 linear (time)")
        ax.set_title(f"{name}: {torch.cuda.get_device_name()}")
        plt.xticks(rotation=60, ha="right")
        fig.tight_layout()
        fig.savefig(chart, dpi=120)
        print(f"wrote {chart}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m svdq.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--overhead", action="store_true")
    ap.add_argument("--workload", choices=sorted(WORKLOADS))
    ap.add_argument("--chart")
    a = ap.parse_args(argv)
    if not (a.overhead or a.workload):
        ap.error("nothing to do: give --overhead and/or --workload NAME")
    try:
        import torch
    except ImportError as e:
        print(f"python -m svdq.bench needs torch: {e}", file=sys.stderr)
        return 2
    import svdq

    ok, why = svdq.gpu_available()
    if not ok:
        print(f"python -m svdq.bench: no CUDA device: {why}", file=sys.stderr)
        return 2
    print(f"svdq {svdq.version()} on {torch.cuda.get_device_name()}, torch {torch.__version__}")
    if a.overhead:
        for name, us in overhead(torch).items():
            print(f"host time per call  {name:28s} {us:7.2f} us")
    if a.workload:
        workload(torch, a.workload, a.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
