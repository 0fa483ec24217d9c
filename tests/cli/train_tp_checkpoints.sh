#!/usr/bin/env bash
# train_tp_checkpoints.sh PTDP — tensor parallelism from the command line.
#
# 1. Checkpoints hold whole tensors, so they re-shard:
#      A = 3 steps at --tp 2;  B = A + 3 steps at --tp 4;  C = 6 steps at --tp 1
#    The resumed run's steps 4..6 must log the same loss and gradient norm as
#    the straight run's, and B and C must then train on identically (two more
#    steps from each: the loss of step 7 is a function of the parameters, that
#    of step 8 of the optimizer moments too).
# 2. --check passes with dropout on (tp 2 and 4, dp 2) and with a tp that is
#    not a power of two (--tp 5 --ffn 20 --classes 10).
# 3. A --tp that does not divide --ffn and --classes is a usage error (exit 2)
#    naming --tp and the valid values, with nothing on stdout.
#
# Tolerance: 1e-10 for ptdp-f64, 1e-4 for the float build (--check's).
set -uo pipefail

ptdp=${1:?usage: train_tp_checkpoints.sh PATH_TO_PTDP}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
cases=0
model=(--d-in 8 --hidden 16 --ffn 32 --layers 2 --classes 8 --batch 16 --lr 1e-2 --seed 7 --quiet)

fail() {
    failures=$((failures + 1))
    echo "FAIL  $*"
}

# run NAME ARGS...: ptdp train ARGS, which must succeed
run() {
    local name=$1
    shift
    cases=$((cases + 1))
    if "$ptdp" train "$@" >"$dir/$name.out" 2>"$dir/$name.err" </dev/null; then
        echo "ok    ptdp train $*"
    else
        fail "ptdp train $* exited $?"
        sed 's/^/      /' "$dir/$name.out" "$dir/$name.err"
    fi
}

run A "${model[@]}" --tp 2 --steps 3 --save "$dir/A.safetensors"
if grep -q '(f64)' "$dir/A.out"; then tol=1e-10; else tol=1e-4; fi
run B "${model[@]}" --tp 4 --steps 3 --load "$dir/A.safetensors" --save "$dir/B.safetensors" --log "$dir/B.jsonl"
run C "${model[@]}" --tp 1 --steps 6 --save "$dir/C.safetensors" --log "$dir/C.jsonl"
run B2 "${model[@]}" --tp 2 --steps 2 --load "$dir/B.safetensors" --log "$dir/B2.jsonl"
run C2 "${model[@]}" --tp 1 --steps 2 --load "$dir/C.safetensors" --log "$dir/C2.jsonl"

# field FILE STEP NAME: a number from the --log JSON lines
field() {
    sed -n "s/.*\"step\": $2,.*\"$3\": \([^,}]*\).*/\1/p" "$1"
}

# same FILE_A FILE_B STEP: loss and grad_norm of STEP agree to tol * max(1, |b|)
same() {
    cases=$((cases + 1))
    local ok=1
    for f in loss grad_norm; do
        local a b
        a=$(field "$1" "$3" $f)
        b=$(field "$2" "$3" $f)
        if [[ -z $a || -z $b ]] ||
           ! awk -v a="$a" -v b="$b" -v t="$tol" 'BEGIN { d = a - b; if (d < 0) d = -d;
                 m = b < 0 ? -b : b; if (m < 1) m = 1; exit !(d <= t * m) }'; then
            fail "step $3 $f: $(basename "$1") has '${a}', $(basename "$2") '${b}' (tolerance $tol)"
            ok=0
        fi
    done
    [[ $ok -eq 1 ]] && echo "ok    step $3: $(basename "$1") = $(basename "$2") (loss $(field "$1" "$3" loss))"
}

# the resumed run starts at step 4 and matches the straight run there
for s in 4 5 6; do same "$dir/B.jsonl" "$dir/C.jsonl" $s; done
cases=$((cases + 1))
if [[ -n $(field "$dir/B.jsonl" 1 loss) ]]; then
    fail "the run resumed from a 3-step checkpoint logged a step 1"
fi
# B and C hold the same parameters and optimizer state
for s in 7 8; do same "$dir/B2.jsonl" "$dir/C2.jsonl" $s; done

# --check with dropout, and a tp of 5
# (each flag once: a flag given twice is a usage error, so the tp-5 case
# names its own --ffn and --classes instead of the model's)
model5=(--d-in 8 --hidden 16 --layers 2 --batch 16 --lr 1e-2 --seed 7 --quiet --ffn 20 --classes 10)
for args in "--tp 2 --dp 2 --dropout 0.1" "--tp 4 --dp 2 --dropout 0.1" "--tp 5"; do
    if [[ $args == "--tp 5" ]]; then base=("${model5[@]}"); else base=("${model[@]}"); fi
    # shellcheck disable=SC2086
    run check "${base[@]}" --steps 3 --check $args
    cases=$((cases + 1))
    grep -q "check PASSED" "$dir/check.out" || fail "ptdp train $args --check did not pass"
done

# expect_usage "TEXT ON STDERR" ARGS...: exit 2, the text on stderr, stdout empty
expect_usage() {
    local want=$1
    shift
    cases=$((cases + 1))
    "$ptdp" train "$@" >"$dir/u.out" 2>"$dir/u.err" </dev/null
    local status=$?
    if [[ $status -ne 2 ]]; then
        fail "ptdp train $*: exit status $status, expected 2"
    elif ! grep -qF -- "$want" "$dir/u.err"; then
        fail "ptdp train $*: stderr lacks \"$want\": $(cat "$dir/u.err")"
    elif [[ -s $dir/u.out ]]; then
        fail "ptdp train $*: printed on stdout: $(head -c 200 "$dir/u.out")"
    else
        echo "ok    ptdp train $*  ->  $(head -n 1 "$dir/u.err")"
    fi
}

expect_usage "--tp 3 must divide --ffn 256 and --classes 16 (valid --tp: 1, 2, 4, 8, 16)" --tp 3
expect_usage "--tp 4 must divide --ffn 20 and --classes 10 (valid --tp: 1, 2, 5, 10)" --tp 4 --ffn 20 --classes 10
expect_usage "--tp 3 must divide --ffn 24 and --classes 16 (valid --tp: 1, 2, 4, 8)" --tp 3 --ffn 24 --classes 16
expect_usage "--tp 6 must divide --ffn 36 and --classes 8 (valid --tp: 1, 2, 4)" --tp 6 --hidden 9 --classes 8
expect_usage "--tp 0: must be between 1 and 64" --tp 0
expect_usage "--tp 65: must be between 1 and 64" --tp 65
expect_usage "--tp 2x: not a whole number" --tp 2x

echo "$((cases - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
