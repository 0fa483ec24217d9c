#!/usr/bin/env bash
# moe_dense_first.sh — DeepSeek's first dense blocks on the command line,
# for both models: --moe-dense-first K keeps blocks 0..K-1 dense and counts
# --moe-every from block K.  Bad values refused (exit 2, naming the flag)
# before any work; runs pass --check under pp (a stage holding dense and
# MoE blocks), dp with ep and ZeRO; the checkpoint holds dense tensors for
# blocks below K and experts from K, records K, and a run whose K differs
# is refused naming the flag; `ptdp sample` rebuilds the model from the file.
#
#   moe_dense_first.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

for model in gpt llama; do
    g="train --model $model --steps 1 --layers 4 --moe-experts 4"
    expect_usage "--moe-dense-first needs --moe-experts"   -- train --model $model --moe-dense-first 1 --steps 1
    expect_usage "--moe-dense-first"                       -- $g --moe-dense-first -1
    expect_usage "--moe-dense-first"                       -- $g --moe-dense-first two
    expect_usage "--moe-dense-first"                       -- $g --moe-dense-first 99999999999
    expect_usage "--moe-dense-first 4 --moe-every 1: no block of --layers 4" -- $g --moe-dense-first 4
    expect_usage "--moe-dense-first 3 --moe-every 2: no block of --layers 4" -- $g --moe-dense-first 3 --moe-every 2
done

l="train --model llama --layers 4 --hidden 32 --heads 4 --kv-heads 2 --ffn 64 --seq-len 8 --vocab 64 --batch 8 --steps 2"
g="train --model gpt --layers 4 --hidden 32 --heads 4 --ffn 64 --seq-len 8 --batch 8 --steps 2"
for layout in "--pp 2 --micro-batches 2" "--dp 2 --ep 2 --zero 1" "--pp 2 --micro-batches 2 --dp 2 --ep 2"; do
    for base in "$l" "$g"; do
        if run_ok $base --moe-experts 4 --moe-dense-first 1 $layout --check; then
            has "check PASSED" || fail "--moe-dense-first 1 with $layout did not pass --check: $base"
        fi
    done
done

# the file: block 0 dense, blocks 1.. with experts (K 1); K 2 every 2nd: block 3 alone
for base in "$l" "$g"; do
    for k in "1 1 1,2,3" "2 2 3"; do
        read -r K every want <<<"$k"
        if run_ok $base --moe-experts 4 --moe-dense-first "$K" --moe-every "$every" --save "$tmp/d.st"; then
            python3 - "$tmp/d.st" "$K" "$want" <<'PY' || fail "$base --moe-dense-first $K --moe-every $every: the file's blocks with experts are not $want"
import json, re, struct, sys
b = open(sys.argv[1], 'rb').read()
h = json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])
moe = sorted({int(re.search(r'\.(\d+)\.', k).group(1)) for k in h if '.experts.' in k})
assert moe == [int(x) for x in sys.argv[3].split(',')], moe
assert h['__metadata__']['moe_dense_first'] == sys.argv[2]
PY
        fi
    done
done
# a file with K 2 into a run without it, and the other way round: refused naming the flag
if run_ok $g --moe-experts 4 --moe-dense-first 2 --save "$tmp/k2.st" && run_ok $g --moe-experts 4 --save "$tmp/k0.st"; then
    expect_usage "give --moe-dense-first 2"                  -- $g --moe-experts 4 --load "$tmp/k2.st"
    expect_usage "leave out --moe-dense-first"               -- $g --moe-experts 4 --moe-dense-first 1 --load "$tmp/k0.st"
    run_ok $g --moe-experts 4 --moe-dense-first 2 --load "$tmp/k2.st" || true
    if run_ok sample --load "$tmp/k2.st" --tokens 4; then :; fi
fi
finish "moe-dense-first" "bad values refused; dense-first runs pass --check; files hold the dense blocks and K; a different K is refused"
