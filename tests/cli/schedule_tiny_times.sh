#!/usr/bin/env bash
# schedule_tiny_times.sh PTDP — a schedule timed in tiny (or huge) units is
# drawn like one timed in 1s and 2s.
#
# The drawing's unit (a quantum: the shortest action) and its axis ticks
# (1, 2 or 5 times a power of ten) follow the times' own scale, so for any
# positive finite times every stage row, the axis and its numbers span the
# same width, and the SVG has finite coordinates.  Zero forward time (only
# backwards drawn) is allowed too.
set -uo pipefail
# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# drawn ARGS...: exit 0; the rows, the axis and the time line line up
#   stage 0 |F0F1..|   the axis: 8 spaces, then one column more than a row
#           +---+--+
drawn() {
    run_ok schedule "$@" --svg "$tmp/s.svg" || return 0
    cases=$((cases + 1))
    local rows axis time widths
    rows=$(grep '^stage [0-9]' "$out" | sed 's/^\(stage [0-9 ]*|[^|]*|\).*/\1/')
    widths=$(awk '{ print length($0) }' <<<"$rows" | sort -u | wc -l)
    axis=$(grep -A1 '^stage' "$out" | grep -m1 '^        -\|^        +' | wc -L)
    time=$(grep '^time ' "$out" | wc -L)
    if [[ -z $rows || $widths -ne 1 ]]; then fail "ptdp schedule $*: stage rows of different widths"
    elif [[ $axis -ne $(($(head -n 1 <<<"$rows" | wc -L) - 1)) ]]; then fail "ptdp schedule $*: the axis is not as wide as the rows"
    elif [[ $time -gt $((axis + 16)) ]]; then fail "ptdp schedule $*: the time line runs $time columns past an axis of $axis"
    elif [[ $(grep -c '^        .*+.*+' "$out") -ne 1 ]]; then fail "ptdp schedule $*: fewer than two ticks"
    elif grep -qiE '"(-?inf|nan)|="-?(inf|nan)' "$tmp/s.svg"; then fail "ptdp schedule $*: the SVG has a non-finite number"
    else echo "ok    ptdp schedule $*: rows, axis and ticks line up (axis $axis columns)"
    fi
}

drawn --forward-time 1e-12 --backward-time 1e-12
drawn --forward-time 1e-12 --backward-time 2e-12 --schedule gpipe
drawn --forward-time 0 --backward-time 1e-300 --schedule zb-h1
drawn --forward-time 1e-300 --backward-time 1e-300 --schedule interleaved --virtual-stages 2
drawn --forward-time 1e-9 --backward-time 3e-9 --send-time 1e-10
drawn --forward-time 0 --backward-time 1e9 --schedule zb-h1 --pp 8 --micro-batches 64
drawn --forward-time 1e9 --backward-time 1e-9
drawn --forward-time 5e-7 --backward-time 1e-6 --pp 2 --micro-batches 3
drawn

finish schedule_tiny_times "$cases cases: any positive finite times are drawn within their row"
