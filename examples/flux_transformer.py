"""One FLUX.1-dev transformer forward at 1024 x 1024 (4096 image + 512 text tokens), random weights: the BF16 model
against the same model with every nn.Linear of its blocks swapped by svdq.nn.quantize_model (rank 32, quantized on
the GPU), both replayed from CUDA graphs on the same inputs. Prints (and with --out writes as JSON) the forward's wall
time, peak GPU memory and the output's SQNR against BF16.

    python examples/flux_transformer.py [--repeats 20] [--out flux.json]

Needs torch, diffusers (FluxTransformer2DModel is built from the FLUX.1-dev config below: no hub access) and a GPU
with about 40 GB.
"""
import argparse
import json
import time

import torch

import svdq
import svdq.nn

FLUX1_DEV = dict(patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
                 num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768, guidance_embeds=True,
                 axes_dims_rope=(16, 56, 56))


def inputs(dev):
    g = torch.Generator(device="cpu").manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g).to(dev, torch.bfloat16)  # noqa: E731
    img = torch.zeros(4096, 3)
    img[:, 1] = torch.arange(64).repeat_interleave(64)
    img[:, 2] = torch.arange(64).repeat(64)
    return dict(hidden_states=r(1, 4096, 64), encoder_hidden_states=r(1, 512, 4096), pooled_projections=r(1, 768),
                timestep=torch.tensor([0.5], device=dev, dtype=torch.bfloat16),
                guidance=torch.tensor([3.5], device=dev, dtype=torch.bfloat16),
                img_ids=img.to(dev, torch.bfloat16), txt_ids=torch.zeros(512, 3, device=dev, dtype=torch.bfloat16),
                return_dict=False)


def timed_graph(model, x, repeats):
    """The forward captured in a CUDA graph; returns (output, median ms per replay, peak bytes while running)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(2):
            model(**x)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.reset_peak_memory_stats()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        out = model(**x)[0]
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return out.float().clone(), times[len(times) // 2], torch.cuda.max_memory_allocated()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--out")
    args = ap.parse_args()
    from diffusers import FluxTransformer2DModel

    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = FluxTransformer2DModel(**FLUX1_DEV).to(dev, torch.bfloat16).eval()
    x = inputs(dev)
    ref, ms_bf16, mem_bf16 = timed_graph(model, x, args.repeats)
    t0 = time.perf_counter()
    blocks = lambda name, m: name.startswith(("transformer_blocks.", "single_transformer_blocks."))  # noqa: E731
    svdq.nn.quantize_model(model, rank=args.rank, filter=blocks)
    torch.cuda.synchronize()
    quant_s = time.perf_counter() - t0
    swapped = sum(isinstance(m, svdq.nn.SVDQuantLinear) for m in model.modules())
    torch.cuda.empty_cache()
    out, ms_svdq, mem_svdq = timed_graph(model, x, args.repeats)
    sqnr = float(20 * torch.log10(ref.norm() / (out - ref).norm()))
    rec = {"gpu": torch.cuda.get_device_name(), "svdq": svdq.version(), "torch": torch.__version__,
           "layers_swapped": swapped, "rank": args.rank, "quantize_s": round(quant_s, 1),
           "bf16_ms": round(ms_bf16, 3), "svdq_ms": round(ms_svdq, 3), "svdq_over_bf16": round(ms_svdq / ms_bf16, 3),
           "bf16_peak_gib": round(mem_bf16 / 2**30, 2), "svdq_peak_gib": round(mem_svdq / 2**30, 2),
           "output_sqnr_db": round(sqnr, 2)}
    print(json.dumps(rec, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
