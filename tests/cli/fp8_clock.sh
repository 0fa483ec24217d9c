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
#  4. The planner's FP8 terms: delayed's amax table (--explain); --fp8-comm's bytes, EP's
#     dispatch row and ZeRO-3's round of gathers, in --explain and --json's "fp8" object
#     (none without --fp8); plan --fp8-comm without --fp8 exits 2 (1. above).
#  5. The llama's experts under --fp8 pay their quantization passes on the clock, as its dense
#     layers do: the extra compute of wider experts, by hand.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

plan=(plan --model gpt --layers 12 --hidden 768 --heads 12 --seq-len 1024 --vocab 50257 --batch 512 --gpus 8
      --precision bf16 --tp 1 --pp 1 --zero 1 --micro-batch-size 8)

# ---- 1. errors ------------------------------------------------------------------
expect_usage "--fp8 e4m3"  -- "${plan[@]}" --profile dgx-h100 --fp8 e4m3
expect_usage "--fp8"       -- "${plan[@]}" --profile dgx-h100 --fp8
expect_usage "--fp8-comm sends FP8 codes where --fp8 R computes with them: it needs --fp8 R" \
             -- "${plan[@]}" --profile dgx-h100 --fp8-comm
# nothing to send in FP8: ZeRO below 3 and no experts (the plan's --zero 1)
expect_usage "--fp8-comm sends in FP8 expert parallelism's dispatch" \
             -- "${plan[@]}" --profile dgx-h100 --fp8 blockwise --fp8-comm

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

# ---- 4. the FP8 terms of ptdp plan ----------------------------------------------------
# delayed's amax table a step; --fp8-comm's bytes: EP's dispatch row (C codes + scales, in
# place of C reals) and ZeRO-3's round of gathers (psi_q codes + the rest in bf16 + amaxes,
# in place of 2 psi), in --explain and in --json's "fp8" object.
if run_ok "${plan[@]}" --profile dgx-h100 --top 1 --fp8 delayed --explain; then
    expect_line '^  FP8 amaxes +[0-9.e-]+ s   --fp8 delayed: 3 reals a parameter tensor max-reduced over DP'
fi
z3=(plan --model gpt --layers 2 --hidden 64 --heads 4 --seq-len 32 --vocab 62 --batch 8 --gpus 4 --precision bf16
    --profile dgx-h100 --tp 1 --pp 1 --zero 3 --micro-batch-size 2 --schedule 1f1b --fp8 blockwise)
if run_ok "${z3[@]}" --fp8-comm --top 1 --explain; then
    # psi 2 x 49984 + 64 x 64 + 32 x 64 + 128 = 106240; psi_q 2 x 49152; 7 tiles a block
    expect_line '^              psi_q 98304 codes x 1 B \+ 7936 others x 2 B \+ 14 amaxes x 4 B = 114232 B,$' \
                '^              in place of psi 106240 x 2 B = 212480 B$'
fi
json_fp8() {   # json_fp8 KEY...: the first candidate's "fp8" values, one a line
    python3 -c 'import json, sys; f = json.load(open(sys.argv[1]))["candidates"][0].get("fp8")
print("\n".join("absent" if f is None else repr(f[k]) for k in sys.argv[2:]))' "$out" "$@"
}
if command -v python3 >/dev/null; then
    if run_ok "${z3[@]}" --fp8-comm --top 1 --json; then
        got=$(json_fp8 comm zero3_gather_bytes zero3_gather_bytes_without ep_dispatch_row_bytes | tr '\n' ' ')
        [[ $got == "True 114232 212480 None " ]] && echo "ok    --json fp8: $got" ||
            fail "plan --zero 3 --fp8-comm --json: fp8 comm, zero3 bytes, EP row: $got"
    fi
    if run_ok "${z3[@]}" --top 1 --json; then
        got=$(json_fp8 comm zero3_gather_bytes | tr '\n' ' ')
        [[ $got == "False None " ]] && echo "ok    --json fp8 without --fp8-comm: $got" ||
            fail "plan --zero 3 --json without --fp8-comm: $got"
    fi
    if run_ok "${plan[@]}" --profile dgx-h100 --top 1 --json; then
        [[ $(json_fp8 comm) == absent ]] && echo "ok    no --fp8: no fp8 object" || fail "an fp8 object without --fp8"
    fi
fi
moe=(plan --model gpt --layers 2 --hidden 64 --heads 4 --seq-len 32 --vocab 62 --moe-experts 4 --moe-top-k 2
     --moe-ffn 128 --batch 8 --gpus 4 --precision bf16 --profile dgx-h100 --ep 2 --fp8 mxfp8 --fp8-comm --top 1)
if run_ok "${moe[@]}" --explain; then
    expect_line "^  --fp8-comm: EP's dispatch sends a row as C = 64 codes of 1 B \+ 2 scales x 4 B = 72 B, in place of C x 4 B = 256 B$" \
                " --fp8 mxfp8 --fp8-comm( |$)"
fi

# ---- 5. the llama's experts on the clock --------------------------------------------------
# Its experts quantize their operands as its dense layers do (llama_moe.c): on dgx-a100-80g (no
# FP8 peak: the products keep bf16's time) --fp8 adds only quantization passes, (4 + 1) B an
# element at 2.039 TB/s.  Widening each expert from F_e 64 to 128 (every token to each of the 4
# experts, k = E: n = 64 x 32 rows an expert) adds, a block and expert, 6 dF C weight elements
# (W of w1, w2, w3 forward; again in dX) and 4 n dF activation elements (g forward; dY of w1,
# w3 and g again for dW2): the extra compute under --fp8 beyond bf16's, 2 blocks x 4 experts.
if command -v python3 >/dev/null; then
    compute_of() { python3 -c 'import json, sys; print(repr(json.load(open(sys.argv[1]))["devices"][0]["virtual_s"]["compute"]))' "$1"; }
    c=()
    for F in 64 128; do
        for fp8 in "" "--fp8 tensorwise"; do
            # shellcheck disable=SC2086
            run_ok train --model llama --moe-experts 4 --moe-top-k 4 --moe-ffn $F --steps 1 --precision bf16 \
                --profile dgx-a100-80g $fp8 --report "$tmp/l.json" && c+=("$(compute_of "$tmp/l.json")")
        done
    done
    if [[ ${#c[@]} -eq 4 ]] && python3 -c 'import sys
a16, a8, b16, b8 = map(float, sys.argv[1:5])
got = (b8 - b16) - (a8 - a16)
want = 2 * 4 * (6 * 64 * 64 + 4 * 64 * 32 * 64) * 5 / 2.039e12
print("ok    llama experts: --fp8 adds %.9g s more at F_e 128 than at 64, want %.9g s" % (got, want))
sys.exit(0 if abs(got - want) <= 1e-6 * want else 1)' "${c[@]}"; then :
    else fail "the llama's experts under --fp8 on dgx-a100-80g: compute ${c[*]}"
    fi
fi

finish fp8_clock "$cases cases: --fp8 on the virtual clock and in the planner"
