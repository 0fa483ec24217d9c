#!/usr/bin/env bash
# glossary_can_fail.sh SOURCE_DIR — glossary.py is a test that can fail: in
# a copy of the library, an identifier that says "piece", a ring
# all-reduce's "chunk" and an executor's "unit" are each refused, naming the
# file, the line and the identifier; a comment that says them is not.
set -euo pipefail
src=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

try() {                     # FILE LINE EXPECTED-TEXT
    rm -rf "$tmp/tree"
    mkdir -p "$tmp/tree"
    cp -R "$src/src" "$src/include" "$tmp/tree/"
    printf '%s\n' "$2" >>"$tmp/tree/src/$1"
    if python3 "$here/glossary.py" "$tmp/tree" >"$tmp/out" 2>&1; then
        echo "FAIL: glossary.py accepted src/$1 with \"$2\"" >&2
        exit 1
    fi
    grep -qF "$3" "$tmp/out" || { echo "FAIL: expected \"$3\" in:" >&2; cat "$tmp/out" >&2; exit 1; }
    echo "ok: src/$1 with \"$2\" is refused"
}
try core/arena.c 'static int piece_count;' 'src/core/arena.c:'
try comm/shm/allreduce_ring.c 'static int send_chunk;' '"send_chunk"'
try parallel/pp.c 'static int nunits;' 'src/parallel/pp.c:'

# prose may name the other ideas: a comment is no identifier
rm -rf "$tmp/tree"; mkdir -p "$tmp/tree"
cp -R "$src/src" "$src/include" "$tmp/tree/"
printf '/* the ring used to call its segments chunks, and ZeRO its ranges pieces */\n' \
    >>"$tmp/tree/src/comm/shm/allreduce_ring.c"
python3 "$here/glossary.py" "$tmp/tree" >/dev/null 2>&1 || { echo "FAIL: a comment was refused" >&2; exit 1; }
echo "ok: a comment naming the old words is accepted"
