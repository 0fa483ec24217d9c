#!/usr/bin/env bash
# bench_activations.sh PTDP — `ptdp bench activations`: Korthikanti et
# al.'s table 2 (activation bytes one transformer block keeps) for the
# default GPT, ptdp's formula beside the arena's measurement.
#
# The idea: with s positions, b sequences, h hidden, F = 4h, a heads, t the
# TP size and e bytes an element, a GPT block keeps (ptdp's coefficients,
# derived from the tensors it keeps; no dropout masks, float LayerNorm
# statistics)
#
#   no parallelism           sbh (16e) + e a s^2 b + 4r sb
#   tensor parallel          sbh (4e + 12e/t) + e a s^2 b/t + 4r sb
#   + sequence parallel      sbh (16e/t) + e a s^2 b/t + 4r sb/t
#   tensor + selective       sbh (4e + 12e/t) + 4r sb
#   tensor + SP + selective  sbh (16e/t) + 4r sb/t
#   full recomputation       e sbh
#
# with r the bytes of a LayerNorm statistic (a real; float under bf16)
#
#  1. the bench exits 0 (every measurement equals its formula) and prints
#     12 rows, 6 per tp of 2 and 4, each "ok", each with the paper's form;
#  2. the bytes it prints are recomputed here from the printed s, b, h, a, e
#     with the table above (the bench cannot grade its own formula);
#  3. --precision bf16 (the float build): e = 2, measured = formula too;
#  4. bad input exits 2 naming the flag, before any run.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# Check one run's output: every row ok, and its bytes are the table's.
check_table() {   # LABEL
    local label=$1
    local rows
    rows=$(grep -cE '^  [A-Za-z+ ]+ +[0-9]*sbh.* [0-9]+ +[0-9]+ ok ' "$out")
    [[ $rows -eq 12 ]] || fail "$label: $rows rows ok, expected 12"
    grep -q 'DIFFERS' "$out" && fail "$label: a row DIFFERS"
    read -r s b h F a e r < <(sed -nE 's/.*s = ([0-9]+) positions, b = ([0-9]+) .*/\1 \2/p;
        s/^h = ([0-9]+), F = ([0-9]+) .* a = ([0-9]+) heads; e = ([0-9]+) bytes.* statistics r = ([0-9]+) bytes$/\1 \2 \3 \4 \5/p' "$out" | paste -sd' ')
    [[ -n ${r:-} && $F -eq $((4 * h)) ]] || { fail "$label: no s, b, h, F = 4h, a, e in the header"; return; }
    awk -v s="$s" -v b="$b" -v h="$h" -v a="$a" -v e="$e" -v r="$r" -v label="$label" '
        /^tp [0-9]+$/ { t = $2; next }
        match($0, /[0-9]+ +[0-9]+ (ok|DIFFERS)/) {
            split(substr($0, RSTART, RLENGTH), f, / +/)
            name = substr($0, 3, 27); sub(/ +$/, "", name)
            sbh = s * b * h; p = e * a * s * s * b; st = 4 * r * s * b
            if (name == "no parallelism")                  want = sbh * 16 * e + p + st
            else if (name == "tensor parallel")            want = sbh * (4 * e + 12 * e / t) + p / t + st
            else if (name == "tensor + sequence parallel") want = sbh * 16 * e / t + p / t + st / t
            else if (name == "tensor + selective")         want = sbh * (4 * e + 12 * e / t) + st
            else if (name == "tensor + SP + selective")    want = sbh * 16 * e / t + st / t
            else if (name == "full recomputation")         want = sbh * e
            else { print label ": unknown row " name; bad = 1; next }
            if (f[1] != want) { printf "%s: tp %d %s: bench says %s, the table %d\n", label, t, name, f[1], want; bad = 1 }
        }
        END { exit bad }' "$out" || fail "$label: a row's bytes are not the table's"
}

# 1, 2: the build's own elements
before=$failures
run_ok bench activations
check_table "$(basename "$ptdp")"
grep -qF 'sbh(10 + 24/t + 5as/(ht))' "$out" || fail "the paper's tensor-parallel row is not printed"
grep -qF 'what differs from the paper' "$out" || fail "no sentence on the differences"
[[ $failures -eq $before ]] && echo "ok    measured = formula, 12 rows, bytes recomputed here"

# 3: bf16 elements (a run exists in the float build only)
if [[ $("$ptdp" train --help 2>&1) == *"f32 (default) or bf16"* ]]; then
    before=$failures
    run_ok bench activations --precision bf16 --tp 2,4
    check_table bf16
    [[ $failures -eq $before ]] && echo "ok    bf16: measured = formula"
else
    expect_usage '--precision bf16' -- bench activations --precision bf16
fi

# 4: bad input
expect_usage '--tp 3' -- bench activations --tp 3
expect_usage '--tp' -- bench activations --tp 1
expect_usage '--tp' -- bench activations --tp 2 --tp 4
expect_usage '--precision' -- bench activations --precision half
expect_usage '--bogus' -- bench activations --bogus

[[ $failures -eq 0 ]]
