#!/usr/bin/env bash
# zero3.sh PTDP — `ptdp train --zero 3` from the command line.
#
#  1. Bad flags exit 2 naming them, nothing on stdout: --zero 3 with one
#     data-parallel rank (it says it changes nothing), --zero 4, --zero 3
#     with --virtual-stages 2 and with --schedule zb-h1.
#  2. A good run (dp 2, 2 micro-batches) prints the DP bytes beside
#     3M(N-1)/N S, the formula's value equal to the measured one as
#     printed (the norm's one double is below the printed digits); with
#     --recompute full, still 3M(N-1)/N S (each block redone inside its
#     backward's gather); and the ZeRO paper's model states.
#     Its --report JSON holds "zero": 3, and --check passes.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors ------------------------------------------------------------------
t="train --steps 1 --quiet"
expect_usage "--zero 3 with --dp 1"           -- $t --zero 3
expect_usage "so it changes nothing"          -- $t --zero 3 --dp 1
expect_usage "--zero 4"                       -- $t --zero 4 --dp 2
expect_usage "--zero 3 with --virtual-stages 2" \
                                              -- $t --zero 3 --dp 2 --pp 2 --micro-batches 2 --schedule interleaved --virtual-stages 2
expect_usage "--zero 3 with --schedule zb-h1" -- $t --zero 3 --dp 2 --pp 2 --micro-batches 2 --schedule zb-h1

# ---- 2. a good run ----------------------------------------------------------------
# "... formula 3M(N-1)/N S = 1.53 MiB (S = ...), measured 1.53 MiB": both printed values
formula_and_measured() {
    local line
    line=$(grep -F "DP bytes sent per device and step, formula $1" "$out") || { fail "no \"formula $1\" line"; return; }
    local f m
    f=$(sed -E 's/.* S[^=]*= ([0-9.]+ [KMG]?i?B) \(S = .*/\1/' <<<"$line")
    m=$(sed -E 's/.*, measured ([0-9.]+ [KMG]?i?B).*/\1/' <<<"$line")
    if [[ -z $f || $f != "$m" ]]; then fail "formula $1: printed $f, measured $m: $line"
    else echo "ok    formula $1 = $f, measured $m"
    fi
}

if "$ptdp" train --dp 2 --micro-batches 2 --zero 3 --steps 2 --check --report "$tmp/r.json" \
        >"$out" 2>"$err" </dev/null; then
    formula_and_measured "3M(N-1)/N S"
    grep -qF "model states on device 0" "$out" && grep -qF "the ZeRO paper's formula; measured peaks" "$out" \
        && echo "ok    the model states line" || fail "no \"model states on device 0 … measured peaks\" line"
    grep -qF "check PASSED" "$out" && echo "ok    --check passed" || fail "--zero 3 --check did not pass"
    report_config "$tmp/r.json" zero 3
else
    fail "train --dp 2 --micro-batches 2 --zero 3: exit status $?"
fi

if "$ptdp" train --dp 2 --micro-batches 2 --zero 3 --recompute full --steps 1 >"$out" 2>"$err" </dev/null; then
    formula_and_measured "3M(N-1)/N S, each block redone inside its backward's gather"
else
    fail "train --zero 3 --recompute full: exit status $?"
fi

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all ZeRO-3 command-line checks passed"
