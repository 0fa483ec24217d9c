#!/usr/bin/env bash
# calls_can_fail.sh SOURCE_DIR LIBPTDP PAIR_LIB — calls.py is a test that
# can fail: the library passes, and beside it an archive of two files that
# call each other (pair/ping.c, pair/pong.c) is refused, naming both and
# the functions that tie them.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if python3 "$here/calls.py" "$1" "$2" "$3" >"$tmp" 2>&1; then
    echo "FAIL: calls.py accepted ping.c and pong.c, which call each other" >&2
    exit 1
fi
for want in 'ping.c.o and ' 'pong.c.o call each other' '-> ' ': pong' ': ping'; do
    grep -qF -- "$want" "$tmp" || { echo "FAIL: expected \"$want\" in:" >&2; cat "$tmp" >&2; exit 1; }
done
if grep -q '^calls: src/' "$tmp"; then
    echo "FAIL: a pair of src/ was reported beside ping and pong:" >&2
    cat "$tmp" >&2
    exit 1
fi
echo "ok: ping.c and pong.c calling each other are refused"
