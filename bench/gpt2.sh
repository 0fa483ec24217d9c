#!/usr/bin/env bash
# gpt2.sh — GPT-2 124M's training step on every core: ptdp, PyTorch and llm.c,
# each held against the machine's floor.
#
#   bench/gpt2.sh [PTDP] [--llmc DIR] [--runs N] [--steps N] [--warmup N]
#                 [--threads N] [--no-torch] [--attention full|tiled]
#                 [--seq-len T] [--batch B]
#                 [--vocab V] [--hidden C] [--layers L] [--heads H] [--ffn F]
#
#   PTDP        the ptdp binary (default: $PTDP, else build/cli/ptdp)
#   --llmc DIR  a clone of https://github.com/karpathy/llm.c (nothing is
#               downloaded; without it the llm.c column is skipped)
#   --runs N    runs of everything, one after the other (default 3); the
#               table shows the median over runs of each number and ratio
#   --steps N, --warmup N   timed steps and untimed ones before them, every
#               implementation (default 5 and 1; with --llmc at most 20 in
#               all: train_gpt2.c samples text at its step 20)
#   --threads N every implementation's threads (default: every core, nproc)
#   --no-torch  skip the PyTorch column
#   --attention full|tiled   ptdp's attention core (ptdp train --attention):
#               full, the T x T probabilities, as nanoGPT's model and llm.c
#               compute them; tiled, FlashAttention's tiles; default: ptdp
#               train's own choice (tiles past 64 positions, so at T 1024)
#   --device-mem SIZE   ptdp's arena per device (default: the host's
#               MemAvailable, a limit and not an allocation; ptdp's own default,
#               4G, is too small for T 1024)
#   the shape   GPT-2 124M's by default, llm.c's default run: V 50257, T 64,
#               C 768, 12 layers, 12 heads, F 3072, batch 4 (--seq-len 1024:
#               GPT-2's full context, the second table of docs/benchmarks.md)
#
# Each run, on the same machine, one after the other:
#   ptdp train --model gpt    1 device with N BLAS threads; dp N with one
#                             thread each; 1 device with 1 thread (for the
#                             speed-ups); the step's wall time from --log
#   bench/train_torch.py      nanoGPT's model in PyTorch, N threads
#                             (torch.set_num_threads, OPENBLAS_NUM_THREADS)
#   llm.c's train_gpt2.c      built once with cc -Ofast -march=native -fopenmp
#                             -DOMP (its Makefile's flags), OMP_NUM_THREADS=N,
#                             on files of random weights and tokens made by
#                             bench/llmc_files.py; its "step N: ... (took X ms)"
#                             lines (forward, zero_grad, backward, update:
#                             not its validation loss, which it computes
#                             outside its clock)
#   ptdp bench floor          the step's GEMM flops at one square sgemm's
#                             speed on N threads + AdamW's bytes at the copy
#                             bandwidth of N threads; and (--shapes) the
#                             shapes' floor: the step's own products, each
#                             timed alone at its own shape, + the same AdamW
# Every step time is the median of the timed steps of a run; every ratio is
# taken within a run, then the median over runs.  Then "every core, every
# layout": ptdp's speed-up over its 1 device x 1 thread, with dp N and with N
# BLAS threads, against the target 0.9 N.
# llm.c's main() fixes B = 4, T = 64 and 41 steps: the copy built here has
# those three numbers set by sed to the run's (each must match once).
# Exit status: 0 when it ran (met or missed targets are printed, not failed);
# 2 for a bad flag, found before anything runs.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ptdp=${PTDP:-$root/build/cli/ptdp}
runs=3 steps=5 warmup=1 threads=$(nproc 2>/dev/null || echo 1) llmc="" torch=1 attention=
devmem=$(awk '/^MemAvailable:/ { printf "%dM", $2 / 1024 }' /proc/meminfo 2>/dev/null || true)
V=50257 T=64 C=768 L=12 H=12 F=3072 B=4
die() { echo "gpt2.sh: $*" >&2; exit 2; }
count() {   # flag value least: a whole number >= least
    [[ $2 =~ ^[0-9]{1,9}$ ]] && (( 10#$2 >= $3 )) || die "$1 $2: expected a whole number >= $3 (at most 9 digits)"
    echo $((10#$2))
}
while [[ $# -gt 0 ]]; do
    [[ $1 == -* && $1 != --no-torch && $1 != -h && $1 != --help && $# -lt 2 ]] && die "$1 needs a value (see --help)"
    case $1 in
        --llmc) llmc=$2; shift 2; [[ -n $llmc ]] || die "--llmc '': expected llm.c's directory" ;;
        --runs) runs=$(count "$1" "$2" 1); shift 2 ;;
        --steps) steps=$(count "$1" "$2" 1); shift 2 ;;
        --warmup) warmup=$(count "$1" "$2" 0); shift 2 ;;
        --threads) threads=$(count "$1" "$2" 1); shift 2 ;;
        --no-torch) torch=0; shift ;;
        --attention) attention=$2; shift 2
                     [[ $attention == full || $attention == tiled ]] || die "--attention $attention: expected full or tiled" ;;
        --device-mem) devmem=$2; shift 2 ;;
        --seq-len) T=$(count "$1" "$2" 2); shift 2 ;;
        --batch) B=$(count "$1" "$2" 1); shift 2 ;;
        --vocab) V=$(count "$1" "$2" 1); shift 2 ;;
        --hidden) C=$(count "$1" "$2" 1); shift 2 ;;
        --layers) L=$(count "$1" "$2" 1); shift 2 ;;
        --heads) H=$(count "$1" "$2" 1); shift 2 ;;
        --ffn) F=$(count "$1" "$2" 1); shift 2 ;;
        -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
        -*) die "unknown flag $1 (see --help)" ;;
        *) ptdp=$1; shift ;;
    esac
done
[[ -x $ptdp ]] || die "no ptdp binary at $ptdp (build first, or pass its path)"
(( C % H == 0 )) || die "--hidden $C must be a multiple of --heads $H"
memflag=(); [[ -n $devmem ]] && memflag=(--device-mem "$devmem")
attnflag=(); [[ -n $attention ]] && attnflag=(--attention "$attention")
total=$((warmup + steps))
shape=(--model gpt --vocab "$V" --seq-len "$T" --hidden "$C" --layers "$L" --heads "$H" --ffn "$F" --batch "$B")
if [[ -n $llmc ]]; then
    [[ -f $llmc/train_gpt2.c && -d $llmc/llmc ]] || die "--llmc $llmc: no train_gpt2.c and llmc/ there (git clone https://github.com/karpathy/llm.c)"
    (( total <= 20 )) || die "--warmup $warmup + --steps $steps = $total: at most 20 with --llmc (train_gpt2.c samples text at its step 20)"
    (( F == 4 * C )) || die "--ffn $F: llm.c's GPT-2 has F = 4 x hidden = $((4 * C))"
    (( V <= 65536 )) || die "--vocab $V: llm.c's token files are uint16, at most 65536"
fi
dp_ok=1
(( B % threads == 0 )) || dp_ok=0

# A Python with torch, and one (any) for llm.c's files: $PTDP_PYTHON, python3, /usr/bin/python3.
python="" anypy=""
for py in "${PTDP_PYTHON:-}" python3 /usr/bin/python3; do
    [[ -z $py ]] && continue
    if [[ -z $python ]] && "$py" -c 'import torch' >/dev/null 2>&1; then python=$py; fi
    if [[ -z $anypy ]] && "$py" -c 'import sys' >/dev/null 2>&1; then anypy=$py; fi
done
if [[ -n $llmc && -z $anypy ]]; then die "--llmc: no Python to write llm.c's files (bench/llmc_files.py)"; fi
[[ $torch == 1 && -z $python ]] && echo "gpt2.sh: no Python with torch found: the PyTorch column is skipped" >&2
[[ $torch == 0 ]] && python=""
[[ -z $llmc ]] && echo "gpt2.sh: no --llmc DIR (a clone of https://github.com/karpathy/llm.c): the llm.c column is skipped" >&2
(( dp_ok )) || echo "gpt2.sh: --batch $B does not divide over $threads devices: the dp $threads row is skipped" >&2

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# ptdp's own rules for the shape, before anything runs (the floor reads the same flags)
"$ptdp" bench floor "${shape[@]}" --threads 1 --reps 1 --json >/dev/null 2>"$out/check" ||
    die "the shape: $(tail -1 "$out/check")"
# --device-mem as ptdp reads it: a tiny run with it, before anything is measured
if [[ ${#memflag[@]} -gt 0 ]] && ! "$ptdp" train --model gpt --steps 0 --quiet "${memflag[@]}" >/dev/null 2>"$out/check"; then
    die "--device-mem $devmem: $(tail -1 "$out/check")"
fi
# Run a command, its stderr kept: on failure stop with its last lines.
must() {   # label command...
    local label=$1; shift
    "$@" 2>"$out/stderr" || { echo "gpt2.sh: $label failed:" >&2; tail -5 "$out/stderr" >&2; exit 1; }
}

# llm.c: a copy of train_gpt2.c with B, T and its last step set, built once, and its files.
llmc_cflags="-Ofast -march=native -fopenmp -DOMP"
if [[ -n $llmc ]]; then
    mkdir -p "$out/llmc"
    sed -e "s/int B = 4;/int B = $B;/" -e "s/int T = 64;/int T = $T;/" -e "s/step <= 40;/step < $total;/" \
        "$llmc/train_gpt2.c" >"$out/llmc/train_gpt2.c"
    for pat in "int B = $B;" "int T = $T;" "step < $total;"; do
        [[ $(grep -cF "$pat" "$out/llmc/train_gpt2.c") == 1 ]] ||
            die "--llmc $llmc: its train_gpt2.c's main() is not the one this script knows ('$pat' not set once)"
    done
    echo "== llm.c: cc $llmc_cflags train_gpt2.c -lm" >&2
    ${CC:-cc} $llmc_cflags -I"$llmc" "$out/llmc/train_gpt2.c" -lm -o "$out/llmc/train_gpt2"
    echo "== llm.c: random weights and tokens (bench/llmc_files.py)" >&2
    "$anypy" "$root/bench/llmc_files.py" "$out/llmc" --vocab "$V" --max-seq-len $((T > 1024 ? T : 1024)) \
        --layers "$L" --heads "$H" --hidden "$C" --batch "$B" --seq-len "$T" --steps "$total"
fi

# Median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2];
                                               else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# A ptdp --log's timed steps (after the warm-up), in seconds.
ptdp_steps() { sed -n 's/.*"step": \([0-9]*\),.*"wall_s": \([-0-9.eE+]*\).*/\1 \2/p' "$1" | awk -v w="$warmup" '$1 > w { print $2 }'; }
torch_step() { sed -n 's/.*"torch_step_s": \([-0-9.eE+]*\).*/\1/p' "$1"; }
llmc_steps() { sed -n 's/^step \([0-9]*\): train loss .* (took \([0-9.]*\) ms)$/\1 \2/p' "$1" | awk -v w="$warmup" '$1 >= w { print $2 / 1e3 }'; }
field() { sed -n "s/.*\"$1\": \"*\([^,\"}]*\).*/\1/p" "$2"; }

ptdp_run() {   # name devices threads-per-device
    echo "== run $r of $runs: ptdp train, $2 device(s) x $3 BLAS thread(s)" >&2
    must "ptdp train --dp $2 --blas-threads $3" \
        "$ptdp" train "${shape[@]}" "${memflag[@]}" "${attnflag[@]}" --dp "$2" --blas-threads "$3" \
        --steps "$total" --quiet \
        --log "$out/$1.$r.log" --report "$out/$1.$r.report" >/dev/null
    ptdp_steps "$out/$1.$r.log" | median >"$out/$1.$r"
}
for r in $(seq "$runs"); do
    ptdp_run threads 1 "$threads"
    if (( dp_ok )); then ptdp_run dp "$threads" 1; fi
    ptdp_run one 1 1
    if [[ -n $python ]]; then
        echo "== run $r of $runs: PyTorch, $threads thread(s)" >&2
        must "bench/train_torch.py" env OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" \
            "$python" "$root/bench/train_torch.py" --model gpt \
            --vocab "$V" --seq-len "$T" --hidden "$C" --layers "$L" --heads "$H" --ffn "$F" --batch "$B" \
            --threads "$threads" --steps "$steps" --warmup "$warmup" --json >"$out/torch.$r.json"
        torch_step "$out/torch.$r.json" >"$out/torch.$r"
    fi
    if [[ -n $llmc ]]; then
        echo "== run $r of $runs: llm.c, OMP_NUM_THREADS=$threads" >&2
        (cd "$out/llmc" && must "llm.c's train_gpt2" env OMP_NUM_THREADS="$threads" ./train_gpt2 >"$out/llmc.$r.txt")
        llmc_steps "$out/llmc.$r.txt" | median >"$out/llmc.$r"
        [[ -s $out/llmc.$r ]] || die "llm.c printed no step lines (see its output: $(tail -3 "$out/llmc.$r.txt"))"
    fi
    echo "== run $r of $runs: ptdp bench floor, $threads thread(s)" >&2
    must "ptdp bench floor" "$ptdp" bench floor "${shape[@]}" --threads "$threads" --shapes "${memflag[@]}" \
        --json >"$out/floor.$r.json"
    field floor_s "$out/floor.$r.json" >"$out/floor.$r"
    field shapes_floor_s "$out/floor.$r.json" >"$out/shapes.$r"
done

# The median over runs of a measurement, and of a ratio a/b taken within each run.
med() { for r in $(seq "$runs"); do if [[ -s $out/$1.$r ]]; then cat "$out/$1.$r"; fi; done | median; }
ratio() { for r in $(seq "$runs"); do
              if [[ -s $out/$1.$r && -s $out/$2.$r ]]; then
                  awk -v a="$(cat "$out/$1.$r")" -v b="$(cat "$out/$2.$r")" 'BEGIN { if (b > 0) printf "%.6g\n", a / b }'
              fi
          done | median; }
# ptdp's faster layout of each run
for r in $(seq "$runs"); do
    if (( dp_ok )); then cat "$out/threads.$r" "$out/dp.$r"; else cat "$out/threads.$r"; fi | sort -g | head -1 >"$out/best.$r"
done
ms() { awk -v x="$1" 'BEGIN { if (x == "") print "-"; else printf "%.1f", 1e3 * x }'; }
tps() { awk -v x="$1" -v n=$((B * T)) 'BEGIN { if (x == "") print "-"; else printf "%.0f", n / x }'; }
num() { awk -v x="$1" 'BEGIN { if (x == "") print "-"; else printf "%.2f", x }'; }
row() {   # label name
    echo "| $1 | $(ms "$(med "$2")") | $(tps "$(med "$2")") | $(num "$(ratio "$2" floor)") |"
}
s=""; (( threads > 1 )) && s=s
f1="$out/floor.1.json"
echo
name="GPT"; [[ "$V $C $L $H $F" == "50257 768 12 12 3072" ]] && name="GPT-2 124M"
echo "$name: V $V, T $T, C $C, $L layers, $H heads, F $F; batch $B ($((B * T)) tokens a step), float32, AdamW"
echo "every implementation on $threads thread$s ($(nproc 2>/dev/null || echo '?') cores); median of $runs run(s), one after the other; each run: median of $steps step(s) after $warmup warm-up"
echo "OpenBLAS kernels: $(field blas_kernels "$f1") (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}); ptdp's arena per device: ${devmem:-4G}; ptdp's attention: $(field attention "$out/one.1.report")"
echo
echo "| step on $threads thread$s | time (ms) | tokens/s | / floor |"
echo "|---|---:|---:|---:|"
row "ptdp, 1 device x $threads BLAS thread$s" threads
(( dp_ok )) && row "ptdp, dp $threads x 1 BLAS thread" dp
[[ -n $python ]] && row "PyTorch $(field torch "$out/torch.1.json") (nanoGPT's model, bench/train_torch.py)" torch
[[ -n $llmc ]] && row "llm.c train_gpt2.c (cc $llmc_cflags)" llmc
echo "| the shapes' floor: the step's own products, each alone at its shape, + AdamW at the copy bandwidth | $(ms "$(med shapes)") | $(tps "$(med shapes)") | $(num "$(ratio shapes floor)") |"
echo "| the floor: GEMMs at the square sgemm's speed + AdamW at the copy bandwidth | $(ms "$(med floor)") | $(tps "$(med floor)") | 1.00 |"
for name in threads dp torch llmc; do
    if [[ -n $(ratio "$name" floor) ]] && awk -v x="$(ratio "$name" floor)" 'BEGIN { exit !(x < 1) }'; then
        echo
        echo "(a step below the floor: the floor's two speeds were measured while the machine was busier than during that step — rerun on a quiet machine)"
        break
    fi
done
echo
count="the model's count"; (( F == 4 * C )) && count="the model's count: 72 B T L C^2 (1 + T/(6C) + V/(12 L C))"
echo "the floor ($(field threads "$f1") threads): $(awk -v x="$(field gemm_flops_per_step "$f1")" 'BEGIN { printf "%.2f", x / 1e9 }') GFLOP of GEMMs a step ($count) at $(num "$(field square_gemm_gflops "$f1")") GFLOP/s (one 2048^3 sgemm),"
echo "  + $(awk -v x="$(field adamw_bytes_per_step "$f1")" 'BEGIN { printf "%.2f", x / 1e9 }') GB of AdamW (7 x 4 B x $(field params "$f1") parameters: read p g m v, write p m v) at $(num "$(field copy_GBps "$f1")") GB/s (STREAM copy)"
[[ -n $llmc ]] && echo "llm.c's own count: $(sed -n 's/^num_parameters: //p' "$out/llmc.1.txt") parameters (its wpe: $((T > 1024 ? T : 1024)) positions), $(sed -n 's/^num_activations: //p' "$out/llmc.1.txt") floats of activations and as many of their gradients"
echo "the shapes' floor: the step's $(field shapes_products "$f1") products ($(field shapes_distinct "$f1") shapes, $(awk -v x="$(field shapes_gemm_flops "$f1")" 'BEGIN { printf "%.2f", x / 1e9 }') GFLOP as they ran; attention the whole T x T) at $(num "$(field shapes_gemm_gflops "$f1")") GFLOP/s, each shape timed alone"
echo "ptdp's faster layout / the floor:   $(num "$(ratio best floor)")"
echo "ptdp's faster layout / the shapes' floor:   $(num "$(ratio best shapes)")   (what the work around the products costs)"
[[ -n $llmc ]] && echo "ptdp's faster layout / llm.c:       $(num "$(ratio best llmc)")   (below 1: ptdp is faster)"
[[ -n $python ]] && echo "ptdp's faster layout / PyTorch:     $(num "$(ratio best torch)")   (below 1: ptdp is faster)"

echo
if (( threads == 1 )); then
    echo "every core, every layout: one thread, nothing to share (--threads 1)"
else
    target=$(awk -v n="$threads" 'BEGIN { printf "%.2f", 0.9 * n }')
    verdict() { awk -v x="$1" -v t="$target" 'BEGIN { if (x == "") print "not measured"; else if (x >= t) print "met"; else print "MISSED" }'; }
    echo "every core, every layout: ptdp's speed-up over 1 device x 1 thread = t(1 x 1) / t(layout); ideal $threads, target >= 0.9 x $threads = $target"
    echo
    echo "| layout | time (ms) | speed-up | target | |"
    echo "|---|---:|---:|---:|---|"
    echo "| 1 device x 1 BLAS thread | $(ms "$(med one)") | 1.00 | | |"
    if (( dp_ok )); then
        sp=$(ratio one dp)
        echo "| dp $threads x 1 BLAS thread (batch $((B / threads)) a device) | $(ms "$(med dp)") | $(num "$sp") | $target | $(verdict "$sp") |"
    fi
    sp=$(ratio one threads)
    echo "| 1 device x $threads BLAS threads | $(ms "$(med threads)") | $(num "$sp") | $target | $(verdict "$sp") |"
fi
