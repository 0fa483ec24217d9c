#!/usr/bin/env python3
"""check_llama_meta.py — ptdp's llama checkpoint in Meta's own model code.

    PTDP_LLAMA_REFERENCE=/path/to/llama3/llama/model.py \\
        check_llama_meta.py PTDP [--norm-eps E] [--rope-theta T] [--ffn-multiple M]
                            [--perturb-rope-theta T | --perturb-norm-eps E] [ptdp train flags ...]

    e.g.  PTDP_LLAMA_REFERENCE=$HOME/llama3/llama/model.py \\
              check_llama_meta.py build/cli/ptdp-f64 --hidden 24 --heads 4 --kv-heads 2

A real client of ptdp's checkpoints: Meta's reference `Transformer` from
meta-llama/llama3's `llama/model.py`, unmodified, loads a `ptdp train
--model llama --save-init` checkpoint by its own names and shapes (strict:
no name renamed, none missing or left over) and, on the batch ptdp trained
its first step on, gives ptdp's step-1 loss:

    ptdp train --model llama FLAGS --steps 1 --save-init init.st --dump-data data.st --report r.json
                                                 │                  │                    │
             Meta's model.py                     │                  │            run.first_loss
             ModelArgs(dim, n_layers, …) ◄───────┤ shapes, metadata │                    │
             Transformer(args)                   │                  │                    ▼
               .load_state_dict(init.st) ◄───────┘  strict          │                 compare
               .forward(x[0], start_pos=0) ◄───── x [steps, B, T] ──┘                    ▲
                  logits ─► mean cross-entropy against y[0] ──────────────────────────────┘

Then once more on weights far from their initialisation, where every part
of the model moves the loss (at initialisation the attention is nearly
uniform and a wrong rotation would hardly show): a run of --trained-steps
(default 30) at --trained-lr (3e-2) saves its state, a run --load-ing it
takes one step more with --save-init, and Meta's model gives that step's
loss from that file.

The reference file is the user's: set PTDP_LLAMA_REFERENCE to the path of
llama3's `llama/model.py` (git clone https://github.com/meta-llama/llama3).
Without it the script says so and exits 77, which Meson reports as SKIP.

What it takes to run Meta's file on one CPU process, and nothing more:

  - fairscale (model parallelism over torch.distributed) is not imported:
    a stand-in module in sys.modules gives a model-parallel world of 1, and
    ColumnParallelLinear / RowParallelLinear / VocabParallelEmbedding are
    plain nn.Linear / nn.Embedding with the same arguments — at world size
    1 that is what fairscale's layers compute, and their parameter is
    `weight`, so the state_dict names are the same;
  - Attention's KV cache is made with `.cuda()`: while the model is built,
    Tensor.cuda returns the tensor itself (the cache stays on the CPU;
    its size is ModelArgs' max_batch_size x max_seq_len);
  - forward runs under Meta's own torch.inference_mode, with start_pos 0
    (the whole sequence at once, no cache read); the loss is computed here
    from its logits, a mean over the B T positions as ptdp's.

ModelArgs: dim, n_layers, n_heads, n_kv_heads, vocab_size and max_seq_len
are the checkpoint's metadata (ptdp writes them under ModelArgs' names),
checked against the tensors' shapes; max_batch_size is the batch.  The
feed-forward width F (w1's rows) comes out of Meta's rule

    hidden = int(2 (4 dim) / 3);  hidden = int(ffn_dim_multiplier hidden);
    F = multiple_of ceil(hidden / multiple_of)

with no multiplier and multiple_of = --ffn-multiple (also passed to ptdp,
which makes F by the same rule) or Meta's 256 when that gives F; else with
multiple_of = F and ffn_dim_multiplier = (F + 1/2) / int(8 dim / 3): int()
then gives F, which rounds up to itself — so any F >= 1 can be made.
norm_eps and rope_theta are the checkpoint's metadata too (this script's
--norm-eps and --rope-theta are passed to ptdp, which records them); the
--perturb-* options put other values in ModelArgs, to see a drift fail.

Precision: Meta's code computes RMSNorm, the rotation (its angles in
float32, complex64) and the softmax in float32 whatever the weights' type,
and returns float32 logits; the weights are loaded in the checkpoint's type
(float64 from ptdp-f64).  So the loss agrees to float32's rounding, not to
double's: |meta - ptdp| <= 1e-6 |ptdp| for either build (measured: below
2e-8).  --perturb-rope-theta T or --perturb-norm-eps E tell Meta's
ModelArgs another theta or eps while ptdp keeps its own: the check must
then fail (exit 0 when it does).  How much they move the loss, relative,
at initialisation and after 30 steps (the suite's model, ptdp-f64):

    Meta's ModelArgs told                  initial weights   after 30 steps
    --perturb-rope-theta 10000 (500000)    8e-8 (unseen)     6e-4
    --perturb-norm-eps 1.1e-5 (1e-5)       5e-6              1e-6

Exit status: 0 agreement, 1 a mismatch or a refused load, 2 ptdp failed or
a bad command line, 77 no reference file.  Needs torch and numpy (run by
tests/pytorch/run.sh --script check_llama_meta.py).
"""
import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
import types

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True    # leave no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from safetensors_read import read as read_safetensors  # noqa: E402  (tests/safetensors_read.py)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_baseline import run_or_stop  # noqa: E402

ENV = "PTDP_LLAMA_REFERENCE"
SKIP = 77
RELATIVE_TOLERANCE = 1e-6      # float32 inside Meta's forward (see above)


# ------------------------------------------- Meta's file on one CPU process

def fairscale_stand_in():
    """fairscale.nn.model_parallel.{initialize, layers} for a model-parallel world of 1."""

    class ColumnParallelLinear(torch.nn.Linear):
        def __init__(self, in_features, out_features, bias=True, gather_output=True, init_method=None, **_):
            super().__init__(in_features, out_features, bias=bias)

    class RowParallelLinear(torch.nn.Linear):
        def __init__(self, in_features, out_features, bias=True, input_is_parallel=False, init_method=None, **_):
            super().__init__(in_features, out_features, bias=bias)

    class VocabParallelEmbedding(torch.nn.Embedding):
        def __init__(self, num_embeddings, embedding_dim, init_method=None, **_):
            super().__init__(num_embeddings, embedding_dim)

    modules = {name: types.ModuleType(name) for name in
               ("fairscale", "fairscale.nn", "fairscale.nn.model_parallel",
                "fairscale.nn.model_parallel.initialize", "fairscale.nn.model_parallel.layers")}
    init, layers = modules["fairscale.nn.model_parallel.initialize"], modules["fairscale.nn.model_parallel.layers"]
    init.get_model_parallel_world_size = lambda: 1
    init.get_model_parallel_rank = lambda: 0
    layers.ColumnParallelLinear = ColumnParallelLinear
    layers.RowParallelLinear = RowParallelLinear
    layers.VocabParallelEmbedding = VocabParallelEmbedding
    modules["fairscale"].nn = modules["fairscale.nn"]
    modules["fairscale.nn"].model_parallel = modules["fairscale.nn.model_parallel"]
    modules["fairscale.nn.model_parallel"].initialize = init
    modules["fairscale.nn.model_parallel"].layers = layers
    return modules


def import_reference(path):
    """Meta's model.py as a module, fairscale's parallel layers standing in as plain ones."""
    saved = {k: sys.modules.get(k) for k in fairscale_stand_in()}
    sys.modules.update(fairscale_stand_in())
    try:
        spec = importlib.util.spec_from_file_location("meta_llama_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    for name in ("ModelArgs", "Transformer"):
        if not hasattr(module, name):
            raise SystemExit(f"{path}: no {name} — not llama3's llama/model.py?")
    return module


@contextlib.contextmanager
def cuda_stays_on_cpu(dtype):
    """While Meta's model is built: Tensor.cuda() is the tensor itself, and new tensors have `dtype`."""
    cuda, default = torch.Tensor.cuda, torch.get_default_dtype()
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.Tensor.cuda = cuda
        torch.set_default_dtype(default)


# ------------------------------------------------------- ModelArgs from ptdp

def meta_ffn(dim, multiple_of, ffn_dim_multiplier):
    """FeedForward's width by Meta's rule (hidden_dim = 4 dim)."""
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def model_args(module, tensors, meta, batch, opts):
    """Meta's ModelArgs for the checkpoint: its metadata, checked against its shapes."""
    V, C = tensors["tok_embeddings.weight"].shape
    L = len([k for k in tensors if re.fullmatch(r"layers\.\d+\.attention_norm\.weight", k)])
    H, K = int(meta["n_heads"]), int(meta["n_kv_heads"])
    Fd = tensors["layers.0.feed_forward.w1.weight"].shape[0]
    want = {"dim": C, "n_layers": L, "vocab_size": V}
    for key, value in want.items():
        if int(meta[key]) != value:
            raise SystemExit(f"metadata {key} = {meta[key]}, but the tensors' shapes say {value}")
    if tensors["layers.0.attention.wk.weight"].shape[0] != K * (C // H):
        raise SystemExit(f"wk has {tensors['layers.0.attention.wk.weight'].shape[0]} rows, not n_kv_heads "
                         f"{K} x head dim {C // H}")
    multiple_of, multiplier = opts.ffn_multiple or 256, None      # Meta's rule as it stands
    if meta_ffn(C, multiple_of, multiplier) != Fd:
        multiple_of, multiplier = Fd, (Fd + 0.5) / int(2 * (4 * C) / 3)
    if meta_ffn(C, multiple_of, multiplier) != Fd:
        raise SystemExit(f"no multiple_of / ffn_dim_multiplier gives F = {Fd} from dim {C} by Meta's rule")
    extra = {}
    for key, perturbed, given in (("norm_eps", opts.perturb_norm_eps, opts.norm_eps),
                                  ("rope_theta", opts.perturb_rope_theta, opts.rope_theta)):
        value = perturbed if perturbed is not None else float(meta[key]) if key in meta else given
        extra.update({} if value is None else {key: value})
    return module.ModelArgs(dim=C, n_layers=L, n_heads=H, n_kv_heads=K, vocab_size=V, multiple_of=multiple_of,
                            ffn_dim_multiplier=multiplier, max_batch_size=batch,
                            max_seq_len=int(meta["max_seq_len"]), **extra)


def meta_loss(module, init_path, data_path, opts):
    """Meta's Transformer from ptdp's checkpoint, its loss on the batch of the checkpoint's next step."""
    tensors, meta = read_safetensors(init_path)
    data, _ = read_safetensors(data_path)
    if meta.get("model") != "llama":
        raise SystemExit(f"{init_path}: metadata model is {meta.get('model')!r}, not 'llama'")
    x, y = torch.from_numpy(data["x"][0].copy()), torch.from_numpy(data["y"][0].copy())
    args = model_args(module, tensors, meta, x.shape[0], opts)
    weights = {k: torch.from_numpy(v.copy()) for k, v in tensors.items() if not k.startswith("optim.")}
    dtype = weights["tok_embeddings.weight"].dtype
    with cuda_stays_on_cpu(dtype):
        model = module.Transformer(args)
    model.load_state_dict(weights, strict=True)     # Meta's names and shapes, as saved
    logits = model(x, 0)                            # under Meta's torch.inference_mode
    loss = F.cross_entropy(logits.double().reshape(-1, logits.shape[-1]), y.reshape(-1))
    return float(loss), args


# ------------------------------------------------------------- the ptdp runs

def ptdp_run(ptdp, flags, report):
    cmd = [ptdp, "train", "--model", "llama", *flags, "--quiet", "--report", report]
    run_or_stop(cmd)
    with open(report) as f:
        return json.load(f)["run"]["first_loss"]


def check(module, label, init, data, ptdp_loss, opts):
    loss, args = meta_loss(module, init, data, opts)
    diff = abs(loss - ptdp_loss)
    ok = diff <= RELATIVE_TOLERANCE * abs(ptdp_loss)
    print(f"  {label}: ModelArgs(dim={args.dim}, n_layers={args.n_layers}, n_heads={args.n_heads}, "
          f"n_kv_heads={args.n_kv_heads}, vocab_size={args.vocab_size}, multiple_of={args.multiple_of}, "
          f"ffn_dim_multiplier={args.ffn_dim_multiplier}, norm_eps={args.norm_eps:g}, "
          f"rope_theta={args.rope_theta:g}, max_seq_len={args.max_seq_len})")
    print(f"  {label}: loss Meta {loss:.12f}  ptdp {ptdp_loss:.12f}  |diff| {diff:.3e} "
          f"(relative {diff / abs(ptdp_loss):.3e}, tolerance {RELATIVE_TOLERANCE:.0e})"
          + ("" if ok else "  MISMATCH"))
    return ok


def parse():
    p = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1], allow_abbrev=False)
    p.add_argument("ptdp")
    p.add_argument("--norm-eps", type=float)
    p.add_argument("--rope-theta", type=float)
    p.add_argument("--ffn-multiple", type=int)
    perturb = p.add_mutually_exclusive_group()
    perturb.add_argument("--perturb-rope-theta", type=float, metavar="T")
    perturb.add_argument("--perturb-norm-eps", type=float, metavar="E")
    p.add_argument("--trained-steps", type=int, default=30)
    p.add_argument("--trained-lr", type=float, default=3e-2)
    opts, rest = p.parse_known_args()
    for banned in ("--model", "--steps", "--save", "--save-init", "--dump-data", "--report", "--load", "--lr"):
        if any(r == banned or r.startswith(banned + "=") for r in rest):
            p.error(f"{banned} is set by this script")
    for flag, value in (("--norm-eps", opts.norm_eps), ("--rope-theta", opts.rope_theta),
                        ("--ffn-multiple", opts.ffn_multiple)):
        rest += [flag, repr(value)] if value is not None else []
    return opts, rest


def compare_runs(module, opts, rest):
    """The fresh --save-init, then (--trained-steps > 0) one taken after training: True when both agree."""
    with tempfile.TemporaryDirectory(prefix="ptdp-llama-meta-") as d:
        at = lambda name: os.path.join(d, name)   # noqa: E731
        loss = ptdp_run(opts.ptdp, [*rest, "--steps", "1", "--save-init", at("init.st"),
                                    "--dump-data", at("data.st")], at("r.json"))
        ok = check(module, "initial weights", at("init.st"), at("data.st"), loss, opts)
        if opts.trained_steps > 0:
            ptdp_run(opts.ptdp, [*rest, "--steps", str(opts.trained_steps), "--lr", repr(opts.trained_lr),
                                 "--save", at("trained.st")], at("r0.json"))
            loss = ptdp_run(opts.ptdp, [*rest, "--load", at("trained.st"), "--steps", "1", "--save-init",
                                        at("init2.st"), "--dump-data", at("data2.st")], at("r2.json"))
            ok &= check(module, f"after {opts.trained_steps} steps", at("init2.st"), at("data2.st"), loss, opts)
    return ok


def main():
    opts, rest = parse()
    reference = os.environ.get(ENV, "")
    if not reference or not os.path.isfile(reference):
        print(f"SKIP: {ENV} is {'unset' if not reference else repr(reference) + ', not a file'}: set it to the path "
              "of Meta's llama/model.py\n      (git clone https://github.com/meta-llama/llama3; "
              f"{ENV}=$PWD/llama3/llama/model.py) to load ptdp's checkpoint into it.")
        return SKIP
    module = import_reference(reference)
    torch.set_num_threads(1)
    with open(reference, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    print(f"PyTorch {torch.__version__}; Meta's model from {reference} (sha256 {digest[:16]}…)")
    ok = compare_runs(module, opts, rest)
    for name, value in (("rope_theta", opts.perturb_rope_theta), ("norm_eps", opts.perturb_norm_eps)):
        if value is not None:
            print(f"perturbation {'caught' if not ok else 'NOT caught'}: Meta's {name} {value:g}, ptdp's its own")
            return 0 if not ok else 1
    print("PASSED: Meta's Transformer gives ptdp's loss" if ok else "FAILED: Meta's Transformer's loss differs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
