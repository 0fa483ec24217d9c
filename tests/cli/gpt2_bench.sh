#!/usr/bin/env bash
# gpt2_bench.sh PTDP — bench/gpt2.sh (GPT-2's step on every core against
# PyTorch, llm.c and the floor) and what it stands on, on a tiny GPT.
#
#  1. `ptdp bench floor`: bad flags exit 2 naming the flag; its GEMM flops
#     are those `ptdp bench train` records product by product (the GEMM log
#     of a real forward + backward), and its AdamW bytes 7 x sizeof(real) a
#     parameter; the floor is the sum of its two parts.  With --shapes the
#     products it records and times are those same flops, and the shapes'
#     floor is their time plus the same AdamW.
#  2. bench/llmc_files.py writes llm.c's three files and reads them back:
#     the header fields, the parameter count (computed here from llm.c's
#     sixteen tensors) and the file sizes; a file cut short is refused.
#  3. bench/gpt2.sh: bad flags exit 2 before anything runs; a tiny shape,
#     1 run of 1 step, without llm.c: the llm.c column skipped with a
#     message, every other row measured, tokens/s = B T / time, each "/ floor"
#     the row's time over the floor's, and the every-core table's target.
# Times are printed, never judged: the machine is shared.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tiny=(--model gpt --vocab 256 --seq-len 16 --hidden 64 --heads 4 --layers 2 --ffn 256 --batch 4)
num() { sed -n "s/.*\"$1\": \([-0-9.eE+]*\).*/\1/p" "$2"; }

# ---- 1. ptdp bench floor ----------------------------------------------------------
expect_usage "--threads 0: must be between 1 and 256" -- bench floor --threads 0
expect_usage "--reps 9: must be between 1 and 7"      -- bench floor --reps 9
expect_usage "--model mlp: it has no planning table"  -- bench floor --model mlp
expect_usage "--heads"                                -- bench floor --model gpt --hidden 64 --heads 5
expect_usage "--device-mem: only --shapes builds a model" -- bench floor --device-mem 1G
expect_usage "--device-mem 12Q"                       -- bench floor --shapes --device-mem 12Q
if run_ok bench train "${tiny[@]}" --steps 1 --warmup 0 --json && cp "$out" "$tmp/train.json" &&
   run_ok bench floor "${tiny[@]}" --threads 2 --reps 1 --json; then
    logged=$(num gemm_flops_per_step "$tmp/train.json")
    counted=$(num gemm_flops_per_step "$out")
    [[ -n $logged && $logged == "$counted" ]] && echo "ok    the floor's GEMM flops $counted = bench train's GEMM log" \
        || fail "bench floor's GEMM flops '$counted' differ from bench train's logged '$logged'"
    size=4; grep -q '"dtype": "f64"' "$out" && size=8
    awk -v p="$(num params "$out")" -v b="$(num adamw_bytes_per_step "$out")" -v s=$size \
        -v g="$(num gemm_floor_s "$out")" -v a="$(num adamw_floor_s "$out")" -v f="$(num floor_s "$out")" \
        'BEGIN { exit !(p > 0 && (b - 7 * s * p) ^ 2 < 1e-10 * b * b && g > 0 && a > 0 && (f - g - a) ^ 2 < 1e-9 * f * f) }' &&
        echo "ok    AdamW bytes = 7 x $size B x parameters; floor = GEMMs + AdamW" ||
        fail "bench floor's AdamW bytes or floor do not add up"
    grep -q '"threads": 2,' "$out" && grep -q '"blas_kernels": "[^"]' "$out" &&
        echo "ok    bench floor names its threads and BLAS kernels" || fail "bench floor lacks threads or kernels"
    grep -q '"shapes_' "$out" && fail "bench floor without --shapes printed the shapes' keys"
fi
if run_ok bench floor "${tiny[@]}" --threads 2 --reps 1 --shapes --json; then
    counted=$(num gemm_flops_per_step "$out") recorded=$(num shapes_gemm_flops "$out")
    awk -v n="$(num shapes_products "$out")" -v d="$(num shapes_distinct "$out")" -v c="$counted" -v r="$recorded" \
        -v s="$(num shapes_gemm_s "$out")" -v a="$(num adamw_floor_s "$out")" -v f="$(num shapes_floor_s "$out")" \
        'BEGIN { exit !(n > d && d > 0 && c > 0 && c == r && s > 0 && (f - s - a) ^ 2 < 1e-9 * f * f) }' &&
        echo "ok    --shapes: its products' flops $recorded = the floor's count; shapes' floor = their time + AdamW" ||
        fail "bench floor --shapes: products, flops ($recorded against $counted) or shapes' floor do not add up"
fi

# ---- 2. bench/llmc_files.py ---------------------------------------------------------
py=""
for p in python3 /usr/bin/python3; do "$p" -c 'import sys' 2>/dev/null && { py=$p; break; }; done
if [[ -z $py ]]; then
    echo "skip  no python3: bench/llmc_files.py not checked"
else
    d=$tmp/llmc
    cases=$((cases + 1))
    if "$py" "$root/bench/llmc_files.py" "$d" --vocab 300 --layers 2 --heads 4 --hidden 64 --batch 2 \
         --seq-len 16 --max-seq-len 32 --steps 3 >"$out" 2>"$err" &&
       "$py" "$root/bench/llmc_files.py" --check "$d" >"$out" 2>"$err"; then
        # llm.c's sixteen tensors: wte Vp C (Vp = 300 up to 384), wpe maxT C, per layer
        # 12 C^2 + 13 C (qkv, proj, fc, fcproj and their biases, two LayerNorms), lnf 2 C
        n=$((384 * 64 + 32 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64))
        has "model magic 20240326 version 3 maxT 32 V 300 L 2 NH 4 C 64 Vp 384 parameters $n size ok" &&
        has "tiny_shakespeare_train.bin magic 20240520 version 1 tokens 129 " &&
        has "tiny_shakespeare_val.bin magic 20240520 version 1 tokens 161 " &&
        [[ $(stat -c %s "$d/gpt2_124M.bin") == $((4 * (256 + n))) ]] &&
        echo "ok    llmc_files.py: headers, $n parameters, sizes" || fail "llmc_files.py's files are not llm.c's"
        cases=$((cases + 1))
        truncate -s -4 "$d/gpt2_124M.bin"
        if "$py" "$root/bench/llmc_files.py" --check "$d" >"$out" 2>"$err"; then fail "a model file cut short passed --check"
        else has "size WRONG" && echo "ok    llmc_files.py --check refuses a model file cut short" || fail "no WRONG size"
        fi
    else
        fail "llmc_files.py failed"
    fi
fi

# ---- 3. bench/gpt2.sh ---------------------------------------------------------------
gpt2() { PTDP=$ptdp bash "$root/bench/gpt2.sh" "$@" >"$out" 2>"$err" </dev/null; }
bad_script() {   # "text" args...
    local want=$1; shift
    cases=$((cases + 1))
    gpt2 "$@"
    local status=$?
    if [[ $status -ne 2 ]]; then fail "gpt2.sh $*: exit status $status, expected 2"
    elif ! grep -qF -- "$want" "$err"; then fail "gpt2.sh $*: stderr lacks \"$want\""
    elif grep -q "^== run" "$err"; then fail "gpt2.sh $*: ran before refusing"
    else echo "ok    gpt2.sh $*  ->  $(head -n 1 "$err")"
    fi
}
bad_script "--steps 0: expected a whole number >= 1" --steps 0
bad_script "--runs x: expected a whole number >= 1"  --runs x
bad_script "--llmc $tmp/none: no train_gpt2.c"       --llmc "$tmp/none"
bad_script "--hidden 64 must be a multiple of --heads 5" "${tiny[@]:2}" --heads 5
bad_script "the shape: ptdp bench floor: --vocab 70000000" "${tiny[@]:2}" --vocab 70000000
bad_script "--device-mem 12Q: ptdp train: --device-mem 12Q: not a size" --device-mem 12Q
bad_script "--attention foo: expected full or tiled"  --attention foo
bad_script "--bogus"                                  --bogus 1

cases=$((cases + 1))
if ! gpt2 "${tiny[@]:2}" --runs 1 --steps 1 --warmup 0 --threads 2 --no-torch --attention tiled; then
    fail "bench/gpt2.sh on a tiny shape exited $?"
else
    ok=1
    grep -q "the llm.c column is skipped" "$err" || { ok=0; fail "no message that the llm.c column is skipped"; }
    grep -q "^| llm.c" "$out" && { ok=0; fail "an llm.c row without --llmc"; }
    # every measured row: a time, tokens/s = 64 tokens / time, and time / the floor's
    # (each printed to 0.1 ms: a relative rounding of 0.05 / t)
    floor_ms=$(sed -n 's/^| the floor: [^|]* | \([0-9.]*\) |.*/\1/p' "$out")
    rows=$(grep -c "^| ptdp, \|^| PyTorch" "$out")
    [[ $rows -ge 2 && -n $floor_ms ]] || { ok=0; fail "expected ptdp's two rows and the floor's"; }
    bad=$(grep "^| ptdp, \|^| PyTorch" "$out" | awk -F'|' -v f="$floor_ms" '{
              t = $3 + 0; n = $4 + 0; r = $5 + 0
              if (t <= 0 || (n - 64000 / t) ^ 2 > (n * (0.05 / t + 0.01) + 1) ^ 2 ||
                  (r - t / f) ^ 2 > (r * (0.05 / t + 0.05 / f + 0.01) + 0.01) ^ 2) print }')
    [[ -z $bad ]] || { ok=0; fail "rows whose tokens/s or / floor do not follow from their time: $bad"; }
    grep "^| the shapes' floor" "$out" | awk -F'|' -v f="$floor_ms" '{ t = $3 + 0; r = $5 + 0; n++
              if (t <= 0 || (r - t / f) ^ 2 > (r * (0.05 / t + 0.05 / f + 0.01) + 0.01) ^ 2) exit 1 }
              END { exit n != 1 }' || { ok=0; fail "no shapes' floor row, or its / floor is not its time over the floor's"; }
    grep -q "^ptdp's faster layout / the shapes' floor: *[0-9.]" "$out" || { ok=0; fail "no ratio to the shapes' floor"; }
    grep -q "target >= 0.9 x 2 = 1.80" "$out" && grep -q "^| dp 2 x 1 BLAS thread (batch 2 a device) | [0-9.]* | [0-9.]* | 1.80 | \(met\|MISSED\) |" "$out" &&
        grep -q "^| 1 device x 2 BLAS threads | [0-9.]* | [0-9.]* | 1.80 | \(met\|MISSED\) |" "$out" ||
        { ok=0; fail "the every-core table lacks its layouts or target"; }
    grep -q "OpenBLAS kernels: [A-Za-z]" "$out" || { ok=0; fail "no OpenBLAS kernels line"; }
    grep -q "ptdp's attention: tiled$" "$out" || { ok=0; fail "the header does not say ptdp's attention ran in tiles (its --report)"; }
    (( ok )) && echo "ok    gpt2.sh tiny: $rows measured rows, the floor, every core's layouts"
fi

finish gpt2_bench "bench floor's GEMM flops, llm.c's files, gpt2.sh's table"
