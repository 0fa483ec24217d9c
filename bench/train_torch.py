#!/usr/bin/env python3
"""train_torch.py — the reference MLP's training step in PyTorch, on the CPU.

    train_torch.py [--steps 8] [--warmup 2] [--batch 64] [--threads 1] [--json]
                   [--d-in 1024 --hidden 1024 --ffn 4096 --layers 4 --classes 10]

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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--d-in", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--ffn", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = ReferenceMLP(a.d_in, a.hidden, a.ffn, a.layers, a.classes)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    total = a.warmup + a.steps
    xs = torch.randn(total, a.batch, a.d_in)
    ys = torch.randint(0, a.classes, (total, a.batch))

    fwd_bwd, optim, losses = [], [], []
    for s in range(total):
        print(f"PyTorch step {s + 1}/{total}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(xs[s]), ys[s])
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
        "bench": "train-torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "d_in": a.d_in, "hidden": a.hidden, "ffn": a.ffn, "layers": a.layers, "classes": a.classes,
        "batch": a.batch, "steps": a.steps, "warmup": a.warmup,
        "torch_fwd_bwd_s": statistics.median(fwd_bwd), "torch_optimizer_s": statistics.median(optim),
        "torch_step_s": statistics.median(steps),
    }
    r["torch_samples_per_s"] = a.batch / r["torch_step_s"]
    if not all(l == l and abs(l) < 1e30 for l in losses):
        sys.exit("train_torch.py: the loss is not finite")
    if a.json:
        print(json.dumps(r))
    else:
        print(f"PyTorch {r['torch']} CPU, {r['threads']} thread(s), batch {a.batch}, float32, AdamW")
        print(f"  forward + backward {1e3 * r['torch_fwd_bwd_s']:8.1f} ms")
        print(f"  optimizer          {1e3 * r['torch_optimizer_s']:8.1f} ms")
        print(f"  step               {1e3 * r['torch_step_s']:8.1f} ms   {r['torch_samples_per_s']:.1f} samples/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
