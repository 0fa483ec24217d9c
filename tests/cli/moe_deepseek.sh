#!/usr/bin/env bash
# moe_deepseek.sh — DeepSeek-V3's router on the command line, for both
# models: --moe-score sigmoid (the top k of sigmoid(z) + the expert bias,
# gates s_j / sum s x --moe-route-scale); no --moe-bias-update yet.  Every bad
# value refused (exit 2, naming the flag) before any work; sigmoid runs
# pass --check against one device under dp, tp, ep and pp; a sigmoid
# checkpoint holds the expert bias, and a softmax file does not load into a
# sigmoid run (nor the other way round).
#
#   moe_deepseek.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

for model in gpt llama; do
    g="train --model $model --steps 1 --moe-experts 4"
    expect_usage "--moe-score needs --moe-experts"           -- train --model $model --moe-score sigmoid --steps 1
    expect_usage "--moe-route-scale needs --moe-experts"     -- train --model $model --moe-route-scale 2 --steps 1
    expect_usage "--moe-score"                               -- $g --moe-score tanh
    expect_usage "--moe-score"                               -- $g --moe-score 1
    expect_usage "--moe-route-scale needs --moe-score sigmoid" -- $g --moe-route-scale 2
    s="$g --moe-score sigmoid"
    expect_usage "--moe-route-scale 0: must be above 0"      -- $s --moe-route-scale 0
    expect_usage "--moe-route-scale -1: must be above 0"     -- $s --moe-route-scale -1
    expect_usage "--moe-route-scale"                         -- $s --moe-route-scale nan
    expect_usage "--moe-route-scale"                         -- $s --moe-route-scale 1e999
    expect_usage "--moe-route-scale"                         -- $s --moe-route-scale two
    # the bias's update after each step is not written yet: no flag for it
    expect_usage "--moe-bias-update"                         -- $s --moe-bias-update 0.001
done

# --check: one device's run beside the parallel one, for each layout
l="train --model llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --ffn 64 --seq-len 8 --vocab 64 --batch 8 --steps 2"
g="train --model gpt --layers 2 --hidden 32 --heads 4 --ffn 64 --seq-len 8 --batch 8 --steps 2"
for layout in "--dp 2" "--tp 2" "--dp 2 --ep 2" "--pp 2 --micro-batches 2" "--dp 2 --tp 2 --ep 2"; do
    for base in "$l" "$g"; do
        if run_ok $base --moe-experts 4 --moe-score sigmoid --moe-route-scale 2.5 $layout --check; then
            has "check PASSED" || fail "sigmoid routing with $layout did not pass --check: $base"
        fi
    done
done

# checkpoints: the sigmoid file holds the bias; softmax and sigmoid files do not cross
if run_ok $l --moe-experts 4 --moe-score sigmoid --save "$tmp/sig.st"; then
    python3 - "$tmp/sig.st" <<'PY' || fail "the sigmoid checkpoint holds no layers.*.feed_forward.gate.expert_bias"
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
h = json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])
assert 'layers.1.feed_forward.gate.expert_bias' in h and h['layers.1.feed_forward.gate.expert_bias']['shape'] == [4]
assert h['__metadata__']['moe_score'] == '1'
PY
    expect_usage "holds a sigmoid router" -- $l --moe-experts 4 --load "$tmp/sig.st"
    if run_ok $l --moe-experts 4 --moe-score sigmoid --load "$tmp/sig.st"; then :; fi
fi
if run_ok $l --moe-experts 4 --save "$tmp/soft.st"; then
    expect_usage "--moe-score sigmoid contradicts --load" -- $l --moe-experts 4 --moe-score sigmoid --load "$tmp/soft.st"
fi
finish "moe-deepseek" "bad values refused; sigmoid routing passes --check; its checkpoints hold the bias"
