#!/usr/bin/env bash
# schedule_names_can_fail.sh SOURCE_DIR — schedule_names.py is a test that
# can fail: a file outside the registry that compares a schedule's name and
# names two in a message (named_schedule/by_name.c) is refused, each hit
# named with its file and line; what a comment says is not counted.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=can_fail_lib.sh
source "$here/can_fail_lib.sh"
must_refuse "named_schedule/by_name.c, which looks a schedule up by name" \
    python3 "$here/schedule_names.py" "$1" "$here/named_schedule"
must_say 'by_name.c:8: "zb-h1"' 'by_name.c:13: "use --schedule 1f1b or gpipe"'
must_not_say 'a comment may say' "a comment was counted"
echo "ok: a file outside the registry that names a schedule is refused, line by line"
