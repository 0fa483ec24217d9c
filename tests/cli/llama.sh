#!/usr/bin/env bash
# llama.sh — the llama on the command line: every bad value and every
# layout it does not run under yet refused (exit 2, naming the flag) before
# any work (`ptdp plan --model llama`'s in tests/cli/plan.sh); a run passes
# --check against one device, and so does one with a mixture of SwiGLU
# experts under ep x tp x dp (its loads in --log and --report: sum(load) +
# dropped = k B T each step); its --save-init
# checkpoint, under Meta's names, gives in plain Python's replay of Meta's
# forward (llama_reference.py) the step-1 loss ptdp reports (double
# builds: to 1e-9); a GPT checkpoint does not load into it, nor its into
# a GPT (the loader's refusal of another model's file naming its tensors,
# exit 2 before any work), nor one turned by another --rope-theta; `ptdp sample` continues its checkpoint, the
# same text for the same seed, and after 800 steps on the built-in sums it
# answers held-out sums.
#
#   llama.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

l="train --model llama --steps 1"
expect_usage "--kv-heads is a flag of --model llama"      -- train --kv-heads 2 --steps 1
expect_usage "--kv-heads 3 must divide --heads 4"          -- $l --kv-heads 3
expect_usage "is odd, and rotary positions rotate pairs"   -- $l --hidden 12 --heads 4 --kv-heads 4
expect_usage "--rope-theta 0: must be above 0"             -- $l --rope-theta 0
expect_usage "--rope-theta"                                -- $l --rope-theta -1
expect_usage "--rope-theta"                                -- $l --rope-theta nan
expect_usage "--rope-theta"                                -- $l --rope-theta inf
expect_usage "--norm-eps 0: must be above 0"               -- $l --norm-eps 0
expect_usage "--norm-eps"                                  -- $l --norm-eps nan
expect_usage "--norm-eps"                                  -- $l --norm-eps inf
expect_usage "--tp 3 must divide --kv-heads 2"             -- $l --tp 3
expect_usage "--tp 8 must divide --heads 4"                -- $l --tp 8 --vocab 64
expect_usage "and --ffn 100 is given: leave one out"       -- $l --ffn 100 --ffn-multiple 64
expect_usage "--dropout 0.1: the llama model has no dropout" -- $l --dropout 0.1
expect_usage "capped by the kv heads"                     -- $l --cp 4 --cp-algo a2a
expect_usage "the llama model cannot run a slice alone"    -- $l --pp 2 --micro-batches 2 --schedule gpipe --token-slices 2
expect_usage "--ep 2 spreads a mixture of experts' experts over devices, and this llama model is dense" -- $l --dp 2 --ep 2
expect_usage "--moe-top-k needs --moe-experts E"           -- $l --moe-top-k 1
expect_usage "--moe-top-k 5: must be at most --moe-experts 4" -- $l --moe-experts 4 --moe-top-k 5
expect_usage "--moe-experts 6 must divide by --ep 4"       -- $l --moe-experts 6 --dp 4 --ep 4
expect_usage "--moe-ffn 30 must divide by --tp 4"          -- $l --moe-experts 4 --moe-ffn 30 --tp 4 --vocab 64
expect_usage "--moe-capacity-factor 0: must be above 0"    -- $l --moe-experts 4 --moe-capacity-factor 0
expect_usage "--moe-aux-loss"                              -- $l --moe-experts 4 --moe-aux-loss -1
expect_usage "--moe-aux-loss"                              -- $l --moe-experts 4 --moe-aux-loss nan
expect_usage "--moe-experts 4 with --sp"                   -- $l --moe-experts 4 --tp 2 --sp --vocab 64
expect_usage "--ep 2 and --zero 3"                         -- $l --moe-experts 4 --dp 2 --ep 2 --zero 3
expect_usage "--cp and --moe-capacity-factor"              -- $l --moe-experts 4 --cp 2 --moe-capacity-factor 1

# tp 4 over 2 kv heads: each rank a copy of the one its query heads read
if run_ok train --model llama --steps 2 --tp 4 --vocab 64 --dp 2 --zero 1 --check --save "$tmp/llama.st"; then
    has "check PASSED" || fail "a llama at tp 4 > 2 kv heads did not pass --check"
fi

# the checkpoint records rope_theta and norm_eps (Meta's ModelArgs names): a run turned by
# another theta is another model, refused naming both values; ptdp sample takes them from the file
if run_ok train --model llama --steps 1 --vocab 64 --rope-theta 10 --norm-eps 1e-3 --save "$tmp/theta.st"; then
    # (exit 1 as a shape that does not match: the file does not fit the flags)
    run_status 1 train --model llama --steps 1 --vocab 64 --norm-eps 1e-3 --load "$tmp/theta.st" &&
        { grep -qF "the checkpoint has rope_theta=10, this run --rope-theta 500000 (give --rope-theta 10 to go on from it)" "$err" ||
              fail "a llama checkpoint turned by theta 10 loaded into a run of theta 500000 without naming both"; }
    run_status 1 train --model llama --steps 1 --vocab 64 --rope-theta 10 --load "$tmp/theta.st" &&
        { grep -qF "the checkpoint has norm_eps=0.001, this run --norm-eps 1e-05 (give --norm-eps 0.001" "$err" ||
              fail "a llama checkpoint of eps 1e-3 loaded into a run of eps 1e-5 without naming both"; }
    run_ok train --model llama --steps 2 --vocab 64 --rope-theta 10 --norm-eps 1e-3 --load "$tmp/theta.st" ||
        fail "a llama checkpoint did not load with its own --rope-theta and --norm-eps"
    run_ok sample --load "$tmp/theta.st" --prompt "1+" --tokens 4 ||
        fail "ptdp sample did not take rope_theta and norm_eps from the checkpoint"
fi

# a mixture of 4 SwiGLU experts, top-2: ep 2 x tp 2 x dp 2 with a capacity, against one device;
# every step's loads and drops make k B T choices, in --log and in --report
moe="--moe-experts 4 --moe-top-k 2 --moe-capacity-factor 1.0 --hidden 32 --seq-len 16 --batch 8"
if run_ok train --model llama --steps 2 --vocab 64 $moe --dp 2 --tp 2 --ep 2 --check \
        --log "$tmp/moe.jsonl" --report "$tmp/moe.json" --save "$tmp/moe.st"; then
    has "check PASSED" || fail "a llama with experts under ep 2 x tp 2 x dp 2 did not pass --check"
    has "experts' loads, the last step" || fail "a llama with experts printed no loads after the run"
    cases=$((cases + 1))
    python3 - "$tmp/moe.jsonl" "$tmp/moe.json" <<'PY' || fail "the llama's expert loads do not add up to k B T"
import json, sys
kBT = 2 * 8 * 16
log = [json.loads(l) for l in open(sys.argv[1])]
rep = json.load(open(sys.argv[2]))
assert rep["run"]["moe_choices_per_step"] == kBT and [b["block"] for b in rep["run"]["moe_blocks"]] == [0, 1]
assert rep["config"]["model"]["moe_experts"] == 4 and rep["config"]["model"]["moe_capacity_factor"] == 1.0
for s in log:
    for load, dropped in zip(s["moe_load"], s["moe_dropped"]):
        assert sum(load) + dropped == kBT, (s["step"], load, dropped)
PY
fi

# a checkpoint with experts into a dense run, and a dense one into a run with experts
if [[ -f $tmp/moe.st ]] && run_ok train --model llama --steps 1 --vocab 64 --hidden 32 --seq-len 16 --batch 8 \
        --save "$tmp/dense.st"; then
    expect_usage "holds a mixture of experts (layers.0.feed_forward.gate.weight, 4 experts) and this run's llama is dense" \
        -- train --model llama --steps 1 --vocab 64 --hidden 32 --seq-len 16 --batch 8 --load "$tmp/moe.st"
    expect_usage "--moe-experts 4 contradicts --load $tmp/dense.st: it holds a dense llama" \
        -- train --model llama --steps 1 --vocab 64 $moe --load "$tmp/dense.st"
fi

# context parallelism by the ring, zigzag: each chunk at its global positions
if run_ok train --model llama --steps 2 --vocab 64 --cp 2 --check; then
    has "check PASSED" || fail "a llama under --cp 2 (zigzag) did not pass --check"
fi

# context parallelism by Ulysses: whole sequences of a rank's query heads and their kv heads
if run_ok train --model llama --steps 2 --vocab 64 --cp 2 --cp-algo a2a --check; then
    has "check PASSED" || fail "a llama under --cp 2 --cp-algo a2a did not pass --check"
fi

# Meta's forward again, in plain Python, from the checkpoint and the batch
m="--hidden 8 --heads 4 --kv-heads 2 --ffn 12 --layers 2 --seq-len 6 --vocab 64 --batch 3 --rope-theta 10"
if [[ $ptdp == *f64* ]] && command -v python3 >/dev/null &&
   run_ok train --model llama --steps 1 $m --save-init "$tmp/init.st" --dump-data "$tmp/data.st" --report "$tmp/r.json"; then
    loss=$(python3 -c 'import json, sys; print(repr(json.load(open(sys.argv[1]))["run"]["first_loss"]))' "$tmp/r.json")
    cases=$((cases + 1))
    python3 "$(dirname "$0")/llama_reference.py" "$tmp/init.st" "$tmp/data.st" 1e-5 10 "$loss" \
        || fail "Meta's forward in Python does not give ptdp's step-1 loss"
fi

# ptdp sample: a llama checkpoint (saved at tp 4 above, whole tensors) continues a prompt on one
# device, greedy or drawn, the same text for the same seed
for draw in "" "--temperature 1 --seed 4" "--temperature 0.8 --top-k 5 --seed 9"; do
    # shellcheck disable=SC2086
    if run_ok sample --load "$tmp/llama.st" --prompt "12+" --tokens 12 $draw; then
        cp "$out" "$tmp/first.txt"
        # shellcheck disable=SC2086
        run_ok sample --load "$tmp/llama.st" --prompt "12+" --tokens 12 $draw &&
            { cmp -s "$out" "$tmp/first.txt" && [[ $(head -c 3 "$out") == "12+" ]] &&
                  echo "ok    ptdp sample ${draw:-(greedy)} twice: $(head -n 1 "$out")" ||
                  fail "sample ${draw:-(greedy)}: '$(cat "$tmp/first.txt")' then another text"; }
    fi
done

# ...and a llama trained 800 steps on the built-in sums answers sums it never saw (measured:
# 25 of 505 in float, 33 in double; a model that only learnt the format gets a few)
if run_ok train --model llama --steps 800 --lr 3e-3 --seq-len 16 --batch 32 --layers 1 --save "$tmp/sums.st" \
       --quiet && run_ok sample --load "$tmp/sums.st" --held-out; then
    right=$(sed -n 's/^held-out sums: \([0-9]*\) of [0-9]* answered exactly.*/\1/p' "$out")
    if [[ -n $right && $right -ge 15 ]]; then
        echo "ok    $(cat "$out")"
    else
        fail "a llama trained 800 steps answers ${right:-no} held-out sums, want 15 or more"
    fi
fi

# a checkpoint of the other model: refused by the loader, as any model's, before any work (exit 2,
# the command line's mistake), naming the first tensors each side lacks
if run_ok train --model gpt --steps 1 --layers 1 --save "$tmp/gpt.st"; then
    expect_usage "--load $tmp/gpt.st: the checkpoint holds another model, gpt (its metadata 'model'), and this run trains --model llama" \
        -- train --model llama --steps 1 --load "$tmp/gpt.st"
    expect_usage "it holds 'transformer.wte.weight' and 15 more that --model llama has no place for; it lacks 'tok_embeddings.weight' and 11 more that --model llama needs: give --model gpt" \
        -- train --model llama --layers 1 --steps 1 --load "$tmp/gpt.st"
fi
if [[ -f $tmp/llama.st ]]; then
    expect_usage "holds another model, llama (its metadata 'model'), and this run trains --model gpt; it holds 'tok_embeddings.weight' and 20 more that --model gpt has no place for; it lacks 'transformer.wte.weight' and 27 more" \
        -- train --model gpt --steps 1 --load "$tmp/llama.st"
    # before the GPT reads the file for its own checks (a mixture of experts)
    expect_usage "holds another model, llama" -- train --model gpt --moe-experts 4 --steps 1 --load "$tmp/llama.st"
fi
finish "llama" "bad values and unsupported layouts refused; --check passes at tp > kv heads and with experts; Meta's forward replayed; sampled"
