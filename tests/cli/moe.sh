#!/usr/bin/env bash
# moe.sh — a GPT with a mixture of experts on the command line: every bad
# value and every layout it does not run on yet refused (exit 2, naming the
# flag) before any work, by `ptdp plan` as by `ptdp train`; an MoE run passes
# --check against one device, and its checkpoint does not load into a
# dense run.
#
#   moe.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

g="train --model gpt --steps 1 --moe-experts 4"
expect_usage "--moe-experts is a flag of --model gpt"   -- train --moe-experts 4 --steps 1
expect_usage "--moe-top-k needs --moe-experts"          -- train --model gpt --moe-top-k 1 --steps 1
expect_usage "--moe-capacity-factor needs --moe-experts" -- train --model gpt --moe-capacity-factor 1 --steps 1
expect_usage "--moe-top-k 5: must be at most --moe-experts 4" -- $g --moe-top-k 5
expect_usage "--moe-top-k"                              -- $g --moe-top-k 0
expect_usage "--moe-capacity-factor 0: must be above 0" -- $g --moe-capacity-factor 0
expect_usage "--moe-capacity-factor -1: must be above 0" -- $g --moe-capacity-factor -1
expect_usage "--moe-capacity-factor"                    -- $g --moe-capacity-factor nan
expect_usage "--moe-aux-loss -0.5: must be 0 or more"   -- $g --moe-aux-loss -0.5
expect_usage "--moe-experts"                            -- $g --moe-experts -1
expect_usage "--moe-every"                              -- $g --moe-every 0
expect_usage "--moe-ffn"                                -- $g --moe-ffn 0
expect_usage "--moe-ffn 25 must divide by --tp 2"      -- $g --tp 2 --moe-ffn 25
expect_usage "--moe-experts 4 with --cp and --moe-capacity-factor" -- $g --cp 2 --moe-capacity-factor 1
expect_usage "--moe-experts 4 with --zero 3"            -- $g --dp 2 --zero 3
expect_usage "--moe-experts 4 with --token-slices"      -- $g --pp 2 --micro-batches 2 --schedule gpipe --token-slices 2
p="plan --model gpt --layers 2 --hidden 64 --heads 4 --seq-len 32 --vocab 64 --batch 8 --gpus 2 --profile dgx-a100"
expect_usage "--moe-experts 4 with --zero 3"            -- $p --moe-experts 4 --zero 3
expect_usage "--moe-top-k needs --moe-experts"          -- $p --moe-top-k 1
# one rule with ptdp train: a typed capacity factor is above 0 (0 is what leaving it out means)
expect_usage "--moe-capacity-factor 0: must be above 0 (omit it: dropless)" -- $p --moe-experts 4 --moe-capacity-factor 0
# plural rules: one copy, one GPU, one sequence
if run_ok $p --moe-experts 4 --ep 2 --tp 1 --pp 1 --cp 1 --explain; then
    has "each expert has 1 copy (expert DP)" || fail "plan --explain: not \"each expert has 1 copy\""
    has " 1 copies" && fail "plan --explain says \"1 copies\""
fi
if run_ok ${p/--gpus 2/--gpus 1} --moe-experts 4 --micro-batch-size 1 --explain; then
    has "on 1 GPU of dgx-a100" && has "= 1 GPU; b 1 sequence a micro-batch" || fail "plan --explain: not \"1 GPU\", \"1 sequence\""
    grep -qE "(^| )1 (GPUs|sequences|copies)" "$out" && fail "plan --explain: a plural after 1"
fi

if run_ok train --model gpt --moe-experts 4 --steps 2 --dp 2 --moe-capacity-factor 1.0 --moe-every 2 --layers 2 --check --save "$tmp/moe.st"; then
    has "check PASSED" || fail "an MoE run with dp 2 did not pass --check"
fi
expect_usage "holds a mixture of experts (transformer.h.1.mlp.router.weight" -- train --model gpt --steps 3 --load "$tmp/moe.st"
finish "moe" "bad values and unsupported layouts refused; --check passes"
