#!/usr/bin/env bash
# calls_can_fail.sh SOURCE_DIR LIBPTDP PAIR_LIB — calls.py is a test that
# can fail: the library passes, and beside it an archive of two files that
# call each other (pair/ping.c, pair/pong.c) is refused, naming both and
# the functions that tie them.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=can_fail_lib.sh
source "$here/can_fail_lib.sh"
must_refuse "ping.c and pong.c, which call each other" python3 "$here/calls.py" "$1" "$2" "$3"
must_say 'ping.c.o and ' 'pong.c.o call each other' '-> ' ': pong' ': ping'
must_not_say '^calls: src/' "a pair of src/ was reported beside ping and pong"
echo "ok: ping.c and pong.c calling each other are refused"
