#!/usr/bin/env bash
# same_bits.sh — does a change to ptdp keep every answer it gave?
#
# A refactor (a new file layout, a registry, one op where there were two)
# must give the same bits: the same losses and gradient norms, the same
# virtual times, the same --report, the same checkpoints, the same figures,
# schedules and plans.  This script runs one wide set of commands with a
# ptdp binary and keeps what each wrote; run it with the binary before the
# change and with the one after, then compare:
#
#   tools/same_bits.sh record DIR [BIN_DIR]     run every case with BIN_DIR's ptdp
#                                               and ptdp-f64 (default build/cli),
#                                               outputs into DIR (made anew)
#   tools/same_bits.sh diff OLD NEW             compare two records: one line per
#                                               case that differs, exit 1 if any
#   tools/same_bits.sh list                     the cases, one a line
#
#   git stash; meson compile -C build; tools/same_bits.sh record /tmp/before
#   git stash pop; meson compile -C build; tools/same_bits.sh record /tmp/after
#   tools/same_bits.sh diff /tmp/before /tmp/after
#
# What is compared: each command's stdout and exit status, --log, --report,
# --trace's virtual-time half, checkpoints byte for byte, SVG files, plans.
# What is not: wall-clock times (they differ between any two runs), which
# are cut out of every text before it is kept (the "wall" columns and keys,
# the trace's wall-time process).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# ---- the cases: NAME|BINARY|ARGS (BINARY: ptdp or ptdp-f64) ----------------------
# Every training case writes --log, --report and --save; a case whose args
# hold @DIR@ gets the record's folder there (a --load of an earlier case).
GPT="--model gpt --layers 4 --hidden 32 --heads 4 --seq-len 16 --batch 16 --steps 2"
MOE="$GPT --moe-experts 4 --moe-top-k 2"
MLP="--model mlp --layers 8 --batch 32 --steps 3"
cases() {
    cat <<EOF
mlp-1|ptdp|$MLP
mlp-dp2|ptdp|$MLP --dp 2
mlp-tp2|ptdp|$MLP --tp 2
mlp-pp2|ptdp|$MLP --pp 2 --micro-batches 4
mlp-3d|ptdp|$MLP --dp 2 --tp 2 --pp 2 --micro-batches 2
mlp-3d-f64|ptdp-f64|$MLP --dp 2 --tp 2 --pp 2 --micro-batches 2 --check
mlp-gpipe|ptdp|$MLP --pp 4 --micro-batches 4 --schedule gpipe
mlp-inter|ptdp|$MLP --pp 2 --micro-batches 4 --schedule interleaved --virtual-stages 2
mlp-inter-layers|ptdp|$MLP --pp 2 --micro-batches 4 --schedule interleaved --virtual-stages 2 --stage-layers 1,3,2,2
mlp-zb|ptdp|$MLP --pp 4 --micro-batches 8 --schedule zb-h1
mlp-zb-f64|ptdp-f64|$MLP --pp 2 --micro-batches 4 --schedule zb-h1 --dp 2 --check
mlp-dpv|ptdp|$MLP --pp 2 --micro-batches 4 --schedule dualpipev
mlp-dual|ptdp|$MLP --pp 2 --micro-batches 4 --schedule dualpipe --dp 2
mlp-dual-f64|ptdp-f64|$MLP --pp 4 --micro-batches 8 --schedule dualpipe --check
mlp-stage-layers|ptdp|$MLP --pp 3 --micro-batches 4 --stage-layers 3,3,2
mlp-zero1|ptdp|$MLP --dp 4 --zero 1
mlp-zero2|ptdp|$MLP --dp 2 --pp 2 --micro-batches 2 --zero 2
mlp-zero3|ptdp|$MLP --dp 2 --tp 2 --zero 3
mlp-zero3-ov|ptdp|$MLP --dp 2 --zero 3 --overlap
mlp-zero3-bf16|ptdp|$MLP --dp 2 --zero 3 --precision bf16
mlp-zero1-ov|ptdp|$MLP --dp 2 --zero 1 --overlap --bucket-mb 0.01
mlp-overlap|ptdp|$MLP --dp 2 --pp 2 --micro-batches 2 --overlap --bucket-mb 0.01
mlp-bf16|ptdp|$MLP --dp 2 --tp 2 --precision bf16
mlp-bf16-zero2|ptdp|$MLP --dp 2 --zero 2 --precision bf16
mlp-recompute|ptdp|$MLP --pp 2 --micro-batches 2 --recompute
mlp-dropout|ptdp|$MLP --tp 2 --dropout 0.1
mlp-sgd|ptdp|$MLP --dp 2 --optimizer sgd --momentum 0.9 --lr 0.01 --clip-grad 0.5 --weight-decay 0.01
mlp-save-init|ptdp|--model mlp --layers 8 --batch 32 --steps 1 --save-init @DIR@/mlp-init.safetensors
mlp-resume|ptdp|$MLP --dp 2 --tp 2 --load @DIR@/mlp-1.safetensors
mlp-naive|ptdp|$MLP --dp 4 --algo naive
mlp-ring|ptdp|$MLP --dp 4 --algo ring
mlp-profile|ptdp|$MLP --dp 2 --pp 2 --micro-batches 2 --profile dgx-h100
mlp-verify|ptdp|$MLP --dp 2 --verify-replicas
gpt-1|ptdp|$GPT
gpt-1-f64|ptdp-f64|$GPT --dp 2 --tp 2 --check
gpt-dp2|ptdp|$GPT --dp 2
gpt-tp2|ptdp|$GPT --tp 2
gpt-sp|ptdp|$GPT --tp 2 --sp
gpt-sp-ov|ptdp|$GPT --tp 2 --sp --overlap
gpt-pp2|ptdp|$GPT --pp 2 --micro-batches 2
gpt-3d|ptdp|$GPT --dp 2 --tp 2 --pp 2 --micro-batches 2
gpt-cp-ring|ptdp|$GPT --cp 2
gpt-cp-contig|ptdp|$GPT --cp 2 --cp-layout contiguous
gpt-cp-a2a|ptdp|$GPT --cp 2 --cp-algo a2a
gpt-cp-tp-f64|ptdp-f64|$GPT --cp 2 --tp 2 --sp --check
gpt-inter|ptdp|$GPT --pp 2 --micro-batches 2 --schedule interleaved --virtual-stages 2
gpt-zb|ptdp|$GPT --pp 2 --micro-batches 4 --schedule zb-h1 --tp 2
gpt-dpv|ptdp|$GPT --pp 2 --micro-batches 4 --schedule dualpipev
gpt-dual|ptdp|$GPT --pp 2 --micro-batches 4 --schedule dualpipe
gpt-dual-f64|ptdp-f64|$GPT --pp 2 --micro-batches 4 --schedule dualpipe --tp 2 --check
gpt-slices|ptdp|$GPT --pp 2 --micro-batches 2 --schedule gpipe --token-slices 2
gpt-slices-sp|ptdp|$GPT --pp 2 --tp 2 --sp --micro-batches 2 --schedule gpipe --token-slices 2
gpt-rec-full|ptdp|$GPT --pp 2 --micro-batches 2 --recompute full
gpt-rec-sel|ptdp|$GPT --tp 2 --recompute selective
gpt-dropout|ptdp|$GPT --dp 2 --dropout 0.1
gpt-zero1|ptdp|$GPT --dp 2 --pp 2 --micro-batches 2 --zero 1
gpt-zero2|ptdp|$GPT --dp 2 --tp 2 --zero 2
gpt-zero3|ptdp|$GPT --dp 2 --zero 3
gpt-zero3-ov|ptdp|$GPT --dp 2 --zero 3 --overlap --pp 2 --micro-batches 2
gpt-zero3-bf16|ptdp|$GPT --dp 2 --zero 3 --precision bf16
gpt-bf16|ptdp|$GPT --dp 2 --tp 2 --sp --precision bf16
gpt-bf16-cp|ptdp|$GPT --cp 2 --precision bf16 --pp 2 --micro-batches 2
gpt-profile|ptdp|$GPT --dp 2 --tp 2 --pp 2 --micro-batches 2 --profile dgx-h100 --overlap
gpt-resume|ptdp|$GPT --tp 2 --pp 2 --micro-batches 2 --load @DIR@/gpt-1.safetensors
moe-1|ptdp|$MOE
moe-ep2|ptdp|$MOE --dp 2 --ep 2
moe-ep2-f64|ptdp-f64|$MOE --dp 2 --ep 2 --tp 2 --check
moe-cap|ptdp|$MOE --dp 2 --ep 2 --moe-capacity-factor 1.0 --moe-aux-loss 0.01
moe-every|ptdp|$MOE --moe-every 2 --moe-ffn 16 --dp 2 --ep 2 --pp 2 --micro-batches 2
moe-zero1|ptdp|$MOE --dp 2 --ep 2 --zero 1
moe-zero2|ptdp|$MOE --dp 2 --ep 2 --zero 2
moe-zero1-ov|ptdp|$MOE --dp 2 --ep 2 --zero 1 --overlap
moe-zb|ptdp|$MOE --dp 2 --ep 2 --pp 2 --micro-batches 4 --schedule zb-h1
moe-zb-dgx|ptdp|$MOE --dp 2 --ep 2 --pp 2 --micro-batches 4 --schedule zb-h1 --profile dgx-h100
moe-dpv|ptdp|$MOE --dp 2 --ep 2 --pp 2 --micro-batches 4 --schedule dualpipev --profile dgx-h100
moe-dpv-serial|ptdp|$MOE --dp 2 --ep 2 --pp 2 --micro-batches 4 --schedule dualpipev --profile dgx-h100 --no-pair-overlap
moe-dual|ptdp|$MOE --dp 2 --ep 2 --pp 2 --micro-batches 4 --schedule dualpipe
moe-bf16|ptdp|$MOE --dp 2 --ep 2 --precision bf16
moe-cp|ptdp|$MOE --cp 2 --ep 2 --dp 1
moe-tp-rec|ptdp|$MOE --dp 2 --ep 2 --tp 2 --pp 2 --micro-batches 2 --recompute
moe-resume|ptdp|$MOE --dp 2 --ep 2 --load @DIR@/moe-1.safetensors
zero3-rec|ptdp|$GPT --dp 2 --zero 3 --recompute full
zero2-zb|ptdp|$MLP --dp 2 --pp 2 --micro-batches 4 --schedule zb-h1 --zero 2
zero2-ov|ptdp|$MLP --dp 2 --zero 2 --overlap --micro-batches 2
zero1-bf16-tied|ptdp|$GPT --dp 2 --pp 2 --micro-batches 2 --zero 1 --precision bf16
zero2-dual|ptdp|$GPT --pp 2 --micro-batches 4 --schedule dualpipe --dp 2 --zero 2
zero3-sp|ptdp|$GPT --dp 2 --tp 2 --sp --zero 3
zero1-naive|ptdp|$MLP --dp 4 --zero 1 --algo naive
zero3-sgd-clip|ptdp|$MLP --dp 2 --zero 3 --verify-replicas --optimizer sgd --momentum 0.9 --clip-grad 0.1
moe-pp-clip|ptdp|$MOE --dp 2 --ep 2 --clip-grad 0.5 --pp 2 --micro-batches 2
EOF
}

# Commands that are not training runs: NAME|BINARY|ARGS, stdout kept; a
# case may write files into @DIR@ (compared too).
others() {
    cat <<EOF
sched-gpipe|ptdp|schedule --schedule gpipe --pp 4 --micro-batches 8 --list --svg @DIR@/sched-gpipe.svg
sched-1f1b|ptdp|schedule --schedule 1f1b --pp 4 --micro-batches 8 --list --svg @DIR@/sched-1f1b.svg
sched-inter|ptdp|schedule --schedule interleaved --pp 4 --micro-batches 8 --virtual-stages 2 --list --svg @DIR@/sched-inter.svg
sched-zb|ptdp|schedule --schedule zb-h1 --pp 4 --micro-batches 8 --list --svg @DIR@/sched-zb.svg
sched-zb-times|ptdp|schedule --schedule zb-h1 --pp 4 --micro-batches 6 --forward-time 1 --backward-input-time 1.5 --backward-weight-time 0.5 --send-time 0.1
sched-dpv|ptdp|schedule --schedule dualpipev --pp 4 --micro-batches 8 --list --svg @DIR@/sched-dpv.svg --alltoall-time 0.5
sched-dual|ptdp|schedule --schedule dualpipe --pp 4 --micro-batches 8 --list --svg @DIR@/sched-dual.svg --alltoall-time 0.5
sched-dual-6|ptdp|schedule --schedule dualpipe --pp 6 --micro-batches 12
sched-naive|ptdp|schedule --naive --pp 2 --micro-batches 2
sched-bad|ptdp|schedule --schedule dualpipe --pp 3
sched-bad-v|ptdp|schedule --schedule 1f1b --virtual-stages 2
plan-gpt|ptdp|plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 2048 --vocab 51200 --batch 512 --gpus 64 --profile dgx-a100 --top 30
plan-gpt-json|ptdp|plan --model gpt --layers 24 --hidden 2048 --heads 16 --seq-len 2048 --vocab 51200 --batch 256 --gpus 32 --profile dgx-h100 --precision bf16 --json --top 200
plan-gpt-explain|ptdp|plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 2048 --vocab 51200 --batch 512 --gpus 64 --profile dgx-a100 --tp 4 --pp 4 --explain
plan-inter|ptdp|plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 2048 --vocab 51200 --batch 512 --gpus 64 --profile dgx-a100 --schedule interleaved --json --top 100
plan-zb|ptdp|plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 2048 --vocab 51200 --batch 512 --gpus 64 --profile dgx-a100 --schedule zb-h1 --zero 1 --explain
plan-zero3|ptdp|plan --model gpt --layers 24 --hidden 2048 --heads 16 --seq-len 2048 --vocab 51200 --batch 256 --gpus 32 --profile dgx-h100 --zero 3 --precision bf16 --explain
plan-moe|ptdp|plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 4096 --vocab 32000 --ffn 14336 --batch 1024 --profile dgx-h100 --gpus 64 --moe-experts 8 --explain
plan-moe-json|ptdp|plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 4096 --vocab 32000 --ffn 14336 --batch 1024 --profile dgx-h100 --gpus 64 --moe-experts 8 --precision bf16 --json --top 300
plan-dpv|ptdp|plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 4096 --vocab 32000 --ffn 14336 --batch 1024 --profile dgx-h100 --gpus 64 --moe-experts 8 --schedule dualpipev --json --top 100
plan-dual|ptdp|plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 4096 --vocab 32000 --ffn 14336 --batch 1024 --profile dgx-h100 --gpus 64 --moe-experts 8 --schedule dualpipe --explain
plan-cp|ptdp|plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 32768 --vocab 51200 --batch 64 --gpus 128 --profile dgx-h100 --precision bf16 --json --top 100
figures|ptdp|figures --out @DIR@/figures
demo|ptdp|demo --steps 3
demo-gpt|ptdp|demo gpt --steps 3
sample|ptdp|sample --load @DIR@/gpt-1.safetensors --prompt 12+ --tokens 8
bad-zb-bf16|ptdp|train --pp 2 --micro-batches 2 --schedule zb-h1 --precision bf16
bad-dual-zero3|ptdp|train --dp 2 --pp 2 --micro-batches 4 --schedule dualpipe --zero 3
bad-dpv-v|ptdp|train --pp 2 --micro-batches 4 --schedule dualpipev --virtual-stages 3
bad-slices|ptdp|train --model gpt --pp 2 --token-slices 2
bad-inter|ptdp|train --pp 2 --batch 24 --micro-batches 3 --schedule interleaved --virtual-stages 2
bad-sched|ptdp|train --schedule nope
EOF
}

# The same through the MPI backend, one process per device (the name ends
# in -nN: N processes).  Kept apart: a record made without MPI lacks them.
mpi_cases() {
    cat <<EOF
mpi-mlp-3d-n8|ptdp|$MLP --dp 2 --tp 2 --pp 2 --micro-batches 2
mpi-gpt-zero3-n2|ptdp|$GPT --dp 2 --zero 3
mpi-moe-dpv-n4|ptdp|$MOE --dp 2 --ep 2 --pp 2 --micro-batches 4 --schedule dualpipev
EOF
}

# Wall-clock times out of a text: the step line's "wall 12.3 ms", JSON's
# "wall…": number, the trace's wall-time process (pid 1).
strip_wall() {
    sed -E -e 's/wall +[0-9.]+ +[mun]?s//g' \
        -e 's/"wall[a-z_]*": *-?[0-9.eE+-]+,? *//g' \
        -e '/"pid":1,/d' \
        -e 's/in [0-9.]+ (ms|s) of wall[^,;)]*//g' \
        -e 's/(took|wall|searched in) [0-9.]+ ?(ms|s)\b/\1 <t>/g'
}

run_case() {   # DIR BIN_DIR NAME BINARY ARGS KIND
    local dir=$1 bin=$2 name=$3 binary=$4 args=$5 kind=$6
    args=${args//@DIR@/$dir}
    local extra=()
    if [[ $kind == train || $kind == mpi ]]; then
        extra=(--log "$dir/$name.log" --report "$dir/$name.report" --save "$dir/$name.safetensors"
               --trace "$dir/$name.trace")
        # shellcheck disable=SC2086  # ARGS is a list of words
        set -- train $args "${extra[@]}"
    else
        # shellcheck disable=SC2086
        set -- $args
    fi
    local rc=0 launch=()
    if [[ $kind == mpi ]]; then
        launch=(mpirun -n "${name##*-n}" --oversubscribe)
        [[ $(id -u) -ne 0 ]] || launch+=(--allow-run-as-root)
        set -- "$@" --backend mpi
    fi
    # in DIR: what a command writes by default (the demo's demo.html) lands in the record
    (cd "$dir" && OPENBLAS_NUM_THREADS=1 "${launch[@]}" "$bin/$binary" "$@" >"$dir/$name.out" 2>"$dir/$name.err" \
        </dev/null) || rc=$?
    echo "$rc" >"$dir/$name.rc"
    local f
    for f in "$dir/$name".{out,err,log,report,trace} "$dir"/*.html; do   # a page embeds its JSON
        [[ -f $f ]] || continue
        strip_wall <"$f" | sed "s|$dir|@DIR@|g" >"$f.tmp" && mv "$f.tmp" "$f"
    done
}

record() {   # DIR [BIN_DIR]
    local dir=$1 bin=${2:-$root/build/cli}
    bin=$(cd "$bin" 2>/dev/null && pwd) || { echo "same_bits.sh: no folder $2 (build first)" >&2; exit 2; }
    [[ -x $bin/ptdp && -x $bin/ptdp-f64 ]] || { echo "same_bits.sh: $bin has no ptdp and ptdp-f64" >&2; exit 2; }
    rm -rf "$dir" && mkdir -p "$dir" || exit 2
    dir=$(cd "$dir" && pwd)
    local n=0 name binary args
    while IFS='|' read -r name binary args; do
        run_case "$dir" "$bin" "$name" "$binary" "$args" train
        n=$((n + 1))
    done < <(cases)
    while IFS='|' read -r name binary args; do
        run_case "$dir" "$bin" "$name" "$binary" "$args" other
        n=$((n + 1))
    done < <(others)
    if command -v mpirun >/dev/null && "$bin/ptdp" train --backend mpi --steps 0 >/dev/null 2>&1; then
        while IFS='|' read -r name binary args; do
            run_case "$dir" "$bin" "$name" "$binary" "$args" mpi
            n=$((n + 1))
        done < <(mpi_cases)
    else
        echo "same_bits.sh: no mpirun, or ptdp without MPI: the MPI cases are left out" >&2
    fi
    echo "same_bits.sh: $n cases recorded in $dir"
}

diff_records() {   # OLD NEW
    local old=$1 new=$2 bad=0 n=0 f rel
    while IFS= read -r -d '' f; do
        rel=${f#"$old"/}
        n=$((n + 1))
        if [[ ! -e $new/$rel ]]; then
            echo "only in $old: $rel"; bad=$((bad + 1)); continue
        fi
        if ! cmp -s "$f" "$new/$rel"; then
            echo "differs: $rel"
            if [[ $rel != *.safetensors ]]; then
                diff "$f" "$new/$rel" | head -6 | sed 's/^/    /'
            fi
            bad=$((bad + 1))
        fi
    done < <(find "$old" -type f -print0 | sort -z)
    while IFS= read -r -d '' f; do
        rel=${f#"$new"/}
        [[ -e $old/$rel ]] || { echo "only in $new: $rel"; bad=$((bad + 1)); }
    done < <(find "$new" -type f -print0 | sort -z)
    echo "same_bits.sh: $n files compared, $bad differences"
    [[ $bad -eq 0 ]]
}

case ${1:-} in
    record) shift; [[ $# -ge 1 ]] || { echo "usage: same_bits.sh record DIR [BIN_DIR]" >&2; exit 2; }; record "$@" ;;
    diff) shift; [[ $# -eq 2 ]] || { echo "usage: same_bits.sh diff OLD NEW" >&2; exit 2; }; diff_records "$@" ;;
    list) { cases; others; mpi_cases; } | cut -d'|' -f1 ;;
    -h | --help | "") sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; [[ -n ${1:-} ]] ;;
    *) echo "same_bits.sh: unknown command $1 (record, diff, list)" >&2; exit 2 ;;
esac
