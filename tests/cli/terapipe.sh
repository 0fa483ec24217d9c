#!/usr/bin/env bash
# terapipe.sh PTDP — TeraPipe's token slices from the command line.
#
#  1. Bad flags exit 2 naming them: --token-slices with the MLP, more slices
#     than positions, with --cp, with a schedule other than gpipe, with --sp
#     when a slice's positions do not divide by --tp.
#  2. `ptdp train --model gpt --pp 4 --layers 4 --token-slices k --profile
#     ideal` with one micro-batch: the header names TeraPipe, the bubble
#     falls from (p-1)/p = 0.75 as k grows, measured beside the uniform
#     formula (p-1)/(k m + p-1) and never below it (later slices attend to
#     more keys); the report has "token_slices"; --check passes.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors ------------------------------------------------------------------
t="train --steps 1 --quiet"
expect_usage "the MLP's samples have no sequence: TeraPipe is for --model gpt" -- $t --pp 2 --token-slices 2
expect_usage "--token-slices 40: more slices than --seq-len 32"   -- $t --model gpt --pp 2 --token-slices 40
expect_usage "--token-slices 2 and --cp 2 both cut the sequence"   -- $t --model gpt --pp 2 --cp 2 --token-slices 2
expect_usage "use --schedule gpipe (not 1f1b)"                     -- $t --model gpt --pp 2 --schedule 1f1b --token-slices 2
expect_usage "slice 0 holds 11 positions, which do not divide by --tp 2" \
                                                                   -- $t --model gpt --pp 2 --tp 2 --sp --token-slices 3
expect_usage "--token-slices 0"                                    -- $t --model gpt --pp 2 --token-slices 0

# ---- 2. the bubble falls with k --------------------------------------------------
prev=1
for k in 1 2 4 8 16; do
    if ! "$ptdp" train --model gpt --pp 4 --layers 4 --token-slices $k --profile ideal --steps 2 --quiet \
            --report "$tmp/r$k.json" >"$out" 2>"$err" </dev/null; then
        fail "train --token-slices $k: exit status $?"
        continue
    fi
    read_bubble train
    if [[ $k -eq 1 ]]; then
        [[ $measured == 0.7500 ]] || fail "k 1: bubble $measured, want (p-1)/p = 0.7500"
    else
        grep -q "schedule gpipe over $k token slices of each sequence (TeraPipe)" "$out" \
            || fail "k $k: the header does not name TeraPipe"
        [[ $line == *"x $k token slices"*"(p-1)/(k*m+p-1), uniform slices"* ]] || fail "k $k: pipeline line: $line"
        awk -v m="$measured" -v f="$formula" -v p="$prev" 'BEGIN { exit !(m >= f && m < p) }' \
            || fail "k $k: bubble $measured should lie in [formula $formula, previous $prev)"
        grep -q '"token_slices": '"$k" "$tmp/r$k.json" || fail "k $k: no \"token_slices\": $k in the report"
    fi
    echo "ok    --token-slices $k: bubble measured $measured, uniform formula $formula"
    prev=$measured
done

if "$ptdp" train --model gpt --pp 2 --dp 2 --token-slices 4 --micro-batches 2 --steps 2 --check >"$out" 2>"$err" </dev/null \
        && grep -q "check PASSED" "$out"; then
    echo "ok    --token-slices 4 --dp 2 --pp 2 --micro-batches 2 --check passed"
else
    fail "--token-slices 4 --check"
fi

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all TeraPipe checks passed"
