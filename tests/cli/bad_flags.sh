#!/usr/bin/env bash
# bad_flags.sh PTDP — a bad command line exits 2 and says which flag is wrong.
#
# Every case runs the built `ptdp` with one mistake and checks three things:
# the exit status is 2 (a usage error, not a failed run), stderr names the
# flag and the value as typed plus the expected wording, and stdout is empty
# (errors never pollute output that scripts parse, e.g. --json).
set -uo pipefail

ptdp=${1:?usage: bad_flags.sh PATH_TO_PTDP}
failures=0
cases=0
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# expect STATUS "TEXT THAT MUST APPEAR ON STDERR" -- ARGS...
expect() {
    local want_status=$1 want_text=$2
    shift 3
    cases=$((cases + 1))
    "$ptdp" "$@" >"$out" 2>"$err" </dev/null
    local status=$?
    local problem=""
    if [[ $status -ne $want_status ]]; then
        problem="exit status $status, expected $want_status"
    elif ! grep -qF -- "$want_text" "$err"; then
        problem="stderr lacks \"$want_text\""
    elif [[ $want_status -eq 2 && -s $out ]]; then
        problem="printed on stdout: $(head -c 200 "$out")"
    fi
    if [[ -n $problem ]]; then
        failures=$((failures + 1))
        echo "FAIL  ptdp $*: $problem"
        sed 's/^/      stderr: /' "$err"
    else
        echo "ok    ptdp $*  ->  $(head -n 1 "$err")"
    fi
}

# expect_ok "TEXT ON STDOUT" -- ARGS...: help and version succeed on stdout
expect_ok() {
    local want_text=$1
    shift 2
    cases=$((cases + 1))
    if "$ptdp" "$@" >"$out" 2>"$err" </dev/null && grep -qF -- "$want_text" "$out"; then
        echo "ok    ptdp $*"
    else
        failures=$((failures + 1))
        echo "FAIL  ptdp $*: expected status 0 and \"$want_text\" on stdout"
        sed 's/^/      /' "$out" "$err"
    fi
}

# One bad value for each kind of flag, then the rest of each reader in args.c.
expect 2 "--devices 0: must be between 1 and 64"          -- bench collectives --devices 0
expect 2 "--sizes 12Q: not a size"                        -- bench collectives --sizes 12Q
expect 2 "unknown flag --x (see ptdp bench collectives --help)" -- bench collectives --x
expect 2 "--devices 65: must be between 1 and 64"         -- bench collectives --devices 65
expect 2 "--devices abc: not a whole number"              -- bench collectives --devices abc
expect 2 "--devices 2x: not a whole number"               -- bench collectives --devices=2x
expect 2 "--devices: missing value"                       -- bench collectives --devices
expect 2 "--sizes 4K,12Q: '12Q' is not a size"            -- bench collectives --sizes 4K,12Q
expect 2 "--sizes 4K,,4M: empty item"                     -- bench collectives --sizes 4K,,4M
expect 2 "--sizes 0: must be between"                     -- bench collectives --sizes 0
expect 2 "--sizes -4K: not a size"                        -- bench collectives --sizes -4K
expect 2 "--algo fast: must be one of default, naive, ring, shm" -- bench collectives --algo fast
expect 2 "--ops all_reduce,gossip: 'gossip' is not one of" -- bench collectives --ops all_reduce,gossip
expect 2 "--ops broadcast,broadcast: 'broadcast' is listed twice" -- bench collectives --ops broadcast,broadcast
expect 2 "--iters 0: must be between 1 and"               -- bench collectives --iters 0
expect 2 "--watchdog -1: must be between"                 -- bench collectives --watchdog -1
expect 2 "--watchdog soon: not a number"                  -- bench collectives --watchdog soon
expect 2 "--json=yes takes no value"                      -- bench collectives --json=yes
expect 2 "unexpected argument 'extra'"                    -- bench collectives extra
expect 2 "unknown benchmark 'network'"                    -- bench network
expect 2 "usage: ptdp bench"                              -- bench
expect 2 "--devices 0: must be between 1 and 64"          -- bench memory --devices 0
expect 2 "--devices 0: must be between 1 and 64"          -- selftest --devices 0
expect 2 "unknown flag --fast (see ptdp selftest --help)" -- selftest --fast
expect 2 "unknown command 'bnech' (see ptdp --help)"      -- bnech
expect 2 "unknown command 'nothing'"                      -- help nothing
expect 2 "unknown flag --verbose (see ptdp version --help)" -- version --verbose
expect 2 "usage: ptdp <command>"                          --

# A flag given twice: which value was meant?  (Both used to run, the last won.)
expect 2 "--dp is given twice: give it once"              -- train --dp 2 --dp 4
expect 2 "--save is given twice: give it once"            -- train --save a.st --save b.st
expect 2 "--quiet is given twice"                         -- train --quiet --quiet
# A value that needs a label or a better word
expect 2 "--tp '': not a whole number"                    -- train --tp ""
expect 2 "--tp '': not a whole number"                    -- train --tp=
expect 2 "--lr 1e-400: too close to zero (it underflows)" -- train --lr 1e-400
expect 2 "--overlap overlaps the data-parallel gradient sum (and SP's gathers) with the backward: it needs --dp 2 or more, or --sp" -- train --overlap
expect 2 "--overlap with --schedule zb-h1" -- train --dp 2 --pp 2 --micro-batches 2 --schedule zb-h1 --overlap
expect 2 "--overlap with --virtual-stages 2" -- train --dp 2 --pp 2 --micro-batches 2 --schedule interleaved --virtual-stages 2 --overlap
expect 2 "--lr 1e999: too large (it overflows)"           -- train --lr 1e999
expect 2 "--tp 64 x --pp 2 = 128 devices already exceeds the 64 supported" -- train --devices 64 --tp 64 --pp 2
expect 2 "--devices 9 is not a multiple of --tp 2 x --pp 2 = 4 (try --devices 8 or 12)" -- train --devices 9 --tp 2 --pp 2
expect 2 "--devices 63 is not a multiple of --tp 4 x --pp 3 = 12 (try --devices 60)" -- train --devices 63 --tp 4 --pp 3
# A flag that would be ignored
expect 2 "--momentum 0.9 is for --optimizer sgd"          -- train --momentum 0.9

expect_ok "usage: ptdp <command>"                    -- --help
expect_ok "usage: ptdp bench <what>"                 -- help bench
expect_ok "usage: ptdp bench collectives"            -- bench collectives --help
expect_ok "usage: ptdp bench memory"                 -- bench memory -h
expect_ok "usage: ptdp selftest"                     -- selftest --help
expect_ok "ptdp "                                    -- version
expect_ok "dgx-a100     NVIDIA A100 SXM"             -- train --profile list
expect_ok "node 8 devices, network alpha 1e-05 s, beta 2.5e+10 B/s a device" -- train --profile list
expect_ok "bf16 peak 9.89e+14 flop/s"                -- train --profile list
# DeepSeek-V3's cluster: NVLink 160 GB/s a GPU, IB 50 GB/s, the H100's peaks
expect_ok "h800         H800 cluster (DeepSeek-V3's)" -- train --profile list
expect_ok "peak 4.94e+14 flop/s, alpha 3e-06 s, beta 1.6e+11 B/s" -- train --profile list

echo "bad_flags.sh: $((cases - failures)) of $cases cases behaved"
[[ $failures -eq 0 ]]
