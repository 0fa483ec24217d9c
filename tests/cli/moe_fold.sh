#!/usr/bin/env bash
# moe_fold.sh — MoE parallel folding on the command line, for both models:
# --etp N gives the experts their own TP size, and EP and the experts' DP
# are carved from a stage's tp x cp x dp ranks.  Bad values and layouts
# refused (exit 2, naming the flag) before any work; folded runs pass
# --check at every layout the issue names (DeepSeek-style routing with
# shared experts and the bias update, dp x tp x ep, pp, cp, ZeRO 1/2,
# capacity, recompute, DualPipeV, ZB-H1); the report's fold-group bytes
# equal their formula; a folded run's checkpoint resumes on one device to
# the same loss.
#
#   moe_fold.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

g="train --model gpt --layers 2 --hidden 32 --heads 4 --ffn 64 --seq-len 8 --vocab 64 --batch 8 --moe-experts 4 --moe-top-k 2 --steps 1"
expect_usage "--etp 0: must be between 1"                  -- $g --tp 2 --etp 0
expect_usage "--etp -1: must be between 1"                 -- $g --tp 2 --etp -1
expect_usage "--etp x: not a whole number"                 -- $g --tp 2 --etp x
expect_usage "--etp 99999999999"                           -- $g --tp 2 --etp 99999999999
expect_usage "--etp 3 must divide --tp 2"                  -- $g --tp 2 --etp 3
expect_usage "--etp 1 x --ep 8 = 8 must divide"            -- $g --tp 2 --dp 2 --etp 1 --ep 8
expect_usage "give --batch a multiple of"                  -- ${g/--batch 8/--batch 2} --tp 2 --dp 2 --etp 1
expect_usage "--etp 1 with --fp8"                          -- $g --tp 2 --etp 1 --fp8 tensorwise
expect_usage "--shard-group 2 with --etp 1"                -- $g --tp 2 --etp 1 --dp 4 --zero 1 --shard-group 2
expect_usage "this GPT is dense"                           -- train --model gpt --tp 2 --etp 1 --steps 1
expect_usage "--model mlp has no experts"                  -- train --model mlp --tp 2 --etp 1 --steps 1

l="train --model llama --layers 4 --hidden 32 --heads 4 --kv-heads 2 --ffn 64 --seq-len 8 --vocab 64 --batch 16 --steps 2"
G="train --model gpt --layers 4 --hidden 32 --heads 4 --ffn 64 --seq-len 8 --vocab 64 --batch 16 --steps 2"
ds="--moe-experts 8 --moe-top-k 2 --moe-score sigmoid --moe-groups 4 --moe-group-top-k 2 --moe-shared-experts 1 --moe-bias-update 0.001"
for base in "$l" "$G"; do
    for layout in "--dp 2 --tp 2 --ep 4 --etp 1" "--dp 1 --tp 2 --etp 1" "--dp 1 --tp 4 --ep 2 --etp 2" \
                  "--dp 2 --tp 2 --ep 4 --etp 1 --pp 2" "--dp 2 --tp 2 --ep 4 --etp 1 --zero 1" \
                  "--dp 2 --tp 2 --ep 2 --etp 1 --zero 2" "--dp 2 --tp 2 --ep 4 --etp 1 --moe-capacity-factor 1.0" \
                  "--dp 2 --tp 2 --ep 4 --etp 1 --recompute full" \
                  "--dp 2 --tp 2 --ep 4 --etp 1 --pp 2 --schedule dualpipev --micro-batches 4" \
                  "--dp 2 --tp 2 --ep 4 --etp 1 --pp 2 --schedule zb-h1 --micro-batches 2"; do
        if run_ok $base $ds $layout --check; then
            has "check PASSED" || fail "--etp with $layout did not pass --check: $base"
            has "the experts folded" || fail "$layout: the header does not name the folded layout"
        fi
    done
    # CP: each slice's sequences keep their parts on the CP ring (dropless: CP refuses a capacity)
    if run_ok $base --moe-experts 8 --moe-top-k 2 --dp 1 --tp 2 --cp 2 --ep 4 --etp 1 --check; then
        has "check PASSED" || fail "--etp 1 with --cp 2 did not pass --check: $base"
    fi
done

# the fold group's bytes: measured equal to the formula (all-gathers, router sum, bias loads)
for layout in "--dp 2 --tp 2 --ep 4 --etp 1" "--dp 1 --tp 4 --ep 2 --etp 2 --pp 2 --zero 1"; do
    if run_ok $l $ds $layout --report "$tmp/r.json"; then
        cases=$((cases + 1))
        python3 - "$tmp/r.json" <<'PY' || fail "$layout: the fold group's bytes are not their formula"
import json, sys
r = json.load(open(sys.argv[1]))["run"]
b = r["moe_fold_bytes_per_step"]
assert b["measured"] > 0 and abs(b["measured"] - b["formula"]) < 1e-6, b
e = r["ep_bytes_per_step"]
assert abs(e["measured"] - e["formula"]) < 1e-6, e
PY
    fi
done

# a folded run's checkpoint, resumed on one device, trains on to the folded run's loss
third() { sed -n 's/^step *3 *loss \([0-9.]*\).*/\1/p' "$out"; }
g3="${g/--steps 1/--steps 3}"
if run_ok $g3 --tp 2 --etp 1 && a=$(third) && run_ok ${g/--steps 1/--steps 2} --tp 2 --etp 1 --save "$tmp/f.st" &&
   run_ok $g --load "$tmp/f.st"; then
    cases=$((cases + 1))
    [[ -n $a && $a == "$(third)" ]] || fail "a folded checkpoint resumed on one device: step 3's loss $(third), the folded run's $a"
fi
finish "moe-fold" "bad values refused; folded runs pass --check; the fold group's bytes are their formula; a folded checkpoint resumes anywhere"
