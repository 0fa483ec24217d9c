#!/usr/bin/env bash
# fp8_clock.sh PTDP — what --fp8 costs on the virtual clock (clock.h): the
# linear layers' products at the profile's FP8 peak, plus the passes that
# quantize their operands, (4 + 1) bytes an element at HBM bandwidth.
#
#  1. Bad input: `ptdp plan --fp8` with an unknown recipe or no value exits
#     2 naming the flag, nothing on stdout.
#  2. `ptdp train` (the GPT, the llama, the MLP), bf16 on dgx-h100: a step
#     with --fp8 tensorwise takes less virtual time than without (--report's
#     run.virtual_s and devices' virtual_s.compute); on dgx-a100-80g (no FP8
#     peak: the bf16 peak, and the quantization on top) more.
#  3. `ptdp plan --fp8`: the line that says at what the products are priced
#     (FP8 on dgx-h100; the bf16 peak on dgx-a100-80g, said so), the same
#     layout's --json step_s below bf16's on dgx-h100 and above it on
#     dgx-a100-80g, and the `ptdp train` line of --explain carries --fp8.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

plan=(plan --model gpt --layers 12 --hidden 768 --heads 12 --seq-len 1024 --vocab 50257 --batch 512 --gpus 8
      --precision bf16 --tp 1 --pp 1 --zero 1 --micro-batch-size 8)

# ---- 1. errors ------------------------------------------------------------------
expect_usage "--fp8 e4m3"  -- "${plan[@]}" --profile dgx-h100 --fp8 e4m3
expect_usage "--fp8"       -- "${plan[@]}" --profile dgx-h100 --fp8

# ---- 2. ptdp train ----------------------------------------------------------------
# key FILE: run.virtual_s and device 0's virtual_s.compute, as "RUN COMPUTE"
key() {
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(repr(d["run"]["virtual_s"]), repr(d["devices"][0]["virtual_s"]["compute"]))' "$1"
}
# less A B: A < B as numbers
less() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"; }

train_pair() {   # train_pair PROFILE WANT(fewer|more) MODEL-FLAGS...
    local profile=$1 want=$2
    shift 2
    local t=(train "$@" --steps 1 --precision bf16 --profile "$profile")
    run_ok "${t[@]}" --report "$tmp/bf16.json" || return
    run_ok "${t[@]}" --fp8 tensorwise --report "$tmp/fp8.json" || return
    report_config "$tmp/fp8.json" fp8 '"tensorwise"'
    if [[ $profile == dgx-a100-80g ]]; then   # the run says where its products are charged
        has "dgx-a100-80g has no FP8 tensor cores: its clock charges the products at the bf16 peak, 312 TFLOP/s" ||
            fail "ptdp train --fp8 on dgx-a100-80g does not say it has no FP8 peak"
    elif has "has no FP8 tensor cores"; then fail "ptdp train --fp8 on $profile says it has no FP8 peak"
    fi
    read -r run16 comp16 < <(key "$tmp/bf16.json")
    read -r run8 comp8 < <(key "$tmp/fp8.json")
    local a=$run8 b=$run16 c=$comp8 d=$comp16
    [[ $want == more ]] && { a=$run16; b=$run8; c=$comp16; d=$comp8; }
    if less "$a" "$b" && less "$c" "$d"; then
        echo "ok    $* on $profile: --fp8 run.virtual_s $run8 (compute $comp8), bf16 $run16 ($comp16): $want"
    else
        fail "$* on $profile: --fp8 run.virtual_s $run8 (compute $comp8), bf16 $run16 ($comp16): expected $want"
    fi
}

if command -v python3 >/dev/null; then
    gpt=(--model gpt --hidden 128 --heads 4 --layers 2 --batch 4)
    train_pair dgx-h100 fewer "${gpt[@]}"
    train_pair dgx-a100-80g more "${gpt[@]}"
    train_pair dgx-h100 fewer --model llama
    train_pair dgx-h100 fewer --model mlp
else
    echo "skip  ptdp train's --report times (no python3)"
fi

# ---- 3. ptdp plan -------------------------------------------------------------------
step_of() { sed -n 's/.*"step_s": \([0-9.eE+-]*\),.*/\1/p' "$out" | head -n 1; }
for profile in dgx-h100 dgx-a100-80g; do
    run_ok "${plan[@]}" --profile $profile --top 1 --json || continue
    s16=$(step_of)
    run_ok "${plan[@]}" --profile $profile --top 1 --json --fp8 blockwise || continue
    s8=$(step_of)
    if [[ -z $s16 || -z $s8 ]]; then
        fail "$profile: no step_s in --json"
    elif [[ $profile == dgx-h100 ]] && less "$s8" "$s16"; then
        echo "ok    plan on dgx-h100: --fp8 step_s $s8 < bf16 $s16"
    elif [[ $profile == dgx-a100-80g ]] && less "$s16" "$s8"; then
        echo "ok    plan on dgx-a100-80g: --fp8 step_s $s8 > bf16 $s16 (the quantization passes)"
    else
        fail "plan on $profile: --fp8 step_s $s8, bf16 $s16"
    fi
done
if run_ok "${plan[@]}" --profile dgx-h100 --top 1 --fp8 mxfp8; then
    expect_line '^--fp8 mxfp8: .* at 1978 TFLOP/s FP8, plus \(4 \+ 1\) B .* at 3\.35 TB/s$'
fi
if run_ok "${plan[@]}" --profile dgx-a100-80g --top 1 --fp8 tensorwise --explain; then
    expect_line "dgx-a100-80g has no FP8 peak: its bf16 peak" " --precision bf16 --fp8 tensorwise( |$)"
fi

finish fp8_clock "$cases cases: --fp8 on the virtual clock and in the planner"
