#!/usr/bin/env bash
# html.sh PTDP — `--html FILE`: one page a command, saying what its JSON says.
#
#  1. ptdp schedule --report r.json --html p.html, for 1f1b, zb-h1, interleaved
#     and dualpipev: html_page.py finds (a) r.json embedded whole, (b) every
#     number by key equal to r.json's, (c) nothing outside the file, and one
#     <g data-mb> box per action; the report's bubble is the one printed.
#  2. ptdp plan --html beside --json (a GPT, a mixture of experts, --fp8 delayed): the
#     page holds --json's output and shows the ranked table and the bars' terms.
#  3. ptdp train --report --log --html (3D with --check, a GPT under ZeRO-1 with
#     --overlap): the page holds the report and the log lines, shows the
#     report's numbers by key, the --check verdict, and draws every device's
#     timeline with collectives and bytes in hover titles; on two nodes of 8
#     (--dp 2 --tp 8) TP's bytes within a node and DP's across; ptdp demo writes
#     its page (--html) and says where.
#  4. Outputs checked before any work, exit 2 naming the flag: --html into a
#     missing folder, onto a directory, onto --report's or --svg's file.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"
page_check="$(dirname "${BASH_SOURCE[0]}")/html_page.py"
command -v python3 >/dev/null || { echo "html: no python3, nothing checked"; exit 77; }

check_page() {     # check_page PAGE JSON ARGS…: html_page.py agrees
    cases=$((cases + 1))
    if python3 "$page_check" "$@" >"$tmp/check" 2>&1; then echo "ok    $(cat "$tmp/check")"
    else fail "$(cat "$tmp/check")"
    fi
}

# ---- 1. schedule ------------------------------------------------------------------
for args in "--schedule 1f1b --pp 4 --micro-batches 6" "--schedule zb-h1 --pp 4 --micro-batches 8" \
            "--schedule interleaved --virtual-stages 2 --pp 2 --micro-batches 4" \
            "--schedule dualpipev --pp 4 --micro-batches 10 --send-time 0.5"; do
    # shellcheck disable=SC2086
    if run_ok schedule $args --report "$tmp/s.json" --html "$tmp/s.html"; then
        expect_out "wrote $tmp/s.json" "wrote $tmp/s.html"
        check_page "$tmp/s.html" "$tmp/s.json" --min-keys 14 --schedule
        read_bubble schedule
        python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
assert "%.6f" % r["bubble"]["measured"] == sys.argv[2], (r["bubble"], sys.argv[2])' "$tmp/s.json" "$measured" \
            && echo "ok    schedule $args: the report's bubble is the printed $measured" \
            || fail "schedule $args: the report's bubble is not the printed $measured"
    fi
done

# ---- 2. plan ------------------------------------------------------------------------
gpt="--model gpt --layers 24 --hidden 2048 --heads 16 --seq-len 2048 --vocab 51200 --batch 512 --gpus 64"
for args in "$gpt --profile dgx-a100-80g --precision bf16 --top 5" \
            "$gpt --profile dgx-a100-80g --moe-experts 8 --top 3" \
            "$gpt --profile dgx-h100 --precision bf16 --fp8 delayed --top 3"; do
    # shellcheck disable=SC2086
    if run_ok plan $args --json; then
        cp "$out" "$tmp/p.json"
        # shellcheck disable=SC2086
        if run_ok plan $args --html "$tmp/p.html"; then
            expect_out "wrote $tmp/p.html" "layouts:"
            check_page "$tmp/p.html" "$tmp/p.json" --min-keys 60
            if [[ $args == *"--fp8 delayed"* ]]; then   # its amax table's term, by key
                grep -qF 'candidates.2.fp8.amax_table_s' "$tmp/p.html" && echo "ok    plan --html: fp8.amax_table_s" ||
                    fail "plan --fp8 delayed --html: no fp8.amax_table_s"
            fi
        fi
    fi
done

# ---- 3. train, demo -----------------------------------------------------------------
for args in "--dp 2 --tp 2 --pp 2 --micro-batches 2 --steps 3 --check" \
            "--model gpt --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch 8 --steps 2 --dp 2 --zero 1 --overlap" \
            "--dp 4 --zero 2 --shard-group 2 --steps 2"; do
    # shellcheck disable=SC2086
    if run_ok train $args --report "$tmp/r.json" --log "$tmp/l.jsonl" --html "$tmp/t.html"; then
        expect_out "wrote $tmp/t.html"
        check_page "$tmp/t.html" "$tmp/r.json" --min-keys 60 --log "$tmp/l.jsonl"
        world=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["config"]["world"])' "$tmp/r.json")
        for ((r = 0; r < world; r++)); do
            grep -q "<title>device $r: .* bytes</title>" "$tmp/t.html" \
                || fail "train $args: no event of device $r's timeline names its bytes"
        done
        grep -q '<title>device 0: all_reduce [a-z]* (comm) .* bytes</title>' "$tmp/t.html" \
            || fail "train $args: the timeline has no all_reduce"
        if [[ $args == *--check* ]]; then
            grep -qF "<b>check PASSED: tolerance" "$tmp/t.html" || fail "train $args: the page lacks the verdict"
        fi
        echo "ok    train $args: $world devices' timelines, collectives with their bytes"
    fi
done
# two nodes of 8 (dgx-a100-80g): TP's all-reduces stay in a node, DP's cross
if run_ok train --dp 2 --tp 8 --steps 1 --profile dgx-a100-80g --html "$tmp/n.html"; then
    grep -qF '<td class="l">all_reduce tp</td><td class="l">within a node</td>' "$tmp/n.html" \
        && grep -qF '<td class="l">all_reduce dp</td><td class="l">across nodes</td>' "$tmp/n.html" \
        && ! grep -qF 'all_reduce dp</td><td class="l">within a node' "$tmp/n.html" \
        && echo "ok    train --dp 2 --tp 8 on nodes of 8: tp's bytes within a node, dp's across nodes" \
        || fail "train --dp 2 --tp 8 on nodes of 8: the link levels are not tp within, dp across"
fi
# HSDP on two nodes of 8: shard groups of 8 (a node each) within, replica groups across
if run_ok train --dp 16 --zero 2 --shard-group 8 --steps 1 --batch 64 --profile dgx-h100 --html "$tmp/h.html"; then
    grep -qF '<td class="l">reduce_scatter shard</td><td class="l">within a node</td>' "$tmp/h.html" \
        && grep -qF '<td class="l">all_reduce replica</td><td class="l">across nodes</td>' "$tmp/h.html" \
        && ! grep -qF 'not placed' "$tmp/h.html" \
        && echo "ok    train --dp 16 --shard-group 8 on nodes of 8: shard groups within a node, replicas across" \
        || fail "train --dp 16 --shard-group 8 on nodes of 8: the link levels are not shard within, replica across"
fi
if run_ok demo --steps 1 --html "$tmp/demo.html"; then
    expect_out "the page of B: $tmp/demo.html"
    grep -q 'id="ptdp-data"' "$tmp/demo.html" && grep -q '<title>device 7: ' "$tmp/demo.html" \
        && echo "ok    demo --html: the 8-device run's page" || fail "demo's page lacks its data or device 7"
fi

# ---- 4. outputs refused before any work ------------------------------------------
mkdir -p "$tmp/dir"
expect_usage "--html $tmp/missing/p.html: cannot be written" -- schedule --html "$tmp/missing/p.html"
expect_usage "--html $tmp/dir: cannot be written"           -- schedule --html "$tmp/dir"
expect_usage "--report and --html name the same file"       -- schedule --report "$tmp/x" --html "$tmp/./x"
expect_usage "--svg and --html name the same file"          -- schedule --svg "$tmp/x" --html "$tmp/x"
expect_usage "--html $tmp/missing/p.html: cannot be written" -- plan $gpt --profile dgx-a100-80g --html "$tmp/missing/p.html"
touch "$tmp/in.st"
expect_usage "--load and --html name the same file"         -- train --load "$tmp/in.st" --html "$tmp/in.st"
expect_usage "--report and --html name the same file"       -- train --report "$tmp/x" --html "$tmp/x"
expect_usage "--html $tmp/dir: cannot be written"           -- demo --html "$tmp/dir"
[[ -e $tmp/x ]] && fail "a refused command wrote $tmp/x"

finish html "every page holds its command's JSON and shows its numbers"
