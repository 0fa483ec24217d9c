#!/usr/bin/env bash
# glossary_can_fail.sh SOURCE_DIR — glossary.py is a test that can fail: in
# a copy of the library, an identifier that says "piece", a ring
# all-reduce's "chunk" and an executor's "unit" are each refused, naming the
# file, the line and the identifier; a comment that says them is not.
set -euo pipefail
src=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../layers/can_fail_lib.sh
source "$here/../layers/can_fail_lib.sh"

try() {                     # FILE LINE EXPECTED-TEXT
    refuses_line "$src" "$1" "$2" "$3" python3 "$here/glossary.py" "$tmp/tree"
}
try core/arena.c 'static int piece_count;' 'src/core/arena.c:'
try comm/shm/allreduce_ring.c 'static int send_chunk;' '"send_chunk"'
try parallel/pp.c 'static int nunits;' 'src/parallel/pp.c:'

# prose may name the other ideas: a comment is no identifier
copy_tree "$src"
printf '/* the ring used to call its segments chunks, and ZeRO its ranges pieces */\n' \
    >>"$tmp/tree/src/comm/shm/allreduce_ring.c"
python3 "$here/glossary.py" "$tmp/tree" >/dev/null 2>&1 || { echo "FAIL: a comment was refused" >&2; exit 1; }
echo "ok: a comment naming the old words is accepted"
