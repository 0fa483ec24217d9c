#!/usr/bin/env bash
# long_functions_can_fail.sh SOURCE_DIR — long_functions.py is a test that
# can fail: a file with a function of 81 lines (long_function/long.c) is
# refused, naming its file, line, name and length, while the one of
# exactly 80 beside it and the braces in a literal are not counted.
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

