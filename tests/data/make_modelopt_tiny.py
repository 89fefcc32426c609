"""Makes tests/data/modelopt_tiny/ (checkpoint/ and reference.safetensors): a 2-layer Llama-shaped model (hidden 256,
random weights) quantized by NVIDIA ModelOpt with NVFP4_SVDQUANT_DEFAULT_CFG on 4 random calibration batches and
written by ModelOpt's own exporter (export_hf_checkpoint) into OUT_DIR/checkpoint, plus OUT_DIR/reference.safetensors:
ModelOpt's fake-quantized forward of the model after the exporter's re-smoothing step (logits for fixed token ids;
each quantized linear's output for 8 rows x of its input in that forward), and each layer's weight as the exported
tensors define it, applied to x in FP64 without activation quantization:
x @ (pqs * (dequantize(weight, weight_scale, weight_scale_2) + lora_b @ lora_a))ᵀ (NVFP4QTensor.dequantize).

    python tests/data/make_modelopt_tiny.py OUT_DIR [--cpu]

Needs torch, transformers, safetensors and nvidia-modelopt (the files in the repo: torch 2.11.0, transformers 5.23.0,
safetensors 0.8.0, nvidia-modelopt 0.47.0, made with --cpu). ModelOpt's NVFP4 fake quantizer is CUDA/Triton only;
with --cpu it is replaced, for calibration and the reference forward, by ModelOpt's own NVFP4QTensor quantize +
dequantize (the exporter's arithmetic); on a GPU the script runs ModelOpt unchanged.
"""
import argparse
import os

import torch
from safetensors.torch import save_file

import modelopt.torch.quantization as mtq
import modelopt.torch.quantization.tensor_quant as tq
from modelopt.torch.export import export_hf_checkpoint
from modelopt.torch.export.unified_export_hf import requantize_resmooth_fused_llm_layers
from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor
from transformers import LlamaConfig, LlamaForCausalLM


def cpu_fp4_fake_quant(inputs, block_size, amax, num_bits, exponent_bits, scale_num_bits, scale_exponent_bits):
    if (num_bits, exponent_bits, scale_num_bits, scale_exponent_bits) != (4, 2, 8, 4):
        raise NotImplementedError("the CPU stand-in only does NVFP4 (E2M1 values, E4M3 scales)")
    shape, dt = inputs.shape, inputs.dtype
    x = inputs.reshape(-1, shape[-1]).float()
    s2 = amax.float().amax() / (6.0 * 448.0)
    q, s, s2 = NVFP4QTensor.quantize(x, block_size, weights_scaling_factor_2=s2)
    y = q.dequantize(dtype=torch.float32, scale=s, double_scale=s2, block_sizes={-1: block_size})
    return y.reshape(shape).to(dt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    dev = "cpu" if args.cpu else "cuda"
    if args.cpu:
        tq.dynamic_block_quantize_op = cpu_fp4_fake_quant
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=512, max_position_embeddings=128)
    cfg.architectures = ["LlamaForCausalLM"]
    model = LlamaForCausalLM(cfg).to(torch.bfloat16).to(dev)
    batches = [torch.randint(0, 512, (2, 32), device=dev) for _ in range(4)]

    def loop(m):
        for b in batches:
            m(b)

    model = mtq.quantize(model, mtq.NVFP4_SVDQUANT_DEFAULT_CFG, loop)
    # The exporter first re-smooths layers that share an input (q/k/v, gate/up: one pre_quant_scale, the SVD re-run)
    # and exports those weights; run that step here so the reference forward is the exported model's.
    requantize_resmooth_fused_llm_layers(model)
    ref = {}
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 512, (1, 16), generator=g)
    seen = {}

    def record(name):
        def hook(mod, inputs, output):
            seen.setdefault(name, inputs[0].detach())  # returns None: the output stays the layer's

        return hook

    hooks = [mod.register_forward_hook(record(name)) for name, mod in model.named_modules()
             if isinstance(mod, torch.nn.Linear) and name.startswith("model.layers.")]
    with torch.no_grad():
        ref["input_ids"] = ids.to(torch.int32)
        ref["logits"] = model(ids.to(dev)).logits.float().cpu()  # also records each layer's input (the hooks)
        for h in hooks:
            h.remove()
        for name, x in seen.items():  # 8 rows of the layer's real input, in its calibrated range
            x = x.reshape(-1, x.shape[-1])[:8].to(torch.bfloat16)
            ref[name + ".x"] = x.cpu().clone()
            ref[name + ".y"] = model.get_submodule(name)(x).float().cpu()
    ckpt = os.path.join(args.out, "checkpoint")
    export_hf_checkpoint(model, export_dir=ckpt)  # changes the model in place (packs weights, re-smooths)
    from safetensors.torch import load_file

    sd = load_file(os.path.join(ckpt, "model.safetensors"))
    for key in [k for k in ref if k.endswith(".x")]:
        p = key[:-2]
        n, k2 = sd[p + ".weight"].shape
        qt = NVFP4QTensor((n, 2 * k2), torch.float32, sd[p + ".weight"])
        w = qt.dequantize(dtype=torch.float32, scale=sd[p + ".weight_scale"], double_scale=sd[p + ".weight_scale_2"],
                          block_sizes={-1: 16})
        a = sd[p + ".weight_quantizer._svdquant_lora_a"].double()
        b = sd[p + ".weight_quantizer._svdquant_lora_b"].double()
        pqs = sd[p + ".pre_quant_scale"].double()
        weff = (w.double() + b @ a) * pqs[None, :]
        ref[p + ".y_weights"] = (ref[key].double() @ weff.T).float()
    save_file(ref, os.path.join(args.out, "reference.safetensors"))
    print("wrote", ckpt, sorted(os.listdir(ckpt)), "and reference.safetensors")


if __name__ == "__main__":
    main()
