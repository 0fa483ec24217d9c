#!/usr/bin/env bash
# ulysses.sh PTDP — context parallelism's attention as Ulysses' all-to-alls
# (--cp-algo a2a) from the command line.
#
#  1. Bad flags exit 2 naming them: an unknown algorithm, a2a without --cp,
#     heads per TP rank that do not divide by --cp (with the valid --cp),
#     a2a with token slices (they cut the sequence too).
#  2. `--cp 4 --cp-algo a2a --check` passes; the header names Ulysses; the
#     report has "cp_algo": "a2a" ("ring" without the flag); every device
#     sends in the CP group exactly the formula, L M 8 X (N-1)/N elements
#     a step with X = B (T/N) (C/tp), and the text prints it beside the
#     measurement and the ring's.
#  3. The clock: under --profile ideal a device of cp N computes exactly 1/N
#     of one device's virtual time (whole sequences of nh/N heads).
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# ---- 1. errors ------------------------------------------------------------------
t="train --model gpt --steps 1 --quiet"
expect_usage "--cp-algo ulysses: must be one of ring, a2a"               -- $t --cp 2 --cp-algo ulysses
expect_usage "--cp-algo a2a needs --cp 2 or more"                         -- $t --cp-algo a2a
expect_usage "--cp-algo a2a with --cp 4: each TP rank's 2 heads (--heads 4 / --tp 2) must divide by --cp 4" \
                                                                          -- $t --cp 4 --tp 2 --cp-algo a2a
expect_usage "(valid --cp: 2, 3, 6; or --cp-algo ring)"                   -- $t --cp 4 --heads 6 --hidden 36 --cp-algo a2a
expect_usage "--token-slices 2 and --cp 2 both cut the sequence"          -- $t --pp 2 --cp 2 --cp-algo a2a --token-slices 2

# ---- 2. a run ----------------------------------------------------------------------
# the whole matrix here: Ulysses in tiles (delta beside dy) is attention_tiled.sh's
if run_ok train --model gpt --cp 4 --cp-algo a2a --attention full --steps 2 --check --report "$tmp/a2a.json"; then
    has "check PASSED" || fail "--cp 4 --cp-algo a2a --check did not pass"
    has "x cp 4 (zigzag, Ulysses all-to-all)" || fail "the header does not name Ulysses"
    has "CP bytes sent per device and step, formula (L/pp) M x (4f + 4)(N-1)/N X per block" ||
        fail "no CP bytes line for Ulysses"
    line=$(grep -A1 "CP bytes sent" "$out" | tail -n 1)
    [[ $line =~ =\ ([0-9.]+\ [KMG]?i?B),\ measured\ ([0-9.]+\ [KMG]?i?B)$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] &&
        echo "ok    CP bytes: formula and measurement agree ($line)" || fail "CP bytes: '$line'"
    has "(the ring would send" || fail "the ring's bytes are not beside Ulysses'"
    has "attention kept per block on each device (Ulysses: whole sequences of nh/(tp cp) = 1 head)" ||
        fail "no attention memory line"
    report_config "$tmp/a2a.json" cp_algo '"a2a"'
    # defaults: hidden 64, 2 layers, seq-len 32, batch 64: X = 64 x 8 x 64 on N = 4
    python3 - "$tmp/a2a.json" <<'PY' && echo "ok    every device sent the formula's CP bytes" || fail "CP bytes against the formula"
import json, sys
d = json.load(open(sys.argv[1]))
N, L, M, B, T, C = 4, 2, 1, 64, 32, 64
X = B * (T // N) * C
want = L * M * 8 * X * (N - 1) / N * d["real_bytes"]
got = [dev["bytes_sent_per_step"]["cp"] for dev in d["devices"]]
assert all(g == want for g in got), (got, want)
PY
fi
if run_ok train --model gpt --cp 2 --steps 1 --report "$tmp/ring.json"; then
    report_config "$tmp/ring.json" cp_algo '"ring"'
    has "context parallelism (ring), N = 2: CP bytes sent per device and step" || fail "no CP bytes line for the ring"
fi

# ---- 3. the clock -------------------------------------------------------------------
# Under --profile ideal every product costs exactly 2 m n k and the ends
# nothing: a device of cp N runs B T/N rows of every op and whole-sequence
# attention of nh/N heads, so its virtual compute is exactly 1/N of one
# device's (the ring's is not: its chunk pairs are priced as the ring runs them).
for n in 1 2 4; do
    algo=(); [[ $n -gt 1 ]] && algo=(--cp-algo a2a)
    "$ptdp" train --model gpt --cp $n "${algo[@]}" --profile ideal --steps 1 --quiet --report "$tmp/c$n.json" \
        >/dev/null 2>&1 || fail "--cp $n --cp-algo a2a --profile ideal did not run"
done
python3 - "$tmp" <<'PY' && echo "ok    --profile ideal: cp 2 and 4 under a2a compute 1/2 and 1/4 of one device, exactly" ||
import json, sys
c = {n: json.load(open(f"{sys.argv[1]}/c{n}.json"))["devices"][0]["virtual_s"]["compute"] for n in (1, 2, 4)}
assert c[1] > 0 and abs(c[2] * 2 - c[1]) <= 1e-12 * c[1] and abs(c[4] * 4 - c[1]) <= 1e-12 * c[1], c
PY
    fail "a2a's virtual compute is not one device's / N"

finish ulysses "--cp-algo a2a refused where it cannot split the heads; --check, the header, the report and the CP bytes"
