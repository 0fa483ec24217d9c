#!/usr/bin/env bash
# moe_checkpoints.sh — a mixture of experts' flags and checkpoints, for the
# GPT and the llama alike (the shared MoE settings):
#
#   flags that make no block a mixture   refused (exit 2, naming --moe-every
#                                        and --layers) by train and plan, so
#                                        no dense checkpoint says moe_experts
#
#   moe_checkpoints.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

# ---- no block a mixture: refused before any work, nothing saved
g=(train --model gpt --hidden 32 --heads 4 --ffn 64 --seq-len 8 --batch 8)
expect_usage "--moe-experts 4 --moe-every 3: no block of --layers 2 would be a mixture of experts" \
    -- "${g[@]}" --steps 1 --moe-experts 4 --moe-every 3 --save "$tmp/none.st"
[[ -e $tmp/none.st ]] && fail "a refused run wrote its checkpoint"
expect_usage "give --moe-every 2 or less, or --layers 3 or more" -- "${g[@]}" --steps 1 --moe-experts 4 --moe-every 3 --ep 2 --dp 2
expect_usage "--moe-experts 4 --moe-every 3: no block of --layers 2" \
    -- train --model llama --steps 1 --vocab 64 --moe-experts 4 --moe-every 3
p=(plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 4096 --vocab 32000 --ffn 14336 --batch 1024
   --profile dgx-h100 --gpus 64)
expect_usage "--moe-experts 8 --moe-every 64: no block of --layers 32" -- "${p[@]}" --moe-experts 8 --moe-every 64
run_ok "${g[@]}" --steps 1 --moe-experts 4 --moe-every 2 --quiet || fail "--moe-every 2 on 2 layers (block 1 a mixture) refused"

finish "moe-checkpoints" "flags that make no mixture refused"
