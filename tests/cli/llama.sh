#!/usr/bin/env bash
# llama.sh — the llama on the command line: every bad value and every
# layout it does not run under yet refused (exit 2, naming the flag) before
# any work (`ptdp plan --model llama`'s in tests/cli/plan.sh); a run passes
# --check against one device; its --save-init
# checkpoint, under Meta's names, gives in plain Python's replay of Meta's
# forward (llama_reference.py) the step-1 loss ptdp reports (double
# builds: to 1e-9); a GPT checkpoint does not load into it, nor its into
# a GPT (the loader's refusal of another model's file, exit 1).
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
expect_usage "--cp-algo a2a: the llama model"              -- $l --cp 2 --cp-algo a2a
expect_usage "the llama model cannot run a slice alone"    -- $l --pp 2 --micro-batches 2 --schedule gpipe --token-slices 2
expect_usage "--ep 2: the llama model"                     -- $l --dp 2 --ep 2

# tp 4 over 2 kv heads: each rank a copy of the one its query heads read
if run_ok train --model llama --steps 2 --tp 4 --vocab 64 --dp 2 --zero 1 --check --save "$tmp/llama.st"; then
    has "check PASSED" || fail "a llama at tp 4 > 2 kv heads did not pass --check"
fi

# context parallelism by the ring, zigzag: each chunk at its global positions
if run_ok train --model llama --steps 2 --vocab 64 --cp 2 --check; then
    has "check PASSED" || fail "a llama under --cp 2 (zigzag) did not pass --check"
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

# a checkpoint of the other model: refused by the loader, as any model's (exit 1, the file's fault)
if run_ok train --model gpt --steps 1 --layers 1 --save "$tmp/gpt.st" &&
   run_status 1 train --model llama --steps 1 --load "$tmp/gpt.st"; then
    grep -qF "the checkpoint holds a gpt model, this run trains a llama" "$err" || fail "a GPT checkpoint loaded into llama"
fi
if run_status 1 train --model gpt --steps 1 --load "$tmp/llama.st"; then
    grep -qF "the checkpoint holds a llama model, this run trains a gpt" "$err" || fail "a llama checkpoint loaded into a GPT"
fi
finish "llama" "bad values and unsupported layouts refused; --check passes at tp > kv heads; Meta's forward replayed"
