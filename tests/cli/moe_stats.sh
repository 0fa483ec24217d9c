#!/usr/bin/env bash
# moe_stats.sh — what a run shows of its experts, per MoE block and step:
# --log's moe_load, moe_dropped and moe_aux_loss, --report's moe_blocks,
# the closing lines — checked by the identities any run must obey:
#
#   dropless                 sum_e load[e] = k B T and dropped = 0, each step
#   capacity factor c        sum_e load[e] + dropped = k B T,
#                            load[e] <= ceil(c k T / E) x B (B sequences)
#   always                   the blocks' moe_aux_loss sum to the step's aux_loss;
#                            the report's first/last/totals are the log's;
#                            the same loads at dp 2, pp 2, interleaved and
#                            full recomputation as on one device (every
#                            layout routes the same tokens, each once)
#
#   moe_stats.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

B=8 T=16 k=2 E=4
g="train --model gpt --moe-experts $E --moe-every 2 --layers 4 --seq-len $T --batch $B --steps 2"

# check.py LOG REPORT CAPACITY: the identities of one run (CAPACITY 0: dropless)
cat >"$tmp/check.py" <<'PY'
import json, math, sys
log = [json.loads(l) for l in open(sys.argv[1])]
rep = json.load(open(sys.argv[2]))["run"]
c, B, T, k, E = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
kBT = k * B * T
assert rep["moe_choices_per_step"] == kBT, rep["moe_choices_per_step"]
blocks = rep["moe_blocks"]
assert [b["block"] for b in blocks] == [1, 3], [b["block"] for b in blocks]
drops = 0
for s in log:
    assert len(s["moe_load"]) == len(s["moe_dropped"]) == len(s["moe_aux_loss"]) == 2
    for load, dropped in zip(s["moe_load"], s["moe_dropped"]):
        assert len(load) == E
        assert sum(load) + dropped == kBT, (s["step"], load, dropped)
        if c == 0:
            assert dropped == 0, (s["step"], dropped)
        else:
            assert max(load) <= math.ceil(c * k * T / E) * B, (s["step"], load)
        drops += dropped
    assert abs(sum(s["moe_aux_loss"]) - s["aux_loss"]) <= 1e-12 * abs(s["aux_loss"]), s
assert c == 0 or drops > 0, "a capacity this small drops nothing: the test cannot tell"
for j, b in enumerate(blocks):
    assert b["first_load"] == log[0]["moe_load"][j] and b["last_load"] == log[-1]["moe_load"][j]
    assert b["first_dropped"] == log[0]["moe_dropped"][j] and b["last_dropped"] == log[-1]["moe_dropped"][j]
    assert b["load"] == [sum(s["moe_load"][j][e] for s in log) for e in range(E)]
    assert b["dropped"] == sum(s["moe_dropped"][j] for s in log)
    assert b["first_aux_loss"] == log[0]["moe_aux_loss"][j] and b["last_aux_loss"] == log[-1]["moe_aux_loss"][j]
PY
# loads.py LOG: the loads and drops of every step, one line
cat >"$tmp/loads.py" <<'PY'
import json, sys
print([(s["moe_load"], s["moe_dropped"]) for s in map(json.loads, open(sys.argv[1]))])
PY

for cap in 0 0.5; do
    flags=$g
    [[ $cap != 0 ]] && flags="$g --moe-capacity-factor $cap"
    if run_ok $flags --log "$tmp/one.jsonl" --report "$tmp/one.json"; then
        python3 "$tmp/check.py" "$tmp/one.jsonl" "$tmp/one.json" $cap $B $T $k $E 2>"$err" \
            && echo "ok    capacity $cap: loads, drops and balance losses obey their identities" \
            || fail "capacity $cap: an identity of the experts' counts fails"
        has "experts' loads, the last step" && has "  block 3:" \
            || fail "capacity $cap: no closing line of the experts' loads"
        python3 "$tmp/loads.py" "$tmp/one.jsonl" >"$tmp/one.loads"
    fi
    for layout in "--dp 2" "--pp 2 --micro-batches 2" "--recompute full" \
                  "--dp 2 --pp 2 --micro-batches 2 --recompute full" \
                  "--pp 2 --micro-batches 4 --schedule interleaved --virtual-stages 2"; do
        if run_ok $flags $layout --log "$tmp/l.jsonl" --report "$tmp/l.json"; then
            python3 "$tmp/check.py" "$tmp/l.jsonl" "$tmp/l.json" $cap $B $T $k $E 2>"$err" \
                || fail "capacity $cap, $layout: an identity of the experts' counts fails"
            python3 "$tmp/loads.py" "$tmp/l.jsonl" >"$tmp/l.loads"
            cmp -s "$tmp/one.loads" "$tmp/l.loads" \
                && echo "ok    capacity $cap, $layout: the loads of one device" \
                || fail "capacity $cap, $layout: loads $(cat "$tmp/l.loads") differ from one device's" \
                        "$(cat "$tmp/one.loads")"
        fi
    done
done

# a dense GPT counts nothing: no expert keys anywhere
if run_ok train --model gpt --layers 2 --steps 1 --log "$tmp/d.jsonl" --report "$tmp/d.json"; then
    ! grep -q moe_ "$tmp/d.jsonl" && ! grep -q moe_blocks "$tmp/d.json" && ! has "experts' loads" \
        && echo "ok    a dense GPT writes no expert keys" || fail "a dense GPT writes expert keys"
fi
finish "moe_stats" "loads, drops and balance losses per block obey k B T at every layout"
