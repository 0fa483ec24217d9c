#!/usr/bin/env bash
# can_fail.sh SOURCE_DIR — layers.sh is a test that can fail: in a copy of
# the tree, core/arena.c including the training loop's header (an arrow up
# the whole stack) and runtime/ reaching into the shm backend must each be
# reported, naming the file.
set -euo pipefail
src=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=can_fail_lib.sh
source "$here/can_fail_lib.sh"

try() {                     # FILE HEADER EXPECTED-TEXT
    refuses_line "$src" "$1" "#include \"$2\"" "$3" bash "$here/layers.sh" "$tmp/tree"
}
try core/arena.c ptdp/train.h 'src/core/arena.c includes "ptdp/train.h" (folder train), above src/core/'
try runtime/wait.c comm/shm/shm.h 'src/runtime/wait.c includes "comm/shm/shm.h" (folder comm), above src/runtime/'
try parallel/dp.c comm/shm/shm.h 'src/parallel/dp.c reaches into the shm backend'
