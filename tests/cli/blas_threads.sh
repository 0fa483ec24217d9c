#!/usr/bin/env bash
# blas_threads.sh PTDP — each device's matrix products shared by its threads
# (--blas-threads, src/nn/blas.c) give the same bits whatever their number.
#
#  1. Bad values exit 2 naming the flag, nothing on stdout: 0, abc, 257;
#     with --backend mpi (one thread per process); ptdp demo's and ptdp bench
#     train's.  The help of train, demo and bench train names the flag.
#  2. For --blas-threads 1, 2 and 3 (an odd split), in float (ptdp) and
#     double (ptdp-f64), the MLP under dp 2 × tp 2 and the GPT under tp 2 ×
#     pp 2 and at dp 1, and its mixture of experts and the llama's (the
#     experts' GEMMs one group, queued and run side by side; the router's
#     tokens, the dispatch and combine, GELU and AdamW shared by blocks) at
#     dp 1: the losses and gradient norms of every step (--log,
#     without the wall times) and the checkpoint (--save) are byte for byte
#     those of one thread.  The sizes make every device's large products
#     split into 2 and 3 blocks of rows (at least 3 blocks of 48 rows, each
#     over 2^20 multiply-adds).
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors and help ---------------------------------------------------------
t="train --steps 1 --quiet"
expect_usage "--blas-threads 0: must be between 1 and 256"  -- $t --blas-threads 0
expect_usage "--blas-threads abc: not a whole number"       -- $t --blas-threads abc
expect_usage "--blas-threads 257"                           -- $t --blas-threads 257
expect_usage "--backend mpi"                               -- $t --blas-threads 2 --backend mpi
expect_usage "--blas-threads 0: must be between 1 and 256"  -- demo --blas-threads 0
expect_usage "--blas-threads abc: not a whole number"       -- bench train --blas-threads abc
for cmd in "demo" "bench train"; do
    run_ok $cmd --help && has "--blas-threads N" && echo "ok    ptdp $cmd --help names --blas-threads" \
        || fail "ptdp $cmd --help lacks --blas-threads N"
done
run_ok train --help && has "--blas-threads N" && echo "ok    ptdp train --help names --blas-threads" \
    || fail "ptdp train --help lacks --blas-threads N"

# ---- 2. the same bits for 1, 2 and 3 threads ------------------------------------
mlp="--model mlp --hidden 128 --ffn 512 --layers 2 --batch 576 --steps 3"
gpt="--model gpt --hidden 96 --heads 4 --seq-len 64 --layers 2 --vocab 96 --steps 3"
configs=("$mlp --dp 2 --tp 2"
         "$gpt --batch 12 --tp 2 --pp 2 --micro-batches 2"
         "$gpt --batch 6"
         "$gpt --batch 6 --moe-experts 8 --moe-top-k 2 --moe-capacity-factor 1.25"
         "--model llama --hidden 96 --heads 4 --seq-len 64 --layers 2 --vocab 96 --steps 3 --batch 6 --moe-experts 16 --moe-top-k 4 --moe-shared-experts 1")
f64="$(dirname "$ptdp")/ptdp-f64"
bins=("$ptdp")
[[ -x $f64 ]] && bins+=("$f64")
for bin in "${bins[@]}"; do
    for i in "${!configs[@]}"; do
        c=${configs[$i]}
        for n in 1 2 3; do
            cases=$((cases + 1))
            if ! "$bin" train $c --blas-threads "$n" --quiet --log "$tmp/log$n" --save "$tmp/ckpt$n" \
                    >"$out" 2>"$err" </dev/null; then
                fail "$(basename "$bin") train $c --blas-threads $n failed"
                continue
            fi
            # Every key of each step but the wall time.
            sed 's/, "wall_s": [^,}]*//' "$tmp/log$n" >"$tmp/steps$n"
            if [[ $n -gt 1 ]]; then
                if cmp -s "$tmp/steps1" "$tmp/steps$n" && cmp -s "$tmp/ckpt1" "$tmp/ckpt$n"; then
                    echo "ok    $(basename "$bin") $c: --blas-threads $n = 1, losses and checkpoint bit for bit"
                else
                    fail "$(basename "$bin") train $c: --blas-threads $n differs from 1"
                    diff "$tmp/steps1" "$tmp/steps$n" | head -n 6
                fi
            fi
        done
    done
done
# --report says how many threads each device's products had
if run_ok train --steps 1 --blas-threads 2 --report "$tmp/threads.json"; then
    report_config "$tmp/threads.json" blas_threads 2
fi
finish blas_threads "$cases cases"
