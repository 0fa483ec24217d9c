#!/usr/bin/env bash
# bench_smoke.sh PTDP — `ptdp bench collectives` runs, checks its results and
# reports what it promises: one JSON object per (operation, size) with positive
# times and bandwidths, a table with the memory ceiling, progress on stderr.
# Small sizes and --iters keep it to seconds; the numbers themselves are
# measured by tests/bench/compare_mpi.sh, not asserted here.
set -uo pipefail

ptdp=${1:?usage: bench_smoke.sh PATH_TO_PTDP}
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
failures=0

fail() { failures=$((failures + 1)); echo "FAIL  $*"; sed 's/^/      stderr: /' "$err"; }

# 1. JSON: 3 devices (not a divisor of the counts), 2 sizes, every operation.
if ! "$ptdp" bench collectives --devices 3 --sizes 4K,102 --iters 20 --json --watchdog 30 >"$out" 2>"$err"; then
    fail "bench collectives --json exited $?"
else
    lines=$(wc -l <"$out")
    [[ $lines -eq 8 ]] || fail "expected 8 JSON lines (4 ops x 2 sizes), got $lines"
    for op in all_reduce reduce_scatter all_gather broadcast; do
        [[ $(grep -c "\"op\": \"$op\"" "$out") -eq 2 ]] || fail "expected 2 results for $op"
    done
    # every line: an object with a positive time and bus bandwidth
    bad=$(awk '!/^\{.*\}$/ || !match($0, /"time_us": [0-9.e+-]+/) { print; next }
               { t = substr($0, RSTART + 11, RLENGTH - 11) + 0; if (t <= 0) print }' "$out")
    [[ -z $bad ]] || fail "malformed or zero-time lines: $bad"
    grep -q '"bytes": 102,' "$out" && fail "102 bytes should round down to whole elements"
    grep -q '"devices": 3' "$out" || fail "devices not reported"
    # not a terminal: progress comes as plain lines on stderr
    grep -q '^\[1/8\] all_reduce 4 KiB on 3 devices' "$err" || fail "no progress lines on stderr"
    echo "ok    --json: $lines results"
fi

# 2. The table, one algorithm at a time, one device included.
for algo in naive ring shm; do
    if ! "$ptdp" bench collectives --devices 2 --algo "$algo" --ops all_reduce --sizes 64K --iters 10 >"$out" 2>"$err"; then
        fail "bench collectives --algo $algo exited $?"
        continue
    fi
    grep -q "all_reduce algorithm $algo" "$out" || fail "--algo $algo: the header does not name the algorithm"
    grep -q "ceiling B = " "$out" || fail "--algo $algo: no memory ceiling in the table"
    grep -qE '^all_reduce +64 KiB' "$out" || fail "--algo $algo: no all_reduce row"
    echo "ok    table, --algo $algo"
done
if "$ptdp" bench collectives --devices 1 --sizes 4K --iters 5 >"$out" 2>"$err"; then
    echo "ok    one device"
else
    fail "bench collectives --devices 1 exited $?"
fi

[[ $failures -eq 0 ]]
