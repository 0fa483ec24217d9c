#!/usr/bin/env bash
# equivalence.sh — the MPI backend gives the threads backend's bits.
#
#   tests/mpi/equivalence.sh PTDP [core|wide]
#
# core (the default suite's): each mesh every parallelism builds on once —
# DP, TP, PP, SP, CP's ring and Ulysses, EP, the llama — and the files across
# backends; wide (suite `slow`, which .ci/run runs): the same meshes in other
# combinations, and what is built on them — HSDP and ZeRO++, the llama's and
# bf16's experts, folding, FP8.  Both when no part is named.
#
# For each mesh, the same `ptdp train` command twice: as threads, and under
# mpirun as one process per device (--backend mpi).  Equal means equal:
# the printed steps and report (losses, gradient norms, virtual times,
# bytes, memory — everything but the wall clock), the --log lines, and the
# checkpoint's bytes (gathered to rank 0, one file) — context parallelism
# both as the ring and as Ulysses' all-to-alls; the llama as the GPT.  Then the files cross
# backends: a checkpoint saved under MPI at tp 2 resumes under MPI (every
# rank loads it) and with threads at tp 4 exactly as the threads' own does;
# a --trace, gathered to rank 0, holds the threads' virtual timeline.
# Last, --algo mpi (MPI_Allreduce: another order of sums) passes --check
# against the single device within tolerance.
# Exit 77 (skipped) without MPI.
set -u
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh" "$@"
need_mpi
part=${2:-all}
[[ $part == core || $part == wide || $part == all ]] || { echo "usage: equivalence.sh PTDP [core|wide]" >&2; exit 2; }
core() { [[ $part != wide ]]; }
wide() { [[ $part != core ]]; }

# A --trace's virtual-time events (process 0 of the Chrome trace), one a line.
virtual_events() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for e in (d["traceEvents"] if isinstance(d, dict) else d):
    if e.get("pid") == 0:
        print(json.dumps(e, sort_keys=True))' "$1"
}

# same N ARGS...: threads and N processes, compared.
same() {
    local n=$1
    shift
    "$ptdp" train "$@" --log t.log --save t.st >t.out 2>t.err
    local ts=$?
    run_mpi "$n" "$ptdp" train --backend mpi "$@" --log m.log --save m.st >m.out 2>m.err
    local ms=$?
    if [[ $ts -ne 0 || $ms -ne 0 ]]; then
        fail "$n processes, $*: exit $ts (threads), $ms (mpi): $(head -n 3 m.err)"
    elif ! diff <(no_wall t.out) <(no_wall m.out) >diff.txt; then
        fail "$n processes, $*: the printed run differs"; head -n 6 diff.txt
    elif ! diff <(no_wall t.log) <(no_wall m.log) >/dev/null; then
        fail "$n processes, $*: the --log lines differ"
    elif ! cmp -s t.st m.st; then
        fail "$n processes, $*: the checkpoints differ"
    else
        ok "$n processes: $* — steps, report, log and checkpoint bytes identical"
    fi
}

if core; then
    same 1 --steps 2
    same 2 --tp 2 --steps 2
    cp t.st t_tp2.st
    cp m.st m_tp2.st
    # loading on every rank: a checkpoint saved under MPI, resumed under MPI (and by threads)
    same 4 --dp 2 --tp 2 --zero 1 --steps 2 --load m_tp2.st
    same 8 --dp 2 --tp 2 --pp 2 --micro-batches 2 --algo naive --steps 2
    same 4 --model gpt --tp 2 --pp 2 --micro-batches 2 --sp --steps 2
    # context parallelism: the ring's send/recv, and Ulysses' all-to-alls (--cp-algo a2a)
    same 2 --model gpt --cp 2 --steps 2
    same 4 --model gpt --cp 4 --cp-algo a2a --steps 2
    # expert parallelism: the counts and the rows by all-to-all, expert gradients over the expert-DP group
    same 4 --model gpt --moe-experts 4 --dp 4 --ep 2 --steps 2
    # the llama: a kv head shared by TP ranks (its gradient summed over them)
    same 4 --model llama --tp 4 --vocab 64 --steps 2
fi

if wide; then
    # the same meshes in other combinations: the ring all-reduce with PP, Ulysses with TP and
    # selective recomputation, EP inside TP with ZeRO-1; the llama under PP and ZeRO, the ring
    # with SP, and Ulysses over its kv heads
    same 4 --dp 2 --pp 2 --micro-batches 2 --algo ring --steps 2
    same 4 --model gpt --cp 2 --tp 2 --cp-algo a2a --recompute selective --steps 2
    same 4 --model gpt --moe-experts 4 --dp 2 --tp 2 --ep 2 --zero 1 --steps 2
    same 4 --model llama --dp 2 --pp 2 --micro-batches 2 --zero 1 --steps 2
    same 4 --model llama --cp 2 --tp 2 --sp --steps 2
    same 2 --model llama --cp 2 --cp-algo a2a --steps 2
    # HSDP: ZeRO-3 inside shard groups of 2, each shard all-reduced across the 2 replicas;
    # the checkpoint's shards written by the first shard group's ranks alone
    same 4 --model gpt --dp 4 --zero 3 --shard-group 2 --steps 2
    # ZeRO++'s hpZ: on 4 GPUs a node, dp 4 x tp 2 spans two nodes; the backward gathers
    # each unit over the node group's secondary shards
    same 8 --model gpt --dp 4 --tp 2 --zero 3 --zero-hpz --profile hgx-a100-4 --micro-batches 2 --batch 8 --steps 2
    # ZeRO++'s qwZ: the forward's gathers in INT8 blocks, prefetched under --overlap
    same 4 --model gpt --dp 4 --zero 3 --zero-qwz --zero-quant-block 500 --overlap --micro-batches 2 --steps 2
    # ZeRO++'s qgZ: the gradient's two all-to-alls of INT4 codes, in the node of 4 and across the
    # two nodes; at tp 2 (nodes of 2 DP ranks) in INT8
    same 8 --model gpt --dp 8 --zero 3 --zero-qgz --zero-quant-block 300 --profile hgx-a100-4 --micro-batches 2 --batch 16 --steps 2
    same 8 --model gpt --dp 4 --tp 2 --zero 3 --zero-qgz --zero-qgz-bits 8 --profile hgx-a100-4 --batch 8 --steps 2
    # ...and its mixture of SwiGLU experts, spread over the EP ranks inside tp 2
    same 4 --model llama --moe-experts 4 --moe-top-k 2 --dp 2 --tp 2 --ep 2 --vocab 64 --steps 2
    # ...under bf16 the rows travel as bf16 (rounded on the wire, 2 B an element)
    same 4 --model gpt --moe-experts 4 --moe-top-k 2 --dp 4 --ep 2 --precision bf16 --steps 2
    # ...folded (--etp 1): EP spans the TP pairs, the fold group gathers the slices
    same 4 --model llama --moe-experts 8 --moe-top-k 2 --moe-score sigmoid --moe-groups 4 --moe-group-top-k 2 --moe-shared-experts 1 --moe-bias-update 0.001 --dp 2 --tp 2 --ep 4 --etp 1 --vocab 64 --batch 16 --steps 2
    # FP8 (--fp8): the amaxes max-reduced over TP and CP, delayed scaling's histories over DP,
    # an expert's rows quantized by their own tiles after the all-to-all
    same 4 --model gpt --dp 2 --tp 2 --fp8 delayed --steps 2
    same 2 --model gpt --cp 2 --fp8 tensorwise --steps 2
    same 4 --model gpt --moe-experts 4 --dp 4 --ep 2 --fp8 mxfp8 --steps 2
    # ...and ZeRO-3's gathers as FP8 codes, their amaxes reduced over ZeRO's group and TP
    same 4 --model gpt --dp 2 --tp 2 --zero 3 --fp8 delayed --fp8-comm --steps 2
fi

if core; then
    # Re-sharding across backends: saved under MPI at tp 2, loaded by threads at tp 4.
    "$ptdp" train --tp 4 --steps 2 --load t_tp2.st --log t4.log >/dev/null 2>&1
    "$ptdp" train --tp 4 --steps 2 --load m_tp2.st --log m4.log >/dev/null 2>&1
    if [[ -s t4.log ]] && diff <(no_wall t4.log) <(no_wall m4.log) >/dev/null; then
        ok "saved under MPI at tp 2, resumed by threads at tp 4: the threads' own steps"
    else
        fail "a checkpoint saved under MPI at tp 2 does not resume at tp 4 as the threads' does"
    fi

    # --trace: rank 0 gathers every device's events; the virtual-time half of
    # the file (process 0 of the Chrome trace) is the threads' own.
    "$ptdp" train --dp 2 --pp 2 --micro-batches 2 --steps 2 --trace t.json >/dev/null 2>&1
    run_mpi 4 "$ptdp" train --backend mpi --dp 2 --pp 2 --micro-batches 2 --steps 2 --trace m.json >/dev/null 2>&1
    if ! command -v python3 >/dev/null; then
        echo "note: python3 not found: the traces are not compared"
    elif [[ -s t.json ]] && virtual_events t.json >tv.txt && virtual_events m.json >mv.txt && [[ -s tv.txt ]] &&
         cmp -s tv.txt mv.txt; then
        ok "--trace under MPI: the $(wc -l <tv.txt) virtual-time events of the threads' trace, every device's"
    else
        fail "--trace under MPI: the virtual-time events differ from the threads' (or a trace is missing)"
    fi

    # --algo mpi: MPI_Allreduce's own order of sums, within --check's tolerance.
    if run_mpi 4 "$ptdp" train --backend mpi --dp 4 --algo mpi --steps 3 --check >check.out 2>&1 &&
       grep -q "check PASSED" check.out; then
        ok "--algo mpi, dp 4: $(grep "check PASSED" check.out)"
    else
        fail "--algo mpi, dp 4: --check did not pass"; tail -n 5 check.out
    fi
fi

finish "MPI equivalence checks"
