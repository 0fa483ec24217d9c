#!/usr/bin/env bash
# dualpipev_overlap.sh — DualPipeV's F&B pairs hide expert parallelism's
# all-to-alls in `ptdp train` (pair.h): a dualpipev run with --ep under
# dgx-h100 passes --check, its report shows EP all-to-all time hidden
# (run.ep_hidden_s_per_step > 0) and its trace the all-to-alls on each
# device's communication track; the same run with --no-pair-overlap (the
# all-to-alls on the compute stream, as F then B) trains the same bits,
# hides nothing and takes longer; a schedule without pairs hides nothing.
# DualPipe (two copies, the same pairs) hides them too, with the same bits
# as its own --no-pair-overlap run.
#
#   dualpipev_overlap.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

run="train --model gpt --layers 4 --moe-experts 4 --ep 2 --dp 2 --pp 2 --micro-batches 4 --profile dgx-h100 --steps 2"

"$ptdp" train --help > "$out" 2>&1
has "--no-pair-overlap" || fail "ptdp train --help does not document --no-pair-overlap"

if run_ok $run --schedule dualpipev --check --trace "$tmp/t.json" --report "$tmp/pair.json" --log "$tmp/pair.jsonl"; then
    has "check PASSED" || fail "dualpipev with ep 2 did not pass --check"
    has "under the compute of F&B pairs" || fail "the run does not print the all-to-alls its pairs hid"
    report_config "$tmp/pair.json" pair_overlap true
fi
if run_ok $run --schedule dualpipev --no-pair-overlap --report "$tmp/serial.json" --log "$tmp/serial.jsonl"; then
    has "(--no-pair-overlap)" || fail "--no-pair-overlap is not said in the EP lines"
    report_config "$tmp/serial.json" pair_overlap false
    if [[ "$(grep -o '"loss": [^,]*, "grad_norm": [^,]*' "$tmp/pair.jsonl")" == \
          "$(grep -o '"loss": [^,]*, "grad_norm": [^,]*' "$tmp/serial.jsonl")" ]]; then
        echo "ok    --no-pair-overlap: the same losses and norms, bit for bit"
    else
        fail "--no-pair-overlap changes the losses or norms"
    fi
fi
run_ok $run --schedule 1f1b --report "$tmp/1f1b.json" || true

if command -v python3 >/dev/null && [[ -f "$tmp/pair.json" && -f "$tmp/serial.json" && -f "$tmp/1f1b.json" ]]; then
    python3 - "$tmp/pair.json" "$tmp/serial.json" "$tmp/1f1b.json" "$tmp/t.json" <<'PY' \
        && echo "ok    the pairs hide EP all-to-all time; the step is shorter than with them on the compute stream" \
        || fail "the pairs' overlap is not in the report or the trace"
import json, sys
pair, serial, plain = (json.load(open(p))["run"] for p in sys.argv[1:4])
hid, exp = pair["ep_hidden_s_per_step"], pair["ep_exposed_s_per_step"]
assert hid > 0 and exp >= 0, pair
assert serial["ep_hidden_s_per_step"] == 0, serial
total = serial["ep_exposed_s_per_step"]        # every all-to-all on the compute stream
assert abs(hid + exp - total) <= 1e-12 * total, (hid, exp, total)
assert pair["virtual_s"] < serial["virtual_s"], (pair["virtual_s"], serial["virtual_s"])
assert pair["comm_hidden_s_per_step"] >= hid, pair
assert plain["ep_hidden_s_per_step"] == 0 and plain["ep_exposed_s_per_step"] > 0, plain
print("      step %.2f us with the overlap, %.2f us without; %.2f of %.2f us of EP all-to-alls hidden a device"
      % (pair["virtual_s"] / 2 * 1e6, serial["virtual_s"] / 2 * 1e6, hid * 1e6, total * 1e6))
events = json.load(open(sys.argv[4]))["traceEvents"]
comm = [e for e in events if e.get("ph") == "X" and e.get("pid") == 0 and e.get("tid", 0) >= 1000
        and e["name"].startswith("all_to_all")]
assert len(comm) > 0, "no all-to-all on a communication track"
PY
fi

# DualPipe: the two copies' pairs hide the same kind of all-to-alls.
for mode in pair serial; do
    flag=""; [[ $mode == serial ]] && flag=--no-pair-overlap
    run_ok $run --schedule dualpipe $flag --report "$tmp/dual_$mode.json" --log "$tmp/dual_$mode.jsonl" || true
done
if command -v python3 >/dev/null && [[ -f "$tmp/dual_pair.json" && -f "$tmp/dual_serial.json" ]]; then
    [[ "$(grep -o '"loss": [^,]*, "grad_norm": [^,]*' "$tmp/dual_pair.jsonl")" == \
       "$(grep -o '"loss": [^,]*, "grad_norm": [^,]*' "$tmp/dual_serial.jsonl")" ]] \
        || fail "dualpipe: --no-pair-overlap changes the losses or norms"
    python3 - "$tmp/dual_pair.json" "$tmp/dual_serial.json" <<'PY' \
        && echo "ok    dualpipe: its pairs hide EP all-to-all time, the same bits as --no-pair-overlap" \
        || fail "dualpipe's pairs hide no all-to-all time"
import json, sys
pair, serial = (json.load(open(p))["run"] for p in sys.argv[1:3])
assert pair["ep_hidden_s_per_step"] > 0 and serial["ep_hidden_s_per_step"] == 0, (pair, serial)
assert pair["virtual_s"] < serial["virtual_s"], (pair["virtual_s"], serial["virtual_s"])
PY
fi

finish "dualpipev_overlap" "F&B pairs hide the EP all-to-alls, the same bits"
