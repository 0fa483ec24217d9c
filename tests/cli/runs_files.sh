#!/usr/bin/env bash
# runs_files.sh PTDP — runs and files: what a run refuses, stops on, or says.
#
#   divergence        a run whose gradient norm leaves its start by more
#                     than the documented factor (train.h) stops at that
#                     step: exit 1 naming the step and the rule, the log
#                     keeps the steps before, a file at --save is untouched
#   ZeRO's summary    the optimizer-state and gradient lines count bytes of
#                     their own element size (bf16 gradients: 2 bytes)
#   host memory       inputs too large for any device are refused with their
#                     size, before the first step
#   messages          each misleading message of the past, now naming the
#                     real cause
#
# The float binary; each case says what it checks.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# run_fail STATUS ARGS...: ptdp ARGS exits STATUS (stdout in $out, stderr in $err)
run_fail() {
    local want=$1
    shift
    cases=$((cases + 1))
    "$ptdp" "$@" >"$out" 2>"$err" </dev/null
    local status=$?
    if [[ $status -ne $want ]]; then
        fail "ptdp $*: exit status $status, expected $want"
        return 1
    fi
    return 0
}
said() { grep -qF -- "$1" "$err"; }

# ---- divergence: AdamW at lr 1e6 blows up without ever leaving float's range
echo "a good checkpoint" >"$tmp/d.st"
if run_fail 1 train --model gpt --layers 1 --hidden 32 --heads 2 --ffn 64 --seq-len 16 --batch 8 \
        --lr 1e6 --steps 6 --save "$tmp/d.st" --log "$tmp/d.json"; then
    if said "step 2: the gradient norm" && said "times the first step's" && said "training diverged" &&
        said "--save not written: the run failed" && [[ $(cat "$tmp/d.st") == "a good checkpoint" ]] &&
        [[ $(wc -l <"$tmp/d.json") -eq 1 ]] && grep -q '"step": 1,' "$tmp/d.json"; then
        echo "ok    a diverging AdamW run: exit 1 at step 2, the log keeps step 1, --save untouched"
    else
        fail "a diverging AdamW run: $(cat "$err"); log: $(cat "$tmp/d.json" 2>/dev/null)"
    fi
fi

# ---- ZeRO's summary in bf16: each state in bytes of its own element.  psi =
# 106240 parameters: AdamW's float master, m and v are 12 psi = 1.22 MiB, a
# quarter of it per device; the gradients' bf16 shard is 2 psi / 4 = 51.88 KiB
if run_ok train --model gpt --dp 4 --zero 1 --precision bf16 --steps 1; then
    has "ZeRO-1 on device 0: optimizer state 311.25 KiB (without ZeRO 1.22 MiB: 1/4 of it)" &&
        echo "ok    bf16 ZeRO-1: the optimizer state without ZeRO is 12 bytes a parameter" ||
        fail "bf16 ZeRO-1's summary counts the optimizer state in other bytes than its own"
fi
if run_ok train --model gpt --dp 4 --zero 2 --precision bf16 --steps 1; then
    has "gradients 271.12 KiB at their peak: the bf16 shard, 1/4 of 207.50 KiB (51.88 KiB), + 219.25 KiB of float gradients of the units in use" &&
        has "optimizer state 311.25 KiB (without ZeRO 1.22 MiB: 1/4 of it)" &&
        echo "ok    bf16 ZeRO-2: the gradients' peak is the bf16 shard plus the float units in use" ||
        fail "bf16 ZeRO-2's summary: the gradients are not 1/4 of anything"
fi
if run_ok train --model gpt --dp 4 --zero 2 --steps 1; then
    has "optimizer state 207.50 KiB (without ZeRO 830.00 KiB: 1/4 of it), gradients 103.75 KiB (1/4 of 415.00 KiB)" &&
        echo "ok    float ZeRO-2: the summary as before" || fail "float ZeRO-2's summary changed"
fi

finish "runs_files.sh" "$cases cases"
