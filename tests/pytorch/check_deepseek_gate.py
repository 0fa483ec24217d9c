#!/usr/bin/env python3
"""check_deepseek_gate.py — ptdp's DeepSeek-V3 router against DeepSeek's own Gate.

    PTDP_DEEPSEEK_REFERENCE=/path/to/DeepSeek-V3/inference/model.py \\
        check_deepseek_gate.py MOE_GATE_VALUES [--tokens N] [--dim C] [--experts E] [--top-k k]
                               [--groups G] [--group-top-k M] [--route-scale r] [--bias-std b] [--seed S]
                               [--perturb negate-bias | drop-bias | route-scale X | limited-groups M']

    e.g.  PTDP_DEEPSEEK_REFERENCE=$HOME/DeepSeek-V3/inference/model.py \\
              check_deepseek_gate.py build/tests/moe_gate_values_f64 --experts 32 --groups 8 --group-top-k 4

An independent witness of ptdp's sigmoid router (--moe-score sigmoid, the
expert bias, --moe-groups / --moe-group-top-k, --moe-route-scale): the
helper (tests/pytorch/moe_gate_values.c, one per build) runs ptdp's router
of one block on random h, W_r and b and writes them with ptdp's choices and
gates; DeepSeek's `Gate` from deepseek-ai/DeepSeek-V3's
`inference/model.py`, unmodified, loads W_r and b and routes the same h:

    moe_gate_values OUT.st ──► router.weight, router.expert_bias, h ──► DeepSeek's Gate(ModelArgs)
                               choice [N, k], gate [N, k]                    weights, indices
                                           │                                        │
                                           └──────────── compare ◄──────────────────┘
                          per token: the same set of k experts, each with the same gate

ModelArgs: dim, n_routed_experts, n_activated_experts, n_expert_groups,
n_limited_groups and route_scale are the file's metadata (written under
those names), score_func "sigmoid".  What it takes to run DeepSeek's file
on one CPU process, and nothing more:

  - `kernel` (its Triton FP8 kernels) is not imported: a stand-in module
    gives act_quant, weight_dequant and fp8_gemm, which refuse to run.
    They are never called: the Gate's weight is float (float32 or float64,
    the build's), and model.py's `linear` takes F.linear for a weight of
    more than one byte;
  - the Gate is built with torch's default dtype the file's, and since
    DeepSeek creates its expert bias only when dim == 7168 (DeepSeek-V3's
    width), it is set here on the module — an nn.Parameter `bias` of E, as
    DeepSeek's own line makes it — and then weight and bias are loaded by
    load_state_dict, strict.  At --dim 7168 DeepSeek's own bias is used
    as it made it (float32: the float build's; the double build's
    replaces it with a float64 one, or b would be rounded).

The rule both implement: s = sigmoid(h W_r^T); the top k chosen on s + b;
with G > 1 groups a group's score is the sum of its top 2 values of s + b
and only the M best groups' experts may be chosen; gate = r s_j / sum of
the chosen s.  DeepSeek's code sums a group's top 2 when there is a bias
(and scores a group by its maximum when there is none); ptdp sums the top
floor(k/M): the two agree when floor(k/M) = 2, as DeepSeek-V3's k 8, M 4,
so every case here has floor(k/M) = 2 (and the script refuses another).

The test must be able to see what it checks: the bias must change the
choices of at least MIN_CHANGED of the tokens (DeepSeek's Gate with b = 0
against with b), and so must the groups (with G = 1 against with G); the
script says how many.  Each --perturb tells DeepSeek's side something
else while ptdp keeps its own, and the check must then fail on the
quantity named (exit 0 when it does):

    negate-bias          DeepSeek's Gate gets -b              the choices
    drop-bias            no bias: choices on s, groups scored
                         by their maximum (DeepSeek's rule
                         without a bias)                      the choices
    route-scale X        DeepSeek's route_scale X             the gates only
    limited-groups M'    DeepSeek's n_limited_groups M'       the choices

Precision: ptdp takes the sigmoid and the gates' sum in double and rounds
to the build's real; DeepSeek computes in the Gate's dtype.  The gates
agree to 1e-6 relative in the float build (PyTorch float32) and 1e-12 in
the double build (float64); the script prints the largest difference.

Exit status: 0 agreement (with --perturb: the perturbation caught), 1 a
mismatch (with --perturb: not caught), 2 the helper failed or a bad command
line, 77 no reference file.  Needs torch and numpy (run by
tests/pytorch/run.sh --script check_deepseek_gate.py).
"""
import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import types

import numpy as np
import torch

sys.dont_write_bytecode = True    # leave no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from safetensors_read import read as read_safetensors  # noqa: E402  (tests/safetensors_read.py)

ENV = "PTDP_DEEPSEEK_REFERENCE"
SKIP = 77
TOLERANCE = {"f32": 1e-6, "f64": 1e-12}     # relative, on each gate
MIN_CHANGED = 0.05                          # of the tokens: what the bias and the groups must change


# ---------------------------------------- DeepSeek's file on one CPU process

def kernel_stand_in():
    """DeepSeek's `kernel` module (Triton FP8 kernels): names only, never run for a float weight."""
    module = types.ModuleType("kernel")

    def refuse(name):
        def f(*_args, **_kwargs):
            raise RuntimeError(f"kernel.{name} called: the stand-in has no FP8 kernels (the Gate's weight is float)")
        return f
    for name in ("act_quant", "weight_dequant", "fp8_gemm"):
        setattr(module, name, refuse(name))
    return module


def import_reference(path):
    """DeepSeek's model.py as a module, its `kernel` import answered by the stand-in."""
    saved = sys.modules.get("kernel")
    sys.modules["kernel"] = kernel_stand_in()
    try:
        spec = importlib.util.spec_from_file_location("deepseek_v3_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("kernel", None)
        else:
            sys.modules["kernel"] = saved
    for name in ("ModelArgs", "Gate"):
        if not hasattr(module, name):
            raise SystemExit(f"{path}: no {name} — not DeepSeek-V3's inference/model.py?")
    return module


def deepseek_gate(module, tensors, meta, bias, **override):
    """DeepSeek's Gate for the file's settings (override: another ModelArgs value), W_r and `bias` loaded."""
    weight = torch.from_numpy(tensors["router.weight"].copy())
    settings = dict(dim=int(meta["dim"]), n_routed_experts=int(meta["n_routed_experts"]),
                    n_activated_experts=int(meta["n_activated_experts"]),
                    n_expert_groups=int(meta["n_expert_groups"]), n_limited_groups=int(meta["n_limited_groups"]),
                    score_func="sigmoid", route_scale=float(meta["route_scale"]))
    settings.update(override)
    args = module.ModelArgs(**settings)
    default = torch.get_default_dtype()
    torch.set_default_dtype(weight.dtype)
    try:
        gate = module.Gate(args)
        state = {"weight": weight}
        whose = "DeepSeek's own (dim 7168)"
        if bias is not None:
            if gate.bias is None or gate.bias.dtype != weight.dtype:   # DeepSeek's: dim 7168 only, float32
                gate.bias = torch.nn.Parameter(torch.empty(args.n_routed_experts))
                whose = "set on the module"
            state["bias"] = torch.from_numpy(np.array(bias))
        elif gate.bias is not None:
            gate.bias = None
    finally:
        torch.set_default_dtype(default)
    gate.load_state_dict(state, strict=True)
    gate.whose_bias = whose if bias is not None else "none"
    return gate


def route(gate, h):
    with torch.no_grad():
        weights, indices = gate(h)
    return weights.numpy(), indices.numpy()


# ------------------------------------------------------------- comparing

def same_sets(a, b):
    """Per token, whether the rows of a and b hold the same experts."""
    return np.all(np.sort(a, axis=1) == np.sort(b, axis=1), axis=1)


def compare(choice, gate, ds_indices, ds_weights, tol):
    """(tokens whose sets differ, largest relative gate difference on the tokens that agree)."""
    agree = same_sets(choice, ds_indices)
    worst = 0.0
    for t in np.flatnonzero(agree):
        mine = dict(zip(choice[t].tolist(), gate[t].tolist()))
        for e, w in zip(ds_indices[t].tolist(), ds_weights[t].tolist()):
            worst = max(worst, abs(w - mine[e]) / abs(mine[e]))
    return int((~agree).sum()), worst


def strength(module, tensors, meta, h, ds_indices):
    """How many tokens' choices the bias changes, and how many the groups change (DeepSeek's Gate)."""
    zero = np.zeros_like(tensors["router.expert_bias"])
    _, unbiased = route(deepseek_gate(module, tensors, meta, zero), h)
    _, ungrouped = route(deepseek_gate(module, tensors, meta, tensors["router.expert_bias"],
                                       n_expert_groups=1, n_limited_groups=1), h)
    return int((~same_sets(unbiased, ds_indices)).sum()), int((~same_sets(ungrouped, ds_indices)).sum())


# -------------------------------------------------------------- the run

def parse():
    p = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1], allow_abbrev=False)
    p.add_argument("values", help="the moe_gate_values helper of one build")
    for name in ("--tokens", "--dim", "--experts", "--top-k", "--groups", "--group-top-k", "--seed"):
        p.add_argument(name, type=int)
    for name in ("--route-scale", "--bias-std"):
        p.add_argument(name, type=float)
    p.add_argument("--perturb", nargs="+", metavar="WHAT")
    opts = p.parse_args()
    if opts.perturb is not None:
        what, value = opts.perturb[0], opts.perturb[1:]
        arity = {"negate-bias": 0, "drop-bias": 0, "route-scale": 1, "limited-groups": 1}
        if what not in arity or len(value) != arity[what]:
            p.error(f"--perturb {' '.join(opts.perturb)}: give negate-bias, drop-bias, route-scale X or "
                    "limited-groups M")
        try:
            opts.perturb = (what, float(value[0]) if what == "route-scale" else int(value[0]) if value else None)
        except ValueError:
            p.error(f"--perturb {what} {value[0]}: not a number")
    return opts


def ptdp_values(opts, path):
    """Run the helper: ptdp's routing into `path`."""
    cmd = [opts.values, path]
    for name in ("tokens", "dim", "experts", "top_k", "groups", "group_top_k", "seed", "route_scale", "bias_std"):
        value = getattr(opts, name)
        cmd += [] if value is None else ["--" + name.replace("_", "-"), repr(value)]
    result = subprocess.run(cmd)
    if result.returncode != 0:
        print(f"FAILED: {' '.join(cmd)} exited {result.returncode}")
        sys.exit(2)


def perturbed_gate(module, tensors, meta, perturb):
    """DeepSeek's Gate told what --perturb says (None: the file's own settings)."""
    b = tensors["router.expert_bias"]
    what, value = perturb if perturb else (None, None)
    if what == "negate-bias":
        return deepseek_gate(module, tensors, meta, -b)
    if what == "drop-bias":
        return deepseek_gate(module, tensors, meta, None)
    if what == "route-scale":
        return deepseek_gate(module, tensors, meta, b, route_scale=value)
    if what == "limited-groups":
        return deepseek_gate(module, tensors, meta, b, n_limited_groups=value)
    return deepseek_gate(module, tensors, meta, b)


def check(module, tensors, meta, opts):
    """The comparison; returns (sets differ, gates differ) and prints what it saw."""
    k, M = int(meta["n_activated_experts"]), int(meta["n_limited_groups"])
    if int(meta["n_expert_groups"]) > 1 and k // M != 2:
        print(f"top-k {k}, group top-k {M}: floor(k/M) = {k // M}, but DeepSeek's Gate scores a group by its "
              "top 2 (with a bias): choose floor(k/M) = 2")
        sys.exit(2)
    h = torch.from_numpy(tensors["h"].copy())
    choice, gate = tensors["choice"], tensors["gate"]
    tol = TOLERANCE[meta["real"]]
    reference = deepseek_gate(module, tensors, meta, tensors["router.expert_bias"])
    _, own = route(reference, h)
    by_bias, by_groups = strength(module, tensors, meta, h, own)
    ds_weights, ds_indices = route(perturbed_gate(module, tensors, meta, opts.perturb), h)
    differ, worst = compare(choice, gate, ds_indices, ds_weights, tol)
    N = choice.shape[0]
    b = tensors["router.expert_bias"]
    print(f"  ModelArgs(dim={meta['dim']}, n_routed_experts={meta['n_routed_experts']}, n_activated_experts={k}, "
          f"n_expert_groups={meta['n_expert_groups']}, n_limited_groups={M}, score_func='sigmoid', "
          f"route_scale={float(meta['route_scale']):g}); {N} tokens, ptdp-{meta['real']}, |b| up to {abs(b).max():.3g} "
          f"(the Gate's bias: {reference.whose_bias})")
    print(f"  the bias changes the choices of {by_bias} of {N} tokens, the groups those of {by_groups}")
    print(f"  chosen sets: {N - differ} of {N} tokens the same; gates: largest relative difference {worst:.3e} "
          f"(tolerance {tol:.0e})")
    seen = (("the bias", by_bias),) + ((("the groups", by_groups),) if int(meta["n_expert_groups"]) > 1 else ())
    weak = [what for what, n in seen if n < MIN_CHANGED * N]
    if weak:
        print(f"FAILED: {' and '.join(weak)} change{'s' if len(weak) == 1 else ''} the choices of fewer than "
              f"{MIN_CHANGED:.0%} of the tokens: the comparison would not see {'it' if len(weak) == 1 else 'them'} "
              "(a larger --bias-std, more tokens)")
        sys.exit(1)
    return differ > 0, worst > tol


def verdict(perturb, sets_differ, gates_differ):
    if perturb is None:
        ok = not sets_differ and not gates_differ
        print("PASSED: DeepSeek's Gate chooses ptdp's experts with ptdp's gates" if ok
              else "FAILED: DeepSeek's Gate and ptdp's router differ")
        return 0 if ok else 1
    what, value = perturb
    expected = "the gates" if what == "route-scale" else "the choices"
    caught = (not sets_differ and gates_differ) if what == "route-scale" else sets_differ
    told = what + ("" if value is None else f" {value:g}")
    print(f"perturbation {'caught' if caught else 'NOT caught'}: DeepSeek's Gate told {told}, ptdp its own; "
          f"{expected} must differ" + ("" if what != "route-scale" else " and the choices agree"))
    return 0 if caught else 1


def main():
    opts = parse()
    reference = os.environ.get(ENV, "")
    if not reference or not os.path.isfile(reference):
        print(f"SKIP: {ENV} is {'unset' if not reference else repr(reference) + ', not a file'}: set it to the path "
              "of DeepSeek-V3's inference/model.py\n      (git clone https://github.com/deepseek-ai/DeepSeek-V3; "
              f"{ENV}=$PWD/DeepSeek-V3/inference/model.py) to route ptdp's inputs through its Gate.")
        return SKIP
    module = import_reference(reference)
    torch.set_num_threads(1)
    with open(reference, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    print(f"PyTorch {torch.__version__}; DeepSeek's Gate from {reference} (sha256 {digest[:16]}…)")
    with tempfile.TemporaryDirectory(prefix="ptdp-deepseek-gate-") as d:
        path = os.path.join(d, "gate.st")
        ptdp_values(opts, path)
        tensors, meta = read_safetensors(path)
    sets_differ, gates_differ = check(module, tensors, meta, opts)
    return verdict(opts.perturb, sets_differ, gates_differ)


if __name__ == "__main__":
    sys.exit(main())
