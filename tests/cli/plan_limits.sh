#!/usr/bin/env bash
# plan_limits.sh PTDP — every question `ptdp plan` accepts is answered in
# seconds, however large the flags.
#
# The search weighs every layout the flags allow, so its work grows with
# the divisors of --gpus and --batch and with --layers (the interleaved
# schedule's v runs to L / p).  It walks divisors, never every integer up
# to --gpus or --batch, and past its limit of work it stops and exits 2
# naming the flags to fix.  Each command below once ran for minutes; now
# each must end — with a plan (0), nothing that fits (1) or a message
# (2) — within LIMIT seconds of wall time.  LIMIT is a watchdog, not the
# target: the search stops at a fixed count of work (plan_search.h), some
# 4.5 s of one idle core, and `ptdp bench plan` measures each of these
# searches' seconds against that; here the test suite runs beside other
# tests on two cores (and under sanitizers), so only a search that runs
# for minutes, as these once did, fails.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

LIMIT=${PTDP_PLAN_LIMIT_S:-60}

small=(plan --model gpt --layers 4 --hidden 64 --heads 4 --seq-len 32 --vocab 62 --profile dgx-a100)
widest=(plan --model gpt --layers 65536 --hidden 16777216 --heads 1048576 --seq-len 16777216 --vocab 67108864
        --ffn 67108864 --vocab-multiple 65536 --profile dgx-a100)

answers_in_time() {   # answers_in_time ARGS...: ends within LIMIT s, exit 0, 1 or 2
    cases=$((cases + 1))
    local t0=$SECONDS status
    timeout "$LIMIT" "$ptdp" "$@" >"$out" 2>"$err" </dev/null
    status=$?
    if [[ $status -eq 124 ]]; then fail "ptdp $*: still searching after $LIMIT s"
    elif [[ $status -gt 2 ]]; then fail "ptdp $*: exit status $status"
    else echo "ok    ptdp $*  ->  exit $status in $((SECONDS - t0)) s"
    fi
}

answers_in_time "${small[@]}" --batch 8 --gpus 16777216
answers_in_time "${small[@]}" --batch 2147483647 --gpus 8
answers_in_time "${small[@]}" --batch 2095133040 --gpus 8
answers_in_time "${widest[@]}" --batch 8 --gpus 8
answers_in_time "${widest[@]}" --layers 1024 --batch 16777216 --gpus 16777216
answers_in_time "${widest[@]}" --layers 1024 --batch 1073741824 --gpus 65536
# a profile with no memory size rules nothing out: every layout of the 1T
# GPT fits, and timing them all took 40-50 s before timing was counted too
answers_in_time plan --model gpt --layers 128 --hidden 25600 --heads 160 --seq-len 2048 --vocab 51200 \
    --batch 3072 --gpus 3072 --profile dgx-a100

# Mixtures of experts: expert parallelism multiplies the layouts, a
# mixture's pricing once grew with the blocks, and DP's buckets walk every
# expert's tensors.  A Mixtral-like GPT on a million GPUs once took 26 s of
# CPU, with experts too wide to fit (the refusal's probes for what would)
# 127 s, and with 4096 experts all chosen over a minute.
moe=(plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 4096 --vocab 32000 --ffn 14336 --batch 1024
     --profile dgx-h100 --precision bf16 --moe-experts 8 --moe-top-k 2)
answers_in_time "${moe[@]}" --moe-ffn 21504 --gpus 4096
answers_in_time "${moe[@]}" --moe-ffn 21504 --gpus 1048576
answers_in_time "${moe[@]}" --moe-ffn 67108864 --gpus 1024
answers_in_time plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 4096 --vocab 32000 --ffn 14336 \
    --batch 1024 --profile dgx-h100 --precision bf16 --moe-experts 4096 --moe-top-k 4096 --moe-ffn 1 --gpus 1024

# Too much to weigh is a usage error that names the flags to fix.
expect_usage "fix part of the layout (--tp, --pp" -- "${widest[@]}" --batch 8 --gpus 8

finish "plan limits" "$cases questions answered within $LIMIT s each"
