#!/usr/bin/env bash
# html.sh PTDP — `--html FILE`: one page a command, saying what its JSON says.
#
#  1. ptdp schedule --report r.json --html p.html, for 1f1b, zb-h1, interleaved
#     and dualpipev: html_page.py finds (a) r.json embedded whole, (b) every
#     number by key equal to r.json's, (c) nothing outside the file, and one
#     <g data-mb> box per action; the report's bubble is the one printed.
#  2. ptdp plan --html beside --json (a GPT, and a mixture of experts): the
#     page holds --json's output and shows the ranked table and the bars' terms.
#  3. Outputs checked before any work, exit 2 naming the flag: --html into a
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
            "$gpt --profile dgx-a100-80g --moe-experts 8 --top 3"; do
    # shellcheck disable=SC2086
    if run_ok plan $args --json; then
        cp "$out" "$tmp/p.json"
        # shellcheck disable=SC2086
        if run_ok plan $args --html "$tmp/p.html"; then
            expect_out "wrote $tmp/p.html" "layouts:"
            check_page "$tmp/p.html" "$tmp/p.json" --min-keys 60
        fi
    fi
done

# ---- 3. outputs refused before any work ------------------------------------------
mkdir -p "$tmp/dir"
expect_usage "--html $tmp/missing/p.html: cannot be written" -- schedule --html "$tmp/missing/p.html"
expect_usage "--html $tmp/dir: cannot be written"           -- schedule --html "$tmp/dir"
expect_usage "--report and --html name the same file"       -- schedule --report "$tmp/x" --html "$tmp/./x"
expect_usage "--svg and --html name the same file"          -- schedule --svg "$tmp/x" --html "$tmp/x"
expect_usage "--html $tmp/missing/p.html: cannot be written" -- plan $gpt --profile dgx-a100-80g --html "$tmp/missing/p.html"
[[ -e $tmp/x ]] && fail "a refused command wrote $tmp/x"

finish html "every page holds its command's JSON and shows its numbers"
