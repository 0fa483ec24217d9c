#!/usr/bin/env bash
# faults.sh — a process device that fails, hangs or dies ends the job.
#
#   tests/mpi/faults.sh PTDP FAULTS
#
# FAULTS is tests/mpi/faults.c built against libptdp.  Checked:
#   - a cycle of receives (faults deadlock) ends within the watchdog's time
#     with the threads backend's report: "watchdog: rank R waited …", and
#     who waits for whom ("waiting in recv from rank 1 …") for every rank;
#   - a rank that fails while another waits for it (faults fail) ends the
#     job with its rank and message (MPI_Abort), exit status not 0;
#   - a collective called with different counts (faults mismatch) reports
#     every rank's call, as with threads;
#   - a rank killed by a signal (kill -9, mid-training) ends the job instead
#     of leaving the others waiting;
#   - lesson 01's ring all-reduce over processes (faults ring);
#   - all_to_allv with uneven and zero counts, and its count mismatch;
#   - expert parallelism's dispatch and combine (faults ep).
# Exit 77 (skipped) without MPI.
set -u
faults=$(realpath "${2:?usage: faults.sh PTDP FAULTS}")
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh" "$@"
need_mpi

# A cycle of receives: the watchdog (1 s in faults.c) and its report.
start=$SECONDS
run_mpi 3 "$faults" deadlock >out.txt 2>&1
status=$?
took=$((SECONDS - start))
if [[ $status -eq 0 ]]; then
    fail "faults deadlock: exit status 0"
elif ! grep -q "watchdog: rank [0-2] waited" out.txt; then
    fail "faults deadlock: no watchdog report"; head -n 5 out.txt
elif ! grep -q "waiting in recv from rank 1 tag 0 in group 'world'" out.txt ||
     ! grep -q "waiting in recv from rank 0 tag 0 in group 'world'" out.txt; then
    fail "faults deadlock: the report does not say who waits for whom"; grep watchdog out.txt | head -n 2
elif [[ $took -gt 20 ]]; then
    fail "faults deadlock: took $took s to end (watchdog 1 s)"
else
    ok "a cycle of receives over 3 processes: $(grep -o "watchdog: rank [0-9] waited.*" out.txt | head -n 1 | cut -c1-200)…"
fi

# A rank fails while rank 0 waits for its message.
run_mpi 3 "$faults" fail >out.txt 2>&1
status=$?
if [[ $status -eq 0 ]]; then
    fail "faults fail: exit status 0"
elif ! grep -q "ptdp: rank 1 of 3 failed (.*): rank 1 gives up before its send" out.txt ||
     ! grep -q "MPI_Abort" out.txt; then
    fail "faults fail: no report of rank 1's failure"; head -n 5 out.txt
else
    ok "a failing rank ends the job: $(grep -m1 "ptdp: rank 1 of 3 failed" out.txt)"
fi

# Different calls in one collective: every rank's call is reported.
run_mpi 3 "$faults" mismatch >out.txt 2>&1
status=$?
if [[ $status -eq 0 ]]; then
    fail "faults mismatch: exit status 0"
elif ! grep -q "mismatched collectives in group 'world'" out.txt ||
     ! grep -q "count=5" out.txt || ! grep -q "count=4" out.txt; then
    fail "faults mismatch: no report of both calls"; head -n 5 out.txt
else
    ok "mismatched calls: $(grep -m1 -o "mismatched collectives.*" out.txt | cut -c1-160)…"
fi

# kill -9 one process of a long run: mpirun must end the job.
run_mpi 2 "$ptdp" train --backend mpi --dp 2 --steps 1000000 --quiet >out.txt 2>&1 &
job=$!
victim=""
for _ in $(seq 1 100); do
    # ptdp runs under mpirun, which may run under run_mpi's subshell
    for parent in "$job" $(pgrep -P "$job"); do
        victim=$(pgrep -P "$parent" -x ptdp | head -n 1)
        [[ -n $victim ]] && break
    done
    [[ -n $victim ]] && break
    sleep 0.1
done
if [[ -z $victim ]]; then
    fail "kill -9: no ptdp process appeared under mpirun"
    kill "$job" 2>/dev/null
else
    sleep 1
    kill -9 "$victim"
    for _ in $(seq 1 200); do
        kill -0 "$job" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$job" 2>/dev/null; then
        fail "kill -9 of process $victim: the job still runs 20 s later"
        kill "$job"
    else
        wait "$job"
        status=$?
        if [[ $status -eq 0 ]]; then
            fail "kill -9 of process $victim: mpirun exited 0"
        else
            ok "kill -9 of one process ends the job (mpirun exit status $status)"
        fi
    fi
fi

# Lesson 01's algorithm over processes.
if run_mpi 4 "$faults" ring >out.txt 2>&1 && grep -q "no failure" out.txt; then
    ok "the ring all-reduce over 4 processes: every rank has the sum"
else
    fail "faults ring"; head -n 5 out.txt
fi

# all_to_allv: uneven and zero counts, learnt by exchanging them; a mismatch.
if run_mpi 4 "$faults" alltoallv >out.txt 2>&1 && grep -q "no failure" out.txt; then
    ok "all_to_allv over 4 processes: uneven and zero counts arrive where they should"
else
    fail "faults alltoallv"; head -n 5 out.txt
fi
run_mpi 3 "$faults" vmismatch >out.txt 2>&1
if [[ $? -eq 0 ]]; then
    fail "faults vmismatch: exit status 0"
elif ! grep -q "rank 1 sends 2 elements to rank 2 (at faults.c:[0-9]*), but rank 2 expects 1 from rank 1" out.txt; then
    fail "faults vmismatch: no report naming both calls"; head -n 5 out.txt
else
    ok "mismatched all_to_allv counts: $(grep -m1 -o "mismatched all_to_allv.*" out.txt | cut -c1-160)…"
fi

# Expert parallelism's exchanges: rows in local expert order, and home again.
if run_mpi 4 "$faults" ep >out.txt 2>&1 && grep -q "no failure" out.txt; then
    ok "ep dispatch and combine over 4 processes: local expert order, every row home, the bytes of the rows sent away"
else
    fail "faults ep"; head -n 5 out.txt
fi

# A run that diverges (train.h's rule) ends the job as any failure does, but
# first keeps what the threads keep: the --log of the steps completed, the
# loss as rank 0 prints it; and nothing over a file at --save.
echo "a good checkpoint" >good.st
run_mpi 2 "$ptdp" train --backend mpi --dp 2 --model gpt --layers 1 --hidden 32 --heads 2 --ffn 64 --seq-len 16 \
    --batch 8 --lr 1e6 --steps 6 --save good.st --log diverge.json >diverge.out 2>&1
status=$?
step1=$(sed -n 's/^step    1  loss \([0-9.]*\) .*/\1/p' diverge.out)
if [[ $status -eq 0 ]]; then
    fail "a diverging MPI run: exit status 0"
elif ! grep -q "step 2: the gradient norm .* times the first step's" diverge.out; then
    fail "a diverging MPI run: the step and the rule not named"; grep -m 3 ptdp diverge.out
elif [[ ! -f diverge.json || $(wc -l <diverge.json) -ne 1 ]] || ! grep -q "\"step\": 1, \"loss\": $step1" diverge.json; then
    fail "a diverging MPI run: no --log of the step completed (loss $step1): $(cat diverge.json 2>/dev/null)"
elif [[ $(cat good.st) != "a good checkpoint" ]]; then
    fail "a diverging MPI run wrote over --save"
else
    ok "a diverging MPI run: ended at step 2, the --log keeps step 1 (loss $step1), --save untouched"
fi

finish "MPI fault checks"
