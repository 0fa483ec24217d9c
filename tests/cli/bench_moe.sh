#!/usr/bin/env bash
# bench_moe.sh PTDP — `ptdp bench moe`: the dense GPT beside a mixture of
# experts of the same active parameters (E experts of F_e = F/k, top-k), at
# ep 1, 2, 4 on the virtual clock.  The table's arithmetic, recomputed here
# from the printed sizes (the bench cannot grade its own formulas):
#
#  1. parameters: active - dense = L_moe (E + k - 1) C (the router and k-1
#     more output biases: the expert matrices are equal, k 2 C F_e = 2 C F);
#     total - dense = L_moe (E C + E (2 C F_e + F_e + C) - (2 C F + F + C));
#     a device at ep N holds dense + L_moe (E C + (E/N)(…) - (…));
#  2. the compute a step is the same for every layout (equal active FLOPs);
#  3. bytes: the dense run and ep 1 send nothing in ep (and nothing in
#     edp); ep = counts + rows + norm (the gradient norm's sum of the
#     experts' squares: one all-reduce of a double, 2(N-1)/N 8); counts = c L_moe M (N-1)(E/N) 4 exactly; the
#     uniform estimate = a L_moe M k T_r C (N-1)/N e with T_r = B T/(dp M);
#     the rows' mean lies within their min..max over devices, below the
#     all-away bound a L_moe M k T_r C e, and rows / ((N-1)/N) agrees across
#     N within the measured loads' spread: the bytes grow as (N-1)/N;
#  4. --recompute full: a = 6 all-to-alls and c = 2 count exchanges;
#  5. bad input exits 2 naming the flag, before any run;
#  6. --wall on a tiny shape: its table's arithmetic (no time is asserted,
#     only how the printed numbers relate): each round's ratio is its moe /
#     dense, the median row the rounds' medians, the headline the median of
#     the rounds' ratios, F_e = F / k, and the parts' table adds up (each
#     difference moe - dense, each column's parts to its step).
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# Check one run's output against the arithmetic above; a, c: exchanges.
check_table() {   # LABEL A C
    local label=$1 a=$2 c=$3
    local rows
    rows=$(grep -cE '^  (dense|moe ep [0-9]+) ' "$out")
    [[ $rows -ge 6 ]] || fail "$label: $rows table rows, expected two tables of the layouts"
    awk -v a="$a" -v c="$c" -v label="$label" '
        function bad(msg) { printf "%s: %s\n", label, msg; nbad++ }
        function near(x, y) { return (x - y) <= 1 && (y - x) <= 1 }
        /^ptdp bench moe/ { match($0, /T [0-9]+, C [0-9]+/); split(substr($0, RSTART, RLENGTH), t, /[ ,]+/)
                            T = t[2]; C = t[4]; match($0, /F [0-9]+$/); F = substr($0, RSTART + 2) + 0 }
        /^  batch / { B = $2 + 0; dp = $4 + 0; M = $7 + 0 }
        /^  dense: / { Pd = $(NF - 4) + 0; sub(/,/, "", Pd) }
        /^  MoE: / { E = $4 + 0; k = $7 + 0; split($0, x, "F_e = F / k = "); Fe = x[2] + 0
                     match($0, /in [0-9]+ of/); Lm = substr($0, RSTART + 3) + 0
                     Pm = $(NF - 4); sub(/,/, "", Pm); Pm += 0; Pa = $NF + 0 }
        /e = [0-9]+ bytes$/ { e = $(NF - 1) + 0 }
        /^virtual step/ { tbl = 1; next }
        /^bytes sent/ { tbl = 2; next }
        tbl == 1 && /^  (dense|moe ep)/ { n = ($1 == "dense") ? 0 : $3 + 0
                     comp[n] = $(NF - 3); par[n] = $NF; if (n == 0) base = comp[0] }
        tbl == 2 && /^  (dense|moe ep)/ { n = ($1 == "dense") ? 0 : $3 + 0; o = ($1 == "dense") ? 2 : 4   # o: dp
                     edp[n] = $(o + 1); ep[n] = $(o + 2); cnt[n] = $(o + 3); rw[n] = $(o + 4); nrm[n] = $(o + 5)
                     split($(o + 7), mm, /\.\./); lo[n] = mm[1]; hi[n] = mm[2]; uni[n] = $(o + 8); Ns[n] = 1 }
        END {
            if (!(T && C && F && B && dp && M && Pd && E && k && Fe && Lm && e)) { bad("sizes not found"); exit 1 }
            if (Fe * k != F) bad("F_e " Fe " x k " k " != F " F)
            exp_ = 2 * C * Fe + Fe + C; mlp = 2 * C * F + F + C
            if (Pa - Pd != Lm * (E + k - 1) * C) bad("active - dense = " Pa - Pd ", want L_moe (E + k - 1) C")
            if (Pm - Pd != Lm * (E * C + E * exp_ - mlp)) bad("total - dense = " Pm - Pd)
            if (par[0] != Pd) bad("dense params a device " par[0] " != " Pd)
            Tr = B / (dp * M) * T
            for (n in Ns) {
                if (comp[n] < 0.95 * base || comp[n] > 1.05 * base) bad("compute " comp[n] " vs dense " base)
                if (n == 0) { if (ep[0] != 0 || edp[0] != 0) bad("dense sends in ep or edp"); continue }
                N = n + 0
                if (par[n] != Pd + Lm * (E * C + (E / N) * exp_ - mlp)) bad("ep " N ": params a device " par[n])
                if (N == 1) { if (ep[n] != 0 || rw[n] != 0 || cnt[n] != 0 || edp[n] != 0) bad("ep 1 sends in ep/edp"); continue }
                if (!near(ep[n], cnt[n] + rw[n] + nrm[n])) bad("ep " N ": ep " ep[n] " != counts + rows + norm")
                if (!near(nrm[n], 2 * (N - 1) / N * 8)) bad("ep " N ": norm " nrm[n] " != 2(N-1)/N 8")
                if (cnt[n] != c * Lm * M * (N - 1) * (E / N) * 4) bad("ep " N ": counts " cnt[n])
                if (uni[n] != a * Lm * M * k * Tr * C * (N - 1) / N * e) bad("ep " N ": uniform " uni[n])
                if (!(lo[n] <= rw[n] + 1 && rw[n] <= hi[n] + 1)) bad("ep " N ": rows outside min..max")
                if (hi[n] > a * Lm * M * k * Tr * C * e) bad("ep " N ": more rows than every choice")
                s = (N - 1) / N; r[N] = rw[n] / s; rlo[N] = lo[n] / s; rhi[N] = hi[n] / s; nN++
            }
            if (nN < 2) bad("fewer than two ep > 1 layouts")
            for (i in r) for (j in r) if (r[i] < rlo[j] || r[i] > rhi[j])
                bad("rows / ((N-1)/N): ep " i " gives " r[i] ", outside ep " j "s spread " rlo[j] ".." rhi[j])
            exit nbad > 0
        }' "$out" || fail "$label: the table's arithmetic does not hold"
}

# 1-3: the default layouts
before=$failures
run_ok bench moe
check_table default 4 1
grep -qE '^  moe ep 4 ' "$out" || fail "no ep 4 row"
grep -qF 'no medians' "$out" || fail "the header does not say why there are no medians"
[[ $failures -eq $before ]] && echo "ok    ep 1, 2, 4: parameters, compute, bytes recomputed here"

# 4: full recomputation, two micro-batches
before=$failures
run_ok bench moe --recompute full --micro-batches 2 --ep 2,4 --steps 1
check_table 'recompute full' 6 2
[[ $failures -eq $before ]] && echo "ok    --recompute full: 6 all-to-alls, the counts twice"

# 5: bad input
expect_usage '--ep 3: must divide' -- bench moe --ep 3
expect_usage '--ep 2: given twice' -- bench moe --ep 2,2
expect_usage '--ep 8: must divide --dp 4' -- bench moe --ep 8
expect_usage '--moe-ffn' -- bench moe --moe-ffn 64
expect_usage '--ep 0: a list' -- bench moe --ep 0
expect_usage '--ep 2,x: a list' -- bench moe --ep 2,x
expect_usage '--ep 2,: a list' -- bench moe --ep 2,
expect_usage '--moe-every 3 with --layers 2: no block' -- bench moe --moe-every 3
expect_usage '--model mlp' -- bench moe --model mlp
expect_usage '--moe-experts 0' -- bench moe --moe-experts 0
expect_usage '--ffn 255: must divide by --moe-top-k 2' -- bench moe --ffn 255
expect_usage '--recompute' -- bench moe --recompute half
expect_usage '--profile nope' -- bench moe --profile nope
expect_usage '--bogus' -- bench moe --bogus

# 6: --wall, tiny
before=$failures
run_ok bench moe --wall --hidden 32 --layers 2 --seq-len 16 --batch 2 --rounds 3 --warmup 1 --timed 2 \
    --moe-experts 4 --moe-top-k 2 --ffn 128
awk '
    function bad(msg) { printf "wall: %s\n", msg; nbad++ }
    function abs(x) { return x < 0 ? -x : x }
    function med3(a, b, c) { return (a <= b) ? ((b <= c) ? b : (a <= c ? c : a)) : ((a <= c) ? a : (b <= c ? c : b)) }
    /MoE: E = / { split($0, x, "F_e = F / k = "); Fe = x[2] + 0; match($0, /top-k [0-9]+/); k = substr($0, RSTART + 6) + 0 }
    /^ptdp bench moe --wall/ { match($0, /F [0-9]+,/); F = substr($0, RSTART + 2) + 0 }
    /^  [0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$/ { n++; d[n] = $2; m[n] = $3; q[n] = $4
        if (abs($3 / $2 - $4) > 0.01 * $4) bad("round " $1 ": ratio " $4 " is not " $3 " / " $2) }
    /^  median / { md = $2; mm = $3 }
    /^moe \/ dense = / { r = $5; sub(/,/, "", r) }
    /^  (blocks|embedding|optimizer|rest)/ { pd += $(NF - 2); pm += $(NF - 1); parts++
        if (abs($NF - ($(NF - 1) - $(NF - 2))) > 0.0015) bad("part " $1 ": difference " $NF) }
    /^  step \(mean\)/ { sd = $3; sm = $4; sdiff = $5 }
    END {
        if (n != 3) { bad(n " round rows, expected 3"); exit 1 }
        if (F == 0 || Fe * k != F) bad("F_e " Fe " x k " k " != F " F)
        if (md != med3(d[1], d[2], d[3])) bad("median dense " md)
        if (mm != med3(m[1], m[2], m[3])) bad("median moe " mm)
        if (r != med3(q[1], q[2], q[3])) bad("headline ratio " r " is not the rounds\x27 median")
        if (parts != 5) bad(parts " parts, expected 5")
        if (abs(pd - sd) > 0.004 || abs(pm - sm) > 0.004) bad("parts do not add up to the step")
        if (abs(sdiff - (sm - sd)) > 0.0015) bad("step difference " sdiff)
        exit nbad > 0
    }' "$out" || fail "--wall: the table's arithmetic does not hold"
expect_out "rounds 2, 4, … MoE first" "targets: <= 1.08 at E 8 top 2, <= 1.12 at E 64 top 8"
[[ $failures -eq $before ]] && echo "ok    --wall: rounds, medians, ratio and parts recomputed here"

expect_usage '--ep: a flag of the virtual tables' -- bench moe --wall --ep 2
expect_usage '--steps: a flag of the virtual tables' -- bench moe --wall --steps 2
expect_usage '--rounds: a flag of --wall' -- bench moe --rounds 2
expect_usage '--timed: a flag of --wall' -- bench moe --timed 2
expect_usage '--rounds 0' -- bench moe --wall --rounds 0
expect_usage '--timed 0' -- bench moe --wall --timed 0
expect_usage '--warmup -1' -- bench moe --wall --warmup -1
expect_usage '--wall: --heads 3 must divide' -- bench moe --wall --heads 3

[[ $failures -eq 0 ]]
