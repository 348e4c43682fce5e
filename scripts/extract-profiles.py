#!/usr/bin/python3
"""Extract per-tensor training profiles for dlcp-sim from Debian's PyTorch.

For each model (torchvision's ResNet50, VGG16, VGG19 and GoogleNet; the
Transformer "base" of Vaswani et al. from torch.nn), write
workloads/profiles/<model>.csv: one row per parameter tensor, in
registration (forward) order, with its gradient's size in bytes (float32)
and the forward and backward compute time of the layer it belongs to.

Compute times come from counted FLOPs, not from a measurement: every
Conv2d, Linear and MultiheadAttention layer's multiply-adds are counted
(2 FLOPs each) with forward hooks on one sample, then
    fwd_us = FLOPs x batch / (device_tflops x efficiency)
    bwd_us = 2 x fwd_us   (gradients of inputs and of weights)
and attributed to the layer's first parameter (its other parameters get 0).
The defaults describe the MLT seed's testbed GPU, an RTX 3090 (35.58 FP32
TFLOPS, NVIDIA's GA102 whitepaper) at an assumed 40% of peak, and the
seed's batch sizes (32 images per GPU; Transformer 10 samples).  Layers
without counted FLOPs (batch norm, ReLU, pooling) are taken as free.  The
assumptions are written into each file's header.

Usage: scripts/extract-profiles.py [--out DIR] [--tflops T] [--efficiency E]
"""
import argparse
import os
import sys

import torch
import torchvision

MODELS = ("resnet50", "vgg16", "vgg19", "googlenet", "transformer")
BATCH = {"resnet50": 32, "vgg16": 32, "vgg19": 32, "googlenet": 32,
         "transformer": 10}
SEQ_LEN = 128          # Transformer source and target tokens per sample
VOCAB = 32000          # tensor2tensor's translate_ende_wmt32k vocabulary


class TransformerBase(torch.nn.Module):
    """Vaswani et al.'s base model: d=512, 8 heads, 6+6 layers, FFN 2048,
    with one embedding shared by source, target and the output projection
    (so its gradient is one tensor, as in tensor2tensor)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 512)
        self.core = torch.nn.Transformer(d_model=512, nhead=8,
                                         num_encoder_layers=6,
                                         num_decoder_layers=6,
                                         dim_feedforward=2048)

    def forward(self, src, tgt):
        out = self.core(self.embed(src), self.embed(tgt))
        return out @ self.embed.weight.t()


def build(name):
    tv = torchvision.models
    if name == "resnet50":
        return tv.resnet50(weights=None), (torch.zeros(1, 3, 224, 224),)
    if name == "vgg16":
        return tv.vgg16(weights=None), (torch.zeros(1, 3, 224, 224),)
    if name == "vgg19":
        return tv.vgg19(weights=None), (torch.zeros(1, 3, 224, 224),)
    if name == "googlenet":
        # The inference tower without the two auxiliary classifiers, as in
        # tf_cnn_benchmarks' googlenet.
        m = tv.googlenet(weights=None, aux_logits=False, init_weights=False)
        return m, (torch.zeros(1, 3, 224, 224),)
    if name == "transformer":
        tok = torch.zeros(SEQ_LEN, 1, dtype=torch.long)
        return TransformerBase(), (tok, tok)
    raise ValueError(name)


def count_flops(model, inputs):
    """FLOPs of one sample's forward pass, per module, by hooks."""
    flops = {}

    def conv(mod, inp, out):
        k = mod.weight.shape[1] * mod.weight.shape[2] * mod.weight.shape[3]
        flops[mod] = flops.get(mod, 0) + 2 * out.numel() * k

    def linear(mod, inp, out):
        flops[mod] = flops.get(mod, 0) + 2 * out.numel() * mod.in_features

    def mha(mod, inp, out):
        q, k = inp[0], inp[1]
        lq, lk, e = q.shape[0], k.shape[0], mod.embed_dim
        proj = 2 * (lq * e * e + 2 * lk * e * e + lq * e * e)
        attn = 2 * 2 * lq * lk * e
        flops[mod] = flops.get(mod, 0) + proj + attn

    hooks = []
    for mod in model.modules():
        if isinstance(mod, torch.nn.Conv2d):
            hooks.append(mod.register_forward_hook(conv))
        elif isinstance(mod, torch.nn.MultiheadAttention):
            hooks.append(mod.register_forward_hook(mha))
        elif isinstance(mod, torch.nn.Linear):
            hooks.append(mod.register_forward_hook(linear))
    model.eval()
    with torch.no_grad():
        out = model(*inputs)
    if isinstance(model, TransformerBase):
        # The output projection through the shared embedding.
        flops[model.embed] = 2 * out.numel() * 512
    for h in hooks:
        h.remove()
    return flops


def owner_of(model):
    """Maps each parameter to the module that directly owns it."""
    owner = {}
    for mod in model.modules():
        for p in mod.parameters(recurse=False):
            owner.setdefault(id(p), mod)
    return owner


def write_profile(name, out_dir, tflops, efficiency):
    torch.manual_seed(0)
    model, inputs = build(name)
    flops = count_flops(model, inputs)
    owner = owner_of(model)
    batch = BATCH[name]
    rate = tflops * 1e12 * efficiency  # FLOP/s
    seen = set()
    rows = []
    for pname, p in model.named_parameters():
        mod = owner[id(p)]
        f = 0
        if mod not in seen:
            seen.add(mod)
            f = flops.get(mod, 0)
        fwd_us = f * batch / rate * 1e6
        rows.append((pname, p.numel(), 4 * p.numel(), fwd_us, 2 * fwd_us))
    path = os.path.join(out_dir, name + ".csv")
    total_bytes = sum(r[2] for r in rows)
    total_fwd = sum(r[3] for r in rows)
    with open(path, "w") as f:
        f.write("# model=%s tensors=%d bytes=%d forward_us=%.3f "
                "backward_us=%.3f\n" % (name, len(rows), total_bytes,
                                        total_fwd, 2 * total_fwd))
        f.write("# source: torch %s, torchvision %s (Debian python3-torch, "
                "python3-torchvision) via scripts/extract-profiles.py\n"
                % (torch.__version__, torchvision.__version__))
        f.write("# compute: counted FLOPs x batch %d / (%.2f TFLOPS x %.2f); "
                "backward = 2 x forward%s\n"
                % (batch, tflops, efficiency,
                   "; %d tokens per sample, vocabulary %d" % (SEQ_LEN, VOCAB)
                   if name == "transformer" else "; 3x224x224 input"))
        f.write("tensor,name,elements,bytes,fwd_us,bwd_us\n")
        for i, (pname, n, b, fw, bw) in enumerate(rows):
            f.write("%d,%s,%d,%d,%.3f,%.3f\n" % (i, pname, n, b, fw, bw))
    print("%-12s %4d tensors %10.3f MB  forward %8.1f us  backward %8.1f us"
          % (name, len(rows), total_bytes / 1e6, total_fwd, 2 * total_fwd))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "workloads",
                                                  "profiles"))
    ap.add_argument("--tflops", type=float, default=35.58)
    ap.add_argument("--efficiency", type=float, default=0.40)
    ap.add_argument("models", nargs="*", default=list(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for m in args.models:
        if m not in MODELS:
            sys.exit("unknown model %r; expected one of %s"
                     % (m, ", ".join(MODELS)))
        write_profile(m, args.out, args.tflops, args.efficiency)


if __name__ == "__main__":
    main()
