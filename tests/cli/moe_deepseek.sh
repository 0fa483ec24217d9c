#!/usr/bin/env bash
# moe_deepseek.sh — DeepSeek-V3's router on the command line, for both
# models: --moe-score sigmoid (the top k of sigmoid(z) + the expert bias,
# gates s_j / sum s x --moe-route-scale) and --moe-bias-update u (after each
# step b_e += u sign(mean L - L_e), the loads summed over the DP group).
# Every bad value refused (exit 2, naming the flag) before any work; sigmoid
# runs pass --check against one device under dp, tp, ep and pp, with and
# without the bias update; the bias moves, and a dp 2 run's checkpoint is a
# dp 1 run's bit for bit (the replicas applied the whole batch's update); a
# sigmoid checkpoint holds the expert bias, and a softmax file does not load
# into a sigmoid run (nor the other way round).
#
#   moe_deepseek.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

for model in gpt llama; do
    g="train --model $model --steps 1 --moe-experts 4"
    expect_usage "--moe-score needs --moe-experts"           -- train --model $model --moe-score sigmoid --steps 1
    expect_usage "--moe-route-scale needs --moe-experts"     -- train --model $model --moe-route-scale 2 --steps 1
    expect_usage "--moe-bias-update needs --moe-experts"     -- train --model $model --moe-bias-update 0.1 --steps 1
    expect_usage "--moe-score"                               -- $g --moe-score tanh
    expect_usage "--moe-score"                               -- $g --moe-score 1
    expect_usage "--moe-route-scale needs --moe-score sigmoid" -- $g --moe-route-scale 2
    s="$g --moe-score sigmoid"
    expect_usage "--moe-route-scale 0: must be above 0"      -- $s --moe-route-scale 0
    expect_usage "--moe-route-scale -1: must be above 0"     -- $s --moe-route-scale -1
    expect_usage "--moe-route-scale"                         -- $s --moe-route-scale nan
    expect_usage "--moe-route-scale"                         -- $s --moe-route-scale 1e999
    expect_usage "--moe-route-scale"                         -- $s --moe-route-scale two
    expect_usage "--moe-bias-update needs --moe-score sigmoid" -- $g --moe-bias-update 0.001
    expect_usage "--moe-bias-update -1: must be 0 or more"   -- $s --moe-bias-update -1
    expect_usage "--moe-bias-update nan"                     -- $s --moe-bias-update nan
    expect_usage "--moe-bias-update 1e999"                   -- $s --moe-bias-update 1e999
    expect_usage "--moe-bias-update two"                     -- $s --moe-bias-update two
    expect_usage "--moe-bias-update"                         -- $s --moe-bias-update ''
    # group-limited routing: E in G groups of E/G, the M best, floor(k/M) of each in its score
    expect_usage "--moe-groups needs --moe-experts"          -- train --model $model --moe-groups 2 --steps 1
    expect_usage "--moe-group-top-k needs --moe-experts"     -- train --model $model --moe-group-top-k 2 --steps 1
    expect_usage "--moe-groups: --moe-groups 3"              -- $g --moe-groups 3
    expect_usage "--moe-groups 0"                            -- $g --moe-groups 0
    expect_usage "--moe-groups -2"                           -- $g --moe-groups -2
    expect_usage "--moe-groups two"                          -- $g --moe-groups two
    expect_usage "--moe-groups 99999999999"                  -- $g --moe-groups 99999999999
    expect_usage "--moe-group-top-k: --moe-groups 2 --moe-group-top-k 3" -- $g --moe-groups 2 --moe-group-top-k 3
    expect_usage "--moe-group-top-k: --moe-groups 4 --moe-group-top-k 3" -- $g --moe-groups 4 --moe-group-top-k 3
    expect_usage "--moe-group-top-k: --moe-groups 4 --moe-group-top-k 1" -- $g --moe-groups 4 --moe-group-top-k 1
    expect_usage "--moe-group-top-k: --moe-groups 1 --moe-group-top-k 2" -- $g --moe-group-top-k 2
    expect_usage "--moe-group-top-k nan"                     -- $g --moe-groups 2 --moe-group-top-k nan
    # what the update does not run with yet, refused by name
    expect_usage "--moe-bias-update 0.01 with --zero 3"      -- $s --moe-bias-update 0.01 --dp 2 --zero 3
    expect_usage "--moe-bias-update 0.01 with DualPipe"      -- $s --moe-bias-update 0.01 --layers 4 --pp 2 --schedule dualpipe --micro-batches 4
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

# the bias update: --check under each layout (the loads summed over dp x cp)
for layout in "--dp 2" "--tp 2" "--cp 2" "--dp 2 --ep 2 --zero 1" "--pp 2 --micro-batches 2" "--dp 2 --tp 2 --ep 2 --zero 2"; do
    for base in "$l" "$g"; do
        if run_ok $base --moe-experts 4 --moe-score sigmoid --moe-bias-update 0.01 $layout --check; then
            has "check PASSED" || fail "the bias update with $layout did not pass --check: $base"
        fi
    done
done

# group-limited routing: --check, and a changed route (other losses than without groups)
for layout in "--dp 2 --tp 2 --ep 2" "--pp 2 --micro-batches 2 --zero 1" "--cp 2 --ep 2"; do
    for base in "$l" "$g"; do
        if run_ok $base --moe-experts 4 --moe-score sigmoid --moe-groups 2 --moe-bias-update 0.01 $layout --check; then
            has "check PASSED" || fail "group-limited routing with $layout did not pass --check: $base"
        fi
    done
done
if run_ok $l --moe-experts 4 --moe-groups 2 --report "$tmp/g2.json" && run_ok $l --moe-experts 4 --report "$tmp/g1.json"; then
    python3 - "$tmp/g1.json" "$tmp/g2.json" <<'PY' || fail "--moe-groups 2 changed nothing, or its report lacks the groups"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert b['config']['model']['moe_groups'] == 2 and b['config']['model']['moe_group_top_k'] == 1
assert 'moe_groups' not in a['config']['model']
assert a['run']['last_loss'] != b['run']['last_loss']
PY
fi
# a file with groups records them, and a resumed run takes them
if run_ok $l --moe-experts 4 --moe-groups 2 --save "$tmp/g.st" &&
   run_ok $l --moe-experts 4 --load "$tmp/g.st" --report "$tmp/g3.json"; then
    grep -q '"moe_groups": 2' "$tmp/g3.json" || fail "the resumed run did not take the file's --moe-groups"
fi

# the bias moves, and dp 2's replicas end with dp 1's bias bit for bit
# (each applied the whole global batch's update, not its own half's)
u="--moe-experts 4 --moe-score sigmoid --moe-bias-update 0.01"
l3="${l/--steps 2/--steps 3}"
if run_ok $l3 $u --save "$tmp/u1.st" && run_ok $l3 $u --dp 2 --save "$tmp/u2.st" &&
   run_ok $l3 $u --dp 2 --ep 2 --zero 1 --save "$tmp/u3.st"; then
    python3 - "$tmp/u1.st" "$tmp/u2.st" "$tmp/u3.st" <<'PY' || fail "the expert bias did not move, or dp 2's differs from dp 1's"
import json, struct, sys
def biases(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h, d = json.loads(b[8:8 + n]), b[8 + n:]
    assert h['__metadata__']['moe_bias_update'] == '1.0000000000000000e-02', h['__metadata__']
    fmt = {'F64': 'd', 'F32': 'f'}
    return {k: struct.unpack('<%d%s' % (v['shape'][0], fmt[v['dtype']]), d[v['data_offsets'][0]:v['data_offsets'][1]])
            for k, v in h.items() if k.endswith('expert_bias')}
a, b, c = (biases(p) for p in sys.argv[1:])
assert a and a == b == c, 'the replicas disagree'
assert any(x != 0 for v in a.values() for x in v), 'the bias stayed 0'
PY
fi
# a bias-update run resumed from a file without the bias (a softmax router's) is refused naming the tensor
if run_ok $l --moe-experts 4 --save "$tmp/soft0.st"; then
    expect_usage "feed_forward.gate.expert_bias (a softmax router" -- $l $u --load "$tmp/soft0.st"
fi
# a bias-update checkpoint resumes with its u
if [[ -f "$tmp/u1.st" ]] && run_ok $l --moe-experts 4 --moe-score sigmoid --load "$tmp/u1.st" --report "$tmp/r.json"; then
    grep -q '"moe_bias_update": 0.01' "$tmp/r.json" || fail "the resumed run did not take the file's --moe-bias-update"
fi

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
finish "moe-deepseek" "bad values refused; sigmoid routing and the bias update pass --check; the bias moves alike on every replica; checkpoints hold the bias and its u"
