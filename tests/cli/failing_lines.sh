#!/usr/bin/env bash
# failing_lines.sh PTDP — command lines that fail after parsing free what
# they held: the built-in corpus, a --data text, a loaded checkpoint.
#
# Each line must exit with its status (2: a usage error found by
# validation; 1: a --load that cannot be read) and, in a build with
# AddressSanitizer, without a leak: LeakSanitizer's report on stderr is a
# failure.  In the plain build the same lines check the statuses only.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
case $ASAN_OPTIONS in *detect_leaks=1*) ;; *) ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=1" ;; esac
# a sanitizer's report is the failure, whatever its own exit code
export ASAN_OPTIONS="$ASAN_OPTIONS:exitcode=99"

# leaks STATUS ARGS...: ptdp ARGS exits STATUS (a sanitizer's report makes
# it 99), and no sanitizer speaks
leaks() {
    local want=$1
    shift
    run_status "$want" "$@" || return 0
    if grep -qE "LeakSanitizer|AddressSanitizer|runtime error" "$err"; then
        fail "ptdp $*: the sanitizer reports"
    else
        echo "ok    ptdp $*  ->  exit $want, nothing leaked"
    fi
}

printf 'not a checkpoint at all' >"$tmp/corrupt.st"
printf '12+35=47\n1+2=3\n' >"$tmp/sums.txt"
# validation after parsing (the built-in corpus is made by then)
leaks 2 train --model gpt --tp 3 --steps 1
leaks 2 train --model gpt --dp 3 --batch 64 --steps 1
leaks 2 train --model gpt --schedule interleaved --pp 2 --virtual-stages 3 --steps 1
leaks 2 train --model gpt --seq-len 64 --data "$tmp/sums.txt" --steps 1
leaks 2 train --model gpt --profile no-such-profile
leaks 2 train --model gpt --save "$tmp/no/such/dir/x.st"
# --load of a missing or corrupt file
leaks 1 train --model gpt --load "$tmp/missing.st" --steps 1
leaks 1 train --model gpt --load "$tmp/corrupt.st" --steps 1
leaks 1 train --load "$tmp/corrupt.st" --steps 1
leaks 1 sample --load "$tmp/corrupt.st"
finish "failing_lines.sh" "$cases failing command lines, each freeing what it held"
