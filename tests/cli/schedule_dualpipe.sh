#!/usr/bin/env bash
# schedule_dualpipe.sh PTDP — `ptdp schedule --schedule dualpipe`: two copies,
# half the micro-batches entering at each end.
#
#  1. Flags that cannot make it exit 2 naming them: an odd --pp (with the pp
#     that would work), an odd --micro-batches, m < 2p (with the m that
#     would), more than two chunks; and in `ptdp train` the same, ZeRO-3,
#     --overlap, bf16 (float build).
#  2. p 4, m 10: the bubble 0.0625 measured and by (p-2)/(3m+p-2), DualPipe's
#     table beside it (2 idle per device, PP+1 = 5 micro-batches kept on
#     every device, 2 stages of 4 a device: 2x the parameters); --list shows
#     the two copies (chunk 0 down, chunk 1 up, no message from one to the
#     other); --svg draws the F&B pairs' borders.
#  3. p 2, 4, 6, 8 and m 2p..2p+4 (even): the measured bubble equals the
#     formula (0 on two devices: each direction fills the other's bubble).
#  4. `ptdp train --schedule dualpipe --profile ideal`: the executor's bubble
#     equals the formula (p 2, m 4; p 4, m 8), the boundary crossings
#     2m(p - 1), as 1F1B's; --check passes for the GPT; its checkpoint is
#     the same bytes as `--dp 2 --micro-batches m/2` 1F1B's (two replicas,
#     one per copy).
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors ------------------------------------------------------------------
s="schedule --schedule dualpipe"
expect_usage "--schedule dualpipe needs an even --pp"          -- $s --pp 3 --micro-batches 6
expect_usage "try --pp 4"                                      -- $s --pp 3 --micro-batches 6
expect_usage "--schedule dualpipe needs an even --pp"          -- $s --pp 1 --micro-batches 4
expect_usage "--micro-batches 9 must be even"                  -- $s --pp 4 --micro-batches 9
expect_usage "--micro-batches 6 must be even and at least 2 x --pp = 8" -- $s --pp 4 --micro-batches 6
expect_usage "try --micro-batches 8"                           -- $s --pp 4 --micro-batches 6
expect_usage "--virtual-stages 3: the dualpipe schedule holds two chunks" -- $s --pp 2 --micro-batches 4 --virtual-stages 3
# one rule for --virtual-stages in ptdp schedule, train and plan: two copies take none
expect_usage "--virtual-stages 2: the dualpipe schedule holds two chunks per device, stage r of one copy" \
                                                               -- $s --pp 2 --micro-batches 4 --virtual-stages 2
expect_usage "--virtual-stages 2: the dualpipe schedule holds two chunks per device, stage r of one copy" \
                                                               -- train --schedule dualpipe --pp 2 --micro-batches 4 --virtual-stages 2
expect_usage "--virtual-stages 2: the dualpipe schedule holds two chunks per device, stage r of one copy" \
                                                               -- plan --model gpt --layers 8 --hidden 64 --heads 4 --seq-len 32 --vocab 64 --batch 16 --gpus 8 --profile dgx-a100 --schedule dualpipe --virtual-stages 2
t="train --schedule dualpipe"
expect_usage "needs an even --pp"                              -- $t --pp 3 --micro-batches 6 --batch 48
expect_usage "--micro-batches 5 must be even"                  -- $t --pp 2 --micro-batches 5 --batch 40
expect_usage "at least 2 x --pp = 8"                           -- $t --pp 4 --micro-batches 6 --batch 48
expect_usage "--zero 3 with --schedule dualpipe"               -- $t --pp 2 --micro-batches 4 --dp 2 --zero 3
expect_usage "--overlap with --schedule dualpipe"              -- $t --pp 2 --micro-batches 4 --dp 2 --overlap
[[ $ptdp == *f64 ]] ||
    expect_usage "--precision bf16 with --schedule dualpipe"   -- $t --pp 2 --micro-batches 4 --precision bf16

# ---- 2. p 4, m 10 -----------------------------------------------------------------
if run_ok $s --pp 4 --micro-batches 10 --list --svg "$tmp/d.svg"; then
    expect_out "bubble: measured 0.062500" "formula (p-2)/(3m+p-2) = 2/32 = 0.062500" \
               "an F&B pair F + B, m >= 2p" "(PP/2-1)(F&B+B-3W)  1 x (3 + 2 - 3) = 2; measured 2" \
               "PP+1 = 5            peak 5" "2 stages of 4 = 2x the model / PP" \
               "per stage: 5 5 5 5" "chunk 0, micro-batches 0..4" "chunk 1, micro-batches 5..9"
    # the down copy ends at stage 3 (its loss), the up copy at stage 0
    awk '/^stage 3 \(/ { f = 1; next } /^stage / { f = 0 } f' "$out" | grep -qE 'F[0-9]+\.0->' &&
        fail "stage 3 sends a down-copy activation: its chunk 0 is the down copy's last stage"
    awk '/^stage 0 \(/ { f = 1; next } /^stage / { f = 0 } f' "$out" | grep -qE 'F[0-9]+\.1->' &&
        fail "stage 0 sends an up-copy activation: its chunk 1 is the up copy's last stage"
    awk '/^stage 3 \(/ { f = 1; next } /^stage / { f = 0 } f' "$out" | grep -qE 'F[5-9]\.1->2' ||
        fail "stage 3 sends no up-copy activation (micro-batches 5..9) to stage 2"
    grep -qE 'F[0-4]\.1|F[5-9]\.0' "$out" && fail "a micro-batch goes through the other copy"
    grep -q 'stroke="black"' "$tmp/d.svg" || fail "--svg: no F&B pair drawn"
    echo "ok    schedule --schedule dualpipe --pp 4 --micro-batches 10: bubble 0.0625 both ways, table, two copies"
fi

# ---- 3. the formula for several p and m --------------------------------------------
for p in 2 4 6 8; do
    for m in $((2 * p)) $((2 * p + 2)) $((2 * p + 4)); do
        run_ok $s --pp "$p" --micro-batches "$m" || continue
        read_bubble schedule
        [[ -n $measured && $measured == "$formula" ]] || fail "p $p m $m: $line"
        ((p == 2)) || grep -qF "formula (p-2)/(3m+p-2) = $((p - 2))/$((3 * m + p - 2)) = " <<<"$line" ||
            fail "p $p m $m: $line"
    done
done
echo "ok    schedule --schedule dualpipe: measured bubble = (p-2)/(3m+p-2) for p 2..8, m 2p..2p+4"

# ---- 4. training -----------------------------------------------------------------
for pm in "2 4" "4 8"; do
    read -r p m <<<"$pm"
    run_ok train --pp "$p" --micro-batches "$m" --layers $((2 * p)) --schedule dualpipe --profile ideal --steps 2 \
        --quiet || continue
    read_bubble train
    [[ -n $measured && $measured == "$formula" ]] || fail "train --pp $p --micro-batches $m: $line"
    expect_out "= 2 m (p - 1) = 2 x $m x $((p - 1)) = $((2 * m * (p - 1))) boundary crossings"
done
echo "ok    train --schedule dualpipe --profile ideal: the executor's bubble = (p-2)/(3m+p-2), p 2 and 4"
if run_ok train --model gpt --layers 4 --pp 2 --micro-batches 4 --schedule dualpipe --steps 2 --check \
       --save "$tmp/d.st" --quiet; then
    expect_out "check PASSED"
    run_ok train --model gpt --layers 4 --pp 2 --dp 2 --micro-batches 2 --steps 2 --save "$tmp/two.st" --quiet &&
        { cmp -s "$tmp/d.st" "$tmp/two.st" || fail "the dualpipe checkpoint differs from 1f1b's with --dp 2"; }
    echo "ok    train --model gpt --schedule dualpipe --check passes; its checkpoint = 1f1b's with --dp 2, m/2, byte for byte"
fi

finish "schedule dualpipe" "errors, the bubble by formula and measured, DualPipe's table, the two copies"
