#!/usr/bin/env bash
# hpz.sh PTDP — `ptdp train --zero 3 --zero-hpz` (ZeRO++'s hpZ) from the command line.
#
#  1. Bad input exits 2 naming --zero-hpz, nothing on stdout: without --zero 3
#     (stages 0 to 2), without a cluster profile, on a one-node profile, with
#     --shard-group but no profile, a node holding one DP rank (tp = GPUs a
#     node), ZeRO-3's group inside one node, --cp.
#  2. On hgx-a100-4 (4 GPUs a node), dp 8 (two nodes), 2 micro-batches: the
#     bytes across nodes and inside a node each equal their formula as
#     printed (2M(N-1)/N S and M(k-1)/k S), the secondary copy equals S/k;
#     the --report's run.hpz_bytes_per_step and run.hpz_secondary_bytes
#     agree, config.zero_hpz is 4; the cross-node bytes are 2/3 of the same
#     run's without hpZ, whose checkpoint and losses are byte-identical; the
#     --html page puts the node group's gathers within a node.
#  3. dp 4 x tp 2 (node groups of 2 DP ranks) passes --check.
#  4. With HSDP (--shard-group 4, dp 8 x tp 2): node groups of 2 inside each
#     shard group, the inside bytes and the copy equal to their formulas,
#     HSDP's shard line giving hpZ's formula.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors ------------------------------------------------------------------
t="train --steps 1 --quiet --zero-hpz"
expect_usage "--zero-hpz needs --zero 3 (ZeRO++'s secondary partition of ZeRO-3's parameters)" -- $t --dp 8
for s in 1 2; do
    expect_usage "--zero-hpz needs --zero 3" -- $t --dp 8 --zero $s --profile hgx-a100-4
done
expect_usage "--zero-hpz keeps ZeRO-3's secondary pieces inside a node: it needs a cluster profile" \
    -- $t --dp 8 --zero 3
expect_usage "not a one-node one"                    -- $t --dp 8 --zero 3 --profile dgx-a100
expect_usage "--zero-hpz with --shard-group 4 and no cluster profile" -- $t --dp 8 --zero 3 --shard-group 4
expect_usage "its node group is 1 DP rank"          -- $t --dp 2 --tp 4 --zero 3 --profile hgx-a100-4
expect_usage "the group lies inside one node"       -- $t --dp 4 --zero 3 --profile hgx-a100-4
expect_usage "the group lies inside one node"       -- $t --dp 8 --zero 3 --profile dgx-h100
expect_usage "--zero-hpz with --cp 2"               -- $t --model gpt --dp 8 --cp 2 --zero 3 --profile hgx-a100-4

# ---- 2. bytes by link level, memory, the same bits ---------------------------------------
# "... formula RULE = X, measured Y": X and Y as printed must agree
formula_and_measured() {
    local line f m
    line=$(grep -F -- "$1" "$out") || { fail "no \"$1\" line"; return; }
    f=$(sed -E 's/.*formula [^=]*= ([0-9.]+ [KMG]?i?B), measured.*/\1/' <<<"$line")
    m=$(sed -E 's/.*, measured ([0-9.]+ [KMG]?i?B).*/\1/' <<<"$line")
    if [[ -z $f || $f != "$m" ]]; then fail "$1: formula $f, measured $m: $line"
    else echo "ok    $1: formula $f, measured $m"
    fi
}

r="train --profile hgx-a100-4 --dp 8 --zero 3 --micro-batches 2 --batch 16 --steps 2"
if run_ok $r --save "$tmp/a.st" --log "$tmp/a.jsonl" --report "$tmp/a.json"; then
    cp "$out" "$tmp/a.out"
fi
if run_ok $r --zero-hpz --save "$tmp/b.st" --log "$tmp/b.jsonl" --report "$tmp/b.json"; then
    expect_out "ZeRO++ hpZ, node groups of k = 4 DP ranks inside ZeRO-3's DP group of N = 8"
    formula_and_measured "across nodes  the forward's gather and the reduce-scatter: formula 2M(N-1)/N S"
    formula_and_measured "inside a node the backward's gather of the secondary pieces: formula M(k-1)/k S"
    formula_and_measured "memory        the secondary copy (params, \"zero.hpz_secondary\") at its peak: formula 1/k S"
    report_config "$tmp/b.json" zero_hpz 4
    if cmp -s "$tmp/a.st" "$tmp/b.st"; then echo "ok    the checkpoint with hpZ is the bytes of the one without"
    else fail "the checkpoints with and without --zero-hpz differ"; fi
    if command -v python3 >/dev/null; then
        python3 - "$tmp/a.json" "$tmp/b.json" "$tmp/a.jsonl" "$tmp/b.jsonl" <<'PY' \
            && echo "ok    report: across nodes 2/3 of ZeRO-3's, inside = formula, secondary = S/k; the same losses" \
            || fail "the reports or logs with and without --zero-hpz disagree with the formulas"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
h, s = b["run"]["hpz_bytes_per_step"], b["run"]["hpz_secondary_bytes"]
assert h["inside_node"]["measured"] == h["inside_node"]["formula"] > 0, h
assert 0 <= h["across_nodes"]["measured"] - h["across_nodes"]["formula"] <= 16, h   # + the norm's double
def mean_dp(r):   # the formulas are means over devices (a unit's shares differ by an element)
    return sum(d["bytes_sent_per_step"]["dp"] for d in r["devices"]) / len(r["devices"])
dp_without = mean_dp(a)
assert abs(h["across_nodes"]["without_hpz"] - 1.5 * h["across_nodes"]["formula"]) < 1e-6 * dp_without, h
assert abs(dp_without - h["across_nodes"]["without_hpz"]) <= 16, (dp_without, h)
assert mean_dp(b) == h["across_nodes"]["measured"], b["devices"][0]
assert s["measured"] == s["formula"] > 0, s
extra = b["devices"][0]["memory_peak_bytes"]["params"] - a["devices"][0]["memory_peak_bytes"]["params"]
assert 0 < extra <= s["measured"], (extra, s)
assert "hpz_bytes_per_step" not in a["run"] and "zero_hpz" not in a["config"], a["run"]
la, lb = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[3:5])
assert la == lb and len(la) == 2, (la, lb)
PY
    fi
fi

# the train page (--html) places the node group's gathers within a node, ZeRO-3's across
if run_ok $r --zero-hpz --quiet --html "$tmp/p.html" && command -v python3 >/dev/null; then
    python3 - "$tmp/p.html" <<'PY' && echo "ok    --html: all_gather hpz within a node, all_gather dp across nodes" \
        || fail "the train page does not place hpZ's gathers within a node"
import re, sys
t = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", open(sys.argv[1]).read()))
assert re.search(r"all_gather hpz within a node [1-9]", t), t[:2000]
assert re.search(r"all_gather dp across nodes [1-9]", t), t[:2000]
PY
fi

# ---- 3. --check, node groups of 2 under TP ------------------------------------------------
if run_ok train --profile hgx-a100-4 --dp 4 --tp 2 --zero 3 --zero-hpz --micro-batches 2 --batch 8 --steps 2 --check; then
    expect_out "node groups of k = 2 DP ranks" "check PASSED"
fi

# ---- 4. with HSDP: node groups of 2 inside shard groups of 4 (each spanning two nodes) --------
if run_ok train --profile hgx-a100-4 --dp 8 --tp 2 --zero 3 --shard-group 4 --zero-hpz --batch 16 --steps 2; then
    expect_out "node groups of k = 2 DP ranks inside ZeRO-3's shard group of N = 4" \
        "shard group   ZeRO-3 inside it: formula 2M(N-1)/N S (hpZ)"
    formula_and_measured "inside a node the backward's gather of the secondary pieces: formula M(k-1)/k S"
    formula_and_measured "memory        the secondary copy (params, \"zero.hpz_secondary\") at its peak: formula 1/k S"
    formula_and_measured "replica group the shard all-reduced once a step: formula 2(R-1)/(RN) S"
fi

finish hpz "$cases runs: --zero-hpz's refusals, bytes by link level and memory beside their formulas, the same bits"
