#!/usr/bin/env bash
# fp8_train.sh PTDP — `ptdp train --fp8 R` (fp8_linear.h) from the command line.
#
#  1. Bad input exits 2 naming the flag, nothing on stdout: an unknown recipe
#     or format, --fp8-grad-format or --fp8-amax-history without --fp8, a
#     history with a recipe that keeps none, a history of 0, negative or not a
#     number; a tiled recipe whose tile a TP split would cut (the GPT's c_attn
#     at --tp 2, the llama's wk), one scale a tensor with --ep or token slices,
#     delayed with DualPipe's two copies or a checkpoint's history of another
#     length, the llama at --tp > kv heads.
#  2. The run says what it quantizes in what, and --report's config has
#     fp8, fp8_grad_format (and fp8_amax_history for delayed).
#  3. FP8 changes the numbers: the first step's loss differs from float's,
#     and --fp8-grad-format e4m3 from e5m2's.
#  4. --check passes (1e-10 in double; float: 1e-3, parameters AdamW's
#     2 lr a step) at tp 2 with SP, CP 2, pp 2, ZeRO-3, a mixture over
#     --ep 2, the llama at tp 2, DualPipeV's V, each recipe at least once.
#  5. --fp8-comm (EP's dispatch in FP8): the same checkpoint bytes and
#     losses as without it, EP's bytes equal to their formula and fewer.
#     ZeRO-3's gathers in FP8 (zero3_fp8.c): the same checkpoint bytes at
#     dp 2 x tp 2 for a one-scale and a tiled recipe, the ZeRO group's bytes
#     equal to the formula with codes and amaxes (+ the norm's double) and
#     fewer; --check with it; refused beside --zero-hpz.
#  6. delayed scaling's histories go into the checkpoint: 2 + 2 steps through
#     it are 4 steps' bytes; a damaged count exits 1.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. exit 2 ------------------------------------------------------------------
t="train --steps 1 --quiet"
expect_usage "--fp8 fast: must be one of tensorwise, blockwise, mxfp8, delayed" -- $t --fp8 fast
expect_usage "--fp8-grad-format e4m4: must be one of e4m3, e5m2" -- $t --fp8 tensorwise --fp8-grad-format e4m4
expect_usage "--fp8-grad-format e4m3 chooses the gradients' FP8 format: it needs --fp8 R" -- $t --fp8-grad-format e4m3
expect_usage "--fp8-amax-history 4 is delayed scaling's: it needs --fp8 delayed" -- $t --fp8-amax-history 4
expect_usage "--fp8-amax-history 4 is delayed scaling's, and --fp8 mxfp8 keeps no history" -- $t --fp8 mxfp8 \
    --fp8-amax-history 4
for h in 0 -1 abc 1.5; do
    expect_usage "--fp8-amax-history" -- $t --fp8 delayed --fp8-amax-history "$h"
done
expect_usage "--fp8 blockwise with --tp 2: c_attn.weight (192 x 64) is split by rows, each rank 32 of every 64 rows" \
    -- $t --model gpt --fp8 blockwise --tp 2
expect_usage "--fp8 mxfp8 with --tp 2: attention.wk.weight (32 x 64) is split by rows" -- $t --model llama --fp8 mxfp8 --tp 2
expect_usage "--fp8 tensorwise with --ep 2: one scale covers an expert's input of one micro-batch" \
    -- $t --model gpt --moe-experts 4 --dp 2 --ep 2 --fp8 tensorwise
expect_usage "--fp8 delayed with --token-slices 2" -- $t --model gpt --pp 2 --token-slices 2 --fp8 delayed
expect_usage "--fp8 delayed with --schedule dualpipe: each block's step amax would come from two copies" -- $t --pp 2 --micro-batches 4 --schedule dualpipe --fp8 delayed
"$ptdp" train --steps 1 --quiet --fp8 delayed --fp8-amax-history 3 --save "$tmp/ck.st" >/dev/null 2>&1 ||
    fail "ptdp train --fp8 delayed --save: a checkpoint to load"
expect_usage "--fp8 delayed keeps 16 steps of amax history, and the checkpoint's fp8.amax_history keeps 3: give --fp8-amax-history 3" \
    -- $t --load "$tmp/ck.st" --fp8 delayed
expect_usage "--fp8 tensorwise with --tp 4 > --kv-heads 2" -- $t --model llama --kv-heads 2 --ffn 256 --vocab 64 --tp 4 \
    --fp8 tensorwise

expect_usage "--fp8-comm sends FP8 codes where --fp8 R computes with them: it needs --fp8 blockwise or mxfp8" -- $t \
    --fp8-comm
expect_usage "--fp8-comm sends expert parallelism's dispatch in FP8, each row by its own tiles: it needs --ep 2" \
    -- $t --fp8 blockwise --fp8-comm --dp 2
expect_usage "or ZeRO-3's parameter gather in FP8: --zero 3" -- $t --fp8 tensorwise --fp8-comm --dp 2 --zero 2
expect_usage "--fp8-comm with --zero-hpz" -- $t --fp8 tensorwise --fp8-comm --dp 8 --zero 3 --zero-hpz \
    --profile hgx-a100-4
expect_usage "--fp8-comm sends expert parallelism's dispatch in FP8" -- $t --model gpt --moe-experts 4 --dp 2 --ep 2 \
    --fp8 delayed --fp8-comm

# ---- 2. what it says and reports ------------------------------------------------------
if run_ok train --model gpt --steps 1 --fp8 delayed --fp8-amax-history 4 --report "$tmp/r.json"; then
    expect_out "fp8 delayed: every linear layer's X and W in e4m3 (max 448), dY in e5m2 (max 57344)" \
        "from the largest amax of the last 4 steps" "the head, router, norms, softmax, loss and optimizer stay in float"
    report_config "$tmp/r.json" fp8 '"delayed"'
    report_config "$tmp/r.json" fp8_grad_format '"e5m2"'
    report_config "$tmp/r.json" fp8_amax_history 4
fi
if run_ok train --model gpt --steps 1 --fp8 blockwise --fp8-grad-format e4m3 --report "$tmp/r.json"; then
    expect_out "dY in e4m3 (max 448)" "a scale per tile: X and dY 1x128, W 128x128"
    report_config "$tmp/r.json" fp8_grad_format '"e4m3"'
fi
run_ok train --model gpt --steps 1 --report "$tmp/plain.json" && grep -q '"fp8' "$tmp/plain.json" &&
    fail "a run without --fp8 reports fp8 keys"

# ---- 3. the numbers move ------------------------------------------------------------
loss1() { sed -n 's/^step *1 *loss \([0-9.]*\).*/\1/p' "$out"; }
run_ok train --model gpt --steps 1 && float=$(loss1)
run_ok train --model gpt --steps 1 --fp8 tensorwise && e5=$(loss1)
run_ok train --model gpt --steps 1 --fp8 tensorwise --fp8-grad-format e4m3 && e4=$(loss1)
cases=$((cases + 1))
[[ -n ${float:-} && -n ${e5:-} && $float != "$e5" ]] || fail "--fp8 tensorwise: step 1's loss ${e5:-?} is float's ${float:-?}"
run_ok train --model gpt --steps 2 --fp8 tensorwise && e5=$(sed -n 's/^step *2 *loss \([0-9.]*\).*/\1/p' "$out")
run_ok train --model gpt --steps 2 --fp8 tensorwise --fp8-grad-format e4m3 &&
    e4=$(sed -n 's/^step *2 *loss \([0-9.]*\).*/\1/p' "$out")
cases=$((cases + 1))
[[ -n ${e4:-} && $e4 != "$e5" ]] || fail "--fp8-grad-format e4m3: step 2's loss ${e4:-?} is e5m2's ${e5:-?}"

# ---- 4. like one device -------------------------------------------------------------
check() {
    if run_ok train --steps 2 --batch 16 --check "$@"; then
        grep -q '^check PASSED' "$out" || fail "ptdp train --check $*: $(grep '^check' "$out")"
    fi
}
check --model gpt --fp8 tensorwise --tp 2 --sp
check --model gpt --fp8 delayed --dp 2 --micro-batches 2
check --model gpt --fp8 mxfp8 --cp 2
check --model gpt --fp8 blockwise --pp 2 --micro-batches 2
check --model gpt --fp8 delayed --dp 2 --zero 3
check --model gpt --moe-experts 4 --fp8 blockwise --dp 2 --ep 2
check --model llama --fp8 tensorwise --tp 2
check --model mlp --fp8 delayed --dp 2 --tp 2
check --model mlp --fp8 delayed --pp 2 --layers 4 --micro-batches 4 --schedule dualpipev

# ---- 6. delayed scaling's histories in the checkpoint ------------------------------------
# 2 steps, saved, 2 more loaded: the bytes of 4 steps straight; the tensor's shape is 3P x (H + 1);
# a damaged count is refused (exit 1); other recipes load the file and leave the histories be.
d=(train --model gpt --fp8 delayed --fp8-amax-history 3 --quiet)
if run_ok "${d[@]}" --steps 4 --save "$tmp/whole.st" && run_ok "${d[@]}" --steps 2 --save "$tmp/half.st" &&
   run_ok "${d[@]}" --steps 2 --load "$tmp/half.st" --save "$tmp/end.st"; then
    cases=$((cases + 1))
    cmp -s "$tmp/whole.st" "$tmp/end.st" || fail "--fp8 delayed: 2 + 2 steps through a checkpoint differ from 4"
fi
run_ok train --model gpt --fp8 tensorwise --quiet --steps 1 --load "$tmp/end.st"
if command -v python3 >/dev/null; then
    python3 - "$tmp/end.st" "$tmp/bad.st" <<'PY' || fail "the checkpoint's fp8.amax_history: not 3P x (H + 1) with counts of 4 steps"
import json, struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
t = json.loads(b[8:8 + n])['fp8.amax_history']
rows, cols = t['shape']
assert cols == 4 and rows % 3 == 0, t['shape']
at = 8 + n + t['data_offsets'][0]
size = 4 if t['dtype'] == 'F32' else 8
fmt = '<f' if size == 4 else '<d'
counts = [struct.unpack_from(fmt, b, at + r * cols * size)[0] for r in range(rows)]
assert set(counts) == {0.0, 3.0}, sorted(set(counts))   # 4 steps, 3 kept; the norms and the head 0
struct.pack_into(fmt, b, at + counts.index(3.0) * cols * size, 9.0)   # a count beyond H
open(sys.argv[2], 'wb').write(b)
PY
    run_status 1 "${d[@]}" --steps 1 --load "$tmp/bad.st" &&
        { grep -q "fp8.amax_history' row .*: not a count in 0..3" "$err" || fail "a damaged history: $(head -n 1 "$err")"; }
fi

# ---- 5. the dispatch in FP8 ------------------------------------------------------------
# The same bits (checkpoint bytes, losses) with and without --fp8-comm; EP's bytes measured equal
# to their formula, and fewer: each forward dispatch row C codes + a scale instead of C reals.
moe=(train --model gpt --moe-experts 4 --dp 4 --ep 2 --steps 2 --fp8 mxfp8)
ep_bytes() { python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["run"]["ep_bytes_per_step"]; print(b["measured"], b["formula"])' "$1"; }
if run_ok "${moe[@]}" --save "$tmp/a.st" --report "$tmp/a.json" && cp "$out" "$tmp/a.out" &&
   run_ok "${moe[@]}" --fp8-comm --save "$tmp/b.st" --report "$tmp/b.json"; then
    expect_out "--fp8-comm: the forward dispatch sends a row as C codes of 1 B + 2 scales (1x32 tiles)"
    report_config "$tmp/b.json" fp8_comm true
    cases=$((cases + 1))
    cmp -s "$tmp/a.st" "$tmp/b.st" || fail "--fp8-comm: the checkpoint differs from the same run's without it"
    cases=$((cases + 1))
    [[ $(grep '^step' "$tmp/a.out" | sed 's/virtual.*//') == $(grep '^step' "$out" | sed 's/virtual.*//') ]] ||
        fail "--fp8-comm: the steps' losses differ from the run's without it"
    if command -v python3 >/dev/null; then
        read -r am af < <(ep_bytes "$tmp/a.json")
        read -r bm bf < <(ep_bytes "$tmp/b.json")
        cases=$((cases + 1))
        [[ $bm == "$bf" && $am == "$af" ]] || fail "EP bytes measured $am / $bm against the formula $af / $bf"
        cases=$((cases + 1))
        (( bm < am )) || fail "--fp8-comm: EP sent $bm B a step, without it $am B"
    fi
fi
check --model gpt --moe-experts 4 --fp8 blockwise --fp8-comm --dp 2 --ep 2

# ZeRO-3's gathers in FP8: the same bits, the bytes of the formula, fewer than without.
gather_bytes() { python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["run"]["fp8_gather_bytes_per_step"]; print(b["measured"], b["formula"], b["without_fp8"])' "$1"; }
for r in delayed mxfp8; do   # delayed: without hold its history would record the codes' amax
    z3=(train --model gpt --zero 3 --dp 2 --tp 2 --steps 2 --fp8 "$r")
    if run_ok "${z3[@]}" --save "$tmp/z3a.st" && run_ok "${z3[@]}" --fp8-comm --save "$tmp/z3b.st" --report "$tmp/z3.json"; then
        expect_out "--fp8-comm: a gather of device 0's units sends its q = "
        cases=$((cases + 1))
        cmp -s "$tmp/z3a.st" "$tmp/z3b.st" || fail "--fp8 $r --fp8-comm --zero 3: the checkpoint differs from the run's without it"
        if command -v python3 >/dev/null; then
            read -r gm gf gw < <(gather_bytes "$tmp/z3.json")
            cases=$((cases + 1))
            [[ $((gm - gf)) == 8 ]] || fail "--fp8 $r: ZeRO-3 sent $gm B a step, the formula $gf B + the norm's 8 B"
            cases=$((cases + 1))
            (( gm * 3 < gw * 2 )) || fail "--fp8 $r: ZeRO-3 sent $gm B a step in FP8, $gw B without: not a third less"
        fi
    fi
done
check --model gpt --zero 3 --dp 2 --fp8 delayed --fp8-comm --overlap

finish fp8_train "--fp8's refusals, its line and report keys, its numbers, --check at ten layouts, the FP8 dispatch's and ZeRO-3 gather's bits and bytes"
