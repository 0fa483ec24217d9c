#!/usr/bin/env bash
# moe_shared.sh — DeepSeek's shared experts on the command line, for both
# models: --moe-shared-experts S adds to every MoE block one FFN of S F_e
# that every token takes beside its routed experts.  Bad values refused
# (exit 2, naming the flag) before any work; runs pass --check under dp
# with ep and ZeRO, tp, pp and cp; the shared FFN changes the model (the
# first loss is not the run's without it); the checkpoint holds its
# tensors under ….shared_experts.* with S in the metadata, a run with
# another S is refused naming the flag, and `ptdp sample` rebuilds the
# model from the file alone.
#
#   moe_shared.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

for model in gpt llama; do
    g="train --model $model --steps 1 --moe-experts 4"
    expect_usage "--moe-shared-experts needs --moe-experts" -- train --model $model --moe-shared-experts 1 --steps 1
    expect_usage "--moe-shared-experts -1: must be between 0 and 4096" -- $g --moe-shared-experts -1
    expect_usage "--moe-shared-experts one: not a whole number"        -- $g --moe-shared-experts one
    expect_usage "--moe-shared-experts 99999999999"                    -- $g --moe-shared-experts 99999999999
    expect_usage "--moe-shared-experts 1.5"                            -- $g --moe-shared-experts 1.5
done

l="train --model llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --ffn 64 --seq-len 8 --vocab 64 --batch 8 --steps 2"
g="train --model gpt --layers 2 --hidden 32 --heads 4 --ffn 64 --seq-len 8 --batch 8 --steps 2"
for layout in "1 --dp 2 --ep 2 --zero 1" "2 --tp 2" "1 --pp 2 --micro-batches 2 --dp 2 --ep 2" "1 --cp 2"; do
    for base in "$l" "$g"; do
        if run_ok $base --moe-experts 4 --moe-shared-experts $layout --check; then
            has "check PASSED" || fail "--moe-shared-experts with $layout did not pass --check: $base"
        fi
    done
done

# the shared FFN is in the model: the first loss moves; the file holds it, named, and S
for base in "$l" "$g"; do
    first() { sed -n 's/^step *1 *loss \([0-9.]*\).*/\1/p' "$out"; }
    if run_ok $base --moe-experts 4 && a=$(first) && run_ok $base --moe-experts 4 --moe-shared-experts 2 --save "$tmp/s.st"; then
        cases=$((cases + 1))
        [[ -n $a && $a != "$(first)" ]] || fail "$base: --moe-shared-experts 2 left the first loss at $a"
        python3 - "$tmp/s.st" <<'PY' || fail "$base --moe-shared-experts 2: the file's shared experts are not one FFN of 2 F_e a MoE block"
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
h = json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])
F = int(h['__metadata__']['moe_ffn'])
shared = {k: v['shape'] for k, v in h.items() if '.shared_experts.' in k and not k.startswith('optim.')}
assert h['__metadata__']['moe_shared_experts'] == '2'
assert len(shared) in (6, 8), shared                # 2 blocks: the llama's w1 w2 w3, the GPT's c_fc, c_proj and biases
assert all(2 * F in s for s in shared.values() if len(s) == 2), shared
PY
        expect_usage "the checkpoint holds shared experts"                  -- $base --moe-experts 4 --load "$tmp/s.st"
        expect_usage "give --moe-shared-experts 2"                          -- $base --moe-experts 4 --moe-shared-experts 1 --load "$tmp/s.st"
        run_ok $base --moe-experts 4 --moe-shared-experts 2 --load "$tmp/s.st" || true
        run_ok sample --load "$tmp/s.st" --tokens 4 || true
    fi
done
# a file without shared experts into a run with them: refused naming the flag
if run_ok $g --moe-experts 4 --save "$tmp/n.st"; then
    expect_usage "the checkpoint holds no shared experts" -- $g --moe-experts 4 --moe-shared-experts 1 --load "$tmp/n.st"
fi
finish "moe-shared" "bad values refused; shared-expert runs pass --check; they change the model; files hold them and S; another S is refused"
