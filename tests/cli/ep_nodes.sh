#!/usr/bin/env bash
# ep_nodes.sh — what expert parallelism sends over the network on a cluster
# of nodes (ep_nodes.c): the forward dispatch's rows that leave their node,
# as the all-to-all sends them (one a choice) and one copy a remote node
# (DeepEP), in the run's print and the report's run.ep_net_rows_per_step,
# and priced on the profile's two link levels (run.ep_net_seconds_per_step:
# DeepEP's below the all-to-all's, NVLink faster than the NIC).
# On hgx-a100-4 (4 GPUs a node) dp 8 x ep 8 spans two nodes, 2 experts a
# rank: experts 0-7 in node 0, 8-15 in node 1.  Checked: on one node nothing
# is counted; one copy a node never sends more than the all-to-all; with
# --moe-groups 2 (the two nodes) --moe-group-top-k 1 a token reaches one
# node, so at most one row a token and MoE block crosses; without the
# limit, with top 4 of 16, the two counts differ.
#
#   ep_nodes.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

t=(train --model gpt --layers 2 --moe-experts 16 --moe-top-k 4 --moe-score sigmoid --dp 8 --ep 8 --batch 16
   --steps 2)
net() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["run"]; n=r.get("ep_net_rows_per_step"); print("none" if n is None else "%d %d" % (n["all_to_all"], n["one_a_node"]))' "$1"; }
if run_ok "${t[@]}" --report "$tmp/one.json"; then
    cases=$((cases + 1))
    [[ $(net "$tmp/one.json") == none ]] || fail "one node: the report counts network rows: $(net "$tmp/one.json")"
fi
# 16 sequences of 32 over 8 devices: 64 tokens a device, 2 MoE blocks: 128 a step
for limit in "" "--moe-groups 2 --moe-group-top-k 1"; do
    if run_ok "${t[@]}" $limit --profile hgx-a100-4 --report "$tmp/n.json"; then
        expect_out "across nodes: the forward dispatch sends"
        read -r all one < <(net "$tmp/n.json")
        cases=$((cases + 1))
        (( one <= all && one > 0 )) || fail "${limit:-no limit}: one copy a node $one, all-to-all $all rows"
        cases=$((cases + 1))
        # priced on two link levels: the formula from the rows and hgx-a100-4's links (report-schema.md)
        cases=$((cases + 1))
        python3 - "$tmp/n.json" <<'PY' || fail "${limit:-no limit}: run.ep_net_seconds_per_step is not its formula"
import json, sys
r = json.load(open(sys.argv[1]))
run, C = r["run"], r["config"]["model"]["hidden"]
rows, sec = run["ep_net_rows_per_step"], run["ep_net_seconds_per_step"]
row, nic, nvlink = C * r["real_bytes"], 25e9, 300e9   # hgx-a100-4: 200 Gb/s a GPU, NVLink 300 GB/s
a2a = 4 * rows["all_to_all"] * row / nic
deepep = 4 * rows["one_a_node"] * row / nic + 4 * rows["all_to_all"] * row / nvlink
assert abs(sec["all_to_all"] - a2a) <= 1e-9 * a2a and abs(sec["one_a_node"] - deepep) <= 1e-9 * deepep, (sec, a2a, deepep)
assert sec["one_a_node"] < sec["all_to_all"], sec
PY
        if [[ -n $limit ]]; then
            (( one <= 128 )) || fail "--moe-group-top-k 1: $one rows a step cross, more than one a token and block (128)"
        else
            (( one < all )) || fail "top 4 of 16 over 2 nodes: one copy a node ($one) saves nothing on $all"
        fi
    fi
done
finish "ep-nodes" "rows over the network counted on a cluster of nodes, none on one node; group limits cap them"
