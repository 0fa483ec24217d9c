#!/usr/bin/env bash
# long_functions_can_fail.sh SOURCE_DIR — long_functions.py is a test that
# can fail: a file with a function of 81 lines (long_function/long.c) is
# refused, naming its file, line, name and length, while the one of
# exactly 80 beside it and the braces in a literal are not counted; an
# allow line keeps the long one, and an allow line that names a function
# no longer long is refused as stale.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=can_fail_lib.sh
source "$here/can_fail_lib.sh"
must_refuse "long_function/long.c, whose one_over has 81 lines" \
    python3 "$here/long_functions.py" "$1" "$here/long_function"
must_say 'long.c:91 one_over 81'
must_not_say 'at_the_limit' "a function of exactly 80 lines was counted as over 80"
must_not_say 'braces' "braces in a literal opened a function"
echo "ok: a function over 80 lines is refused, with its file, line and length"

printf 'long.c one_over     kept for now\n' >"$tmp/allow"
python3 "$here/long_functions.py" --allow "$tmp/allow" "$1" "$here/long_function" >"$tmp/out" 2>&1 ||
    { echo "FAIL: an allowed long function was refused:" >&2; cat "$tmp/out" >&2; exit 1; }
echo "ok: an allow line keeps a long function"

printf 'long.c one_over     kept for now\nlong.c at_the_limit split already\n' >"$tmp/allow"
must_refuse "an allow line for at_the_limit, which is not over 80 lines" \
    python3 "$here/long_functions.py" --allow "$tmp/allow" "$1" "$here/long_function"
must_say 'allow:2: long.c at_the_limit is not over 80 lines'
echo "ok: a stale allow line is refused"
