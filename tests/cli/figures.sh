#!/usr/bin/env bash
# figures.sh PTDP — `ptdp figures` draws every figure, each a valid SVG.
#
#  1. --out a fresh (nested) directory: every figure's file exists, its path
#     is printed, it starts with <svg and the SVG namespace, and it is
#     well-formed XML (Python's parser if python3 is there, else a tag count);
#  2. each figure carries what it measured (the ring's check, the bubble,
#     the loss difference, the DP gradient and bytes, the mesh's groups,
#     ZeRO's formulas and peaks (stages 0-3, float and bf16 — measured in
#     the float build — each arena equal to its formula at rest; one
#     ZeRO-3 step's timeline with its prefetched gathers and bytes), the attention's shards and padded
#     vocabularies, the SP block's shapes, positions, activations and
#     bytes, ring attention's blocks, pairs, work and bytes per rank, and
#     the memory of the ZeRO runs, the planner's layouts of a 7.5B GPT, the
#     FP8 runs' curves and their gaps to float's);
#  2b. every text fits the figure's width and none is drawn on another
#     (svg_text_fits.py: widths estimated from the characters), and
#     plan_layouts ranks lesson 12's layouts in reals, not bf16;
#  3. --only draws one figure; a bad --only or flag exits 2; a directory
#     that cannot be created exits 1 with a message.
set -uo pipefail

ptdp=${1:?usage: figures.sh PATH_TO_PTDP}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { failures=$((failures + 1)); echo "FAIL  $*"; [[ -s $tmp/err ]] && sed 's/^/      stderr: /' "$tmp/err"; }

names="ring_allreduce dp_allreduce tp_splits pipeline_schedules filling_the_bubble dualpipev dualpipe mesh_groups expert_groups moe_folding hsdp
       zero_ownership zero_memory zero_overlap attention_tp sp_block moe_dispatch attention_tiles ring_attention ulysses
       memory_per_device loss_curves fp8_loss_curves plan_layouts"

# Well-formed: parsed by xml.dom.minidom, or (without python3) every opening
# tag of each element name matched by a closing tag.
well_formed() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$1" 2>>"$tmp/err"
    else
        local t open close
        for t in svg g text; do
            open=$(grep -o "<${t}[ >]" "$1" | wc -l)
            close=$(grep -o "</$t>" "$1" | wc -l)
            [[ $open -eq $close ]] || return 1
        done
        ! grep -q '&[^a-z#]' "$1"
    fi
}

# 1. every figure
out=$tmp/a/b/figures
if ! "$ptdp" figures --out "$out" >"$tmp/out" 2>"$tmp/err"; then
    fail "ptdp figures --out $out exited $?"
else
    for n in $names; do
        f=$out/$n.svg
        if [[ ! -s $f ]]; then fail "$n.svg missing or empty"; continue; fi
        grep -qx "$f" "$tmp/out" || fail "$f not printed"
        head -c 4 "$f" | grep -q '^<svg' || fail "$n.svg does not start with <svg"
        head -n 1 "$f" | grep -q 'xmlns="http://www.w3.org/2000/svg"' || fail "$n.svg: no SVG namespace"
        tail -n 1 "$f" | grep -qx '</svg>' || fail "$n.svg does not end with </svg>"
        well_formed "$f" || fail "$n.svg is not well-formed XML"
    done
    count=$(echo $names | wc -w)
    [[ $(ls "$out" | wc -l) -eq $count ]] || fail "expected exactly $count files in $out: $(ls "$out")"
    echo "ok    $count figures, well-formed"
    if command -v python3 >/dev/null 2>&1; then
        python3 "$(dirname "${BASH_SOURCE[0]}")/svg_text_fits.py" "$out"/*.svg >"$tmp/fits" 2>&1 ||
            fail "texts past a figure's width or on top of each other: $(cat "$tmp/fits")"
        grep "^ok" "$tmp/fits"
    fi
    # each lesson shows its figure, as an image in its README
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    for pair in 01-collectives:ring_allreduce 04-pipeline-parallel:pipeline_schedules 06-zero:zero_ownership \
        07-attention-tp:attention_tp 08-sequence-split:ring_attention 09-filling-the-bubble:filling_the_bubble \
        10-zero3-overlap:zero_overlap 13-all-to-all:ulysses; do
        grep -qF "](../../figures/${pair#*:}.svg)" "$root/tutorials/${pair%%:*}/README.md" ||
            fail "tutorials/${pair%%:*}/README.md does not show figures/${pair#*:}.svg"
    done
    if grep -q 'bf16' "$out/plan_layouts.svg"; then
        fail "plan_layouts ranks bf16 layouts; lesson 12 prices reals"
    fi

    # 2. what each figure measured
    grep -q 'checked against a real 4-device ring all-reduce' "$out/ring_allreduce.svg" || fail "ring: no check"
    grep -q 'each device sent [0-9]* B of S = [0-9]* B' "$out/ring_allreduce.svg" || fail "ring: no bytes"
    [[ $(grep -c 'bubble measured 27.3%, formula' "$out/pipeline_schedules.svg") -eq 2 ]] \
        || fail "pipeline: expected two titles with the bubble 27.3%"
    for want in 'GPipe — bubble measured 27.3%, formula (p-1)/(m+p-1) = 27.3%' \
                '1F1B — bubble measured 27.3%' \
                'v = 2 — bubble measured 15.8%, formula (p-1)/(v\*m+p-1) = 15.8%' \
                'ZB-H1 — bubble measured 11.1%, formula (p-1)/(3m+p-1) = 11.1%' \
                'Makespans 33, 33, 28.5 and 27 time units' 'owes up to 1, 2, 3, 4 W passes'; do
        grep -q -- "$want" "$out/filling_the_bubble.svg" || fail "filling_the_bubble: no '$want'"
    done
    grep -q 'rank 3 · \[4 × 64\] · rows 12–15' "$out/tp_splits.svg" || fail "tp: no output-layer shard of rank 3"
    grep -q 'Largest difference over 30 steps: [0-9.e+-]* .* within the --check tolerance' \
        "$out/loss_curves.svg" || fail "loss: no difference within tolerance in the caption"
    [[ $(grep -c '<polyline' "$out/loss_curves.svg") -eq 2 ]] || fail "loss: expected two curves"
    grep -q 'stroke-dasharray' "$out/loss_curves.svg" || fail "loss: no dashed curve"

    # FP8's quality: float, bf16 (the float build) and the four recipes, each
    # a curve above and (but float) a gap below, each gap at the last step named
    f=$out/fp8_loss_curves.svg
    nrun=6; [[ $("$ptdp" version) == *f64* ]] && nrun=5
    [[ $(grep -c '<polyline' "$f") -eq $((2 * nrun - 1)) ]] || fail "fp8_loss_curves: expected $nrun curves and $((nrun - 1)) gaps"
    for r in tensorwise blockwise mxfp8 delayed; do
        grep -q ">$r: gap [-+][0-9.]* ([-+][0-9.]*%)<" "$f" || fail "fp8_loss_curves: no gap of $r"
    done
    grep -q 'At step 60 the largest FP8 gap is' "$f" || fail "fp8_loss_curves: no largest gap in the caption"

    # lesson 02: the sum equals one device, the three replicas print the same
    # norm, the bytes of each rank are there
    f=$out/dp_allreduce.svg
    same='The same gradient: the largest difference between the dp = 3 sum and one device over the [0-9]* elements'
    grep -q "$same is [0-9.e+-]* (f[0-9]* rounding)" "$f" || fail "dp: no difference from one device in the caption"
    grep -q 'measured: rank 0 sent [0-9]* B, rank 1 [0-9]* B, rank 2 [0-9]* B' "$f" || fail "dp: no bytes per rank"
    norms=$(grep -A1 '>g = g0 + g1 + g2<' "$f" | grep -o '>‖g‖ = [0-9.]*<' | sort -u)
    [[ $(grep -c '>g = g0 + g1 + g2<' "$f") -eq 3 && $(echo "$norms" | wc -l) -eq 1 && -n $norms ]] \
        || fail "dp: expected three replicas with one norm after the all-reduce, got: $norms"
    grep -q 'The tempting average instead' "$f" || fail "dp: no average of averages"

    # lesson 12: every layout the planner found, the GPU's memory, the best five named
    f=$out/plan_layouts.svg
    grep -q '[0-9][0-9]* valid layouts, [0-9][0-9]* fit in [0-9]* GiB' "$f" || fail "plan_layouts: no counts"
    grep -q '>the best 5 that fit<' "$f" || fail "plan_layouts: no best five"
    [[ $(grep -c 'GiB, step [0-9.]* s, [0-9]* model TFLOP/s a GPU' "$f") -eq 5 ]] \
        || fail "plan_layouts: expected five named layouts"
    grep -q 'GiB: one GPU' "$f" || fail "plan_layouts: no memory line"

    # lesson 05: the groups the devices reported
    f=$out/mesh_groups.svg
    grep -q 'Device 5 (dp 0, tp 1, pp 1): TP group {4, 5}, DP group {5, 7}, PP group {1, 5}' "$f" \
        || fail "mesh: no groups of device 5"
    for g in '{0, 1} {2, 3} {4, 5} {6, 7}' '{0, 2} {1, 3} {4, 6} {5, 7}' '{0, 4} {1, 5} {2, 6} {3, 7}'; do
        grep -q "4 groups: $g" "$f" || fail "mesh: no groups $g"
    done
    grep -q '1 + 2·(0 + 2·1) = 5' "$f" || fail "mesh: no rank formula for device 5"

    # expert parallelism: EP groups of consecutive DP ranks, expert-DP groups
    # of one EP rank, and the two all-reduces the devices ran over them
    f=$out/expert_groups.svg
    for t in 'EP group {0, 1}: all-to-alls of the tokens' 'EP group {2, 3}: all-to-alls of the tokens' \
             'expert-DP group {0, 2}: experts 0, 1' 'expert-DP group {1, 3}: experts 2, 3' \
             'summed over all of DP: 1 + 2 + 3 + 4 = 10 on every device' \
             'Expert gradients only over the expert-DP group: {0, 2} sums 4, {1, 3} sums 6'; do
        grep -qF "$t" "$f" || fail "expert_groups: no '$t'"
    done

    # MoE parallel folding: one EP group over the TP pairs, the fold group's
    # all-gather rebuilding each TP group's slices (real devices, checked)
    f=$out/moe_folding.svg
    for t in 'EP group {0, 1, 2, 3}: all-to-alls of the routed rows, across the TP pairs' \
             'fold {0, 1} all-gathers: a b' 'fold {2, 3} all-gathers: c d' 'TP group {2, 3}: the same rows' \
             'whole: experts&apos; TP 1, expert-DP 1'; do
        grep -qF "$t" "$f" || fail "moe_folding: no '$t'"
    done

    # Attention in tiles: T 256 in tiles of 64 computes 10 of 16 tiles (40960
    # = 0.62 T^2 scores a head), and a block keeps a log-sum-exp a query
    f=$out/attention_tiles.svg
    for t in '65536 scores a head (1.00 T²)' '40960 scores a head (0.62 T²)' 'B nh T log-sum-exps' \
             '32896 of the 65536 scores are needed'; do
        grep -qF "$t" "$f" || fail "attention_tiles: no '$t'"
    done

    # HSDP against ZeRO-3: the replicas' all-reduce is all that leaves a node,
    # 2(R-1)/(RN) S = S/4 of ZeRO-3's 3(N-1)/N S with N = 8: 1/4 / (21/8) = 9.5%
    f=$out/hsdp.svg
    for t in 'one group of 8 across both nodes (InfiniBand):' 'shard groups of 4, one a node (NVLink):' \
             'replica groups of 2, across the nodes (InfiniBand):' 'sends only 9.5% of its cross-node bytes' \
             'ZeRO++ qgZ: --zero 3 --zero-qgz (INT4, 4 GPUs a node)' \
             'the gradient&apos;s INT4 all-to-all in the node:'; do
        grep -qF "$t" "$f" || fail "hsdp: no '$t'"
    done
    # qgZ's share of ZeRO-3's cross-node bytes: about two thirds (the gathers stay exact), in float
    # 67.3%, in double 67.0% (its INT4 codes a smaller part of 8-byte gradients)
    q=$(grep -o 'qgZ sends [0-9.]*% of ZeRO-3' "$f" | grep -o '[0-9.]*%' | tr -d '%')
    [[ -n $q ]] && awk -v q="$q" 'BEGIN { exit !(q > 66.6 && q < 67.5) }' || fail "hsdp: qgZ's share '$q%', not about 2/3"


    # a mixture of experts' dispatch: the router's loads add up to k B T, one
    # line per choice, dashed exactly for the choices the all-to-all sends
    f=$out/moe_dispatch.svg
    loads=$(grep -o 'Loads [0-9]* + [0-9]* + [0-9]* + [0-9]* = k B T = 2 × 2 × 16 = 64 choices, none dropped' "$f" |
            grep -o '^Loads [0-9 +]*' | tr -dc '0-9+\n' | sed 's/^+//')
    [[ -n $loads && $(( ${loads//+/ + } )) -eq 64 ]] || fail "moe_dispatch: no loads summing to k B T = 64 ('$loads')"
    sends=$(grep -o 'rank 0 sends [0-9]* token rows to rank 1 ([^)]*), rank 1 sends [0-9]* to rank 0' "$f" |
            grep -o 'sends [0-9]*' | grep -o '[0-9]*' | paste -sd+)
    [[ -n $sends && $(grep -c '<line' "$f") -eq 64 && $(grep -c 'stroke-dasharray' "$f") -eq $(( sends )) ]] \
        || fail "moe_dispatch: expected 64 choices, the dashed ones the all-to-all's $sends rows"
    grep -q 'its loads checked equal to what the model' "$f" || fail "moe_dispatch: no check against the model's router"

    # lesson 06: each stage's formulas, with the measured peaks beside them
    f=$out/zero_ownership.svg
    grep -q 'P = 267856 parameters' "$f" || fail "zero: no P"
    for t in 'plain DP (--zero 0)' 'ZeRO-1 (--zero 1)' 'ZeRO-2 (--zero 2)'; do
        grep -q ">$t" "$f" || fail "zero: no row '$t'"
    done
    [[ $(grep -c '>2P/N<' "$f") -eq 2 && $(grep -c '>P/N<' "$f") -eq 1 && $(grep -c '>P (bucket)<' "$f") -eq 1 ]] \
        || fail "zero: expected 2P/N twice, P/N and the bucket once"
    [[ $(grep -c '>DP sent/step<' "$f") -eq 3 ]] || fail "zero: expected the DP bytes of three stages"
    grep -q 'its peak total, [0-9.]* [KM]iB, is' "$f" || fail "zero: no measured peak total of ZeRO-2"

    # ZeRO's memory table: four stages of the default GPT (Ψ = 106240), each
    # the formula in this build's float, the arena (equal at rest), and bf16
    # mixed (2 + 2 + 12 bytes): in the float build its arena measured under
    # --precision bf16, equal at rest to the formula; in ptdp-f64 the formula
    f=$out/zero_memory.svg
    grep -q 'Ψ = 106240 parameters' "$f" || fail "zero_memory: no Ψ"
    for t in 'plain DP (--zero 0)' 'ZeRO-1 (--zero 1)' 'ZeRO-2 (--zero 2)' 'ZeRO-3 (--zero 3)'; do
        grep -q ">$t" "$f" || fail "zero_memory: no stage '$t'"
    done
    ! grep -q '≠' "$f" || fail "zero_memory: an arena differs from its formula"
    if grep -q 'bf16 mixed: 2 + 2 + 12, measured' "$f"; then
        [[ $(grep -c 'at rest = formula' "$f") -eq 8 ]] \
            || fail "zero_memory: expected the arena at rest = formula in all 4 stages, f32 and bf16"
        [[ $(grep -c '>arena, bf16, measured<' "$f") -eq 4 ]] || fail "zero_memory: expected 4 measured bf16 bars"
        for t in '1.62 MiB at rest = formula (16Ψ)' '726.25 KiB at rest = formula (4Ψ + 12Ψ/N)' \
                 '570.62 KiB at rest = formula (2Ψ + 14Ψ/N); + [0-9.]* KiB units + [0-9.]* KiB bucket' \
                 '415.00 KiB at rest = formula (16Ψ/N); + [0-9.]* KiB units'; do
            grep -q ">$t" "$f" || fail "zero_memory: no bf16 arena '$t'"
        done
        grep -q 'bf16 moves bf16 stores, half the bytes, measured = formula: 311.25 KiB, 466.89 KiB and 933.76 KiB' "$f" \
            || fail "zero_memory: no bf16 DP bytes (half of float's)"
    else
        [[ $(grep -c 'at rest = formula' "$f") -eq 4 ]] \
            || fail "zero_memory: expected the arena at rest = formula in all 4 stages"
        [[ $(grep -c '>formula, bf16 mixed<' "$f") -eq 4 ]] || fail "zero_memory: expected 4 bf16 formula bars"
        for t in '16Ψ = 1.62 MiB' '4Ψ + 12Ψ/N = 726.25 KiB' '2Ψ + 14Ψ/N = 570.62 KiB' '16Ψ/N = 415.00 KiB'; do
            grep -q ">$t<" "$f" || fail "zero_memory: no bf16 formula '$t'"
        done
    fi
    grep -q 'at rest = formula; + [0-9.]* [KM]iB bucket' "$f" || fail "zero_memory: no ZeRO-2 bucket"
    grep -q 'at rest = formula; + [0-9.]* [KM]iB units' "$f" || fail "zero_memory: no ZeRO-3 gathered units"

    # one ZeRO-3 step in time, --overlap against blocking, 2 devices: both
    # step times, the saving, the bytes = 3M(N-1)/N S, gathers and
    # reduce-scatters on the comm tracks (AG / RS labels)
    f=$out/zero_overlap.svg
    ovl=$(grep -o '>--zero 3 --overlap: step [0-9.]* µs<' "$f" | grep -o '[0-9.]*')
    blk=$(grep -o '>--zero 3, blocking: step [0-9.]* µs<' "$f" | grep -o '[0-9.]*')
    [[ -n $ovl && -n $blk ]] && awk -v a="$ovl" -v b="$blk" 'BEGIN { exit !(a < b) }' \
        || fail "zero_overlap: expected a shorter --overlap step, got '$ovl' against '$blk'"
    grep -q "The step: $blk µs blocking, $ovl µs with --overlap" "$f" || fail "zero_overlap: no step times in the caption"
    grep -q 'Device 0 sent [0-9.]* [KM]iB in the step = 3M(N−1)/N S' "$f" || fail "zero_overlap: no bytes per step"
    grep -q '5 gathers and 4 reduce-scatters on its comm stream' "$f" || fail "zero_overlap: no collectives counted"
    [[ $(grep -c '>device [01] comm<' "$f") -eq 2 ]] || fail "zero_overlap: expected two comm tracks"
    [[ $(grep -c '>AG<' "$f") -ge 10 && $(grep -c '>RS<' "$f") -ge 8 ]] || fail "zero_overlap: too few AG / RS labels"

    # lesson 07: the default GPT at tp 2 — c_attn's q, k, v rows by head,
    # c_proj's columns, the vocabulary padded at two multiples
    f=$out/attention_tp.svg
    for t in 'rank 0 · q rows 0–31' 'rank 1 · q rows 32–63' 'rank 0 · k rows 64–95' 'rank 1 · k rows 96–127' \
             'rank 0 · v rows 128–159' 'rank 1 · v rows 160–191'; do
        grep -q ">$t<" "$f" || fail "attention: no c_attn run '$t'"
    done
    [[ $(grep -c '>heads 0–1<' "$f") -eq 4 && $(grep -c '>heads 2–3<' "$f") -eq 4 ]] \
        || fail "attention: expected heads 0–1 and 2–3 on three c_attn blocks and c_proj each"
    grep -q '>cols 0–31<' "$f" && grep -q '>cols 32–63<' "$f" || fail "attention: no c_proj columns per rank"
    grep -q '>V_pad = 128<' "$f" && grep -q '>V_pad = 64<' "$f" || fail "attention: no V_pad 128 and 64"
    grep -q '64 × 2 → 128, 66 padding rows; 8 × 2 → 64, 2 padding rows' "$f" \
        || fail "attention: no padding arithmetic in the caption"
    [[ $(grep -c '>padding 62–63<' "$f") -eq 2 ]] && grep -q '>padding 64–127<' "$f" \
        || fail "attention: padding rows not marked per rank"
    grep -q 'rank 1 holds padding only' "$f" || fail "attention: rank 1's all-padding rows not said"
    grep -q 'every element held by exactly one rank' "$f" || fail "attention: no coverage check said"

    # sequence parallelism: the default GPT at tp 2 with --sp, B = 64 — the
    # SP regions' tensors split along T (positions found by value), the TP
    # region's by head or F/tp, the joins (ḡ is g and a combining macron),
    # the formula beside the arena (one block more: the formula's bytes;
    # the SVG writes ' as &apos;) and one step's bytes
    f=$out/sp_block.svg
    [[ $(grep -c '>rank 0: positions 0–15<' "$f") -eq 6 && $(grep -c '>rank 1: positions 16–31<' "$f") -eq 6 ]] \
        || fail "sp: expected positions 0–15 and 16–31 on x, ln1, x2 (twice), ln2 and out"
    [[ $(grep -c '>64 × 16 × 64 per rank<' "$f") -eq 6 && $(grep -c '>64 × 32 × 64 per rank<' "$f") -eq 0 ]] \
        || fail "sp: expected B × T/tp × C six times (x, ln1, x2, x2, ln2, out), no gathered B × T × C kept"
    grep -q '>64 × 32 × 96 per rank<' "$f" && grep -q '>64 × 32 × 32 per rank<' "$f" \
        && [[ $(grep -c '>64 × 32 × 128 per rank<' "$f") -eq 2 ]] || fail "sp: no qkv, y, fc and gelu shapes"
    grep -q '>rank 0: q k v, heads 0–1<' "$f" && grep -q '>rank 1: q k v, heads 2–3<' "$f" \
        || fail "sp: no heads per rank on qkv"
    [[ $(grep -c '>rank 1: columns 128–255<' "$f") -eq 2 ]] || fail "sp: no F/tp columns of rank 1"
    [[ $(grep -c '>g[^ ]*: all-gather along T<' "$f") -eq 2 && $(grep -c '>g: reduce-scatter along T<' "$f") -eq 2 \
       && $(grep -c '>backward: reduce-scatter, and all-gather again<' "$f") -eq 2 \
       && $(grep -c '>backward: all-gather<' "$f") -eq 2 ]] \
        || fail "sp: expected two ḡ and two g joins with their backward partners"
    grep -q 'ln_1.weight, ln_1.bias \[64\]: replicated.*gradient all-reduced over TP' "$f" \
        || fail "sp: the LayerNorm parameters not marked replicated, gradient all-reduced"
    grep -q '1183744 elements with SP, 1449984 with TP alone (81.6%)' "$f" || fail "sp: no formula per block"
    kept=$(grep -o 'one block more adds [0-9]* B and [0-9]* B' "$f" | grep -o '[0-9]* B and [0-9]* B')
    [[ -n $kept ]] && grep -q "(the formula.* $kept, exactly)" "$f" \
        || fail "sp: one block more measured '$kept', not the formula's bytes exactly"
    grep -q 'with --sp (10 reduce-scatters, 15 all-gathers, 14 all-reduces), [0-9]* B without (14 all-reduces)' "$f" \
        || fail "sp: no collectives of one step"
    e=4; [[ $("$ptdp" version) == *f64* ]] && e=8   # bytes of a real: 5 gathers of (tp-1)/tp x 64 x 32 x 64 of them
    grep -q "the [0-9]* B more are the all-reduce of the LayerNorms[^ ]* 640 gradients and the 5 shards gathered again ($((5 * 1024 * 64 * e)) B)" "$f" \
        || fail "sp: the extra bytes of --sp are not the LayerNorms' all-reduce and the shards gathered again"

    # ring attention, cp = 4, T = 32: at step s rank r holds rank r - s's
    # block (cells drawn rank by rank, step by step: zigzag, then
    # contiguous); the pairs per cell; the work per rank from
    # ptdp_ring_attention_scores; the bytes of a real ring
    f=$out/ring_attention.svg
    owners=$(grep -o '>kv of rank [0-9]: chunks\? [0-9, ]*<' "$f" | sed 's/>kv of rank \([0-9]\).*/\1/' | tr -d '\n')
    [[ $owners == 03211032210332100321103221033210 ]] \
        || fail "ring attention: expected rank r - step's block in each cell, got owners $owners"
    for r in 0 1 2 3; do
        grep -q ">kv of rank $r: chunks $r, $((7 - r))<" "$f" && grep -q ">kv of rank $r: chunk $r<" "$f" \
            || fail "ring attention: rank $r's block is not chunks $r, $((7 - r)) (zigzag) and chunk $r (contiguous)"
    done
    [[ $(grep -c '>48 scores<' "$f") -eq 4 && $(grep -c '>32 scores<' "$f") -eq 12 \
       && $(grep -c '>64 scores<' "$f") -eq 10 && $(grep -c '>0 scores<' "$f") -eq 6 ]] \
        || fail "ring attention: expected 4 cells of 48 scores and 12 of 32 (zigzag), 10 of 64 and 6 of 0 (contiguous)"
    [[ $(grep -c '>1 full, 2 masked<' "$f") -eq 4 && $(grep -c '>2 full, 0 masked<' "$f") -eq 12 ]] \
        || fail "ring attention: expected the diagonal pairs masked at step 0 only"
    # one triangle per masked pair (8 zigzag, 4 contiguous) and the legend's
    [[ $(grep -c '<polygon' "$f") -eq 13 ]] || fail "ring attention: expected 13 masked triangles"
    [[ $(grep -c '>144<' "$f") -eq 4 ]] && grep -q '>64<' "$f" && grep -q '>128<' "$f" && grep -q '>192<' "$f" \
        && grep -q '>256<' "$f" || fail "ring attention: no scores per rank 144 x 4 and 64, 128, 192, 256"
    grep -q 'zigzag 144, 144, 144, 144, equal on every rank; contiguous 64, 128, 192, 256 = 1, 2, 3, 4 times rank 0' \
        "$f" || fail "ring attention: no work per rank compared in the caption"
    grep -q 'each equals ptdp_ring_attention_scores' "$f" || fail "ring attention: no check against the library said"
    bytes=$(grep -o '2 × 8 × 16 = 256 reals = [0-9]* B, over N − 1 = 3 passes: [0-9]* B sent per rank (zigzag), [0-9]* B' "$f" \
            | grep -o '[0-9]* B' | grep -o '[0-9]*' | tr '\n' ' ')
    read -r step zig con <<<"$bytes"
    grep -q 'each step sends B T/N 2C per rank' "$f" && [[ -n $step && $zig -eq $((3 * step)) && $con -eq $zig ]] \
        && [[ $step -eq 1024 || $step -eq 2048 ]] \
        || fail "ring attention: expected 256 reals per step and 3 steps sent per rank in both layouts, got '$bytes'"

    # Ulysses: checked on 4 real devices, each rank's two all-to-alls 2 x 3/4 of its 8 cells
    f=$out/ulysses.svg
    grep -q 'checked on 4 devices with ptdp_all_to_all' "$f" || fail "ulysses: no check on real devices said"
    grep -qE 'each rank sent (48|96) B in the two all-to-alls' "$f" || fail "ulysses: no bytes of 2 x 3/4 of 8 cells"

    # the memory figure: the ZeRO runs and the comm category
    f=$out/memory_per_device.svg
    grep -q '>ZeRO-1<' "$f" && grep -q '>ZeRO-2<' "$f" || fail "memory: no ZeRO bars"
    grep -q '>comm<' "$f" || fail "memory: no comm category in the legend"
    echo "ok    captions carry the measurements"
fi

# 3. --only, bad flags, a directory in the way
if "$ptdp" figures --out "$tmp/one" --only pipeline_schedules >"$tmp/out" 2>"$tmp/err" \
    && [[ $(ls "$tmp/one") == pipeline_schedules.svg ]]; then
    echo "ok    --only"
else
    fail "--only pipeline_schedules: $(ls "$tmp/one" 2>&1)"
fi
"$ptdp" figures --only nosuch >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc -eq 2 ]] && grep -q -- '--only' "$tmp/err" || fail "--only nosuch: exit $rc, expected 2 naming the flag"
"$ptdp" figures --bogus >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc -eq 2 ]] || fail "--bogus: exit $rc, expected 2"
: >"$tmp/file"
"$ptdp" figures --out "$tmp/file/sub" >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--out .*cannot create directory" "$tmp/err" \
    || fail "--out under a regular file: exit $rc, expected 2 naming --out (a usage error, as train's outputs)"
"$ptdp" figures --out "$tmp/file" >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc -eq 2 ]] || fail "--out naming a regular file: exit $rc, expected 2"
echo "ok    usage and directory errors"

[[ $failures -eq 0 ]]
