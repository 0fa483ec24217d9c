#!/usr/bin/env bash
# bench_zero.sh PTDP — `ptdp bench zero` measures what the ZeRO paper's
# formula says, on a GPT small enough to run every stage in a second.
#
# The idea: with Ψ parameters on N devices and bw + bg + bo bytes per
# parameter (this build's float: 4 + 4 + 8, or 8 + 8 + 16 in ptdp-f64), a
# device keeps at rest
#
#   --zero 0   params bw Ψ     grads bg Ψ     optim bo Ψ
#   --zero 1   params bw Ψ     grads bg Ψ     optim bo Ψ/N
#   --zero 2   params bw Ψ     grads bg Ψ/N   optim bo Ψ/N
#   --zero 3   params bw Ψ/N   grads bg Ψ/N   optim bo Ψ/N
#
# and sends 2(N-1)/N S, 2(N-1)/N S, (M+1)(N-1)/N S, 3M(N-1)/N S per step.
#
#  1. --json: per stage, the arena's bytes at rest equal the formula's,
#     each state (Ψ divides by N here, so exactly); the formula is the
#     table above, computed here from Ψ; the DP bytes are the formula's
#     (+ the norm's few bytes); ZeRO-2's bucket is a whole gradient and
#     ZeRO-3's peak params exceed its shard (the gathered units); the
#     bf16 column is 2 + 2 + 12 — and in the float build measured: its
#     arena at rest equals that formula exactly and its DP bytes are half
#     of float's (ptdp-f64 has no bf16 run: null there); every stage has
#     an --overlap step time (ZeRO-1's buckets reduce-scattered in the
#     backward);
#  2. the table: each stage's rows show the formula's bytes and the
#     measured ones side by side, equal ("="), the rules 16Ψ/N etc.;
#  3. bad input exits 2 naming the flag, before any run.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

small=(--layers 1 --hidden 32 --heads 2 --seq-len 16 --batch 8 --dp 2 --micro-batches 2)
N=2 M=2

# A number from a JSON line: field FIELD of object OBJ ("" for top level).
num() {   # LINE OBJ FIELD
    local s=$1
    [[ -n $2 ]] && s=$(grep -o "\"$2\": {[^}]*}" <<<"$s")
    grep -o "\"$3\": [^,}]*" <<<"$s" | head -n 1 | sed 's/.*: //'
}

# 1. --json
before=$failures
"$ptdp" bench zero "${small[@]}" --json >"$out" 2>"$err"
status=$?
if [[ $status -ne 0 ]]; then
    fail "bench zero --json exited $status"
else
    [[ $(wc -l <"$out") -eq 4 ]] || fail "expected 4 JSON lines, one per stage"
    R=$(num "$(head -n 1 "$out")" "" precision)
    case $R in
        '"f32"') r=4 ;;
        '"f64"') r=8 ;;
        *) r=0; fail "unknown precision $R" ;;
    esac
    for z in 0 1 2 3; do
        line=$(grep "\"stage\": $z," "$out")
        psi=$(num "$line" "" psi)
        [[ $(num "$line" "" states_match) == true ]] || fail "--zero $z: states_match is not true"
        # the formula, computed here: whole or divided by N
        div() { [[ $1 -ge $2 ]] && echo $N || echo 1; }   # STAGE FROM
        want_p=$((r * psi / $(div $z 3))) want_g=$((r * psi / $(div $z 2))) want_o=$((2 * r * psi / $(div $z 1)))
        for k in params:$want_p grads:$want_g optim:$want_o; do
            cat=${k%%:*} want=${k#*:}
            f=$(num "$line" formula_bytes "$cat") m=$(num "$line" rest_bytes "$cat")
            [[ $f == "$want" ]] || fail "--zero $z: formula $cat $f B, expected ${want} B"
            [[ $m == "$want" ]] || fail "--zero $z: measured $cat at rest $m B, the formula says ${want} B"
        done
        # bf16: 2 + 2 + 12 bytes, same sharding
        b=$(num "$line" bf16_formula_bytes total)
        want_b=$(( (2 * psi / $(div $z 3)) + (2 * psi / $(div $z 2)) + (12 * psi / $(div $z 1)) ))
        [[ $b == "$want_b" ]] || fail "--zero $z: bf16 formula total $b, expected $want_b"
        if [[ $r -eq 4 ]]; then   # the float build runs --precision bf16
            [[ $(num "$line" "" bf16_states_match) == true ]] || fail "--zero $z: bf16_states_match is not true"
            want_bp=$((2 * psi / $(div $z 3))) want_bg=$((2 * psi / $(div $z 2))) want_bo=$((12 * psi / $(div $z 1)))
            for k in params:$want_bp grads:$want_bg optim:$want_bo total:$want_b; do
                cat=${k%%:*} want=${k#*:}
                m=$(num "$line" bf16_rest_bytes "$cat")
                [[ $m == "$want" ]] || fail "--zero $z: bf16 $cat at rest $m B, the formula says ${want} B"
            done
        else
            [[ $(num "$line" "" bf16_rest_bytes) == null ]] || fail "--zero $z: ptdp-f64 measured bf16"
        fi
        # DP bytes per step
        S=$((r * psi))
        case $z in 0|1) fb=$((2 * (N - 1) * S / N)) ;; 2) fb=$(((M + 1) * (N - 1) * S / N)) ;; 3) fb=$((3 * M * (N - 1) * S / N)) ;; esac
        f=$(num "$line" dp_bytes_per_step formula) m=$(num "$line" dp_bytes_per_step measured)
        [[ $f == "$fb" ]] || fail "--zero $z: DP formula $f B, expected $fb B"
        awk -v m="$m" -v f="$fb" 'BEGIN { exit !(m >= f && m <= f + 64) }' \
            || fail "--zero $z: DP bytes measured $m B, the formula says $fb B"
        if [[ $r -eq 4 ]]; then   # bf16 moves bf16 stores: half the bytes
            f=$(num "$line" bf16_dp_bytes_per_step formula) m=$(num "$line" bf16_dp_bytes_per_step measured)
            [[ $f == $((fb / 2)) ]] || fail "--zero $z: bf16 DP formula $f B, expected $((fb / 2)) B"
            awk -v m="$m" -v f="$((fb / 2))" 'BEGIN { exit !(m >= f && m <= f + 64) }' \
                || fail "--zero $z: bf16 DP bytes measured $m B, half the formula is $((fb / 2)) B"
        fi
        ov=$(num "$line" virtual_step_s overlap)
        [[ $ov != null ]] || fail "--zero $z: no --overlap step time"
    done
    # what lives a moment: ZeRO-2's bucket is one whole gradient, ZeRO-3's
    # gathered units are more than its shard
    z2=$(grep '"stage": 2,' "$out") z3=$(grep '"stage": 3,' "$out")
    [[ $(num "$z2" peak_bytes comm) == $((r * $(num "$z2" "" psi))) ]] || fail "--zero 2: the bucket is not S"
    [[ $(num "$z3" peak_bytes params) -gt $(num "$z3" rest_bytes params) ]] \
        || fail "--zero 3: the peak of params shows no gathered unit"
    [[ $failures -eq $before ]] && echo "ok    --json: the states at rest, bf16 and the DP bytes equal the formula"
fi

# 2. the table
before=$failures
"$ptdp" bench zero "${small[@]}" >"$out" 2>"$err"
status=$?
if [[ $status -ne 0 ]]; then
    fail "bench zero exited $status"
else
    for t in 'plain DP (--zero 0)' 'ZeRO-1 (--zero 1)' 'ZeRO-2 (--zero 2)' 'ZeRO-3 (--zero 3)'; do
        grep -qF "$t" "$out" || fail "table: no stage '$t'"
    done
    # every params/grads/optim/model-states row: the formula's bytes, then
    # the same bytes measured, then "="
    rows=$(grep -E '^  (params|grads|optim|model states) ' "$out")
    [[ $(wc -l <<<"$rows") -eq 16 ]] || fail "table: expected 16 rows of states, got $(wc -l <<<"$rows")"
    bad=$(sed -E 's/^  (params|grads|optim|model states) +[^ ]+( \+ [^ ]+)? +//' <<<"$rows" \
          | awk '!($1 == $3 && $2 == $4 && $5 == "=") { print }')
    [[ -z $bad ]] || fail "table: formula and measured differ in: $bad"
    grep -q '≠\|MISMATCH' "$out" && fail "table: a mismatch is shown"
    for want in '16Ψ/N' '2Ψ + 14Ψ/N' '4Ψ + 12Ψ/N' '3M(N-1)/N S' '(M+1)(N-1)/N S' 'the full-size bucket'; do
        grep -qF -- "$want" "$out" || fail "table: no '$want'"
    done
    if grep -qF '(f32)' "$out"; then
        # the bf16 column measured: each row's bf16 bytes, then at rest, then "="
        grep -qF 'bf16 2 + 2 + 12 (measured, --precision bf16)' "$out" || fail "table: bf16 not measured"
        bad=$(grep -oE '(2|12|16)Ψ(/N)?( \+ [0-9]+Ψ/N)? +[0-9.]+ [KM]?i?B +[0-9.]+ [KM]?i?B( [=≈≠])?$' <<<"$rows" \
              | sed -E 's/^.*Ψ(\/N)? +//' | awk '!($1 == $3 && $2 == $4 && $5 == "=") { print }')
        [[ -z $bad && $(grep -cE '[0-9.]+ [KM]?i?B =$' <<<"$rows") -eq 16 ]] \
            || fail "table: bf16 formula and measured differ in: $bad"
        [[ $(grep -c 'DP bytes, bf16 .* measured .* =$' "$out") -eq 4 ]] || fail "table: bf16 DP bytes not equal 4 times"
    else
        grep -qF 'bf16 2 + 2 + 12 (formula only)' "$out" || fail "table: ptdp-f64's bf16 is not the formula only"
    fi
    [[ $(grep -c 'DP bytes per step .* measured .* =$' "$out") -eq 4 ]] || fail "table: DP bytes not equal 4 times"
    [[ $failures -eq $before ]] && echo "ok    table: formula = measured in every row"
fi

# 3. bad input: exit 2 naming the flag, nothing on stdout
expect_usage '--dp 1' -- bench zero --dp 1
expect_usage '--bogus' -- bench zero --bogus
expect_usage '--batch 15' -- bench zero --dp 2 --batch 15
expect_usage '--profile nosuch' -- bench zero --profile nosuch
expect_usage '--d-in' -- bench zero --d-in 8
expect_usage '--micro-batches' -- bench zero --micro-batches 0

[[ $failures -eq 0 ]]
