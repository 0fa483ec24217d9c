#!/usr/bin/env bash
# zero_qwz.sh — ZeRO++'s qwZ (--zero-qwz, zero3_qwz.c) on the command line:
# ZeRO-3's forward gathers in INT8 blocks of each rank's shard.
#
#  1. Refused (exit 2, naming the flag): without --zero 3, a block of 0, -1,
#     abc or beyond 2^24, --zero-quant-block without --zero-qwz, with
#     --fp8-comm, --zero-hpz or --recompute, and --check at tp, or at pp
#     with the GPT (no one device has a TP rank's units, nor a last stage's
#     head with its own copy of the tied embedding).
#  2. Lossy, as it should be: the first step's loss is not the exact run's,
#     and near it.
#  3. --check passes against one device that quantizes its units as the
#     ZeRO group's shards would, at dp 2, dp 4 with --shard-group 2, cp 2,
#     the llama's pp 2 (its stages' units are one device's) and --overlap
#     (the forward's gathers prefetched); under bf16 its
#     first step equal to the one device's.
#  4. The ZeRO group's bytes equal the printed formula (+ the gradient
#     norm's double) and fall below ZeRO-3's.
#
#   zero_qwz.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

t="train --steps 1 --quiet --dp 2"
expect_usage "--zero-qwz quantizes ZeRO-3's parameter gathers: it needs --zero 3"  -- $t --zero 2 --zero-qwz
for b in 0 -1 abc 99999999999; do
    expect_usage "--zero-quant-block"                                              -- $t --zero 3 --zero-qwz --zero-quant-block "$b"
done
expect_usage "--zero-quant-block 64 is the block qwZ quantizes in: it needs --zero-qwz" -- $t --zero 3 --zero-quant-block 64
expect_usage "--fp8-comm with --zero-qwz"   -- $t --zero 3 --zero-qwz --fp8 tensorwise --fp8-comm
expect_usage "--zero-qwz with --recompute"  -- $t --zero 3 --zero-qwz --recompute
expect_usage "--zero-qwz with --zero-hpz"   -- train --steps 1 --quiet --dp 8 --zero 3 --zero-qwz --zero-hpz --profile hgx-a100-4
expect_usage "--check with --zero-qwz and --tp 2" -- $t --tp 2 --zero 3 --zero-qwz --check
expect_usage "--check with --zero-qwz and --pp 2" -- $t --model gpt --pp 2 --zero 3 --zero-qwz --check

g=(train --model gpt --steps 2 --dp 2 --zero 3)
first() { sed -n 's/^step *1 *loss \([0-9.]*\).*/\1/p' "$out"; }
if run_ok "${g[@]}" && a=$(first) && run_ok "${g[@]}" --zero-qwz --report "$tmp/q.json"; then
    b=$(first)
    cases=$((cases + 1))
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if a != b and abs(a - b) < 1e-2 else 1)" "$a" "$b" ||
        fail "--zero-qwz: step 1's loss $b against the exact run's $a (want different, within 1e-2)"
    expect_out "--zero-qwz: a forward gather of device 0's units puts W = "
    read -r m f w < <(python3 -c 'import json,sys; q=json.load(open(sys.argv[1]))["run"]["qwz_gather_bytes_per_step"]; print(int(q["measured"]), int(q["formula"]), int(q["without_qwz"]))' "$tmp/q.json")
    cases=$((cases + 1))
    [[ $((m - f)) == 8 ]] || fail "--zero-qwz: ZeRO-3 sent $m B a step, the formula $f B + the norm's 8 B"
    cases=$((cases + 1))
    (( m < w )) || fail "--zero-qwz: $m B a step, without it $w B"
fi

check() {
    if run_ok train --steps 2 --batch 16 --check "$@"; then
        grep -q '^check PASSED' "$out" || fail "ptdp train --check $*: $(grep '^check' "$out")"
    fi
}
check --model gpt --dp 2 --zero 3 --zero-qwz --zero-quant-block 100
check --model gpt --dp 4 --shard-group 2 --zero 3 --zero-qwz
check --model llama --dp 2 --cp 2 --zero 3 --zero-qwz --zero-quant-block 64
# pipeline stages: a stage's units are one device's when no tied embedding sits in the head
check --model llama --dp 2 --pp 2 --micro-batches 2 --zero 3 --zero-qwz --zero-quant-block 64
check --model llama --dp 2 --pp 2 --moe-experts 4 --zero 3 --zero-qwz
check --model gpt --dp 2 --micro-batches 2 --overlap --zero 3 --zero-qwz --zero-quant-block 300
# bf16: the check's tolerance is bf16's (1e-2), so hold its first step, before any bf16 sum of
# gradients, to the one device's forward: equal but for float's order (a qwZ forward moves it ~5e-4)
if [[ $(basename "$ptdp") == ptdp ]] && run_ok train --model gpt --steps 2 --batch 16 --check --dp 2 --zero 3 \
       --zero-qwz --zero-quant-block 300 --precision bf16; then
    d=$(awk '$1 == "1" && NF == 4 { print $4 }' "$out")
    cases=$((cases + 1))
    python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1e-6 else 1)" "${d:-1}" ||
        fail "--zero-qwz --precision bf16: step 1 is ${d:-?} from its one device's"
fi

# the precision benchmark's qwZ runs: one device quantizing as N ranks' shards would, so its losses
# are a real ZeRO-3 --zero-qwz run's over N devices (to --check's float tolerance)
expect_usage "--qwz-ranks 4 is the ZeRO group qwZ's blocks follow: it needs --qwz B" -- bench fp8 --steps 2 --qwz-ranks 4
expect_usage "--qwz 0: '0' must be between 1 and 16777216"        -- bench fp8 --steps 2 --qwz 0
expect_usage "--qwz 2K: '2K' is not a whole number"               -- bench fp8 --steps 2 --qwz 2K
expect_usage "--qwz 512,nan: 'nan' is not a whole number"         -- bench fp8 --steps 2 --qwz 512,nan
expect_usage "--qwz-ranks 1: must be between 2 and 65536" -- bench fp8 --steps 2 --qwz 512 --qwz-ranks 1
if run_ok bench fp8 --steps 4 --qwz 512 --qwz-ranks 2 --json && grep '"qwz-512"' "$out" > "$tmp/bench.json" &&
   run_ok train --model gpt --steps 4 --batch 64 --lr 3e-3 --dp 2 --zero 3 --zero-qwz --zero-quant-block 512 \
       --log "$tmp/q.log"; then
    cases=$((cases + 1))
    python3 - "$tmp/bench.json" "$tmp/q.log" <<'PY' || fail "bench fp8 --qwz 512 --qwz-ranks 2: its losses are not the dp 2 --zero-qwz run's"
import json, sys
bench = json.loads(open(sys.argv[1]).read())
assert bench["qwz_block"] == 512 and bench["qwz_ranks"] == 2, bench
run = [json.loads(l)["loss"] for l in open(sys.argv[2]) if l.strip()]
assert len(run) == 4 and all(abs(a - b) <= 1e-4 * max(1, abs(b)) for a, b in zip(bench["loss"], run)), (bench["loss"], run)
PY
fi

finish zero_qwz "qwZ's refusals, its loss, its bytes against the formula, --check at dp, HSDP, cp, pp and --overlap"
