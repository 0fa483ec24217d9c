#!/usr/bin/env bash
# bf16.sh PTDP — `ptdp train --precision bf16` from the command line (the
# float binary; ptdp-f64 is found beside it).
#
#  1. Bad inputs exit 2 naming the flag, nothing on stdout: --precision fp8;
#     ptdp-f64 with --precision bf16 (its master weights would be double);
#     bf16 with --schedule zb-h1 and with --schedule interleaved
#     --virtual-stages 2.
#  2. A good run (dp 2, ZeRO-1, 2 micro-batches) prints the model states as
#     2 + 2 + 12 bytes each, its --report JSON says "store": "bf16" (and
#     parses), and --check passes against a bf16 baseline.
#  3. The activations (act_bf16.h): a GPT run prints a block's in bf16
#     bytes and its report says "acts_store": "bf16" with about half float's
#     "acts_per_block_bytes" (the LayerNorm statistics stay float); 12 steps' --check allows the
#     parameters AdamW's reach (2 lr a step); an arena too small for a
#     block's bf16 buffer stops the run with exit 1 naming it.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors ------------------------------------------------------------------
t="train --steps 1 --quiet"
expect_usage "--precision fp8"                   -- $t --precision fp8
expect_usage "--precision bf16 with --schedule zb-h1" \
                                                 -- $t --precision bf16 --pp 2 --micro-batches 2 --schedule zb-h1
expect_usage "--precision bf16 with --virtual-stages 2" \
                                                 -- $t --precision bf16 --schedule interleaved --virtual-stages 2 --pp 2 --micro-batches 4
f64="$(dirname "$ptdp")/ptdp-f64"
if [[ -x $f64 ]]; then
    ptdp=$f64 expect_usage "--precision bf16"   -- $t --precision bf16
    ptdp=$f64 expect_usage "ptdp-f64"           -- $t --precision bf16
else
    fail "no ptdp-f64 beside $ptdp"
fi

# ---- 2. a good run ----------------------------------------------------------------
if "$ptdp" train --precision bf16 --dp 2 --micro-batches 2 --zero 1 --steps 2 --check --report "$tmp/r.json" \
        >"$out" 2>"$err" </dev/null; then
    grep -qE "^model states on device 0, .* 2 \+ 2 \+ 12 bytes each" "$out" \
        && echo "ok    model states: 2 + 2 + 12 bytes each" || fail "no \"model states … 2 + 2 + 12 bytes each\" line"
    grep -qF "check PASSED" "$out" && grep -qF "bf16 against a bf16 baseline" "$out" \
        && echo "ok    --check passed against a bf16 baseline" || fail "--check did not pass against a bf16 baseline"
    report_config "$tmp/r.json" store '"bf16"'
else
    fail "train --precision bf16 --dp 2 --zero 1: exit status $?"
fi

# float keeps its 4 + 4 + 8 and its store
if "$ptdp" train --dp 2 --steps 1 --report "$tmp/f.json" >"$out" 2>"$err" </dev/null; then
    grep -qE "^model states on device 0, .* 4 \+ 4 \+ 8 bytes each" "$out" && ! grep -qF '"store": "bf16"' "$tmp/f.json" \
        && echo "ok    float: 4 + 4 + 8 bytes each, no bf16 store" || fail "float run: not 4 + 4 + 8, or a bf16 store"
else
    fail "train --dp 2: exit status $?"
fi

# ---- 3. the activations ----------------------------------------------------------
g="train --model gpt --steps 1"
if "$ptdp" $g --precision bf16 --report "$tmp/gb.json" >"$out" 2>"$err" </dev/null &&
        "$ptdp" $g --report "$tmp/gf.json" >/dev/null 2>&1 </dev/null; then
    grep -qE "elements = [0-9.]+ MiB in bf16 \(float LayerNorm statistics\)$" "$out" \
        && echo "ok    a block's activations printed in bf16 bytes" || fail "no \"… MiB in bf16\" activations line"
    bb=$(grep -o '"acts_per_block_bytes": [0-9.e+]*' "$tmp/gb.json" | grep -o '[0-9.e+]*$')
    fb=$(grep -o '"acts_per_block_bytes": [0-9.e+]*' "$tmp/gf.json" | grep -o '[0-9.e+]*$')
    if grep -qF '"acts_store": "bf16"' "$tmp/gb.json" && [[ -n $bb && -n $fb ]] &&
            awk -v b="$bb" -v f="$fb" 'BEGIN { exit !(b > 0 && b < 0.55 * f) }'; then
        echo "ok    --report: acts_store bf16, $bb bytes a block against float's $fb"
    else
        fail "--report: acts_store or acts_per_block_bytes wrong (bf16 '$bb', float '$fb')"
    fi
else
    fail "train --model gpt (--precision bf16): exit status $?"
fi
if "$ptdp" train --model gpt --precision bf16 --steps 12 --check >"$out" 2>"$err" </dev/null; then
    grep -qF "bf16 against a bf16 baseline; parameters 2e-02, AdamW's 2 lr a step)" "$out" \
        && echo "ok    12 steps: the parameters allowed 2 lr a step" || fail "no \"parameters 2e-02\" in --check's verdict"
else
    fail "train --model gpt --precision bf16 --steps 12 --check: exit status $?"
fi
"$ptdp" train --model gpt --precision bf16 --steps 1 --device-mem 20M >"$out" 2>"$err" </dev/null
rc=$?
if [[ $rc -eq 1 ]] && grep -qF "out of memory allocating 'acts.block_bf16'" "$err"; then
    echo "ok    --device-mem 20M: exit 1 naming acts.block_bf16"
else
    fail "--device-mem 20M: exit $rc, stderr: $(head -c 300 "$err")"
fi

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all bf16 command-line checks passed"
