#!/usr/bin/env bash
# schedule_ii.sh PTDP — `ptdp schedule` for the schedules that shrink the bubble.
#
#  1. Flags that cannot make a schedule exit 2 naming them: --virtual-stages
#     with a schedule that has no chunks, m not a multiple of p under
#     interleaving, interleaving on one stage, B/W times without a split
#     backward, an unknown schedule.
#  2. --schedule interleaved --virtual-stages 2 (p 4, m 8): F<k>.<c> labels,
#     bubble 0.157895 measured and by (p-1)/(v*m+p-1), peaks 11 9 7 5.
#  3. --schedule zb-h1 (p 4, m 8): W boxes, bubble 0.111111 both ways,
#     1F1B's activation peaks 4 3 2 1 and W owed 1 2 3 4; --svg and --list.
#  4. `ptdp train --schedule zb-h1 --zero 2`: the DP bytes' formula counts a
#     reduce-scatter after B and another after W, and meets the measurement.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors ------------------------------------------------------------------
s=schedule
expect_usage "--virtual-stages 2: the 1f1b schedule runs one chunk per stage" -- $s --virtual-stages 2
expect_usage "--micro-batches 6 must be a multiple of --pp 4"  -- $s --schedule interleaved --virtual-stages 2 --micro-batches 6
expect_usage "try --micro-batches 8"                          -- $s --schedule interleaved --micro-batches 6
expect_usage "--schedule interleaved needs --pp 2 or more"    -- $s --schedule interleaved --pp 1 --micro-batches 4
expect_usage "--backward-weight-time"                         -- $s --schedule 1f1b --backward-weight-time 1
expect_usage "--virtual-stages 0"                             -- $s --schedule interleaved --virtual-stages 0
expect_usage "--schedule zb-v"                                -- $s --schedule zb-v

# ---- 2. interleaved ---------------------------------------------------------------
if run_ok $s --schedule interleaved --virtual-stages 2 --pp 4 --micro-batches 8 --list; then
    expect_out "interleaved: 4 stages, 8 micro-batches, makespan 28.5" \
               "bubble: measured 0.157895" "formula (p-1)/(v*m+p-1) = 3/19 = 0.157895" \
               "per stage: 11 9 7 5" "F0.1<-3" "B7.1->3" "F7.1"
    grep -q '^stage 0 .*F0\.0.*B7\.0' "$out" || fail "interleaved: stage 0's row lacks F0.0 .. B7.0"
    echo "ok    schedule --schedule interleaved --virtual-stages 2: bubble 0.157895 both ways, peaks 11 9 7 5"
fi

# ---- 3. ZB-H1 ---------------------------------------------------------------------
if run_ok $s --schedule zb-h1 --pp 4 --micro-batches 8 --svg "$tmp/zb.svg"; then
    expect_out "zb-h1: 4 stages, 8 micro-batches, makespan 27" "costs per micro-batch and stage: forward 1, B 1, W 1" \
               "bubble: measured 0.111111" "formula (p-1)/(3m+p-1) = 3/27 = 0.111111" \
               "per stage: 4 3 2 1" "for them): 1 2 3 4" "wrote $tmp/zb.svg"
    grep -q '^stage 3 .*F0B0F1B1F2B2F3B3W0F4B4W1' "$out" || fail "zb-h1: stage 3 does not run W0 after B3"
    grep -q 'W: weight gradients' "$tmp/zb.svg" || fail "zb-h1 --svg: no W in the legend"
    echo "ok    schedule --schedule zb-h1: bubble 0.111111 both ways, W owed 1 2 3 4, SVG written"
fi
# B and W priced apart: a slower W lengthens the run.
if run_ok $s --schedule zb-h1 --pp 4 --micro-batches 8 --backward-input-time 1 --backward-weight-time 2; then
    expect_out "forward 1, B 1, W 2"
    grep -q 'makespan 27 ' "$out" && fail "zb-h1 with W = 2 still takes 27"
fi

# ---- 4. ZB-H1 under ZeRO-2 reduce-scatters after B and after W: the printed
# formula counts both and meets the measured bytes.
if run_ok train --pp 2 --dp 2 --micro-batches 4 --schedule zb-h1 --zero 2 --steps 2 --quiet; then
    line=$(grep '^data parallelism' "$out")
    f=$(sed -n 's/.*S = \([0-9.]* [KMG]*i*B\) (S = .*/\1/p' <<<"$line")
    m=$(sed -n 's/.*measured \([0-9.]* [KMG]*i*B\)$/\1/p' <<<"$line")
    [[ -n $f && $f == "$m" ]] || fail "zb-h1 --zero 2: formula '$f', measured '$m': $line"
    expect_out "M = 8 backwards (B and W each count"
    echo "ok    train --schedule zb-h1 --zero 2: DP bytes $m by formula and measured"
fi

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all schedule II checks passed"
