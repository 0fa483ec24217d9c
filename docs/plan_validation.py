#!/usr/bin/env python3
"""plan_validation.py PTDP — docs/plan.md's validation at scale, rerun.

For each published run of Narayanan et al. 2021 ("Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", arXiv
2104.04473v5: table 1, weak scaling; table 2, PTD-P against ZeRO-3) it asks
`ptdp plan` for the published layout fixed — tp, pp (and ZeRO-3's dp and
micro-batch), full recomputation as the paper ran, no SP or CP (not in the
paper), ZeRO off for PTD-P — on dgx-a100-80g in bf16, and prints the
planner's hardware TFLOP/s per GPU (the paper's count, which includes the
recomputed forward: its equation 3) beside the published one, with the
ratio, and the memory per GPU the planner predicts.  --device-mem 100000G lets
the planner price layouts that would not fit in 80 GB (it says which).

And a mixture of experts: Megatron-Core's Mixtral 8x7B on 64 H100s
(megatron/core/transformer/moe/README.md, "Reference Best Parallel
Mapping": dropless, all-to-all dispatcher, BF16, seq-len 4096, TP 1 EP 8
PP 4 VP 8, micro-batch 1, global batch 256, vocabulary 32K; 468 TFLOP/s a
GPU with MCore v0.9) asked of `ptdp plan` on dgx-h100 with what ptdp can
express of it (docs/plan.md says what differs), its TFLOP/s counted both
ways: ptdp's model count of the model it plans, and Megatron's count of
Mixtral (num_floating_point_operations: 12 B s L h^2 (1 + g/a + s/h +
k (F/h) 3/2 + V/(2 L h))) over the planner's step — the second is the one
comparable with the published figure.

And Llama 3 (Meta, "The Llama 3 Herd of Models", 2024, tables 3 and 4): 405B
on H100s in the paper's three pretraining layouts, their TP, CP, PP (so DP)
fixed and ZeRO-2 (FSDP without resharding after the forward), the planner
choosing the rest within 80 GiB, its model TFLOP/s and MFU beside the
published ones; what the differences cost, each a planner number; and 70B,
for which nothing is published to compare with.

    python3 docs/plan_validation.py build/cli/ptdp            # the markdown tables
    python3 docs/plan_validation.py build/cli/ptdp --llama    # the Llama 3 tables only
"""
import json
import subprocess
import sys

V, S = 51200, 2048
# table 1: params (B), heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s per GPU, % of peak
TABLE1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52),
]
# table 2: scheme, params (B), model-parallel size, batch, GPUs, micro-batch, TFLOP/s per GPU
GPT3 = (96, 12288, 96)          # heads, hidden, layers of the 174.6B model (GPT-3)
MT530 = (128, 20480, 105)       # of the 529.6B model (table 1's row)
TABLE2 = [
    ("ZeRO-3", 174.6, 1, 1536, 384, 4, 144), ("ZeRO-3", 174.6, 1, 1536, 768, 2, 88),
    ("ZeRO-3", 174.6, 1, 1536, 1536, 1, 44), ("ZeRO-3", 529.6, 1, 2560, 640, 4, 138),
    ("ZeRO-3", 529.6, 1, 2240, 1120, 2, 98), ("ZeRO-3", 529.6, 1, 2240, 2240, 1, 48),
    ("PTD-P", 174.6, 96, 1536, 384, 1, 153), ("PTD-P", 174.6, 96, 1536, 768, 1, 149),
    ("PTD-P", 174.6, 96, 1536, 1536, 1, 141), ("PTD-P", 529.6, 280, 2240, 560, 1, 171),
    ("PTD-P", 529.6, 280, 2240, 1120, 1, 167), ("PTD-P", 529.6, 280, 2240, 2240, 1, 159),
]


def plan(ptdp, heads, hidden, layers, gpus, batch, fixed):
    """The best layout within the profile's 80 GiB; if none fits, the best
    with no memory limit, marked (fits False)."""
    for mem in ([], ["--device-mem", "100000G"]):
        c, cmd, err = plan_once(ptdp, heads, hidden, layers, gpus, batch, fixed + mem)
        if c is not None:
            c["fits80"] = not mem
            return c, cmd, err
    return c, cmd, err


def plan_once(ptdp, heads, hidden, layers, gpus, batch, fixed):
    # --attention full: the 2021 runs kept the whole T x T matrix (Megatron's
    # fused softmax); FlashAttention's tiles came a year later
    cmd = [ptdp, "plan", "--model", "gpt", "--layers", str(layers), "--hidden", str(hidden),
           "--heads", str(heads), "--seq-len", str(S), "--vocab", str(V), "--batch", str(batch),
           "--gpus", str(gpus), "--profile", "dgx-a100-80g", "--precision", "bf16", "--attention", "full",
           "--recompute", "full", "--cp", "1", "--sp", "off", "--top", "1", "--json"] + fixed
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, " ".join(cmd[1:]), out.stderr.strip()
    return json.loads(out.stdout)["candidates"][0], " ".join(cmd[1:]), ""


def mem(c):
    m = f"{c['memory_per_gpu_bytes'] / 2**30:.1f} GiB"
    return m if c["fits80"] else m + " (> 80 GiB: none fits)"


def layout(c):
    s = c["schedule"] + (f" v{c['virtual_stages']}" if c["virtual_stages"] > 1 else "")
    z = f"ZeRO-{c['zero']}" + (" (no --overlap)" if c["zero"] == 3 and not c["overlap"] else "")
    return f"dp {c['dp']} tp {c['tp']} pp {c['pp']}, b {c['micro_batch_size']}, {s}, {z}"


def main():
    ptdp = sys.argv[1] if len(sys.argv) > 1 else "build/cli/ptdp"
    print("| params | GPUs | t x p | published TFLOP/s a GPU | ptdp plan (layout it chose) | predicted "
          "TFLOP/s a GPU (hardware; model) | ratio | memory a GPU |")
    print("|---|---|---|---|---|---|---|---|")
    for p, heads, hidden, layers, tp, pp, gpus, batch, tflops, pct in TABLE1:
        c, cmd, err = plan(ptdp, heads, hidden, layers, gpus, batch, ["--tp", str(tp), "--pp", str(pp), "--zero", "0"])
        if c is None:
            print(f"| {p}B | {gpus} | {tp} x {pp} | {tflops} ({pct}%) | failed: {err} | | | |")
            continue
        hw = c["hardware_tflops_per_gpu"]
        print(f"| {p}B | {gpus} | {tp} x {pp} | {tflops} ({pct}%) | {layout(c)} | {hw:.0f}; {c['model_tflops_per_gpu']:.0f} "
              f"| {hw / tflops:.2f} | {mem(c)} |")
    print()
    print("| scheme | params | GPUs | micro-batch | published TFLOP/s a GPU | ptdp plan (layout) | predicted "
          "(hardware; model) | ratio | memory a GPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for scheme, p, mp, batch, gpus, b, tflops in TABLE2:
        heads, hidden, layers = GPT3 if p < 300 else MT530
        if scheme == "ZeRO-3":
            fixed = ["--tp", "1", "--pp", "1", "--zero", "3", "--micro-batch-size", str(b)]
        else:
            fixed = ["--tp", "8", "--pp", str(mp // 8), "--zero", "0", "--micro-batch-size", str(b)]
        c, cmd, err = plan(ptdp, heads, hidden, layers, gpus, batch, fixed)
        if c is None:
            print(f"| {scheme} | {p}B | {gpus} | {b} | {tflops} | failed: {err} | | | |")
            continue
        hw = c["hardware_tflops_per_gpu"]
        print(f"| {scheme} | {p}B | {gpus} | {b} | {tflops} | {layout(c)} | {hw:.0f}; {c['model_tflops_per_gpu']:.0f} "
              f"| {hw / tflops:.2f} | {mem(c)} |")


# Mixtral 8x7B (mistralai; Megatron-Core's example): layers, hidden, heads,
# query groups, ffn, experts, top-k, vocab; the published run: GPUs, tp, ep,
# pp, vp, micro-batch, batch, seq-len, TFLOP/s a GPU.
MIXTRAL_8X7B = dict(layers=32, hidden=4096, heads=32, groups=8, ffn=14336, experts=8, topk=2, vocab=32000,
                    gpus=64, tp=1, ep=8, pp=4, vp=8, mbs=1, gbs=256, seq=4096, tflops=468)


def megatron_flops(m):
    """Megatron-LM's count of a step (training.py num_floating_point_operations,
    GQA and SwiGLU experts, the router not counted)."""
    h, L, s = m["hidden"], m["layers"], m["seq"]
    return 12 * m["gbs"] * s * L * h * h * ((1 + m["groups"] / m["heads"] + s / h)
                                            + m["ffn"] / h * m["topk"] * 1.5 + m["vocab"] / (2 * L * h))


def moe_rows(ptdp):
    m = MIXTRAL_8X7B
    # a SwiGLU expert's three h x F matrices are two of ptdp's GELU expert of
    # width 1.5 F (the same parameters and FLOPs); FlashAttention's
    # recomputation of the attention core is ptdp's selective recomputation;
    # the distributed optimizer is ZeRO-1; bf16 runs one chunk a stage here
    cmd = [ptdp, "plan", "--model", "gpt", "--layers", str(m["layers"]), "--hidden", str(m["hidden"]),
           "--heads", str(m["heads"]), "--seq-len", str(m["seq"]), "--vocab", str(m["vocab"]),
           "--moe-experts", str(m["experts"]), "--moe-top-k", str(m["topk"]), "--moe-ffn", str(m["ffn"] * 3 // 2),
           "--batch", str(m["gbs"]), "--gpus", str(m["gpus"]), "--profile", "dgx-h100", "--precision", "bf16",
           "--tp", str(m["tp"]), "--ep", str(m["ep"]), "--pp", str(m["pp"]), "--cp", "1",
           "--micro-batch-size", str(m["mbs"]), "--zero", "1", "--recompute", "selective", "--top", "1", "--json"]
    print("| model | GPUs | published layout | published TFLOP/s a GPU | ptdp plan (layout) | predicted TFLOP/s "
          "a GPU (ptdp's count; Megatron's) | ratio | step s (predicted; published) | memory a GPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    out = subprocess.run(cmd, capture_output=True, text=True)
    published = f"TP {m['tp']} EP {m['ep']} PP {m['pp']} VP {m['vp']}, b {m['mbs']}, B {m['gbs']}"
    if out.returncode != 0:
        print(f"| Mixtral 8x7B | {m['gpus']} | {published} | {m['tflops']} | failed: {out.stderr.strip()} | | | | |")
        return
    c = json.loads(out.stdout)["candidates"][0]
    fl = megatron_flops(m)
    step = c["step_s"]
    meg = fl / (step * m["gpus"]) / 1e12
    pub_step = fl / (m["tflops"] * 1e12 * m["gpus"])
    lay = (f"dp {c['dp']} ep {c['ep']} tp {c['tp']} pp {c['pp']}, b {c['micro_batch_size']}, {c['schedule']}, "
           f"ZeRO-{c['zero']}, {c['recompute']} recompute")
    print(f"| Mixtral 8x7B | {m['gpus']} | {published} | {m['tflops']} | {lay} | {c['model_tflops_per_gpu']:.0f}; "
          f"{meg:.0f} | {meg / m['tflops']:.2f} | {step:.2f}; {pub_step:.2f} | "
          f"{c['memory_per_gpu_bytes'] / 2**30:.1f} GiB |")


def dualpipe_rows(ptdp):
    """Mixtral 8x7B on the same 64 GPUs under 1F1B and DualPipeV, in float (DualPipe runs without bf16:
    two chunks a device), full recomputation (selective does not fit in float), EP 8 in one node
    (tp 1) and over two (tp 2); the whole attention matrix, as the Mixtral row's selective
    recomputation keeps it."""
    m = MIXTRAL_8X7B
    print("| layout (dp ep tp pp, b 1, ZeRO-1, full recompute, float) | schedule | step s | TFLOP/s a GPU "
          "(ptdp's count) | bubble | EP all-to-alls a micro-batch a device | memory a GPU |")
    print("|---|---|---|---|---|---|---|")
    for tp in (1, 2):
        for schedule in ("1f1b", "dualpipev"):
            cmd = [ptdp, "plan", "--model", "gpt", "--layers", str(m["layers"]), "--hidden", str(m["hidden"]),
                   "--heads", str(m["heads"]), "--seq-len", str(m["seq"]), "--vocab", str(m["vocab"]),
                   "--moe-experts", str(m["experts"]), "--moe-top-k", str(m["topk"]),
                   "--moe-ffn", str(m["ffn"] * 3 // 2), "--batch", str(m["gbs"]), "--gpus", str(m["gpus"]),
                   "--profile", "dgx-h100", "--tp", str(tp), "--ep", str(m["ep"]), "--pp", str(m["pp"]),
                   "--cp", "1", "--micro-batch-size", str(m["mbs"]), "--zero", "1", "--recompute", "full",
                   "--attention", "full", "--schedule", schedule, "--top", "1", "--json"]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"| tp {tp} | {schedule} | failed: {out.stderr.strip()} | | | | |")
                continue
            c = json.loads(out.stdout)["candidates"][0]
            chunks = 2 if schedule == "dualpipev" else 1   # ep_comm_s is one chunk's: a device has two
            lay = f"dp {c['dp']} ep {c['ep']} tp {c['tp']} pp {c['pp']}"
            print(f"| {lay} | {schedule} | {c['step_s']:.2f} | {c['model_tflops_per_gpu']:.0f} | "
                  f"{c['time']['bubble']:.3f} | {c['time']['ep_comm_s'] * chunks * 1e3:.1f} ms | "
                  f"{c['memory_per_gpu_bytes'] / 2**30:.1f} GiB |")


# Llama 3 (Meta, "The Llama 3 Herd of Models", 2024): 405B's shape, table 3;
# its three pretraining layouts, table 4 (GPUs, TP, CP, PP, DP, seq-len,
# batch a DP rank, tokens a batch, TFLOP/s a GPU, BF16 MFU %).  And 70B's
# shape (the paper gives no layout or throughput for it).
LLAMA_405B = dict(layers=126, hidden=16384, ffn=53248, heads=128, kv=8, vocab=128256)
LLAMA_70B = dict(layers=80, hidden=8192, ffn=28672, heads=64, kv=8, vocab=128256)
LLAMA_405B_RUNS = [
    (8192, 8, 1, 16, 64, 8192, 32, "16M", 430, 43),
    (16384, 8, 1, 16, 128, 8192, 16, "16M", 400, 41),
    (16384, 8, 16, 16, 8, 131072, 16, "16M", 380, 38),
]
H100_BF16_PEAK = 989e12   # dgx-h100's bf16 peak (src/core/clock.c), what MFU divides by


def llama_cmd(ptdp, m, seq, batch, gpus, fixed):
    return [ptdp, "plan", "--model", "llama", "--layers", str(m["layers"]), "--hidden", str(m["hidden"]),
            "--ffn", str(m["ffn"]), "--heads", str(m["heads"]), "--kv-heads", str(m["kv"]), "--seq-len", str(seq),
            "--vocab", str(m["vocab"]), "--batch", str(batch), "--gpus", str(gpus), "--profile", "dgx-h100",
            "--precision", "bf16"] + fixed + ["--top", "1", "--json"]


def llama_plan(ptdp, m, seq, batch, gpus, fixed):
    cmd = llama_cmd(ptdp, m, seq, batch, gpus, fixed)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    return json.loads(out.stdout)["candidates"][0], ""


def llama_layout(c):
    return (f"dp {c['dp']} tp {c['tp']} pp {c['pp']} cp {c['cp']}, b {c['micro_batch_size']}, {c['schedule']}, "
            f"ZeRO-{c['zero']}, {c['recompute']} recompute, sp {'on' if c['sp'] else 'off'}, "
            f"overlap {'on' if c['overlap'] else 'off'}")


def llama_rows(ptdp):
    """Llama 3 405B's three published layouts, fixed (tp, cp, pp, and so dp;
    ZeRO-2 as FSDP without resharding after the forward), the planner
    choosing the rest within 80 GiB; then what the differences cost, each
    a planner number: no recomputation, the attention in tiles (what
    FlashAttention without activation checkpointing computes), with no
    memory limit, and that step's busy time without the pipeline's bubble
    (the limit an interleaved schedule approaches)."""
    print("| 405B run | GPUs | published layout | seq-len | batch | published TFLOP/s a GPU (BF16 MFU) | ptdp plan "
          "(layout it chose) | predicted TFLOP/s a GPU (model; hardware) | predicted MFU | ratio | step s "
          "(predicted; published) | memory a GPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    whatif = []
    for i, (gpus, tp, cp, pp, dp, seq, per_dp, tokens, tflops, mfu) in enumerate(LLAMA_405B_RUNS):
        batch = dp * per_dp
        fixed = ["--tp", str(tp), "--cp", str(cp), "--pp", str(pp), "--zero", "2"]
        pub = f"TP {tp} CP {cp} PP {pp} DP {dp}"
        c, err = llama_plan(ptdp, LLAMA_405B, seq, batch, gpus, fixed)
        if c is None:
            print(f"| {i + 1} | {gpus} | {pub} | {seq} | {batch} | {tflops} ({mfu}%) | failed: {err} | | | | | |")
            continue
        model = c["model_tflops_per_gpu"]
        pub_step = c["time"]["model_flops"] / (tflops * 1e12 * gpus)
        print(f"| {i + 1} | {gpus} | {pub} | {seq} | {batch} ({tokens} tokens) | {tflops} ({mfu}%) | {llama_layout(c)} "
              f"| {model:.0f}; {c['hardware_tflops_per_gpu']:.0f} | {100 * model * 1e12 / H100_BF16_PEAK:.0f}% "
              f"| {model / tflops:.2f} | {c['step_s']:.1f}; {pub_step:.1f} | {c['memory_per_gpu_bytes'] / 2**30:.1f} GiB |")
        s, err = llama_plan(ptdp, LLAMA_405B, seq, batch, gpus, fixed + [
            "--micro-batch-size", str(c["micro_batch_size"]), "--sp", "on" if c["sp"] else "off",
            "--schedule", c["schedule"], "--recompute", "none", "--device-mem", "100000G"])
        whatif.append((i + 1, c, s, tflops))
    print()
    print("| 405B run | predicted (full recompute, fits): bubble; TP and CP of a micro-batch's F + B | no "
          "recompute instead, in tiles (memory a GPU it needs) | and no bubble (its busy time; its bubble) | published |")
    print("|---|---|---|---|---|")
    for run, c, s, tflops in whatif:
        t = c["time"]
        comm = (t["tp_comm_s"] + t["cp_comm_s"]) / (t["forward_s"] + t["backward_s"])
        head = f"{c['model_tflops_per_gpu']:.0f}: {t['bubble']:.2f}; {100 * comm:.0f}%"
        if s is None:
            print(f"| {run} | {head} | failed | | {tflops} |")
            continue
        sel, b = s["model_tflops_per_gpu"], s["time"]["bubble"]
        print(f"| {run} | {head} | {sel:.0f} ({s['memory_per_gpu_bytes'] / 2**30:.0f} GiB) "
              f"| {sel / (1 - b):.0f} ({b:.2f}) | {tflops} |")


def llama_70b_rows(ptdp):
    """Llama 3 70B at 8K on 1024 H100s, 16M tokens a batch: the planner's
    free choice, and a layout like the 405B's (TP 8 in a node, ZeRO-2).
    No published throughput to set beside them."""
    print("| 70B layout asked | ptdp plan (layout it chose) | predicted TFLOP/s a GPU (model; hardware) | "
          "predicted MFU | step s | memory a GPU |")
    print("|---|---|---|---|---|---|")
    for what, fixed in (("free (1024 GPUs)", []), ("TP 8, CP 1, ZeRO-2", ["--tp", "8", "--cp", "1", "--zero", "2"])):
        c, err = llama_plan(ptdp, LLAMA_70B, 8192, 2048, 1024, fixed)
        if c is None:
            print(f"| {what} | failed: {err} | | | | |")
            continue
        model = c["model_tflops_per_gpu"]
        print(f"| {what} | {llama_layout(c)} | {model:.0f}; {c['hardware_tflops_per_gpu']:.0f} | "
              f"{100 * model * 1e12 / H100_BF16_PEAK:.0f}% | {c['step_s']:.1f} | "
              f"{c['memory_per_gpu_bytes'] / 2**30:.1f} GiB |")


if __name__ == "__main__":
    ptdp_path = sys.argv[1] if len(sys.argv) > 1 else "build/cli/ptdp"
    if "--llama" not in sys.argv[2:]:
        main()
        print()
        moe_rows(ptdp_path)
        print()
        dualpipe_rows(ptdp_path)
        print()
    llama_rows(ptdp_path)
    print()
    llama_70b_rows(ptdp_path)
