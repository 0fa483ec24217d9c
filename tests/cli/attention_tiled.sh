#!/usr/bin/env bash
# attention_tiled.sh — `ptdp train --attention tiled` (attention_tiled.c):
# a bad value, a model without attention and a missing value refused
# (exit 2, naming the flag and the choices) before any work; --check
# passes in tiles under dp x tp with SP and dropout, 1F1B, TeraPipe's
# token slices with dropout and selective recompute, Ulysses, the ring
# (said to be the ring's own tiles), full recompute, bf16 (the float build), and the llama
# with grouped kv heads under tp and under Ulysses — all at seq-len 80,
# and Ulysses' CP bytes (delta sent beside dy) equal its printed formula;
# two query tiles of 64 and 16; the loss in tiles is the whole matrix's as
# printed; the report says config.attention "tiled" (the default over one
# tile), "full" with --attention full, at seq-len 64 or under --recompute
# selective, nothing for the MLP; keeps a log-sum-exp a query where full keeps T x T, and the
# virtual clock charges the tiles' fewer scores at seq-len 256.
#
#   attention_tiled.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

g="train --model gpt --steps 1"
expect_usage "--attention foo: must be one of full, tiled"            -- $g --attention foo
expect_usage "--attention: missing value"                             -- $g --attention
expect_usage "--attention tiled computes a model's attention in tiles, and the MLP has no attention" \
    -- train --model mlp --steps 1 --attention tiled
expect_usage "--attention foo: must be one of full, tiled"            -- bench train --attention foo
expect_usage "--attention tiled computes a model's attention in tiles, and the MLP has no attention" \
    -- bench train --attention tiled
if "$ptdp" bench train --model gpt --hidden 32 --heads 4 --ffn 64 --layers 1 --seq-len 80 --batch 2 --attention tiled \
       --steps 1 --warmup 0 --json 2>/dev/null | grep -q '"attention": "tiled"'; then
    echo "ok    ptdp bench train --attention tiled: its JSON says \"attention\": \"tiled\""
else
    echo "FAIL  ptdp bench train --attention tiled: no \"attention\": \"tiled\" in its JSON"; failures=$((failures + 1))
fi
P="plan --model gpt --layers 2 --hidden 64 --heads 4 --seq-len 128 --vocab 64 --batch 4 --gpus 1 --profile dgx-a100"
expect_usage "--attention foo: must be one of full, tiled"            -- $P --attention foo
# the planner in tiles by default: it says so, and the train command it prints
# runs them without the flag (train's default); --attention full there
# carries the flag, and --recompute selective plans (and prints) the whole matrix
if planned=$("$ptdp" $P --top 1 --explain 2>&1) &&
   grep -q "^--attention tiled: a log-sum-exp a query" <<<"$planned" &&
   grep -q -- "--schedule 1f1b \\\\$" <<<"$planned"; then
    echo "ok    ptdp plan: tiles by default, its line, and no --attention in the train command it prints"
else
    echo "FAIL  ptdp plan: no tiles line, or the train command has an --attention"; failures=$((failures + 1))
fi
if planned=$("$ptdp" $P --attention full --top 1 --explain 2>&1) &&
   ! grep -q "^--attention tiled" <<<"$planned" && grep -q -- "--schedule 1f1b --attention full" <<<"$planned" &&
   planned=$("$ptdp" $P --recompute selective --top 1 --explain 2>&1) &&
   ! grep -q "^--attention tiled" <<<"$planned" && grep -q -- "--recompute selective \\\\$" <<<"$planned"; then
    echo "ok    ptdp plan --attention full and --recompute selective: the whole matrix, train's flags as printed"
else
    echo "FAIL  ptdp plan --attention full or --recompute selective: tiles said, or the train command's flags"
    failures=$((failures + 1))
fi

# --check in tiles, layout by layout (T = 80: a tile of 64 and one of 16)
G="--model gpt --steps 2 --seq-len 80 --batch 8 --hidden 32 --heads 4 --attention tiled --check"
L="--model llama --steps 2 --seq-len 80 --batch 8 --hidden 32 --heads 4 --kv-heads 2 --attention tiled --check"
layouts=(
    "$G --dp 2 --tp 2 --sp --dropout 0.1"
    "$G --pp 2 --micro-batches 2"
    "$G --pp 2 --micro-batches 2 --schedule gpipe --token-slices 2 --dropout 0.1 --recompute selective"
    "$G --cp 2 --cp-algo a2a --dropout 0.1"
    "$G --cp 2"
    "$G --recompute full --dropout 0.1"
    "$L --tp 2"
    "$L --cp 2 --cp-algo a2a"
)
for args in "${layouts[@]}"; do
    # shellcheck disable=SC2086
    if run_ok train $args; then
        has "check PASSED" && echo "ok    ptdp train $args" || fail "ptdp train $args: no check PASSED"
        has "attention in tiles" || fail "ptdp train $args: the header does not say the attention runs in tiles"
    fi
done
# bf16 needs the float build
if ! "$ptdp" version 2>/dev/null | grep -q "elements f64"; then
    # shellcheck disable=SC2086
    run_ok train $G --tp 2 --precision bf16 && { has "check PASSED" || fail "bf16 in tiles: no check PASSED"; }
fi
# shellcheck disable=SC2086
run_ok train $G --cp 2 && expect_out "attention in tiles (the ring's own: its chunks)"

# Ulysses in tiles sends delta = dY . y beside dy: its formula's bytes are the measured ones
# shellcheck disable=SC2086
if run_ok train $G --cp 2 --cp-algo a2a; then
    line=$(grep -A1 -F "(4f + 4 + 1/hd)(N-1)/N X (tiles: delta)" "$out" | tail -n 1)
    formula=$(sed -n 's/.*) = \(.*\), measured .*/\1/p' <<<"$line") measured=$(sed -n 's/.*, measured //p' <<<"$line")
    [[ -n $formula && $formula == "$measured" ]] && echo "ok    Ulysses in tiles: CP bytes $measured, formula $formula" \
        || fail "Ulysses in tiles: CP bytes measured '$measured', formula '$formula'"
fi

# the same losses as the whole matrix (to the printed digits), the report's
# keys: tiles the default at T 80, the whole matrix at T 64 and under
# --recompute selective
S="--model gpt --steps 2 --seq-len 80 --batch 8 --hidden 32 --heads 4 --dropout 0.1"
losses() { grep -oE 'loss [0-9.]+' "$out"; }
# shellcheck disable=SC2086
if run_ok train $S --attention full --report "$tmp/full.json"; then
    full=$(losses)
    # shellcheck disable=SC2086
    if run_ok train $S --report "$tmp/tiled.json"; then
        [[ -n $full && $(losses) == "$full" ]] && echo "ok    the losses in tiles are the whole matrix's" \
            || fail "losses in tiles: $(losses | tr '\n' ' '), whole matrix: $(tr '\n' ' ' <<<"$full")"
        report_config "$tmp/tiled.json" attention '"tiled"'
        # the printed numbers substituted into the formula make its count
        sub=$(grep -A1 "keeps per block (attention in tiles)" "$out" | tail -n 1)
        python3 - "$sub" <<'PY' && echo "ok    the tiles' formula with its numbers: $sub" || fail "the tiles' formula line: '$sub'"
import re, sys
m = re.fullmatch(r"\s*= (.+) = (\d+) elements = .*", sys.argv[1])
sys.exit(0 if m and "x" in m.group(1) and eval(m.group(1).replace("x", "*")) == int(m.group(2)) else 1)
PY
        report_config "$tmp/full.json" attention '"full"'
        # shellcheck disable=SC2086
        run_ok train $S --recompute selective --report "$tmp/sel.json" && report_config "$tmp/sel.json" attention '"full"'
        # one tile holds a sequence of 64 or fewer: the whole matrix by default
        run_ok train --model gpt --steps 1 --seq-len 64 --report "$tmp/t64.json" &&
            report_config "$tmp/t64.json" attention '"full"'
        # shellcheck disable=SC2086
        run_ok train --model mlp --steps 1 --report "$tmp/mlp.json" && grep -q '"attention"' "$tmp/mlp.json" &&
            fail "the MLP, without attention, reports config.attention"
        # a log-sum-exp a query, not T x T: B (nh/tp) (T^2 - T) elements fewer a block
        acts() { grep -oE '"acts_per_block_bytes": [0-9]+' "$1" | grep -oE '[0-9]+$'; }
        a_full=$(acts "$tmp/full.json") a_tiled=$(acts "$tmp/tiled.json")
        fewer=$(( 8 * 4 * (80 * 80 - 80) ))
        [[ -n $a_full && -n $a_tiled && $(( (a_full - a_tiled) % fewer )) -eq 0 && $a_full -gt $a_tiled ]] &&
            echo "ok    a block keeps $a_tiled B in tiles, $a_full B whole: B (nh/tp)(T^2 - T) elements fewer" ||
            fail "acts_per_block_bytes: $a_tiled in tiles, $a_full whole (want fewer by a multiple of $fewer)"
    fi
fi

# the clock: at T = 256 the tiles compute 0.56 of the scores, the step's virtual time falls
virtual() { grep -m 1 -oE 'virtual +[0-9.]+ [mu]s' "$out"; }
V="--model gpt --steps 1 --seq-len 256 --batch 2 --hidden 32 --heads 4"
# shellcheck disable=SC2086
if run_ok train $V --attention full; then
    vf=$(virtual)
    # shellcheck disable=SC2086
    if run_ok train $V; then
        vt=$(virtual)
        python3 - "$vf" "$vt" <<'EOF' && echo "ok    the step in tiles: $vt, whole: $vf" || fail "the step in tiles: $vt, whole: $vf"
import sys
def us(s):
    n, u = s.split()[1:3]
    return float(n) * (1000 if u == "ms" else 1)
sys.exit(0 if us(sys.argv[2]) < us(sys.argv[1]) else 1)
EOF
    fi
fi

finish attention_tiled "--attention tiled: $cases cases"
