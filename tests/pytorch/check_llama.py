#!/usr/bin/env python3
"""check_llama.py — train ptdp's llama again in PyTorch and compare.

    check_llama.py PTDP [--perturb TENSOR] [ptdp train flags ...]

    e.g.  check_llama.py build/cli/ptdp-f64 --hidden 24 --heads 4 --kv-heads 2 --lr 1e-2
          check_llama.py build/cli/ptdp --tp 4 --kv-heads 2 --rope-theta 10 --norm-eps 1e-3

The independent witness of `ptdp train --model llama` (check_baseline.py is
the MLP's and the GPT's): the model written again here from its definition
— RMSNorm, rotary positions, grouped-query attention, SwiGLU, no biases, an
untied head, under Meta's llama3 names — trained by torch.optim.AdamW on
ptdp's initial parameters and ptdp's batches, and compared step by step:

    ptdp train --model llama FLAGS --save-init --dump-data --save --log
        │               │                │             │          │
        │        parameters at 0   x, y [steps,B,T]  final      loss, |g|
        │               ▼                ▼             │          │
        │     PyTorch: the llama below, AdamW   ──►  compare  ◄───┘
        ▼
    any --tp (also tp > kv heads) / --pp / --dp --zero / --cp / --sp: the
    parallel run against one PyTorch model, since --check equals them anyway

The model, in PyTorch's words (C hidden, H heads of d = C/H, K kv heads,
F ffn, V vocab, T positions):

    h = tok_embeddings[x]                                     [B, T, C]
    each layer:
        n = rmsnorm(h) * attention_norm;  q, k, v = wq n, wk n, wv n
        q, k = rope(q), rope(k)        pairs (2i, 2i+1) of each head at
                                       position p rotated by p theta^(-2i/d)
        y = softmax(q k^T / sqrt(d) + causal) v   query head j reads kv
                                                  head j // (H/K)
        h = h + wo y
        n = rmsnorm(h) * ffn_norm;  h = h + w2 (silu(w1 n) * w3 n)
    logits = output(rmsnorm(h) * norm);  loss = mean cross-entropy over B T

    rmsnorm(x) = x / sqrt(mean(x^2) + eps)

eps and theta are this script's --norm-eps and --rope-theta, passed on to
ptdp when given; when not, PyTorch uses Meta's ModelArgs defaults (1e-5,
500000) and ptdp its own — so a default that drifted from Meta's fails.
AdamW decays the 2-D tensors only (the norms' weights not).

The rule is check_baseline.py's (and --check's): each step's loss and
gradient norm and every final parameter within tol * max(1, max|b|), the
AdamW moments within tol * max|b|, b = PyTorch; tol 1e-4 when ptdp is built
in float (PyTorch in float32), 1e-10 in double (PyTorch in float64).
--perturb TENSOR: the check must fail on that tensor alone (exit 0 if so).

Exit status: 0 agreement, 1 a mismatch, 2 ptdp failed or a bad command
line.  Run by tests/pytorch/run.sh --script check_llama.py (SKIP without
torch).
"""
import argparse
import math
import os
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True    # leave no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_baseline import (TOLERANCE, compare, perturb, read_safetensors, run_ptdp, torch_state,  # noqa: E402
                            torch_steps, verdict)

META_NORM_EPS, META_ROPE_THETA = 1e-5, 500000.0     # Meta's ModelArgs defaults


# --------------------------------------------------------------- the model

class RMSNorm(torch.nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight."""

    def __init__(self, dim, eps, dtype):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, theta):
    """x [B, T, heads, d]: each head's pair (2i, 2i+1) at position p rotated by the angle p theta^(-2i/d)."""
    _, T, _, d = x.shape
    i = torch.arange(d // 2, dtype=x.dtype)
    angle = torch.arange(T, dtype=x.dtype)[:, None] * theta ** (-2.0 * i / d)[None, :]   # T, d/2
    cos, sin = angle.cos()[None, :, None, :], angle.sin()[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


class Llama(torch.nn.Module):
    """The llama under Meta's names: tok_embeddings, layers.{i}.attention.wq …, norm, output."""

    def __init__(self, meta, eps, theta, dtype):
        super().__init__()
        C, H, K = int(meta["dim"]), int(meta["n_heads"]), int(meta["n_kv_heads"])
        Fd, V, d = int(meta["ffn_dim"]), int(meta["vocab_size"]), C // H
        self.H, self.K, self.d, self.theta = H, K, d, theta

        def linear(n_in, n_out):
            return torch.nn.Linear(n_in, n_out, bias=False, dtype=dtype)

        self.tok_embeddings = torch.nn.Embedding(V, C, dtype=dtype)
        self.layers = torch.nn.ModuleList()
        for _ in range(int(meta["n_layers"])):
            b = torch.nn.Module()
            b.attention_norm, b.ffn_norm = RMSNorm(C, eps, dtype), RMSNorm(C, eps, dtype)
            b.attention = torch.nn.Module()
            b.attention.wq, b.attention.wk = linear(C, H * d), linear(C, K * d)
            b.attention.wv, b.attention.wo = linear(C, K * d), linear(H * d, C)
            b.feed_forward = torch.nn.Module()
            b.feed_forward.w1, b.feed_forward.w2, b.feed_forward.w3 = linear(C, Fd), linear(Fd, C), linear(C, Fd)
            self.layers.append(b)
        self.norm = RMSNorm(C, eps, dtype)
        self.output = linear(C, V)

    def attention(self, a, n):
        B, T, _ = n.shape
        q = rope(a.wq(n).view(B, T, self.H, self.d), self.theta)
        k = rope(a.wk(n).view(B, T, self.K, self.d), self.theta)
        v = a.wv(n).view(B, T, self.K, self.d)
        # query head j reads kv head j // (H/K): each kv head repeated H/K times in place
        k, v = (z.repeat_interleave(self.H // self.K, dim=2) for z in (k, v))
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))                       # B, heads, T, d
        s = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return a.wo((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, self.H * self.d))

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for b in self.layers:
            h = h + self.attention(b.attention, b.attention_norm(h))
            n = b.ffn_norm(h)
            f = b.feed_forward
            h = h + f.w2(F.silu(f.w1(n)) * f.w3(n))
        return self.output(self.norm(h))


# ------------------------------------------------------------ the PyTorch run

def train_torch(init, data, meta, opts, dtype):
    """ptdp's initial parameters and batches, AdamW; returns losses, norms, the model and the optimizer."""
    model = Llama(meta, opts.norm_eps, opts.rope_theta, dtype)
    params = {k: torch.from_numpy(v.copy()) for k, v in init.items() if not k.startswith("optim.")}
    model.load_state_dict(params, strict=True)    # every name and shape must be ptdp's
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": opts.weight_decay},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    # foreach=False: PyTorch's single-tensor loop, whose operation order ptdp copies.
    opt = torch.optim.AdamW(groups, lr=opts.lr, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    losses, norms = torch_steps(model, opt, data, opts.clip_grad)
    return losses, norms, model, opt


# -------------------------------------------------------------------- main

def parse():
    p = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1], allow_abbrev=False)
    p.add_argument("ptdp")
    p.add_argument("--perturb", metavar="TENSOR")
    # What PyTorch must mirror; every other flag goes to ptdp alone.
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--clip-grad", type=float, default=0.0)
    p.add_argument("--norm-eps", type=float)
    p.add_argument("--rope-theta", type=float)
    opts, rest = p.parse_known_args()
    for banned in ("--save", "--save-init", "--dump-data", "--log", "--load", "--model", "--optimizer"):
        if any(r == banned or r.startswith(banned + "=") for r in rest):
            p.error(f"{banned} is set by this script")
    flags = ["--model", "llama", *rest, "--lr", repr(opts.lr), "--weight-decay", repr(opts.weight_decay),
             "--clip-grad", repr(opts.clip_grad)]
    for flag, value in (("--norm-eps", opts.norm_eps), ("--rope-theta", opts.rope_theta)):
        flags += [flag, repr(value)] if value is not None else []
    opts.norm_eps = META_NORM_EPS if opts.norm_eps is None else opts.norm_eps
    opts.rope_theta = META_ROPE_THETA if opts.rope_theta is None else opts.rope_theta
    opts.optimizer = "adamw"
    return opts, flags


def main():
    opts, flags = parse()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="ptdp-llama-torch-") as workdir:
        files, log = run_ptdp(opts.ptdp, flags, workdir)
        init, meta = read_safetensors(files["init"])
        data, _ = read_safetensors(files["data"])
        if meta.get("model") != "llama":
            print(f"the checkpoint's metadata says model {meta.get('model')!r}, not 'llama'", file=sys.stderr)
            return 2
        dtype_name = str(init["tok_embeddings.weight"].dtype)
        tol = TOLERANCE[dtype_name]
        if opts.perturb:
            perturb(files["final"], opts.perturb, tol)
        final, _ = read_safetensors(files["final"])

    print(f"PyTorch {torch.__version__} in {dtype_name}: the llama, dim {meta['dim']}, {meta['n_heads']} heads, "
          f"{meta['n_kv_heads']} kv heads, ffn {meta['ffn_dim']}, {meta['n_layers']} layers, vocab "
          f"{meta['vocab_size']}, eps {opts.norm_eps:g}, theta {opts.rope_theta:g}; {data['x'].shape[0]} steps of "
          f"batch {data['x'].shape[1]}; rule max|a - b| <= {tol:.0e} * max(1, max|b|), b = PyTorch")
    losses, norms, model, opt = train_torch(init, data, meta, opts, getattr(torch, dtype_name))
    failed = compare(log, losses, norms, final, torch_state(model, opt, "adamw"), tol)
    if int(final["optim.step"]) != len(losses):
        failed.append(f"optim.step is {int(final['optim.step'])}, expected {len(losses)}")
    print("  largest loss |ptdp - torch|: %.3e" % max(abs(e["loss"] - t) for e, t in zip(log, losses)))

    return verdict(failed, opts.perturb, "ptdp's llama agrees with PyTorch")


if __name__ == "__main__":
    sys.exit(main())
