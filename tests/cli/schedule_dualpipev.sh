#!/usr/bin/env bash
# schedule_dualpipev.sh PTDP — `ptdp schedule --schedule dualpipev`: the V.
#
#  1. Flags that cannot make it exit 2 naming them: m < 2p (with the m that
#     would work), one device, more than two chunks; and in `ptdp train`
#     too few blocks for 2p stages, ZeRO-3, --overlap, bf16 (float build).
#  2. p 4, m 10: the bubble 0.090909 measured and by (p-1)/(3m+p-1), DualPipe's
#     table beside it (6 idle per device, PP+1 = 9 stage-micro-batches kept
#     on every device, 2 stages of 8 a device); --list shows the V (stage 3
#     hands piece 3 to 4 itself) and no message across its tip; --svg draws
#     the F&B pairs' borders.
#  3. p 2..5, m 2p..2p+2: the measured bubble equals the formula.
#  4. `ptdp train --schedule dualpipev --profile ideal`: the executor's
#     bubble equals the formula (p 2, m 4; p 3, m 8), the boundary
#     crossings 2m(2p - 2); --check passes for the GPT; its checkpoint is
#     the same bytes as 1F1B's on 2p stages.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors ------------------------------------------------------------------
s="schedule --schedule dualpipev"
expect_usage "--micro-batches 7 is fewer than 2 x --pp = 8"   -- $s --pp 4 --micro-batches 7
expect_usage "try --micro-batches 8"                          -- $s --pp 4 --micro-batches 7
expect_usage "--schedule dualpipev needs --pp 2 or more"      -- $s --pp 1 --micro-batches 4
expect_usage "--virtual-stages 3: the dualpipev schedule holds two chunks" -- $s --pp 2 --micro-batches 4 --virtual-stages 3
# one rule for --virtual-stages in ptdp schedule, train and plan: a V takes none
expect_usage "--virtual-stages 2: the dualpipev schedule holds two chunks per device, stages r and 2p-1-r" \
                                                              -- $s --pp 2 --micro-batches 4 --virtual-stages 2
expect_usage "--virtual-stages 2: the dualpipev schedule holds two chunks per device, stages r and 2p-1-r" \
                                                              -- train --schedule dualpipev --pp 2 --micro-batches 4 --layers 4 --virtual-stages 2
t="train --schedule dualpipev --pp 2"
expect_usage "fewer than 2 x --pp = 4"                        -- $t --micro-batches 3 --batch 48
expect_usage "need --layers >= 4"                             -- $t --micro-batches 4 --model gpt
expect_usage "--zero 3 with --schedule dualpipev"             -- $t --micro-batches 4 --dp 2 --zero 3
expect_usage "--overlap with --schedule dualpipev"            -- $t --micro-batches 4 --dp 2 --overlap
[[ $ptdp == *f64 ]] ||
    expect_usage "--precision bf16 with --schedule dualpipev" -- $t --micro-batches 4 --precision bf16

# ---- 2. p 4, m 10 -----------------------------------------------------------------
if run_ok $s --pp 4 --micro-batches 10 --list --svg "$tmp/v.svg"; then
    expect_out "bubble: measured 0.090909" "formula (p-1)/(3m+p-1) = 3/33 = 0.090909" \
               "an F&B pair F + B, m >= 2p" "(PP/2-1)(F&B+B-3W)  3 x (3 + 2 - 3) = 6; measured 6" \
               "PP+1 = 9            peak 9" "2 stages of 8 = 1x the model / p" \
               "per stage: 9 9 9 9" "stage 3 hands piece 3 to 4 itself"
    grep -q 'F[0-9]*\.0->3' "$out" || fail "no activation from stage 2's chunk 0 to stage 3"
    awk '/^stage 3 \(/ { f = 1; next } /^stage / { f = 0 } f' "$out" | grep -qE 'F[0-9]+\.0->|B[0-9]+\.1->' &&
        fail "stage 3 sends across its tip: chunk 0 to chunk 1 is a hand-over"
    awk '/^stage 3 \(/ { f = 1; next } /^stage / { f = 0 } f' "$out" | grep -qE 'F[0-9]+\.1->2' ||
        fail "stage 3 sends no activation of its chunk 1 (model stage 4) to stage 2's chunk 1 (5)"
    grep -q 'stroke="black"' "$tmp/v.svg" || fail "--svg: no F&B pair drawn"
    echo "ok    schedule --schedule dualpipev --pp 4 --micro-batches 10: bubble 0.090909 both ways, table, V"
fi

# all-to-alls: hidden in the pairs, waited for by ZB-H1's every F and B
if run_ok $s --pp 4 --micro-batches 10 --alltoall-time 1; then
    expect_out "all-to-alls 0.5 per forward or backward (--alltoall-time)"
fi

# ---- 3. the formula for several p and m --------------------------------------------
for p in 2 3 4 5; do
    for m in $((2 * p)) $((2 * p + 1)) $((2 * p + 2)); do
        run_ok $s --pp "$p" --micro-batches "$m" || continue
        read_bubble schedule
        [[ -n $measured && $measured == "$formula" ]] || fail "p $p m $m: $line"
    done
done
echo "ok    schedule --schedule dualpipev: measured bubble = (p-1)/(3m+p-1) for p 2..5, m 2p..2p+2"

# ---- 4. training -----------------------------------------------------------------
for pm in "2 4" "3 8"; do
    read -r p m <<<"$pm"
    run_ok train --pp "$p" --micro-batches "$m" --layers $((2 * p)) --schedule dualpipev --profile ideal --steps 2 \
        --quiet || continue
    read_bubble train
    [[ -n $measured && $measured == "$formula" ]] || fail "train --pp $p --micro-batches $m: $line"
    expect_out "= 2 m (2p - 2) = 2 x $m x $((2 * p - 2)) = $((2 * m * (2 * p - 2))) boundary crossings"
done
echo "ok    train --schedule dualpipev --profile ideal: the executor's bubble = (p-1)/(3m+p-1), p 2 and 3"
if run_ok train --model gpt --layers 4 --pp 2 --micro-batches 4 --schedule dualpipev --steps 2 --check \
       --save "$tmp/v.st" --quiet; then
    expect_out "check PASSED"
    run_ok train --model gpt --layers 4 --pp 4 --micro-batches 4 --steps 2 --save "$tmp/one.st" --quiet &&
        { cmp -s "$tmp/v.st" "$tmp/one.st" || fail "the dualpipev checkpoint differs from 1f1b's on 4 stages"; }
    echo "ok    train --model gpt --schedule dualpipev --check passes; its checkpoint = 1f1b's on 2p stages, byte for byte"
fi

finish "schedule dualpipev" "errors, the bubble by formula and measured, DualPipe's table, the V"
