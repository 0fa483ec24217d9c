#!/usr/bin/env bash
# consistency.sh PTDP — every command refuses the same mistakes the same way.
#
#   an output that cannot be   exit 2 before any work, as train's outputs:
#     written                  schedule --svg (figures makes its --out
#                              directory before any figure: exit 1 if it cannot)
#   mpirun without             a command that runs in one process (plan,
#     --backend mpi            sample, demo, selftest, schedule, figures,
#                              bench zero/memory/train/plan) is refused as
#                              train is: N copies of one run help nobody;
#                              rank 0 says so, the others stay silent
#   --load with a typed        a checkpoint's vocabulary padding is fixed: a
#     --vocab-multiple         --vocab-multiple it is no multiple of is refused,
#                              naming both (one that divides it is fine)
set -uo pipefail
# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"
gpt=(--model gpt --hidden 16 --heads 2 --layers 1 --seq-len 8 --batch 4)

# ---- outputs checked up front
expect_usage "--svg /nonexistent/x.svg: cannot be written: the directory /nonexistent does not exist" -- \
    schedule --svg /nonexistent/x.svg
expect_usage "--svg $tmp: cannot be written: it is a directory" -- schedule --svg "$tmp"

# ---- under an MPI launcher, without --backend mpi
run_ok train "${gpt[@]}" --steps 1 --quiet --save "$tmp/gpt.st" || true
launched="was started by an MPI launcher (a world of 2 processes)"
export OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0
expect_usage "add --backend mpi" -- train --steps 1
expect_usage "ptdp plan: this process $launched" -- plan --model gpt --layers 4 --hidden 64 --heads 4 \
    --seq-len 32 --vocab 256 --batch 16 --gpus 8
expect_usage "ptdp sample: this process $launched" -- sample --load "$tmp/gpt.st" --prompt "1+2="
expect_usage "ptdp demo: this process $launched" -- demo --steps 1
expect_usage "ptdp selftest: this process $launched" -- selftest --devices 2
expect_usage "ptdp schedule: this process $launched" -- schedule
expect_usage "ptdp figures: this process $launched" -- figures --out "$tmp/figs"
expect_usage "ptdp bench zero: this process $launched" -- bench zero --layers 1 --hidden 32 --heads 2 \
    --seq-len 16 --batch 8 --dp 2
expect_usage "ptdp bench memory: this process $launched" -- bench memory
expect_usage "ptdp bench collectives: this process $launched" -- bench collectives --devices 2
export OMPI_COMM_WORLD_RANK=1
cases=$((cases + 1))
"$ptdp" plan --gpus 8 >"$out" 2>"$err" </dev/null
status=$?
if [[ $status -eq 2 && ! -s $out && ! -s $err ]]; then echo "ok    rank 1: exit 2, silent"
else fail "rank 1 of ptdp plan under a launcher: exit $status"; fi
unset OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK
[[ -e $tmp/figs ]] && fail "figures under a launcher made its directory"

# ---- --load and --vocab-multiple
run_ok train "${gpt[@]}" --vocab 62 --vocab-multiple 1 --steps 1 --quiet --save "$tmp/v62.st" || true
expect_usage "--vocab-multiple 64 contradicts --load $tmp/v62.st: its vocabulary is padded to 62 rows" -- \
    train "${gpt[@]}" --vocab 62 --load "$tmp/v62.st" --vocab-multiple 64 --steps 2
expect_usage "--vocab-multiple 4 contradicts --load" -- train "${gpt[@]}" --vocab 62 --load "$tmp/v62.st" --vocab-multiple 4 --steps 2
run_ok train "${gpt[@]}" --vocab 62 --load "$tmp/v62.st" --vocab-multiple 2 --steps 2 --quiet && echo "ok    --vocab-multiple 2 divides 62: loads"
run_ok train "${gpt[@]}" --vocab 62 --load "$tmp/v62.st" --steps 2 --quiet && echo "ok    no --vocab-multiple: the checkpoint's padding"

finish consistency "$cases cases: outputs up front, mpirun refused by every one-process command, fixed padding"
