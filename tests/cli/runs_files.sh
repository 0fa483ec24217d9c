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

# run_fail STATUS ARGS...: ptdp ARGS exits STATUS (usage_lib.sh's run_status)
run_fail() { run_status "$@"; }
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
# The float gradients on top are the tied embeddings' (T C + V C = 6144,
# held from the head's backward to the embedding's) and one subunit's, the
# largest linear layer of a block with its LayerNorm: c_fc and ln_2,
# F C + F + 2C = 16768 — 22912 floats, 89.50 KiB (a whole block's, 49984,
# before bf16 widened a block a linear layer at a time).
if run_ok train --model gpt --dp 4 --zero 2 --precision bf16 --steps 1; then
    has "gradients 141.38 KiB at their peak: the bf16 shard, 1/4 of 207.50 KiB (51.88 KiB), + 89.50 KiB of float gradients of the units in use" &&
        has "optimizer state 311.25 KiB (without ZeRO 1.22 MiB: 1/4 of it)" &&
        echo "ok    bf16 ZeRO-2: the gradients' peak is the bf16 shard plus the float units in use" ||
        fail "bf16 ZeRO-2's summary: the gradients are not 1/4 of anything"
fi
if run_ok train --model gpt --dp 4 --zero 2 --steps 1; then
    has "optimizer state 207.50 KiB (without ZeRO 830.00 KiB: 1/4 of it), gradients 103.75 KiB (1/4 of 415.00 KiB)" &&
        echo "ok    float ZeRO-2: the summary as before" || fail "float ZeRO-2's summary changed"
fi

# ---- host memory: --data read once on the host and refused past its limit;
# an embedding padded past its limit refused with its size, before any work
truncate -s 1073741825 "$tmp/huge.txt"
expect_usage "--data $tmp/huge.txt: 1073741825 bytes, more than the 1073741824 bytes (1 GiB) allowed" -- \
    train --model gpt --data "$tmp/huge.txt" --steps 1
rm -f "$tmp/huge.txt"
expect_usage "is 67108864 rows: an embedding of 67108864 x --hidden 64 = 4294967296 elements, more than the 268435456 a run holds" -- \
    train --model gpt --vocab-multiple 1048576 --tp 64 --heads 64 --ffn 256 --steps 1
# 8 MB of text at dp 4: the host holds it once, where a copy per device
# would hold 4 more (+ 32 MB; without meson's MALLOC_PERTURB_, which
# writes every block malloc hands out)
if command -v /usr/bin/time >/dev/null; then
    head -c 8000000 /dev/zero | tr '\0' 'a' >"$tmp/t8.txt"
    for dp in 1 4; do
        env -u MALLOC_PERTURB_ /usr/bin/time -f "%M" -o "$tmp/rss$dp" "$ptdp" train --model gpt --dp $dp --batch 8 --steps 1 --quiet \
            --layers 1 --hidden 16 --heads 1 --seq-len 8 --data "$tmp/t8.txt" >/dev/null 2>&1
    done
    cases=$((cases + 1))
    grow=$(($(cat "$tmp/rss4") - $(cat "$tmp/rss1")))
    if ((grow < 16000)); then
        echo "ok    --data at dp 4 grows the host's memory by $grow KB over dp 1: one copy, not one per device"
    else
        fail "--data at dp 4 grows the host's memory by $grow KB over dp 1: copied per device"
    fi
fi

# ---- messages that name the real cause
expect_usage "--lr nan: not a number (NaN)" -- train --lr nan
expect_usage "--clip-grad inf: infinite" -- train --clip-grad inf
printf 'a' >"$tmp/one.txt"
expect_usage "--seq-len 2: the data has 1 token, too few for any sequence" -- train --model gpt --data "$tmp/one.txt" --seq-len 2
if run_ok train --model gpt --data /proc/cpuinfo --steps 1 --quiet --layers 1 --hidden 16 --heads 1 --seq-len 8 --batch 2; then
    has "tokens (/proc/cpuinfo)" && echo "ok    --data /proc/cpuinfo: read to its end (stat says 0 bytes)" ||
        fail "--data /proc/cpuinfo not read"
fi
if run_ok train --steps 0 --report "$tmp/r0.json"; then
    grep -q '"first_loss": null, "last_loss": null' "$tmp/r0.json" &&
        echo "ok    --steps 0 --report: no loss is null, not 0" || fail "--steps 0 --report: $(grep first_loss "$tmp/r0.json")"
fi
if run_ok bench zero --help; then
    has "the model (default gpt)" && echo "ok    bench zero --help: the GPT is its default" ||
        fail "bench zero --help names another default model"
fi
# a checkpoint whose metadata a hand edited: the file named, not a flag
if run_ok train --model gpt --steps 1 --quiet --layers 1 --hidden 16 --heads 2 --seq-len 8 --batch 2 --save "$tmp/g.st" &&
    command -v python3 >/dev/null; then
    python3 - "$tmp" <<'PY'
import json, struct, sys
d = sys.argv[1]
b = open(d + '/g.st', 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
for key, value, name in [('vocab_padded', '99999999999', 'vp'), ('heads', '3', 'h3')]:
    g = json.loads(json.dumps(h))
    g['__metadata__'][key] = value
    s = json.dumps(g).encode()
    s += b' ' * ((8 - len(s) % 8) % 8)
    open('%s/%s.st' % (d, name), 'wb').write(struct.pack('<Q', len(s)) + s + b[8 + n:])
PY
    run_fail 1 train --model gpt --load "$tmp/vp.st" --steps 1 &&
        { said "--load $tmp/vp.st: metadata 'vocab_padded' is 99999999999, out of range" && ! said "--vocab-multiple" &&
            echo "ok    vocab_padded past int in a checkpoint: the field named, no flag" || fail "vocab_padded 99999999999"; }
    run_fail 1 sample --load "$tmp/h3.st" --prompt "1+1=" &&
        { said "--load $tmp/h3.st: its metadata are no model ptdp can build" &&
            echo "ok    ptdp sample on metadata that are no model: the file named" || fail "sample on heads 3"; }
fi
expect_usage "--layers 3 cannot be cut into --pp 2 x --virtual-stages 2 = 4 pieces" -- \
    plan --model gpt --layers 3 --hidden 64 --heads 4 --seq-len 32 --vocab 62 --batch 8 --gpus 4 \
    --profile dgx-a100 --pp 2 --schedule interleaved --virtual-stages 2
# the host running out while each device builds a schedule of 2^20 micro-batches.  One BLAS
# thread, as every device runs: OpenBLAS's own pool (started when the library loads, one
# thread a core) allocates its buffers lazily, and under an address-space limit glibc's malloc
# can spin in alloc_new_heap in that thread while exit() waits to join it.
cases=$((cases + 1))
(ulimit -v 300000 && OPENBLAS_NUM_THREADS=1 timeout 60 "$ptdp" train --pp 2 --micro-batches 1048576 \
    --batch 1048576 --device-mem 64M --steps 1 --quiet) >/dev/null 2>"$err" </dev/null
if said "host out of memory building the 1f1b schedule"; then
    echo "ok    a schedule the host has no memory for: said so, not \"invalid argument\""
elif said "invalid argument"; then
    fail "a schedule the host has no memory for is blamed on the arguments"
else
    echo "note  the schedule did not run out of memory under ulimit -v here: $(tail -n 1 "$err")"
fi

finish "runs_files.sh" "$cases cases"
