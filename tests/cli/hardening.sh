#!/usr/bin/env bash
# hardening.sh PTDP — runs and files that must fail cleanly, early, or not at all.
#
#   a run that diverges       exit 1 naming the step and the quantity; the log
#                             of the steps before it is valid JSON (no NaN)
#   an output that cannot     exit 2 naming the flag, before the first step
#     be written
#   --load of a FIFO          refused at once, never a hang
#   a killed run's temporary  removed by the next write of the same path;
#                             a live writer's is left alone
#   resuming                  seed and batch from the checkpoint unless typed
#                             (and then said); SGD momentum buffers never
#                             silently dropped or restarted
#   labels                    step lines say their bytes are all devices'; the
#                             naive all-reduce's formula is its own
set -uo pipefail

# shellcheck source=cases_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cases_lib.sh"
small=(--d-in 8 --hidden 16 --ffn 32 --layers 2 --classes 4)   # each flag once: twice is an error

# run NAME ARGS...: ptdp train, stdout and stderr into $dir/NAME.out/.err, status into $status
run() {
    local name=$1
    shift
    "$ptdp" train "$@" >"$dir/$name.out" 2>"$dir/$name.err" </dev/null
    status=$?
}
has() { grep -qF -- "$2" "$dir/$1"; }

# ---- a run that diverges
run diverge --lr 1e6 --optimizer sgd --steps 6 --log "$dir/l.json" --report "$dir/r.json"
# (float diverges at step 2, double at step 3: the log holds the steps before)
done_steps=$(sed -n 's/.*the \([0-9]*\) steps\{0,1\} completed.*/\1/p' "$dir/diverge.err")
if [[ $status -eq 1 ]] &&
    grep -qE "step $((done_steps + 1)): the (loss is not finite|gradient norm is (NaN|infinite)|gradient norm .* times the first step.s .*): training diverged" \
        "$dir/diverge.err" &&
    has diverge.err "--report not written: the run failed" && [[ ! -e $dir/r.json ]] &&
    [[ $(wc -l <"$dir/l.json") -eq $done_steps ]] && ! grep -qiE 'nan|inf' "$dir/l.json"; then
    ok "a diverging run: exit 1 at step $((done_steps + 1)), a valid log of the steps before, no report"
else
    fail "a diverging run: exit $status; stderr: $(cat "$dir/diverge.err"); log: $(cat "$dir/l.json" 2>/dev/null)"
fi
if command -v python3 >/dev/null && [[ -e $dir/l.json ]]; then
    if python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$dir/l.json"; then
        ok "the diverged run's log reads as JSON (python3)"
    else
        fail "the diverged run's log is not JSON"
    fi
fi

# ---- outputs checked before any work
touch "$dir/a-file"
for spec in "--save:$dir/no/such/x.st:the directory $dir/no/such does not exist" \
            "--log:$dir/a-file/l.json:$dir/a-file is not a directory" \
            "--trace:$dir:it is a directory; name a file" \
            "--report:$dir/no/r.json:the directory $dir/no does not exist" \
            "--save-init:$dir/no/i.st:the directory $dir/no does not exist" \
            "--dump-data:$dir/no/d.st:the directory $dir/no does not exist"; do
    IFS=: read -r flag path why <<<"$spec"
    start=$SECONDS
    run out "${small[@]}" --quiet --steps 100000 "$flag" "$path"
    if [[ $status -eq 2 ]] && has out.err "$flag $path: cannot be written: $why" && [[ ! -s $dir/out.out ]] &&
        ((SECONDS - start < 10)); then
        ok "$flag $path: exit 2 before training"
    else
        fail "$flag $path: exit $status after $((SECONDS - start)) s; stderr: $(cat "$dir/out.err")"
    fi
done
run same "${small[@]}" --steps 1 --log "$dir/x" --save "$dir/x"
if [[ $status -eq 2 ]] && has same.err "--save and --log name the same file"; then
    ok "--save and --log naming one file: exit 2"
else
    fail "--save and --log naming one file: exit $status; $(cat "$dir/same.err")"
fi

# ---- --load of something that is not a regular file
mkfifo "$dir/fifo.st"
start=$SECONDS
timeout 20 "$ptdp" train --load "$dir/fifo.st" >"$dir/fifo.out" 2>"$dir/fifo.err" </dev/null
status=$?
if [[ $status -eq 1 ]] && has fifo.err "fifo.st: not a regular file" && ((SECONDS - start < 10)); then
    ok "--load of a FIFO: refused at once"
else
    fail "--load of a FIFO: exit $status after $((SECONDS - start)) s; $(cat "$dir/fifo.err")"
fi

# ---- temporaries of killed runs
sleep 0 &
dead=$!
wait "$dead"
echo leftover >"$dir/ck.st.tmp.$dead.0"
echo in-use >"$dir/ck.st.tmp.$$.0"          # this shell is alive
echo other >"$dir/other.st.tmp.$dead.0"      # another path's: not ours to remove
run tmp "${small[@]}" --steps 1 --save "$dir/ck.st"
if [[ $status -eq 0 && -s $dir/ck.st && ! -e $dir/ck.st.tmp.$dead.0 && -e $dir/ck.st.tmp.$$.0 &&
      -e $dir/other.st.tmp.$dead.0 ]]; then
    ok "a dead run's temporary of ck.st removed; a live one's and another path's kept"
else
    fail "temporaries: exit $status; left: $(cd "$dir" && echo *.tmp.*)"
fi

# ---- resuming: seed and batch
run full "${small[@]}" --seed 5 --batch 32 --steps 4 --log "$dir/full.json"
run first "${small[@]}" --seed 5 --batch 32 --steps 2 --save "$dir/half.st"
run rest "${small[@]}" --steps 2 --load "$dir/half.st" --log "$dir/rest.json"
if [[ $status -eq 0 ]] && [[ $(sed -n 3p "$dir/full.json" | cut -d, -f1-2) == $(sed -n 1p "$dir/rest.json" | cut -d, -f1-2) ]]; then
    ok "--load without --seed/--batch continues with the checkpoint's seed 5 and batch 32"
else
    fail "resume: exit $status; full step 3 $(sed -n 3p "$dir/full.json"); resumed $(sed -n 1p "$dir/rest.json" 2>/dev/null)"
fi
run seeded "${small[@]}" --steps 1 --load "$dir/half.st" --seed 3
if [[ $status -eq 0 ]] && has seeded.out "--seed 3 is used, not the checkpoint's seed 5"; then
    ok "--load with another --seed: the run says which it uses"
else
    fail "--load --seed 3: exit $status; $(cat "$dir/seeded.out" "$dir/seeded.err")"
fi

# ---- resuming: SGD momentum buffers
run mom "${small[@]}" --optimizer sgd --momentum 0.9 --steps 1 --save "$dir/mom.st"
run nomom "${small[@]}" --optimizer sgd --steps 1 --save "$dir/nomom.st"
run drop "${small[@]}" --optimizer sgd --steps 1 --load "$dir/mom.st"
run restart "${small[@]}" --optimizer sgd --momentum 0.9 --steps 1 --load "$dir/nomom.st"
if has drop.err "the checkpoint holds SGD momentum buffers, but --momentum is 0" &&
    has restart.err "--momentum 0.9, but the checkpoint holds no momentum buffers"; then
    ok "momentum buffers are neither dropped nor restarted at zero"
else
    fail "momentum: $(cat "$dir/drop.err" "$dir/restart.err")"
fi

# ---- labels
run label "${small[@]}" --dp 4 --steps 1 --algo naive
if has label.out "(all devices)" && has label.out "formula naive, root (N-1) S and the others S"; then
    ok "step lines label their bytes; --algo naive quotes its own formula"
else
    fail "labels: $(cat "$dir/label.out")"
fi

behaved
