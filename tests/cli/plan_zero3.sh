#!/usr/bin/env bash
# plan_zero3.sh PTDP — `ptdp plan --zero 3` with ZeRO-3's options: HSDP
# (--shard-group), ZeRO++'s hpZ, qwZ and qgZ, and --compare-zero.
#
#  1. --compare-zero prints the best layout under ZeRO-3 and each option,
#     by collective and link level: HSDP's groups inside a node, hpZ's
#     backward gathers inside, qgZ and ZeRO++ marked as formulas; ZeRO-3's
#     cross-node volume is 3(N-1)/N M and ZeRO++'s below a third of it.
#  2. --json --compare-zero: "zero3_options", six options, valid JSON.
#  3. --explain with an option: its `ptdp train` line carries the flag and
#     runs (one step).
#  4. Bad inputs exit 2 naming the flag and what would do, nothing on stdout:
#     the same rules as ptdp train's, and the planner's own (--zero 3 only).
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# a small GPT on 16 GPUs of 4-GPU nodes: ZeRO's group of 16 spans 4 nodes
m=(plan --model gpt --layers 4 --hidden 64 --heads 4 --seq-len 32 --vocab 256 --batch 16)
small=("${m[@]}" --gpus 16 --profile hgx-a100-4 --zero 3 --tp 1 --pp 1 --micro-batch-size 1 --recompute none)

# ---- 1. the comparison ------------------------------------------------------------
# the "all" line of an option: its cross-node volume in M (the last column)
volume_of() {   # volume_of OPTION
    awk -v want="$1" '$1 == want { on = 1 } on && $1 == "all" { print $(NF - 1); exit }' "$out"
}
before=$failures
if run_ok "${small[@]}" --top 1 --compare-zero; then
    expect_out "ZeRO-3's options on layout 1 (dp 16, tp 1, pp 1, b 1, M 1; 4 DP ranks a node)" \
               "intra-node" "cross-node" "leaves node" "ZeRO-3  forward gather" "HSDP    forward gather" \
               "replicas' sum" "hpZ     forward gather" "qwZ     forward gather" "qgZ     forward gather" \
               "ZeRO++  forward gather" "qwZ+hpZ+qgZ (formula: ptdp train does not run it)"
    grep -qF "quantized grads (formula" "$out" && fail "--compare-zero: qgZ's row a formula, though ptdp train runs it"
    # hpZ's backward gather is inside the node: no cross-node bytes
    hpz_b=$(awk '$1 == "hpZ" { on = 1 } on && $1 == "backward" { print $5, $6; exit }' "$out")
    [[ $hpz_b == "0 B" ]] || fail "hpZ's backward gather crosses nodes: '$hpz_b'"
    z3=$(volume_of ZeRO-3)
    zpp=$(volume_of ZeRO++)
    awk -v a="$z3" 'BEGIN { exit !(a > 2.8 && a < 3.0) }' || fail "ZeRO-3's cross-node volume $z3 M, not 3(N-1)/N"
    awk -v a="$z3" -v b="$zpp" 'BEGIN { exit !(b > 0 && b < a / 3) }' ||
        fail "ZeRO++'s cross-node volume $zpp M is not below a third of ZeRO-3's $z3 M"
    [[ $failures -eq $before ]] && echo "ok    --compare-zero: six options by link level, ZeRO-3 $z3 M -> ZeRO++ $zpp M"
fi

# ---- 2. --json ---------------------------------------------------------------------
before=$failures
if run_ok "${small[@]}" --top 1 --compare-zero --json; then
    n=$(grep -c '^  {"option": ' "$out")
    [[ $n -eq 6 ]] || fail "--json: $n options in zero3_options, expected 6"
    grep -qF '"zero3_options": [' "$out" || fail "--json: no \"zero3_options\""
    if command -v python3 >/dev/null; then
        python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); o = d["zero3_options"]
assert [x["option"] for x in o] == ["ZeRO-3", "HSDP", "hpZ", "qwZ", "qgZ", "ZeRO++"], o
assert o[2]["backward_gather"]["cross_node_bytes"] == 0 and o[2]["backward_gather"]["intra_node_bytes"] > 0
assert o[1]["replicas_sum"]["cross_node_bytes"] > 0' "$out" || fail "--json: zero3_options is not what it should be"
    fi
    [[ $failures -eq $before ]] && echo "ok    --json --compare-zero: zero3_options, six options"
fi
before=$failures
if run_ok "${small[@]}" --top 1 --json; then
    grep -qF '"zero3_options"' "$out" && fail "--json without --compare-zero has zero3_options"
    [[ $failures -eq $before ]] && echo "ok    --json without --compare-zero: no zero3_options"
fi

# ---- 3. --explain's run line carries the option and runs ----------------------------
run_explained_line() {   # run_explained_line WHAT
    line=$(sed -n '/^run it in the simulator:/,$p' "$out" | tail -n +2 | grep -v '^  (without' | tr -d '\\\n' |
           tr -s ' ')
    line=${line#*ptdp train }
    line=${line/--steps 2 --report report.json/--steps 1 --quiet}
    # shellcheck disable=SC2086
    if ! "$ptdp" train $line >"$tmp/train_out" 2>"$tmp/train_err" </dev/null; then
        fail "$1 --explain's run line failed: ptdp train $line"
        sed 's/^/      /' "$tmp/train_err" | head -n 5
    fi
}
for opt in "--zero-hpz" "--shard-group 4" "--zero-qwz --zero-quant-block 64" "--zero-qgz --zero-qgz-bits 4"; do
    before=$failures
    # shellcheck disable=SC2086
    if run_ok "${m[@]}" --gpus 8 --profile hgx-a100-4 --zero 3 --tp 1 --top 1 --explain $opt; then
        grep -qF -- "$opt" "$out" || fail "$opt: --explain's run line lacks it"
        run_explained_line "$opt"
        [[ $failures -eq $before ]] && echo "ok    $opt: --explain's line carries it and runs"
    fi
done
# under bf16, which ptdp train refuses qgZ, the comparison prices qgZ's row by formula and says so
before=$failures
if run_ok "${small[@]}" --top 1 --compare-zero --precision bf16; then
    expect_out "quantized grads (formula: ptdp train does not run it)"
fi

# ---- 4. bad inputs ---------------------------------------------------------------------
h=("${m[@]}" --gpus 16 --profile hgx-a100-4)
expect_usage "--zero-hpz prices ZeRO-3's options (HSDP, ZeRO++'s hpZ, qwZ and qgZ): it needs --zero 3; --zero is not given" \
             -- "${h[@]}" --zero-hpz
expect_usage "--zero-qwz prices ZeRO-3's options"                        -- "${h[@]}" --zero 2 --zero-qwz
expect_usage "it needs --zero 3; --zero is 2"                            -- "${h[@]}" --zero 2 --zero-qgz
expect_usage "--compare-zero prices ZeRO-3's options"                    -- "${h[@]}" --zero 0 --compare-zero
expect_usage "ptdp train also runs --shard-group under ZeRO-1 and 2"     -- "${h[@]}" --zero 1 --shard-group 4
expect_usage "--zero-quant-block 64 is the block qwZ quantizes in: it needs --zero-qwz" \
             -- "${h[@]}" --zero 3 --zero-quant-block 64
expect_usage "--zero-qgz-bits 8 is the width qgZ quantizes the gradients to: it needs --zero-qgz" \
             -- "${h[@]}" --zero 3 --zero-qgz-bits 8
expect_usage "--zero-qgz-bits 3: must be one of 4, 8"                    -- "${h[@]}" --zero 3 --zero-qgz --zero-qgz-bits 3
expect_usage "--zero-quant-block 0: must be between 1 and 16777216"      -- "${h[@]}" --zero 3 --zero-qwz --zero-quant-block 0
expect_usage "--zero-quant-block x: "                                    -- "${h[@]}" --zero 3 --zero-qwz --zero-quant-block x
expect_usage "--shard-group 0: must be between 1"                        -- "${h[@]}" --zero 3 --shard-group 0
expect_usage "--shard-group 3 must divide --dp"                          -- "${h[@]}" --zero 3 --tp 1 --shard-group 3
expect_usage "--shard-group 32 is more than --dp 16"                     -- "${h[@]}" --zero 3 --tp 1 --shard-group 32
expect_usage "--zero-hpz keeps ZeRO-3's secondary pieces inside a node: it needs a cluster profile" \
             -- "${m[@]}" --gpus 16 --profile dgx-a100 --zero 3 --zero-hpz
expect_usage "so its node group is 1 DP rank"                            -- "${h[@]}" --zero 3 --tp 4 --zero-hpz
expect_usage "--zero-hpz with --tp 3 and --profile hgx-a100-4"           -- plan --model gpt --layers 4 --hidden 48 --heads 3 \
             --seq-len 32 --vocab 256 --batch 16 --gpus 24 --profile hgx-a100-4 --zero 3 --tp 3 --zero-hpz
expect_usage "--zero-hpz with --cp 2: its node groups cut the DP ranks alone" -- "${h[@]}" --zero 3 --cp 2 --zero-hpz
expect_usage "must cut ZeRO-3's group of 4 into two or more groups"      -- "${m[@]}" --gpus 4 --profile hgx-a100-4 --zero 3 --zero-hpz
expect_usage "--zero-qwz with --zero-hpz: hpZ keeps the forward's gathered unit" -- "${h[@]}" --zero 3 --zero-qwz --zero-hpz
expect_usage "--zero-qwz with --recompute full"                          -- "${h[@]}" --zero 3 --zero-qwz --recompute full
expect_usage "--fp8-comm with --compare-zero"                            -- "${h[@]}" --zero 3 --fp8 tensorwise --fp8-comm --compare-zero

finish plan_zero3 "ZeRO-3's options priced by link level, compared, and refused where they cannot run"
