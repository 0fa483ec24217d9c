#!/usr/bin/env bash
# stdout_full.sh PTDP — an answer that cannot be written is a failure.
#
# With standard output on /dev/full (every write: "No space left on
# device"), each command that prints exits 1 with
#
#     ptdp: writing standard output: No space left on device
#
# instead of 0 with nothing written.  main.c flushes stdout after every
# command and asks stdio whether any write failed.
set -uo pipefail
# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"
small=(--d-in 8 --hidden 16 --ffn 32 --layers 2 --classes 4)
gpt=(--model gpt --hidden 16 --heads 2 --layers 1 --seq-len 8 --batch 4)

# full ARGS...: ptdp ARGS >/dev/full exits 1 and says so on stderr (why, when
# the last flush is the write that failed: a command that flushed on its way
# had its error reported then, and stdio keeps only that one happened)
full() {
    cases=$((cases + 1))
    "$ptdp" "$@" >/dev/full 2>"$err" </dev/null
    local status=$?
    if [[ $status -ne 1 ]]; then fail "ptdp $* >/dev/full: exit status $status, expected 1"
    elif ! grep -qE "^ptdp: writing standard output: (No space left on device|an earlier write failed)$" "$err"; then
        fail "ptdp $* >/dev/full: stderr does not say the write failed"
    else echo "ok    ptdp $* >/dev/full  ->  exit 1"
    fi
}

run_ok train "${gpt[@]}" --steps 1 --quiet --save "$tmp/gpt.st" || true

full plan --model gpt --layers 4 --hidden 64 --heads 4 --seq-len 32 --vocab 256 --batch 16 --gpus 8 \
    --profile dgx-a100 --device-mem 1G --json
full plan --model gpt --layers 4 --hidden 64 --heads 4 --seq-len 32 --vocab 256 --batch 16 --gpus 8 \
    --profile dgx-a100 --device-mem 1G
full train "${small[@]}" --steps 2
full train "${small[@]}" --steps 1 --quiet
full sample --load "$tmp/gpt.st" --prompt "1+2=" --tokens 4
full bench zero --layers 1 --hidden 32 --heads 2 --seq-len 16 --batch 8 --dp 2 --micro-batches 2 --json
full schedule
full schedule --pp 2 --micro-batches 2 --svg "$tmp/s.svg"
full figures --only ring_allreduce --out "$tmp/fig"
full selftest --devices 2
full version
full help schedule

cases=$((cases + 1))
"$ptdp" schedule >/dev/full 2>"$err"
grep -qx "ptdp: writing standard output: No space left on device" "$err" && echo "ok    the reason: the system's" \
    || fail "ptdp schedule >/dev/full: the message lacks the system's reason"

# a usage error stays one
cases=$((cases + 1))
"$ptdp" train --bogus >/dev/full 2>"$err"
[[ $? -eq 2 ]] && echo "ok    a usage error keeps exit 2 on a full stdout" || fail "a usage error changed its exit status"

finish stdout_full "$cases cases: a failed write of stdout exits 1 with a message"
