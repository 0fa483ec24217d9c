#!/usr/bin/env bash
# demo_learns.sh PTDP — `ptdp demo gpt`, with its defaults, learns the sums:
# at the end it is asked every sum its training text left out, and must
# answer at least 90% of them exactly (it answers 100% at seed 1), and
# continue "12+35=" with 047.  About 45 s of one core: suite `slow`, run by
# .ci/run (meson test --setup slow --suite slow), not by ./quickstart test.
set -uo pipefail

ptdp=${1:?usage: demo_learns.sh PATH_TO_PTDP}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

start=$SECONDS
"$ptdp" demo gpt >"$out" 2>&1
status=$?
secs=$((SECONDS - start))
line=$(grep -E "held-out sums: [0-9]+ of [0-9]+ answered exactly" "$out")
read -r right asked < <(sed -E 's/.*held-out sums: ([0-9]+) of ([0-9]+).*/\1 \2/' <<<"$line")
if [[ $status -eq 0 && -n ${right:-} && $asked -gt 0 ]] && ((right * 10 >= asked * 9)) &&
    grep -q "^12+35=047" "$out"; then
    echo "ok    demo gpt in ${secs} s: ${line# *}; $(grep "^12+35=" "$out")"
else
    echo "FAIL  demo gpt (exit $status, ${secs} s): '${line}'"
    tail -n 25 "$out"
    exit 1
fi
