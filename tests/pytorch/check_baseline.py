#!/usr/bin/env python3
"""check_baseline.py — train ptdp's model (the MLP or the GPT) in PyTorch and compare.

    check_baseline.py PTDP [--perturb TENSOR] [ptdp train flags ...]

    e.g.  check_baseline.py build/cli/ptdp --steps 10 --lr 1e-2
          check_baseline.py build/cli/ptdp-f64 --dp 2 --micro-batches 2
          check_baseline.py build/cli/ptdp --optimizer sgd --momentum 0.9 \\
                --weight-decay 0.1 --clip-grad 0.5

The equivalence suites prove that every parallel run equals ptdp's own
single-device baseline.  They cannot prove the baseline itself right: a wrong
GELU derivative or a transposed weight would be wrong the same way in both.
This script is the independent witness, as llm.c's train_gpt2.py is for
train_gpt2.c:

    ptdp train FLAGS --save-init init.st --dump-data data.st --save final.st --log log.jsonl
        │                │                     │                 │               │
        │        parameters at step 0    x [steps,B,d_in]   parameters and   loss and |g|
        │                │               y [steps,B]        optimizer state  per step
        │                ▼                     ▼                 │               │
        │     PyTorch: the same model, the same batches,         ▼               ▼
        │     torch.optim.AdamW / SGD, clip_grad_norm_  ───►  compare  ◄─────────┘
        ▼
    any --dp / --tp / --pp / --micro-batches: the parallel run against PyTorch

The model, in PyTorch's words (nn.Linear stores W as [out, in]):

    h = in(x)                                        in:  Linear(d_in, h)
    for each block:  h = h + fc2(gelu(fc1(h), approximate="tanh"))
    logits = out(h);  loss = cross_entropy(logits, y)   (mean over the batch)

With --model gpt the model is nanoGPT's GPT-2, in its names (transformer.wte,
transformer.h.{l}.attn.c_attn, …; the head tied to wte): pre-LayerNorm
blocks of causal attention and a GELU-tanh MLP, cross-entropy over the
padded vocabulary, mean over every position; AdamW with weight decay on the
2-D tensors only, as nanoGPT's configure_optimizers.  Its mixtures of experts
(--moe-*) are written densely: Mixtral's softmax router, or DeepSeek-V3's —
sigmoid affinities, the top k of s + bias among the M best groups' experts
(a group scored by its top floor(k/M)), gates route_scale s_j / sum s, the
bias a buffer moved after each optimizer step by u sign(mean L - L_e) —
with the shared experts' MLP on every token and the router z-loss.  (Dropout masks cannot
be replayed in PyTorch: GPT cases run without --dropout.)

The rule is ptdp train --check's: for each step's loss and gradient norm, and
for every parameter of the final state, max|a - b| <= tol * max(1, max|b|)
with b = PyTorch, tol = 1e-4 when ptdp is built in float (PyTorch then runs
in float32) and 1e-10 in double (PyTorch in float64).  The optimizer state
(exp_avg, exp_avg_sq, momentum_buffer) is checked too, against tol * max|b|:
its values are far below 1, where max(1, .) would let even zeros pass.

--perturb TENSOR adds 3 * tol * max(1, max|a|) to the first element of
TENSOR in ptdp's final checkpoint, on disk, before comparing: the check must
then fail on that tensor and on nothing else.  In this mode the exit status
is 0 when it does — a demonstration that the comparison can fail.

Exit status: 0 agreement, 1 a mismatch (or, with --perturb, a missed one),
2 ptdp failed or the command line is wrong.  Needs numpy and torch (the
runner tests/pytorch/run.sh finds a Python that has them).
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True    # leave no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from safetensors_read import read as read_safetensors  # noqa: E402  (tests/safetensors_read.py)

TOLERANCE = {"float32": 1e-4, "float64": 1e-10}


# --------------------------------------------------------------- the model

class ReferenceMLP(torch.nn.Module):
    """The reference MLP, named like ptdp's checkpoints (in.weight, blocks.0.fc1.weight, …)."""

    def __init__(self, d_in, d_model, d_ff, n_layers, n_classes, dtype):
        super().__init__()
        # "in" is a Python keyword, so the input layer is registered by name.
        self.add_module("in", torch.nn.Linear(d_in, d_model, dtype=dtype))
        self.blocks = torch.nn.ModuleList()
        for _ in range(n_layers):
            block = torch.nn.Module()
            block.fc1 = torch.nn.Linear(d_model, d_ff, dtype=dtype)
            block.fc2 = torch.nn.Linear(d_ff, d_model, dtype=dtype)
            self.blocks.append(block)
        self.out = torch.nn.Linear(d_model, n_classes, dtype=dtype)

    def forward(self, x):
        h = getattr(self, "in")(x)
        for block in self.blocks:
            h = h + block.fc2(F.gelu(block.fc1(h), approximate="tanh"))
        return self.out(h)


class ReferenceGPT(torch.nn.Module):
    """nanoGPT's GPT, named like its state_dict; lm_head tied to wte (no tensor of its own)."""

    def __init__(self, vocab_padded, seq_len, hidden, heads, ffn, layers, dtype, moe=None):
        super().__init__()
        self.heads = heads
        self.moe = moe
        t = torch.nn.Module()
        t.wte = torch.nn.Embedding(vocab_padded, hidden, dtype=dtype)
        t.wpe = torch.nn.Embedding(seq_len, hidden, dtype=dtype)
        t.h = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.ln_1 = torch.nn.LayerNorm(hidden, eps=1e-5, dtype=dtype)
            b.attn = torch.nn.Module()
            b.attn.c_attn = torch.nn.Linear(hidden, 3 * hidden, dtype=dtype)
            b.attn.c_proj = torch.nn.Linear(hidden, hidden, dtype=dtype)
            b.ln_2 = torch.nn.LayerNorm(hidden, eps=1e-5, dtype=dtype)
            b.mlp = torch.nn.Module()
            l, K = len(t.h), moe["dense_first"] if moe else 0
            if moe and l >= K and (l - K + 1) % moe["every"] == 0:   # a mixture of experts
                Fe = moe["ffn"] or ffn
                b.mlp.router = torch.nn.Linear(hidden, moe["experts"], bias=False, dtype=dtype)
                if moe["score"] == "sigmoid":   # DeepSeek-V3's selection bias: a buffer
                    b.mlp.router.register_buffer("expert_bias", torch.zeros(moe["experts"], dtype=dtype))
                b.mlp.experts = torch.nn.ModuleList()
                for _ in range(moe["experts"]):
                    e = torch.nn.Module()
                    e.c_fc = torch.nn.Linear(hidden, Fe, dtype=dtype)
                    e.c_proj = torch.nn.Linear(Fe, hidden, dtype=dtype)
                    b.mlp.experts.append(e)
                if moe["shared"] > 0:   # DeepSeek's shared experts: one MLP of S F_e
                    b.mlp.shared_experts = torch.nn.Module()
                    b.mlp.shared_experts.c_fc = torch.nn.Linear(hidden, moe["shared"] * Fe, dtype=dtype)
                    b.mlp.shared_experts.c_proj = torch.nn.Linear(moe["shared"] * Fe, hidden, dtype=dtype)
            else:
                b.mlp.c_fc = torch.nn.Linear(hidden, ffn, dtype=dtype)
                b.mlp.c_proj = torch.nn.Linear(ffn, hidden, dtype=dtype)
            t.h.append(b)
        t.ln_f = torch.nn.LayerNorm(hidden, eps=1e-5, dtype=dtype)
        self.transformer = t

    def attention(self, b, x):
        B, T, C = x.shape
        q, k, v = b.attn.c_attn(x).split(C, dim=2)
        hd = C // self.heads
        q, k, v = (z.view(B, T, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return b.attn.c_proj(y)

    def route(self, b, z):
        """A token's k experts, their gates, and the balance loss's P (B E):
        Mixtral's softmax, or DeepSeek-V3's sigmoid (the top k of s + bias,
        gates route_scale s_j / sum of the chosen s, P the sequence's mean
        of s / sum s); with groups, only among the M best groups' experts,
        a group scored by the sum of its top floor(k/M)."""
        m, E, k = self.moe, self.moe["experts"], self.moe["top_k"]
        s = torch.sigmoid(z) if m["score"] == "sigmoid" else None
        v = (s + b.mlp.router.expert_bias if s is not None else z).detach()
        if m["groups"] > 1:
            G, M = m["groups"], m["group_top_k"]
            vg = v.reshape(*v.shape[:-1], G, E // G)
            score = -torch.sort(-vg, dim=-1, stable=True).values[..., :k // M].sum(-1)   # B T G: top floor(k/M) sums
            best = torch.sort(-score, dim=-1, stable=True).indices[..., :M]              # ties: the lower group
            kept = torch.zeros_like(score, dtype=torch.bool).scatter(-1, best, True)
            v = v.masked_fill(~kept.repeat_interleave(E // G, dim=-1), -math.inf)
        choice = torch.sort(-v, dim=-1, stable=True).indices[..., :k]   # ties: the lower index first
        if s is None:
            return choice, z.gather(-1, choice).softmax(-1), z.softmax(-1).mean(1)
        chosen = s.gather(-1, choice)
        return choice, m["route_scale"] * chosen / chosen.sum(-1, keepdim=True), (s / s.sum(-1, keepdim=True)).mean(1)

    def experts(self, b, h):
        """The mixture, written densely: every expert on every token, each
        token's output the sum of its kept choices' gates times theirs, and
        the shared experts' on every token; returns it and the balance loss
        (a mean over the sequences) with the router z-loss (a mean over the
        tokens)."""
        B, T, _ = h.shape
        E, k, cf = self.moe["experts"], self.moe["top_k"], self.moe["capacity"]
        z = b.mlp.router(h)                                        # B T E
        choice, gates, P = self.route(b, z)
        onehot = F.one_hot(choice, E).to(h.dtype)                  # B T k E
        b.mlp.counts = onehot.sum(dim=(0, 1, 2)).detach()          # E: the step's choices, before the capacity
        keep = torch.ones_like(gates)
        if cf > 0:                                                 # per sequence, in position order
            flat = onehot.reshape(B, T * k, E)
            rank = flat.cumsum(1) * flat
            keep = ((rank > 0) & (rank <= math.ceil(cf * k * T / E))).any(-1).reshape(B, T, k).to(h.dtype)
        out = 0
        for e, ex in enumerate(b.mlp.experts):
            w = (gates * keep * (choice == e).to(h.dtype)).sum(-1, keepdim=True)
            out = out + w * ex.c_proj(F.gelu(ex.c_fc(h), approximate="tanh"))
        if hasattr(b.mlp, "shared_experts"):
            sh = b.mlp.shared_experts
            out = out + sh.c_proj(F.gelu(sh.c_fc(h), approximate="tanh"))
        f = E / (k * T) * onehot.sum(dim=(1, 2)).detach()          # B E, before dropping
        aux = self.moe["alpha"] * (f * P).sum(-1).mean()
        if self.moe["z_loss"] > 0:
            aux = aux + self.moe["z_loss"] * (torch.logsumexp(z, dim=-1) ** 2).mean()
        return out, aux

    def bias_step(self, u):
        """After an optimizer step: b_e += u sign(mean L - L_e), L the step's choices."""
        with torch.no_grad():
            for b in self.transformer.h:
                if hasattr(b.mlp, "router") and hasattr(b.mlp.router, "expert_bias"):
                    L = b.mlp.counts.double()
                    b.mlp.router.expert_bias += (u * torch.sign(L.sum() - len(L) * L)).to(b.mlp.router.expert_bias.dtype)

    def forward(self, idx):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.shape[1]))
        self.aux = 0
        for b in t.h:
            x = x + self.attention(b, b.ln_1(x))
            if hasattr(b.mlp, "router"):
                y, aux = self.experts(b, b.ln_2(x))
                x = x + y
                self.aux = self.aux + aux
            else:
                x = x + b.mlp.c_proj(F.gelu(b.mlp.c_fc(b.ln_2(x)), approximate="tanh"))
        return t.ln_f(x) @ t.wte.weight.t()


# ------------------------------------------------------------- the ptdp run

def run_or_stop(cmd):
    """Run a ptdp command, echoed; if it fails, show its output and stop the
    check with exit 2 (an error of the run, not a disagreement)."""
    print("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        print(proc.stdout)
        print(f"ptdp {cmd[1]} exited with {proc.returncode}", file=sys.stderr)
        sys.exit(2)


def verdict(failed, perturbation, agrees):
    """The exit status of a comparison: with --perturb, 0 when exactly the
    perturbed quantity (and nothing else) failed; otherwise 0 when nothing
    failed.  `agrees` is what a pass prints."""
    if perturbation:
        if failed == [perturbation]:
            print(f"perturbation caught: the comparison failed on {perturbation} and nothing else")
            return 0
        print(f"perturbation NOT caught as expected: failures {failed or 'none'}")
        return 1
    if failed:
        print("FAILED: " + "; ".join(failed))
        return 1
    print("PASSED: " + agrees)
    return 0


def run_ptdp(ptdp, flags, workdir):
    """Run ptdp train with FLAGS, keeping every file the comparison needs."""
    files = {k: os.path.join(workdir, k + ext) for k, ext in
             [("init", ".st"), ("final", ".st"), ("data", ".st"), ("log", ".jsonl")]}
    cmd = [ptdp, "train", *flags, "--quiet", "--save-init", files["init"], "--save", files["final"],
           "--dump-data", files["data"], "--log", files["log"]]
    run_or_stop(cmd)
    with open(files["log"]) as f:
        log = [json.loads(line) for line in f if line.strip()]
    return files, log


def perturb(path, name, tol):
    """Add 3 tol max(1, max|t|) to element 0 of tensor `name`, in place in the file."""
    with open(path, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        if name not in header:
            print(f"--perturb {name}: no such tensor in {path}", file=sys.stderr)
            sys.exit(2)
        info = header[name]
        fmt = {"F32": "<f", "F64": "<d"}[info["dtype"]]
        begin, end = info["data_offsets"]
        f.seek(8 + n + begin)                      # the data starts after the header
        values = np.frombuffer(f.read(end - begin), dtype=fmt)
        delta = 3 * tol * max(1.0, float(np.abs(values).max()))
        f.seek(8 + n + begin)
        f.write(struct.pack(fmt, float(values[0]) + delta))
    print(f"perturbed {name}[0] of {os.path.basename(path)} by {delta:.3e}")


# ------------------------------------------------------------ the PyTorch run

def train_torch(init, data, meta, opts, dtype):
    """Train from ptdp's initial parameters on ptdp's batches; return losses, norms, model, optimizer."""
    gpt = meta.get("model") == "gpt"
    if gpt:
        model = ReferenceGPT(int(meta["vocab_padded"]), int(meta["seq_len"]), int(meta["hidden"]),
                             int(meta["heads"]), int(meta["ffn"]), int(meta["layers"]), dtype,
                             moe=opts.moe if opts.moe["experts"] > 0 else None)
    else:
        model = ReferenceMLP(int(meta["d_in"]), int(meta["d_model"]), int(meta["d_ff"]),
                             int(meta["n_layers"]), int(meta["n_classes"]), dtype)
    params = {k: torch.from_numpy(v.copy()) for k, v in init.items() if not k.startswith("optim.")}
    model.load_state_dict(params, strict=True)    # every name and shape must match ptdp's

    # The GPT decays its 2-D tensors only (nanoGPT); the MLP every tensor.
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2 or not gpt],
               "weight_decay": opts.weight_decay},
              {"params": [p for p in model.parameters() if p.dim() < 2 and gpt], "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if opts.optimizer == "adamw":
        # foreach=False: PyTorch's single-tensor loop, whose operation order ptdp copies.
        opt = torch.optim.AdamW(groups, lr=opts.lr, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    else:
        opt = torch.optim.SGD(groups, lr=opts.lr, momentum=opts.momentum, foreach=False)

    losses, norms = torch_steps(model, opt, data, opts.clip_grad, opts.moe["bias_update"] if gpt else 0.0)
    return losses, norms, model, opt


def torch_steps(model, opt, data, clip_grad, bias_update=0.0):
    """One optimizer step per dumped batch, as ptdp logs it: the loss is the
    cross-entropy alone (a mixture's balance loss, model.aux, joins the
    backward only); the norm is every parameter's once, summed in double,
    taken before clipping (when clip_grad > 0)."""
    xs = torch.from_numpy(data["x"].copy())
    ys = torch.from_numpy(data["y"].copy())
    losses, norms = [], []
    for s in range(xs.shape[0]):
        opt.zero_grad()
        out = model(xs[s])                        # B x T x V_pad (or B x classes), a mean over every position
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), ys[s].reshape(-1))
        (loss + getattr(model, "aux", 0)).backward()
        norms.append(math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in model.parameters())))
        if clip_grad > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad)
        opt.step()
        if bias_update > 0:                       # DeepSeek-V3's loss-free balance, after the step
            model.bias_step(bias_update)
        losses.append(float(loss))
    return losses, norms


def torch_state(model, opt, optimizer):
    """The final state under ptdp's checkpoint names."""
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    slots = ["exp_avg", "exp_avg_sq"] if optimizer == "adamw" else ["momentum_buffer"]
    for name, p in model.named_parameters():
        for slot in slots:
            buf = opt.state[p].get(slot)
            if buf is not None:
                state[f"optim.{name}.{slot}"] = buf.detach().numpy()
    for name, buf in model.named_buffers():   # ptdp keeps the expert bias's moments, never moved: zeros
        if name.endswith(".expert_bias"):
            for slot in slots:
                state[f"optim.{name}.{slot}"] = np.zeros_like(buf.detach().numpy())
    return state


# ----------------------------------------------------------------- compare

def within(a, b, tol, floor=1.0):
    """max|a - b| <= tol * max(floor, max|b|): --check's rule with floor 1.  Returns (ok, max|a - b|, ratio)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    diff = float(np.abs(a - b).max()) if a.size else 0.0
    scale = max(floor, float(np.abs(b).max()) if b.size else 0.0)
    if scale == 0.0:                      # b all zero: a must be too
        return diff == 0.0, diff, 0.0 if diff == 0.0 else math.inf
    return diff <= tol * scale, diff, diff / scale


def compare(log, losses, norms, final, ref, tol):
    """Print the per-step table and the per-tensor summary; return the names that failed."""
    failed = []
    print(f"  {'step':>4}  {'loss ptdp':>18}  {'loss torch':>18}  {'|diff|':>9}  {'|g| |diff|':>10}")
    for s, (entry, lt, nt) in enumerate(zip(log, losses, norms)):
        ok_l, dl, _ = within(entry["loss"], lt, tol)
        ok_n, dn, _ = within(entry["grad_norm"], nt, tol)
        if not ok_l:
            failed.append(f"loss of step {entry['step']}")
        if not ok_n:
            failed.append(f"grad_norm of step {entry['step']}")
        print(f"  {entry['step']:>4}  {entry['loss']:18.12f}  {lt:18.12f}  {dl:9.2e}  {dn:10.2e}"
              + ("" if ok_l and ok_n else "  MISMATCH"))
    if len(log) != len(losses):
        failed.append(f"ptdp logged {len(log)} steps, PyTorch ran {len(losses)}")

    # Parameters by --check's rule.  Optimizer moments are far below 1, where
    # max(1, max|b|) would hide any error (an all-zero exp_avg would pass), so
    # they are held to the same tol relative to their own largest value.
    worst = {"parameters": (0.0, ""), "optimizer state": (0.0, "")}
    for name, b in ref.items():
        a = final.get(name)
        if a is None or a.shape != b.shape:
            failed.append(f"{name}: missing or misshapen in ptdp's checkpoint")
            continue
        kind, floor, rule = (("optimizer state", 0.0, "max|b|") if name.startswith("optim.")
                             else ("parameters", 1.0, "max(1, max|b|)"))
        ok, diff, ratio = within(a, b, tol, floor)
        if ratio >= worst[kind][0]:
            worst[kind] = (ratio, name)
        if not ok:
            failed.append(name)
            print(f"  MISMATCH {name}: max|a - b| = {diff:.3e} > {tol:.0e} * {rule}")
    extra = sorted(set(final) - set(ref) - {"optim.step"})
    failed += [f"{name}: in ptdp's checkpoint but not in PyTorch's state" for name in extra]
    print(f"  parameters: largest |a - b| / max(1, max|b|) {worst['parameters'][0]:.3e} "
          f"({worst['parameters'][1]})")
    print(f"  optimizer state: largest |a - b| / max|b| {worst['optimizer state'][0]:.3e} "
          f"({worst['optimizer state'][1] or 'none'})")
    return failed


# -------------------------------------------------------------------- main

def main():
    p = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    p.add_argument("ptdp")
    p.add_argument("--perturb", metavar="TENSOR")
    # The flags PyTorch must mirror; every other flag goes to ptdp alone.
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--clip-grad", type=float, default=0.0)
    # A mixture of experts (the GPT): read here and passed on to ptdp.
    p.add_argument("--moe-experts", type=int, default=0)
    p.add_argument("--moe-every", type=int, default=1)
    p.add_argument("--moe-ffn", type=int, default=0)
    p.add_argument("--moe-top-k", type=int, default=2)
    p.add_argument("--moe-capacity-factor", type=float, default=0.0)
    p.add_argument("--moe-aux-loss", type=float, default=0.01)
    # ... and DeepSeek-V3's: its router, group limits, shared experts, first dense blocks; ST-MoE's z-loss
    p.add_argument("--moe-score", default="softmax", choices=["softmax", "sigmoid"])
    p.add_argument("--moe-route-scale", type=float, default=1.0)
    p.add_argument("--moe-bias-update", type=float, default=0.0)
    p.add_argument("--moe-groups", type=int, default=1)
    p.add_argument("--moe-group-top-k", type=int, default=1)
    p.add_argument("--moe-shared-experts", type=int, default=0)
    p.add_argument("--moe-dense-first", type=int, default=0)
    p.add_argument("--moe-z-loss", type=float, default=0.0)
    opts, rest = p.parse_known_args()
    opts.moe = {"experts": opts.moe_experts, "every": opts.moe_every, "ffn": opts.moe_ffn, "top_k": opts.moe_top_k,
                "capacity": opts.moe_capacity_factor, "alpha": opts.moe_aux_loss, "score": opts.moe_score,
                "route_scale": opts.moe_route_scale, "bias_update": opts.moe_bias_update, "groups": opts.moe_groups,
                "group_top_k": opts.moe_group_top_k, "shared": opts.moe_shared_experts,
                "dense_first": opts.moe_dense_first, "z_loss": opts.moe_z_loss}
    if opts.moe_experts > 0:
        rest += ["--moe-experts", str(opts.moe_experts), "--moe-every", str(opts.moe_every), "--moe-top-k",
                 str(opts.moe_top_k), "--moe-aux-loss", repr(opts.moe_aux_loss)]
        rest += ["--moe-ffn", str(opts.moe_ffn)] if opts.moe_ffn > 0 else []
        rest += ["--moe-capacity-factor", repr(opts.moe_capacity_factor)] if opts.moe_capacity_factor > 0 else []
        deepseek = [("--moe-score", opts.moe_score, "softmax"), ("--moe-route-scale", opts.moe_route_scale, 1.0),
                    ("--moe-bias-update", opts.moe_bias_update, 0.0), ("--moe-groups", opts.moe_groups, 1),
                    ("--moe-group-top-k", opts.moe_group_top_k, 1),
                    ("--moe-shared-experts", opts.moe_shared_experts, 0),
                    ("--moe-dense-first", opts.moe_dense_first, 0), ("--moe-z-loss", opts.moe_z_loss, 0.0)]
        for flag, value, default in deepseek:   # only where not the default: the run's flags as typed
            rest += [flag, value if isinstance(value, str) else repr(value)] if value != default else []
    for banned in ("--save", "--save-init", "--dump-data", "--log", "--load"):
        if any(r == banned or r.startswith(banned + "=") for r in rest):
            p.error(f"{banned} is set by this script")
    flags = [*rest, "--optimizer", opts.optimizer, "--lr", repr(opts.lr), "--momentum", repr(opts.momentum),
             "--weight-decay", repr(opts.weight_decay), "--clip-grad", repr(opts.clip_grad)]

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="ptdp-torch-") as workdir:
        files, log = run_ptdp(opts.ptdp, flags, workdir)
        init, meta = read_safetensors(files["init"])
        data, _ = read_safetensors(files["data"])
        dtype_name = str(init["transformer.wte.weight" if meta.get("model") == "gpt" else "in.weight"].dtype)
        tol = TOLERANCE[dtype_name]
        if opts.perturb:
            perturb(files["final"], opts.perturb, tol)
        final, _ = read_safetensors(files["final"])

    dtype = getattr(torch, dtype_name)
    print(f"PyTorch {torch.__version__} in {dtype_name}, {opts.optimizer}, {data['x'].shape[0]} steps of "
          f"batch {data['x'].shape[1]}; rule max|a - b| <= {tol:.0e} * max(1, max|b|), b = PyTorch")
    losses, norms, model, opt = train_torch(init, data, meta, opts, dtype)
    ref = torch_state(model, opt, opts.optimizer)
    failed = compare(log, losses, norms, final, ref, tol)
    steps_taken = int(final["optim.step"])
    if steps_taken != len(losses):
        failed.append(f"optim.step is {steps_taken}, expected {len(losses)}")

    return verdict(failed, opts.perturb, "ptdp agrees with PyTorch")


if __name__ == "__main__":
    sys.exit(main())
