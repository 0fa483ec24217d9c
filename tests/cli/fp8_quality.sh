#!/usr/bin/env bash
# fp8_quality.sh PTDP — FP8 training stays within a stated band of float's
# loss, measured with `ptdp bench fp8`; and that command's bad flags exit 2.
#
#  1. A small GPT (1 block, C 32, T 32, the built-in sums, batch 16, AdamW lr
#     3e-3, seed 1) trained 30 steps from the same parameters on the same
#     batches in float, bf16 and each FP8 recipe.  At step 30:
#
#         |loss_fp8(30) - loss_f32(30)| <= BAND x loss_f32(30),  BAND = 0.5%
#
#     Measured (float build, OpenBLAS, this machine; dY in E5M2, the
#     default): float's loss 2.1371; the gaps tensorwise -0.00002 (0.001%),
#     blockwise -0.0011 (0.05%), mxfp8 +0.0029 (0.13%), delayed +0.0024
#     (0.11%); bf16's own gap -0.00004 at step 30 and at most 0.0015 (0.07%)
#     over the 30 steps.
#     Why 0.5% is honest: it is about 4 times the largest FP8 gap measured
#     (room for another BLAS adding in another order), 7 times bf16's
#     largest gap over the run (the yardstick: a precision everyone trains
#     in), and below what a broken cast does: rounding toward zero instead
#     of to nearest (src/nn/fp8.c's round-up step left out, tried once) put
#     the four gaps at +0.016 to +0.023 (0.73% to 1.07%) and failed all four.
#     bf16 is held to the same band.  Step 30 is before the loss's plateau
#     (~1.4) where the model starts to learn the sums: leaving a plateau
#     amplifies any difference (bf16's gap at step 120 of the demo's model
#     is 1.9%, docs/benchmarks.md), so a fixed band only means something on
#     the smooth descent.
#     It can fail: FP8_BAND=0.0005 (10 times tighter) fails blockwise, mxfp8
#     and delayed.
#  2. The JSON has one object a run, the float's first; the
#     table prints every precision and the held-out sums.
#  3. Bad flags exit 2 naming the flag, before any run.
# The float build only: bf16 needs it, and the numbers above are its.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

band=${FP8_BAND:-0.005}
small=(bench fp8 --hidden 32 --layers 1 --batch 16 --steps 30)

# ---- 1. the band ------------------------------------------------------------
# precision, final loss and gap of each JSON line ("gap": null if diverged)
field() { grep -o "\"$1\": [^,}]*" | head -n 1 | sed 's/^[^:]*: //; s/"//g'; }
if run_ok "${small[@]}" --json; then
    f32=$(head -n 1 "$out" | field final_loss)
    [[ $(head -n 1 "$out" | field precision) == f32 && -n $f32 ]] || fail "the first run is not float's"
    seen=""
    while IFS= read -r line; do
        p=$(field precision <<<"$line")
        gap=$(field gap <<<"$line")
        [[ $p == f32 ]] && continue
        seen+="$p "
        cases=$((cases + 1))
        if awk -v g="$gap" -v l="$f32" -v b="$band" 'BEGIN { exit !(g != "null" && (g < 0 ? -g : g) <= b * l) }'; then
            echo "ok    $p at step 30: gap $gap, within $band x $f32"
        else
            fail "$p at step 30: gap $gap to float's $f32, beyond the band $band x $f32"
        fi
    done <"$out"
    [[ $seen == "bf16 tensorwise blockwise mxfp8 delayed " ]] || fail "expected bf16 and the four recipes, got '$seen'"
fi

# ---- 2. the table and --recipes -----------------------------------------------
if run_ok bench fp8 --hidden 32 --layers 1 --batch 16 --steps 4 --every 2 --recipes mxfp8,tensorwise; then
    rows=$(grep -E '^(f32|bf16|mxfp8|tensorwise|blockwise|delayed) ' "$out" | cut -d' ' -f1 | paste -sd' ')
    [[ $rows == "f32 bf16 mxfp8 tensorwise" ]] || fail "--recipes mxfp8,tensorwise: rows '$rows'"
    grep -q 'step 1 .*step 2 .*step 4 .*gap .*held-out' "$out" || fail "table header lacks the steps 1, 2, 4 or held-out"
    grep -Eq '^mxfp8 .* [0-9]+/[0-9]+ +[0-9.]+%' "$out" || fail "no held-out sums on mxfp8's row"
    echo "ok    the table: --recipes chooses the FP8 rows, losses at steps 1, 2, 4, held-out sums"
fi

# ---- 3. bad flags -----------------------------------------------------------------
expect_usage "--recipes nosuch: 'nosuch' is not one of" -- bench fp8 --recipes nosuch
expect_usage "--recipes" -- bench fp8 --recipes mxfp8,mxfp8
expect_usage "--steps" -- bench fp8 --steps 0
expect_usage "--every 50 is more than --steps 10" -- bench fp8 --steps 10 --every 50
expect_usage "--repeat" -- bench fp8 --repeat 0
expect_usage "--lr" -- bench fp8 --lr -1
expect_usage "--json" -- bench fp8 --json=yes
expect_usage "--fp8" -- bench fp8 --fp8 tensorwise
expect_usage "--data $tmp/missing.txt" -- bench fp8 --data "$tmp/missing.txt"
expect_usage "--heads" -- bench fp8 --heads 3
run_ok bench fp8 --help && has "--recipes" && echo "ok    --help" || fail "bench fp8 --help"

finish fp8-quality "FP8's loss within $band of float's at step 30, bad flags exit 2"
