#!/usr/bin/env bash
# hsdp.sh PTDP — `ptdp train --zero S --shard-group N` (HSDP) from the command line.
#
#  1. Bad values exit 2 naming --shard-group, nothing on stdout: 0, negative,
#     not a number, not dividing --dp, more than --dp, without --zero.
#  2. A good run (dp 4, N 2, ZeRO-2, 2 micro-batches) prints the shard group's
#     bytes beside the row's formula and the replica group's beside
#     2(R-1)/(RN) S, each formula equal to the measured value as printed; its
#     --report has config.shard_group and run.hsdp_bytes_per_step (the
#     replicas' bytes exactly the formula, the shard group's within the
#     norm's one double), and --check passes.
#  3. On --profile dgx-h100 (8 GPUs a node), dp 16: shard groups of 8 (one
#     node each; the replicas' all-reduce the only InfiniBand traffic) take
#     less virtual communication time than ZeRO-2 over all 16.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors ------------------------------------------------------------------
t="train --steps 1 --quiet --dp 4"
expect_usage "--shard-group"                        -- $t --zero 1 --shard-group 0
expect_usage "--shard-group"                        -- $t --zero 1 --shard-group -2
expect_usage "--shard-group"                        -- $t --zero 1 --shard-group two
expect_usage "--shard-group 3 must divide --dp 4"   -- $t --zero 1 --shard-group 3
expect_usage "--shard-group 8 is more than --dp 4"  -- $t --zero 2 --shard-group 8
expect_usage "it needs --zero 1, 2 or 3"            -- $t --shard-group 2
expect_usage "it needs --zero 1, 2 or 3"            -- $t --zero 0 --shard-group 2

# ---- 2. a good run ----------------------------------------------------------------
# "... formula RULE = X, measured Y": X and Y as printed must agree
formula_and_measured() {
    local line f m
    line=$(grep -F -- "$1" "$out") || { fail "no \"$1\" line"; return; }
    f=$(sed -E 's/.*formula [^=]*= ([0-9.]+ [KMG]?i?B), measured.*/\1/' <<<"$line")
    m=$(sed -E 's/.*, measured ([0-9.]+ [KMG]?i?B).*/\1/' <<<"$line")
    if [[ -z $f || $f != "$m" ]]; then fail "$1: formula $f, measured $m: $line"
    else echo "ok    $1: formula $f, measured $m"
    fi
}

if run_ok train --dp 4 --zero 2 --shard-group 2 --micro-batches 2 --batch 8 --steps 2 --check \
        --report "$tmp/r.json"; then
    expect_out "HSDP, 2 shard groups of N = 2, R = 2 replicas of each shard" "check PASSED"
    formula_and_measured "shard group   ZeRO-2 inside it: formula (M+1)(N-1)/N S"
    formula_and_measured "replica group the shard all-reduced once a step: formula 2(R-1)/(RN) S"
    report_config "$tmp/r.json" shard_group 2
    if command -v python3 >/dev/null; then
        python3 - "$tmp/r.json" <<'PY' && echo "ok    run.hsdp_bytes_per_step: replica = formula, shard within the norm's double" \
            || fail "run.hsdp_bytes_per_step does not match its formulas"
import json, sys
r = json.load(open(sys.argv[1]))
h = r["run"]["hsdp_bytes_per_step"]
assert h["replica"]["measured"] == h["replica"]["formula"] > 0, h
assert 0 <= h["shard"]["measured"] - h["shard"]["formula"] <= 8, h   # the norm: 2(N-1)/N x 8 B
d = r["devices"][0]["bytes_sent_per_step"]
assert d["dp"] == 0 and d["shard"] > 0 and d["replica"] > 0, d
PY
    fi
fi

# ---- 3. two link levels -------------------------------------------------------------
comm_us() {   # device 0's "comm us" column, in the table of bytes and times
    awk '/^bytes sent per device/ { t = 1 } t && /^  0 \(0,0,0\)/ { print $(NF - 1); exit }' "$out"
}
a=""; b=""
run_ok train --profile dgx-h100 --dp 16 --zero 2 --batch 16 --steps 1 && a=$(comm_us)
run_ok train --profile dgx-h100 --dp 16 --zero 2 --shard-group 8 --batch 16 --steps 1 && b=$(comm_us)
if [[ -n $a && -n $b ]] && awk -v a="$a" -v b="$b" 'BEGIN { exit !(b < a) }'; then
    echo "ok    dgx-h100 dp 16 ZeRO-2: $a us of communication; shard groups of 8 (a node): $b us"
else
    fail "dgx-h100 dp 16 ZeRO-2: shard groups of 8 took $b us of communication, against $a us over all 16"
fi

finish hsdp "$cases runs: --shard-group's refusals, bytes by group, its two link levels"
