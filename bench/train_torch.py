#!/usr/bin/env python3
"""train_torch.py — ptdp's training step in PyTorch, on the CPU: the MLP or the GPT.

    train_torch.py [--steps 8] [--warmup 2] [--batch 64] [--threads 1] [--json]
                   [--d-in 1024 --hidden 1024 --ffn 4096 --layers 4 --classes 10]
    train_torch.py --model gpt [--batch 8] [--vocab 256 --seq-len 256 --hidden 512
                   --heads 8 --layers 4 --ffn 2048]

--model gpt is `ptdp bench train --model gpt`'s model, nanoGPT's layout:
x = wte[tok] + wpe[pos]; per block x += c_proj(attn(ln_1(x))),
x += mlp(ln_2(x)) with GELU-tanh; logits = ln_f(x) wte^T (tied head, V
padded to a multiple of 64 as ptdp pads it); attention as nanoGPT writes it
without flash attention (q k^T / sqrt(hd), causal mask, softmax, times v).

The PyTorch side of bench/train.sh: the same model as `ptdp bench
train` (h = in(x); h = h + fc2(gelu(fc1(h), approximate="tanh")) per block;
cross_entropy(out(h), y)), the same initialisation (weights N(0, 0.02^2),
biases 0), float32, torch.optim.AdamW with its defaults but weight_decay 0
(ptdp's default), and one thread — one ptdp device is one thread, so
torch.set_num_threads(1) and OPENBLAS_NUM_THREADS=1 (Debian's torch calls
the system BLAS, OpenBLAS, which has threads of its own).

One step, timed in two phases like ptdp's:

    forward + backward   opt.zero_grad(); loss = xent(model(x), y); loss.backward()
    optimizer            opt.step()

Each time is the median over the timed steps, after --warmup untimed ones.
The batches are drawn before timing starts.  Prints a table, or one JSON
object (--json).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

# Before torch loads OpenBLAS: one thread, as one ptdp device.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("train_torch.py: torch is not installed for " + sys.executable)


class ReferenceMLP(torch.nn.Module):
    def __init__(self, d_in, d_model, d_ff, n_layers, n_classes):
        super().__init__()
        self.add_module("in", torch.nn.Linear(d_in, d_model))
        self.blocks = torch.nn.ModuleList()
        for _ in range(n_layers):
            block = torch.nn.Module()
            block.fc1 = torch.nn.Linear(d_model, d_ff)
            block.fc2 = torch.nn.Linear(d_ff, d_model)
            self.blocks.append(block)
        self.out = torch.nn.Linear(d_model, n_classes)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                torch.nn.init.zeros_(p)
            else:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, x):
        h = getattr(self, "in")(x)
        for block in self.blocks:
            h = h + block.fc2(F.gelu(block.fc1(h), approximate="tanh"))
        return self.out(h)


class Block(torch.nn.Module):
    def __init__(self, c, nh, f):
        super().__init__()
        self.nh = nh
        self.ln_1 = torch.nn.LayerNorm(c)
        self.c_attn = torch.nn.Linear(c, 3 * c)
        self.attn_proj = torch.nn.Linear(c, c)
        self.ln_2 = torch.nn.LayerNorm(c)
        self.c_fc = torch.nn.Linear(c, f)
        self.mlp_proj = torch.nn.Linear(f, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, c // self.nh).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.nh))
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class ReferenceGPT(torch.nn.Module):
    def __init__(self, v_pad, t, c, nh, layers, f):
        super().__init__()
        self.wte = torch.nn.Embedding(v_pad, c)
        self.wpe = torch.nn.Embedding(t, c)
        self.h = torch.nn.ModuleList(Block(c, nh, f) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(c)
        for name, p in self.named_parameters():
            if "ln_" in name:
                continue                      # LayerNorm: weight 1, bias 0
            if name.endswith("bias"):
                torch.nn.init.zeros_(p)
            else:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, tok):
        x = self.wte(tok) + self.wpe(torch.arange(tok.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("mlp", "gpt"), default="mlp")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=None, help="64 (mlp) or 8 sequences (gpt)")
    p.add_argument("--d-in", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=None, help="1024 (mlp) or 512 (gpt)")
    p.add_argument("--ffn", type=int, default=None, help="4096 (mlp) or 2048 (gpt)")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--vocab-multiple", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    gpt = a.model == "gpt"
    a.batch = a.batch or (8 if gpt else 64)
    a.hidden = a.hidden or (512 if gpt else 1024)
    a.ffn = a.ffn or (4 * a.hidden if gpt else 4096)

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    total = a.warmup + a.steps
    if gpt:
        v_pad = -(-a.vocab // a.vocab_multiple) * a.vocab_multiple
        model = ReferenceGPT(v_pad, a.seq_len, a.hidden, a.heads, a.layers, a.ffn)
        xs = torch.randint(0, a.vocab, (total, a.batch, a.seq_len))
        ys = torch.randint(0, a.vocab, (total, a.batch, a.seq_len))
        def loss_of(s):
            return F.cross_entropy(model(xs[s]).view(-1, v_pad), ys[s].view(-1))
    else:
        model = ReferenceMLP(a.d_in, a.hidden, a.ffn, a.layers, a.classes)
        xs = torch.randn(total, a.batch, a.d_in)
        ys = torch.randint(0, a.classes, (total, a.batch))
        def loss_of(s):
            return F.cross_entropy(model(xs[s]), ys[s])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)

    fwd_bwd, optim, losses = [], [], []
    for s in range(total):
        print(f"PyTorch step {s + 1}/{total}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_of(s)
        loss.backward()
        t1 = time.perf_counter()
        opt.step()
        t2 = time.perf_counter()
        losses.append(float(loss))
        if s >= a.warmup:
            fwd_bwd.append(t1 - t0)
            optim.append(t2 - t1)
    steps = [f + o for f, o in zip(fwd_bwd, optim)]
    r = {
        "bench": "train-torch", "model": a.model, "torch": torch.__version__, "threads": torch.get_num_threads(),
        "d_in": a.d_in, "hidden": a.hidden, "ffn": a.ffn, "layers": a.layers, "classes": a.classes,
        "batch": a.batch, "steps": a.steps, "warmup": a.warmup,
        "torch_fwd_bwd_s": statistics.median(fwd_bwd), "torch_optimizer_s": statistics.median(optim),
        "torch_step_s": statistics.median(steps),
    }
    r["torch_samples_per_s"] = a.batch / r["torch_step_s"]
    if gpt:
        r.update({"vocab": a.vocab, "vocab_padded": v_pad, "seq_len": a.seq_len, "heads": a.heads,
                  "torch_tokens_per_s": a.batch * a.seq_len / r["torch_step_s"]})
    if not all(l == l and abs(l) < 1e30 for l in losses):
        sys.exit("train_torch.py: the loss is not finite")
    if a.json:
        print(json.dumps(r))
    else:
        print(f"PyTorch {r['torch']} CPU, {r['threads']} thread(s), {a.model}, batch {a.batch}, float32, AdamW")
        print(f"  forward + backward {1e3 * r['torch_fwd_bwd_s']:8.1f} ms")
        print(f"  optimizer          {1e3 * r['torch_optimizer_s']:8.1f} ms")
        print(f"  step               {1e3 * r['torch_step_s']:8.1f} ms   {r['torch_samples_per_s']:.1f} samples/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
