#!/usr/bin/env bash
# step_times.sh — wall-clock step time on this machine beside the virtual
# (simulated GPU) step time, for a few dp x tp x pp configurations and the
# single-device baseline.  Prints the Markdown table of docs/benchmarks.md's section
# "Step times: wall clock vs simulated GPUs".
#
#   bench/step_times.sh [PTDP] [--steps N] [--warmup N] [--profiles P,Q] [-- MODEL FLAGS...]
#
#   PTDP          the ptdp binary (default: $PTDP, else build/cli/ptdp)
#   --steps N     steps per configuration (default 12); the first --warmup N
#                 (default 2) are left out, the table shows the median of the rest
#   --profiles    cost models of the virtual clock, one pair of columns each
#                 (default dgx-a100,laptop-cpu; `ptdp train --profile list`)
#   after --       the model and batch, passed to every run (default below)
#
# Wall time is what the threads took on this host: N device threads share
# its cores, so more devices rarely make a step faster here.  Virtual time
# is the same schedule on the profile's GPUs and links: compute = flops /
# peak, a message = alpha + bytes / beta — what the configuration would cost
# on real hardware.  Each step's time is the slowest device's.  Wall time
# comes from the run with the first profile; each further profile is one
# more short run (virtual time is the same every step: 2 steps suffice).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ptdp=${PTDP:-$root/build/cli/ptdp}
steps=12 warmup=2 profiles=dgx-a100,laptop-cpu
model=(--d-in 128 --hidden 256 --ffn 1024 --layers 8 --classes 32 --batch 128)
while [[ $# -gt 0 ]]; do
    case $1 in
        --steps) steps=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --profiles) profiles=$2; shift 2 ;;
        --) shift; model=("$@"); break ;;
        -h | --help) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "step_times.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
        *) ptdp=$1; shift ;;
    esac
done
[[ -x $ptdp ]] || { echo "step_times.sh: no ptdp binary at $ptdp (build first, or pass its path)" >&2; exit 2; }
(( steps > warmup )) || { echo "step_times.sh: --steps must exceed --warmup" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

configs=(
    "baseline (1 device)|"
    "dp 2|--dp 2"
    "dp 4|--dp 4"
    "dp 4, buckets of 25 MiB|--dp 4 --bucket-mb 25"
    "dp 4, ZeRO-1|--dp 4 --zero 1"
    "dp 4, ZeRO-2, M 4|--dp 4 --zero 2 --micro-batches 4"
    "tp 2|--tp 2"
    "tp 4|--tp 4"
    "pp 2, 1F1B, M 4|--pp 2 --micro-batches 4"
    "pp 4, 1F1B, M 8|--pp 4 --micro-batches 8"
    "dp 2 x tp 2 x pp 2, M 4|--dp 2 --tp 2 --pp 2 --micro-batches 4"
)

# Median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Median over the steps after the warm-up of key in a --log file.
step_median() { sed -n "s/.*\"$1\": \([-0-9.eE+]*\).*/\1/p" "$2" | tail -n +$((warmup + 1)) | median; }

IFS=, read -r -a profs <<<"$profiles"
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo "?")
load=$(uptime 2>/dev/null | sed -n 's/.*load averages*: *//p')
echo "ptdp train ${model[*]}: wall = median of steps $((warmup + 1))-$steps on $cores cores (load average ${load:-?})" >&2

# run NAME STEPS PROFILE FLAGS...: one configuration; the --log file is $out/log.jsonl
run() {
    local name=$1 n=$2 prof=$3
    shift 3
    "$ptdp" train "${model[@]}" "$@" --profile "$prof" --steps "$n" --quiet --log "$out/log.jsonl" \
        >"$out/stdout" 2>"$out/stderr" ||
        { echo "step_times.sh: $name (--profile $prof) failed:" >&2; cat "$out/stderr" >&2; exit 1; }
}

header='| configuration | devices | wall ms/step | wall vs baseline |'
rule='|---|---:|---:|---:|'
for p in "${profs[@]}"; do header+=" $p us/step | $p vs baseline |"; rule+='---:|---:|'; done
printf '%s\n%s\n' "$header" "$rule"
base=()
for entry in "${configs[@]}"; do
    name=${entry%%|*}
    read -r -a flags <<<"${entry#*|}"
    run "$name" "$steps" "${profs[0]}" ${flags[@]+"${flags[@]}"}
    devices=$(sed -n 's/^ptdp train ([a-z0-9]*): \([0-9]*\) device.*/\1/p' "$out/stdout")
    times=("$(step_median wall_s "$out/log.jsonl")" "$(step_median virtual_s "$out/log.jsonl")")
    for p in "${profs[@]:1}"; do
        run "$name" 2 "$p" ${flags[@]+"${flags[@]}"}
        times+=("$(sed -n 's/.*"virtual_s": \([-0-9.eE+]*\).*/\1/p' "$out/log.jsonl" | tail -n 1)")
    done
    [[ ${#base[@]} -eq 0 ]] && base=("${times[@]}")
    row="| $name | $devices |"
    for i in "${!times[@]}"; do
        row+=$(awk -v t="${times[$i]}" -v b="${base[$i]}" -v wall="$((i == 0))" 'BEGIN {
            if (wall) printf " %.2f | %.2fx |", t * 1e3, b / t; else printf " %.1f | %.2fx |", t * 1e6, b / t }')
    done
    echo "$row"
done
