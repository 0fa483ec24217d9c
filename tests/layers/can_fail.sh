#!/usr/bin/env bash
# can_fail.sh SOURCE_DIR — layers.sh is a test that can fail: in a copy of
# the tree, core/arena.c including the training loop's header (an arrow up
# the whole stack) and runtime/ reaching into the shm backend must each be
# reported, naming the file.
set -euo pipefail
src=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

try() {                     # FILE LINE EXPECTED-TEXT
    rm -rf "$tmp/tree"
    mkdir -p "$tmp/tree"
    cp -R "$src/src" "$src/include" "$tmp/tree/"
    printf '#include "%s"\n' "$2" >>"$tmp/tree/src/$1"
    if bash "$here/layers.sh" "$tmp/tree" >"$tmp/out" 2>&1; then
        echo "FAIL: layers.sh accepted src/$1 including \"$2\"" >&2
        exit 1
    fi
    grep -qF "$3" "$tmp/out" || { echo "FAIL: expected \"$3\" in:" >&2; cat "$tmp/out" >&2; exit 1; }
    echo "ok: src/$1 including \"$2\" is refused"
}
try core/arena.c ptdp/train.h 'src/core/arena.c includes "ptdp/train.h" (folder train), above src/core/'
try runtime/wait.c comm/shm/shm.h 'src/runtime/wait.c includes "comm/shm/shm.h" (folder comm), above src/runtime/'
try parallel/dp.c comm/shm/shm.h 'src/parallel/dp.c reaches into the shm backend'
