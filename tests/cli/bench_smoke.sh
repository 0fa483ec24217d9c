#!/usr/bin/env bash
# bench_smoke.sh PTDP — `ptdp bench collectives` runs, checks its results and
# reports what it promises: one JSON object per (operation, size) with positive
# times and bandwidths, a table with the memory ceiling, progress on stderr.
# Small sizes and --iters keep it to seconds; the numbers themselves are
# measured by bench/compare_mpi.sh, not asserted here.
set -uo pipefail

ptdp=${1:?usage: bench_smoke.sh PATH_TO_PTDP}
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
failures=0

fail() { failures=$((failures + 1)); echo "FAIL  $*"; sed 's/^/      stderr: /' "$err"; }

# 1. JSON: 3 devices (not a divisor of the counts), 2 sizes, every operation.
before=$failures
if ! "$ptdp" bench collectives --devices 3 --sizes 4K,102 --iters 20 --json --watchdog 30 >"$out" 2>"$err"; then
    fail "bench collectives --json exited $?"
else
    lines=$(wc -l <"$out")
    [[ $lines -eq 12 ]] || fail "expected 12 JSON lines (6 ops x 2 sizes), got $lines"
    for op in all_reduce reduce_scatter all_gather broadcast all_to_all all_to_allv; do
        [[ $(grep -c "\"op\": \"$op\"" "$out") -eq 2 ]] || fail "expected 2 results for $op"
    done
    # every line: an object with a positive time and bus bandwidth
    bad=$(awk '!/^\{.*\}$/ || !match($0, /"time_us": [0-9.e+-]+/) { print; next }
               { t = substr($0, RSTART + 11, RLENGTH - 11) + 0; if (t <= 0) print }' "$out")
    [[ -z $bad ]] || fail "malformed or zero-time lines: $bad"
    # every line: the copy timed after each sample, and the share of the bound at it
    bad=$(awk '!match($0, /"paired_fraction_of_bound": [0-9.e+-]+/) { print; next }
               { f = substr($0, RSTART + 28, RLENGTH - 28) + 0; if (f <= 0) print }' "$out")
    [[ -z $bad ]] || fail "lines without a positive paired share of the bound: $bad"
    grep -q '"bytes": 102,' "$out" && fail "102 bytes should round down to whole elements"
    grep -q '"devices": 3' "$out" || fail "devices not reported"
    # not a terminal: progress comes as plain lines on stderr
    grep -q '^\[1/12\] all_reduce 4 KiB on 3 devices' "$err" || fail "no progress lines on stderr"
    [[ $failures -eq $before ]] && echo "ok    --json: $lines results"
fi

# 2. The table: the ring on 2 devices, naive on one (each run also measures
#    the memory ceiling, so keep the number of runs small).
table() {   # ALGO DEVICES
    local before=$failures
    if ! "$ptdp" bench collectives --devices "$2" --algo "$1" --ops all_reduce --sizes 64K --iters 10 >"$out" 2>"$err"; then
        fail "bench collectives --algo $1 --devices $2 exited with an error"
        return
    fi
    grep -q "all_reduce algorithm $1" "$out" || fail "--algo $1: the header does not name the algorithm"
    grep -q "ceiling B = " "$out" || fail "--algo $1: no memory ceiling in the table"
    grep -q "of paired" "$out" || fail "--algo $1: no paired share of the bound in the table"
    grep -qE '^all_reduce +64 KiB' "$out" || fail "--algo $1: no all_reduce row"
    [[ $failures -eq $before ]] && echo "ok    table, --algo $1, $2 device(s)"
}
table ring 2
table naive 1

[[ $failures -eq 0 ]]
