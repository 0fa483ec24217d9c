#!/usr/bin/env bash
# zero_qgz.sh — ZeRO++'s qgZ (--zero-qgz, zero3_qgz.c) on the command line:
# ZeRO-3's gradient reduce-scatter as two all-to-alls of INT4/INT8 codes,
# inside the node (the profile's), then across nodes.
#
#  1. Refused (exit 2, naming the flag): bits other than 4 and 8, bits
#     without --zero-qgz, without --zero 3 (naming the stage), without a
#     cluster profile, nodes that do not cut ZeRO's group into two or more,
#     with bf16, --overlap, --cp, --ep; --check at tp or pp, or with a batch
#     the ranks' micro-batches do not split evenly; the benchmark's bad
#     --qgz values.
#  2. Lossy, as it should be: the second step's loss is not the exact
#     run's, and near it.
#  3. Its bytes: each link level's measured bytes equal the printed formula
#     (a slot a unit, M (k-1) m X inside the node, M (m-1) X across), the
#     codes cover the parameters, and the cross-node bytes fall below the
#     reduce-scatter's.
#  4. --check passes against one device that sums each rank's micro-batch
#     gradient through the same quantizations (INT4 and INT8, micro-batches,
#     HSDP, with qwZ and hpZ, --recompute, the llama).
#  5. The benchmark's qgZ run is the dp 8 run's losses.
#
#   zero_qgz.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

t="train --model gpt --steps 1 --quiet --dp 8 --profile hgx-a100-4"
for b in 2 3 16; do
    expect_usage "--zero-qgz-bits $b: qgZ sends INT4 or INT8 codes; use 4 or 8" -- $t --zero 3 --zero-qgz --zero-qgz-bits "$b"
done
for b in 0 abc; do
    expect_usage "--zero-qgz-bits"                                               -- $t --zero 3 --zero-qgz --zero-qgz-bits "$b"
done
expect_usage "--zero-qgz-bits 8 is the bits qgZ's gradient codes take: it needs --zero-qgz" -- $t --zero 3 --zero-qgz-bits 8
expect_usage "--zero-qgz replaces ZeRO-3's gradient reduce-scatter: it needs --zero 3; --zero is 2" -- $t --zero 2 --zero-qgz
expect_usage "--zero-qgz sums gradients inside a node before they cross nodes: it needs a cluster profile" -- \
    train --steps 1 --quiet --dp 8 --zero 3 --zero-qgz
expect_usage "--zero-qgz: nodes of --profile hgx-a100-4 (4 GPUs a node / --tp 1)" -- \
    train --steps 1 --quiet --dp 4 --zero 3 --zero-qgz --profile hgx-a100-4
expect_usage "--zero-qgz: nodes of --profile dgx-h100 (8 GPUs a node / --tp 2)" -- \
    train --steps 1 --quiet --dp 4 --tp 2 --zero 3 --zero-qgz --profile dgx-h100
expect_usage "--zero-quant-block 64 is the block qwZ quantizes in: it needs --zero-qwz (or --zero-qgz" -- \
    $t --zero 3 --zero-quant-block 64
expect_usage "--zero-qgz with --overlap"       -- $t --zero 3 --zero-qgz --overlap
expect_usage "--zero-qgz with --cp 2"          -- $t --zero 3 --zero-qgz --cp 2
expect_usage "--zero-qgz with --ep 2"          -- $t --zero 3 --zero-qgz --moe-experts 4 --ep 2
if [[ $(basename "$ptdp") == ptdp ]]; then   # bf16 is the float build's
    expect_usage "--zero-qgz with --precision bf16" -- $t --zero 3 --zero-qgz --precision bf16
fi
expect_usage "--check with --zero-qgz and --tp 2" -- $t --tp 2 --zero 3 --zero-qgz --check
expect_usage "--check with --zero-qgz and --pp 2" -- $t --pp 2 --zero 3 --zero-qgz --check
expect_usage "--check with --zero-qgz: its one device runs each rank's micro-batches apart, dp x M = 16" -- \
    $t --zero 3 --zero-qgz --check --batch 24 --micro-batches 2

# 2. lossy: the first step's loss is the exact run's (the same parameters), the second is not
g=(train --model gpt --steps 2 --batch 16 --dp 8 --zero 3 --profile hgx-a100-4)
second() { sed -n 's/^step *2 *loss \([0-9.]*\).*/\1/p' "$out"; }
if run_ok "${g[@]}" && a=$(second) && run_ok "${g[@]}" --zero-qgz --report "$tmp/q.json"; then
    b=$(second)
    cases=$((cases + 1))
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if a != b and abs(a - b) < 0.1 else 1)" "$a" "$b" ||
        fail "--zero-qgz: step 2's loss $b against the exact run's $a (want different, within 0.1)"
    expect_out "ZeRO++ qgZ, INT4 codes in blocks of B = 2048, ZeRO-3's group of N = 8 in m = 2 nodes of k = 4"
    # 3. the bytes of each link level against the printed formula, by the report's numbers
    cases=$((cases + 1))
    python3 - "$tmp/q.json" <<'PY' || fail "--zero-qgz: its bytes by link level (above)"
import json, sys
r = json.load(open(sys.argv[1]))
q, S = r["run"]["qgz_grad_bytes_per_step"], r["devices"][0]["param_elements"]
N, k, m, M, X = 8, 4, 2, 1, q["slot_bytes"]
inside, across = q["inside_node"], q["across_nodes"]
assert r["config"]["zero_qgz"] == {"bits": 4, "block": 2048, "node": 4}, r["config"]["zero_qgz"]
assert inside["measured"] == inside["formula"] == M * (k - 1) * m * X, inside
assert across["measured"] == across["formula"] == M * (m - 1) * X, across
assert X * N * 2 >= S, (X, S)   # INT4: half a byte a parameter, at least
assert across["reduce_scatter"] == M * (N - 1) / N * S * r["real_bytes"], across
assert across["measured"] * 4 < across["reduce_scatter"], across
PY
fi

# 4. --check: the one device sums each rank's gradient as the all-to-alls do
check() {   # check BATCH FLAGS...
    local batch=$1
    shift
    if run_ok train --steps 2 --batch "$batch" --check --profile hgx-a100-4 --zero 3 --zero-qgz "$@"; then
        grep -q '^check PASSED' "$out" || fail "ptdp train --check $*: $(grep '^check' "$out")"
    fi
}
check 16 --model gpt --dp 8 --zero-quant-block 100
check 16 --model gpt --dp 8 --micro-batches 2 --zero-qgz-bits 8
check 32 --model gpt --dp 16 --shard-group 8 --zero-quant-block 300
check 16 --model gpt --dp 8 --zero-qwz --zero-quant-block 100
check 16 --model gpt --dp 8 --zero-hpz --recompute
check 16 --model llama --dp 8 --zero-quant-block 64

# 5. the benchmark's qgZ runs: one device summing as N ranks' all-to-alls would, so its losses are a
# real ZeRO-3 --zero-qgz run's over N devices
expect_usage "--qgz 2: qgZ sends INT4 or INT8 codes; use 4, 8 or 4,8"       -- bench fp8 --steps 2 --qgz 2
expect_usage "--qgz-ranks 4 is the ZeRO group qgZ's all-to-alls sum over: it needs --qgz b" -- bench fp8 --steps 2 --qgz-ranks 4
expect_usage "--qgz-node 3 must cut --qgz-ranks 8 into two or more nodes"   -- bench fp8 --steps 2 --qgz 4 --qgz-node 3
expect_usage "--qgz: --batch 20 must split evenly into --qgz-ranks 8 ranks' micro-batches (8)" -- \
    bench fp8 --steps 2 --qgz 4 --batch 20
if run_ok bench fp8 --steps 4 --qgz 8 --json && grep '"qgz-int8"' "$out" > "$tmp/bench.json" &&
   run_ok train --model gpt --steps 4 --batch 64 --lr 3e-3 --dp 8 --zero 3 --zero-qgz --zero-qgz-bits 8 \
       --profile hgx-a100-4 --log "$tmp/q.log"; then
    cases=$((cases + 1))
    python3 - "$tmp/bench.json" "$tmp/q.log" <<'PY' || fail "bench fp8 --qgz 8: its losses are not the dp 8 --zero-qgz run's"
import json, sys
bench = json.loads(open(sys.argv[1]).read())
assert bench["qgz_bits"] == 8 and bench["qgz_ranks"] == 8 and bench["qgz_node"] == 4, bench
run = [json.loads(l)["loss"] for l in open(sys.argv[2]) if l.strip()]
assert len(run) == 4 and all(abs(a - b) <= 1e-4 * max(1, abs(b)) for a, b in zip(bench["loss"], run)), (bench["loss"], run)
PY
fi

finish zero_qgz "qgZ's refusals, its loss, its bytes by link level against the formula, --check, the benchmark"
