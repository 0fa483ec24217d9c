#!/usr/bin/env bash
# moe_z_loss.sh — ST-MoE's router z-loss on the command line, for both
# models and both routers: --moe-z-loss beta adds beta x the mean over
# tokens of (log sum_e exp z_e)^2 to the objective.  Bad values refused
# (exit 2, naming the flag) before any work; runs pass --check under dp,
# ep, cp, tp with pp and ZeRO; the log's "z_loss" and "moe_z_loss" appear
# with it alone and add up; its gradient reaches the router (a large beta
# shrinks the logits' log-partition where a tiny one lets it grow); a
# checkpoint records beta and a resumed run takes it.
#
#   moe_z_loss.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

for model in gpt llama; do
    g="train --model $model --steps 1 --moe-experts 4"
    expect_usage "--moe-z-loss needs --moe-experts"  -- train --model $model --moe-z-loss 0.1 --steps 1
    expect_usage "--moe-z-loss -1: must be 0 or more" -- $g --moe-z-loss -1
    expect_usage "--moe-z-loss"                      -- $g --moe-z-loss nan
    expect_usage "--moe-z-loss"                      -- $g --moe-z-loss 1e999
    expect_usage "--moe-z-loss"                      -- $g --moe-z-loss two
    expect_usage "--moe-z-loss"                      -- $g --moe-z-loss ''
done

l="train --model llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --ffn 64 --seq-len 8 --vocab 64 --batch 8 --steps 2"
g="train --model gpt --layers 2 --hidden 32 --heads 4 --ffn 64 --seq-len 8 --batch 8 --steps 2"
# --check: one device's run beside the parallel one (CP: each device its tokens' share, no exchange)
for layout in "--dp 2 --ep 2" "--cp 2" "--tp 2 --pp 2 --micro-batches 2" "--dp 2 --zero 2"; do
    for base in "$l" "$g"; do
        for score in softmax sigmoid; do
            if run_ok $base --moe-experts 4 --moe-score $score --moe-z-loss 0.1 $layout --check; then
                has "check PASSED" || fail "the z-loss ($score) with $layout did not pass --check: $base"
            fi
        done
    done
done

# the log: z_loss and moe_z_loss with the flag alone, the blocks' summing to the whole
if run_ok $g --moe-experts 4 --log "$tmp/none.log" && run_ok $g --moe-experts 4 --moe-z-loss 0.1 --log "$tmp/z.log"; then
    grep -q '"z_loss"' "$tmp/none.log" && fail "a run without --moe-z-loss logged a z_loss"
    python3 - "$tmp/z.log" <<'PY' || fail "the log's z_loss is not the sum of moe_z_loss, or not near 0.1 (log 4)^2"
import json, math, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    assert abs(sum(r['moe_z_loss']) - r['z_loss']) <= 1e-12 * r['z_loss'], r
    # logits near 0 at init: lse near log E = log 4, for each of the 2 blocks
    assert 0.5 < r['z_loss'] / (2 * 0.1 * math.log(4) ** 2) < 2, r['z_loss']
PY
fi

# CP: each device's share of a sequence, summed over the group, is the whole sequence's z-loss
if run_ok $l --moe-experts 4 --moe-z-loss 0.1 --log "$tmp/one.log" && run_ok $l --moe-experts 4 --moe-z-loss 0.1 --cp 2 --dp 2 --log "$tmp/cp.log"; then
    python3 - "$tmp/one.log" "$tmp/cp.log" <<'PY' || fail "the z_loss logged under --cp 2 --dp 2 is not one device's"
import json, sys
a, b = ([json.loads(l)['z_loss'] for l in open(p)] for p in sys.argv[1:])
assert len(a) == len(b) and all(abs(x - y) <= 1e-5 * x for x, y in zip(a, b)), (a, b)
PY
fi

# the gradient reaches the router: beta 1 shrinks lse^2, beta 1e-6 does not
# (lr 0.05, 6 steps: measured 3.90 -> 0.08 against 3.90 -> 7.53)
zl="train --model gpt --layers 2 --hidden 16 --heads 2 --ffn 64 --seq-len 8 --batch 4 --steps 6 --lr 0.05 --moe-experts 4 --moe-aux-loss 0"
if run_ok $zl --moe-z-loss 1 --log "$tmp/big.log" && run_ok $zl --moe-z-loss 0.000001 --log "$tmp/tiny.log"; then
    python3 - "$tmp/big.log" "$tmp/tiny.log" <<'PY' || fail "a large --moe-z-loss did not shrink the logits more than a tiny one"
import json, sys
def last(path, beta):
    rows = [json.loads(l) for l in open(path)]
    return rows[0]['z_loss'] / beta, rows[-1]['z_loss'] / beta
b0, b1 = last(sys.argv[1], 1.0)
t0, t1 = last(sys.argv[2], 1e-6)
assert abs(b0 - t0) < 1e-9 * b0, (b0, t0)      # the same start
assert b1 < 0.5 * b0 and b1 < 0.5 * t1, (b0, b1, t0, t1)
PY
fi

# checkpoints: beta recorded (only when not 0), and taken by a resumed run
if run_ok $l --moe-experts 4 --moe-z-loss 0.25 --save "$tmp/z.st" && run_ok $l --moe-experts 4 --save "$tmp/none.st"; then
    python3 - "$tmp/z.st" "$tmp/none.st" <<'PY' || fail "the checkpoint's moe_z_loss is not 0.25, or a run without it recorded one"
import json, struct, sys
def meta(p):
    b = open(p, 'rb').read()
    return json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])['__metadata__']
assert float(meta(sys.argv[1])['moe_z_loss']) == 0.25
assert 'moe_z_loss' not in meta(sys.argv[2])
PY
    if run_ok $l --moe-experts 4 --load "$tmp/z.st" --report "$tmp/r.json"; then
        grep -q '"moe_z_loss": 0.25' "$tmp/r.json" || fail "the resumed run did not take the file's --moe-z-loss"
    fi
fi
finish "moe-z-loss" "bad values refused; the z-loss passes --check; its log keys add up; it shrinks the logits; checkpoints keep beta"
