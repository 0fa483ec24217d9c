#!/usr/bin/env bash
# train_pp.sh PTDP — pipeline parallelism from the command line.
#
#  1. Bad pipeline flags exit 2, name the flag on stderr, print nothing on
#     stdout: --pp above --layers, --micro-batches 0, a batch not divisible
#     by dp x M, --stage-layers that do not add up, contain 0 or have the
#     wrong count, an unknown --schedule; and for the interleaved schedule
#     --virtual-stages 0, v > 1 with another schedule, m not a multiple of
#     p, --pp 1, fewer layers than pieces, --stage-layers without p v entries.
#  2. `ptdp train --pp 4 --micro-batches 8 --check` passes and ends with the
#     bubble (measured next to the formula) and the peak activation memory
#     of each of the 4 stages; under --profile ideal the two bubbles agree;
#     the same for --schedule interleaved --virtual-stages 2, whose line
#     shows (p-1)/(v*m+p-1) and the point-to-point bytes.
#  3. `ptdp schedule --pp 4 --micro-batches 8 --schedule 1f1b` prints one
#     row per stage with every F<k> and B<k>, idle as dots, and the bubble
#     measured and by formula; --svg writes a well-formed SVG.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors -------------------------------------------------------------------
t="train --steps 1 --quiet"
expect_usage "--pp 9: more stages than --layers 8"          -- $t --pp 9
expect_usage "--pp 5: more stages than --layers 4"          -- $t --layers 4 --pp 5
expect_usage "--micro-batches 0: must be between 1"         -- $t --pp 2 --micro-batches 0
expect_usage "--micro-batches -3"                           -- $t --pp 2 --micro-batches -3
expect_usage "--batch 30 must be divisible by --dp x --micro-batches = 2 x 4 = 8" \
                                                            -- $t --pp 2 --dp 2 --micro-batches 4 --batch 30
expect_usage "--batch 64 must be divisible by --dp x --micro-batches = 1 x 3 = 3" \
                                                            -- $t --pp 2 --micro-batches 3
expect_usage "--stage-layers adds up to 7 blocks, but --layers is 8" -- $t --pp 2 --stage-layers 3,4
expect_usage "--stage-layers adds up to 9 blocks, but --layers is 8" -- $t --pp 3 --stage-layers 3,3,3
expect_usage "--stage-layers: stage 1 has 0 blocks"         -- $t --pp 2 --stage-layers 8,0
expect_usage "--stage-layers: stage 0 has 0 blocks"         -- $t --pp 3 --stage-layers 0,4,4
expect_usage "--stage-layers lists 2 stages but --pp is 3"  -- $t --pp 3 --stage-layers 4,4
expect_usage "--stage-layers lists 3 stages but --pp is 2"  -- $t --pp 2 --stage-layers 4,2,2
expect_usage "--stage-layers"                               -- $t --pp 2 --stage-layers 4,x
expect_usage "--stage-layers 4,4,: expected a comma list"   -- $t --pp 2 --stage-layers 4,4,
expect_usage "--stage-layers 4,-4,8: expected a comma list" -- $t --pp 3 --stage-layers 4,-4,8
expect_usage "--schedule zigzag"                            -- $t --pp 2 --schedule zigzag
expect_usage "--pp 0"                                       -- schedule --pp 0
expect_usage "--micro-batches 0"                            -- schedule --micro-batches 0
expect_usage "--schedule zigzag"                            -- schedule --schedule zigzag
# interleaved 1F1B: each mistake found before any work, naming the flags and the fix
i="$t --schedule interleaved"
expect_usage "--virtual-stages 0: must be between 1"        -- $t --pp 2 --virtual-stages 0
expect_usage "--virtual-stages 2: the 1f1b schedule runs one chunk per stage (use --schedule interleaved" \
                                                            -- $t --pp 2 --micro-batches 2 --virtual-stages 2
expect_usage "--virtual-stages 2: the gpipe schedule runs one chunk per stage" \
                                                            -- $t --pp 2 --micro-batches 2 --schedule gpipe --virtual-stages 2
# --no-pair-overlap times a schedule's F&B pairs apart: refused where there are none, as --virtual-stages is
expect_usage "--no-pair-overlap times the all-to-alls of a schedule's overlapped F&B pairs apart, and --schedule 1f1b runs no pairs: use --schedule dualpipev or dualpipe" \
                                                            -- $t --pp 2 --micro-batches 2 --no-pair-overlap
expect_usage "--schedule zb-h1 runs no pairs"               -- $t --pp 2 --micro-batches 2 --schedule zb-h1 --no-pair-overlap
expect_usage "--schedule 1f1b runs no pairs"                -- $t --no-pair-overlap
expect_usage "--micro-batches 6 must be a multiple of --pp 4" -- $i --pp 4 --micro-batches 6 --batch 48 --virtual-stages 2
expect_usage "--schedule interleaved needs --pp 2 or more"  -- $i --pp 1 --virtual-stages 2
expect_usage "--layers 6 cannot be cut into 8 pieces for --pp 4 --virtual-stages 2: need --layers >= 8" \
                                                            -- $i --layers 6 --pp 4 --micro-batches 4 --virtual-stages 2
expect_usage "--stage-layers lists 2 pieces but --pp 2 x --virtual-stages 2 cuts the layers into 4" \
                                                            -- $i --pp 2 --micro-batches 2 --virtual-stages 2 --stage-layers 4,4
expect_usage "--stage-layers: piece 1 (stage 1, chunk 0) has 0 blocks" \
                                                            -- $i --pp 2 --micro-batches 2 --virtual-stages 2 --stage-layers 4,0,2,2

# ---- 2. a pipelined run: --check, the bubble, the peaks -------------------------
before=$failures
if run_ok train --pp 4 --micro-batches 8 --steps 3 --check --quiet; then
    expect_out "check PASSED"
    expect_line '^pipeline \(1f1b, 4 stages, 8 micro-batches\): bubble measured [0-9.]+, formula \(p-1\)/\(m\+p-1\) = 0\.2727'
    expect_line '^  peak activation memory per stage:( [0-9.]+ (B|KiB|MiB)){4}$'
    [[ $failures -eq $before ]] && echo "ok    train --pp 4 --micro-batches 8 --check: passed, bubble and 4 peaks printed"
fi

for sched in gpipe 1f1b; do
    if run_ok train --pp 4 --micro-batches 8 --steps 2 --profile ideal --schedule "$sched" --quiet; then
        read_bubble train
        if [[ -z $measured || $measured != "$formula" || $formula != 0.2727 ]]; then
            fail "train --profile ideal --schedule $sched: bubble measured '$measured', formula '$formula' (want both 0.2727)"
        else
            echo "ok    train --profile ideal --schedule $sched: bubble $measured = formula $formula"
        fi
    fi
done

# interleaved: --check passes; under the ideal profile the bubble is
# (p-1)/(v m+p-1) = 3/11 for p 4, m 4, v 2, measured alike; the
# point-to-point bytes (p v - 1) / (p - 1) = 7/3 times 1F1B's
before=$failures
if run_ok train --pp 2 --micro-batches 4 --schedule interleaved --virtual-stages 2 --steps 2 --check --quiet \
        --report "$tmp/r.json"; then
    expect_out "check PASSED"
    grep -q '"virtual_stages": 2' "$tmp/r.json" || fail "train --schedule interleaved: the report has no \"virtual_stages\": 2"
    [[ $failures -eq $before ]] && echo "ok    train --schedule interleaved --virtual-stages 2 --check: passed, report has virtual_stages"
fi
before=$failures
if run_ok train --pp 4 --micro-batches 4 --schedule interleaved --virtual-stages 2 --steps 2 --profile ideal --quiet; then
    expect_line '^pipeline \(interleaved, 4 stages x 2 virtual stages, 4 micro-batches\): bubble measured 0\.2727, formula \(p-1\)/\(v\*m\+p-1\) = 0\.2727$'
    expect_line '^  point-to-point per step: .* = 2 m \(p v - 1\) = 2 x 4 x 7 = 56 boundary crossings per pipeline; \(p v - 1\) / \(p - 1\) = 2\.33 x 1F1B.s$'
    [[ $failures -eq $before ]] && echo "ok    train --profile ideal --schedule interleaved: bubble 0.2727 both ways, p2p 7/3 of 1F1B's"
fi

# GPipe holds m = 8 micro-batches on every stage, 1F1B only 4, 3, 2, 1:
# every stage's printed peak must be larger under GPipe.
peaks() { sed -nE 's/^  peak activation memory per stage: //p' "$out"; }
to_bytes() {   # "326.00 KiB" -> bytes (integer)
    awk '{ v = $1; u = $2; if (u == "KiB") v *= 1024; else if (u == "MiB") v *= 1048576; printf "%d\n", v }'
}
if run_ok train --pp 4 --micro-batches 8 --steps 1 --schedule gpipe --quiet; then
    gp=$(peaks | grep -oE '[0-9.]+ (B|KiB|MiB)' | to_bytes)
    if run_ok train --pp 4 --micro-batches 8 --steps 1 --schedule 1f1b --quiet; then
        fb=$(peaks | grep -oE '[0-9.]+ (B|KiB|MiB)' | to_bytes)
        if [[ $(wc -l <<<"$gp") -ne 4 || $(wc -l <<<"$fb") -ne 4 ]] ||
           ! paste <(echo "$gp") <(echo "$fb") | awk '$1 <= $2 { bad = 1 } END { exit bad }'; then
            fail "peaks: gpipe [$(echo $gp)] should exceed 1f1b [$(echo $fb)] on every stage"
        else
            echo "ok    peak activations per stage: gpipe [$(echo $gp)] > 1f1b [$(echo $fb)] bytes"
        fi
    fi
fi

# ---- 3. ptdp schedule: the timeline and the picture -----------------------------
if run_ok schedule --pp 4 --micro-batches 8 --schedule 1f1b; then
    ok=1
    for s in 0 1 2 3; do
        row=$(grep -E "^stage $s \|" "$out")
        if [[ -z $row ]]; then
            fail "schedule: no row for stage $s"; ok=0; continue
        fi
        for k in 0 1 2 3 4 5 6 7; do
            if [[ $row != *F$k* || $row != *B$k* ]]; then
                fail "schedule: stage $s row lacks F$k or B$k: $row"; ok=0
            fi
        done
        [[ $s -lt 3 && $row != *.* ]] && { fail "schedule: stage $s shows no idle (.)"; ok=0; }
    done
    if ! has "bubble: measured 0.272727" || ! has "formula (p-1)/(m+p-1) = 3/11 = 0.272727"; then
        fail "schedule: bubble measured / formula line missing"; ok=0
    fi
    [[ $ok -eq 1 ]] && echo "ok    schedule --pp 4 --micro-batches 8 --schedule 1f1b: 4 rows, F0-7 B0-7, bubble 0.272727 both ways"
fi

svg=$tmp/pipe.svg
if run_ok schedule --pp 4 --micro-batches 8 --schedule gpipe --svg "$svg"; then
    if [[ ! -s $svg ]]; then
        fail "schedule --svg: $svg not written"
    elif command -v python3 >/dev/null 2>&1; then
        if python3 - "$svg" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag
rects = root.findall('.//{http://www.w3.org/2000/svg}rect')
texts = [t.text or '' for t in root.iter('{http://www.w3.org/2000/svg}text')]
# 4 stages x 8 micro-batches x (F, B) boxes at least, and the stage labels
assert len(rects) >= 64, len(rects)
assert all(any(t.startswith('stage %d' % s) for t in texts) for s in range(4)), texts[:8]
EOF
        then echo "ok    schedule --svg: well-formed SVG with the stages' boxes"
        else fail "schedule --svg: $svg is not the expected SVG"
        fi
    elif command -v xmllint >/dev/null 2>&1; then
        if xmllint --noout "$svg"; then echo "ok    schedule --svg: well-formed (xmllint)"
        else fail "schedule --svg: xmllint rejects $svg"; fi
    elif head -c 200 "$svg" | grep -q '<svg' && tail -c 20 "$svg" | grep -q '</svg>'; then
        echo "ok    schedule --svg: starts with <svg, ends with </svg> (no XML parser here)"
    else
        fail "schedule --svg: not an SVG"
    fi
fi

echo "train_pp.sh: $((cases - failures)) of $cases cases behaved"
[[ $failures -eq 0 ]]
