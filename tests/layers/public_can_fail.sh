#!/usr/bin/env bash
# public_can_fail.sh SOURCE_DIR — public.py is a test that can fail: in a
# copy of the headers, a new public function that nothing outside src/
# calls is refused, and so is a teaching op once its allow-list line goes;
# each time the message names the function and its header.
set -euo pipefail
src=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

setup() {                   # a tree whose headers we may edit; the rest as is
    rm -rf "$tmp/tree"
    mkdir -p "$tmp/tree"
    cp -R "$src/include" "$tmp/tree/"
    for top in src cli tests tutorials bench docs quickstart README.md; do
        [[ -e $src/$top ]] && ln -s "$src/$top" "$tmp/tree/$top"
    done
    cp "$here/public_allow.txt" "$tmp/allow.txt"
}

refused() {                 # WHAT EXPECTED-TEXT
    if python3 "$here/public.py" "$tmp/tree" "$tmp/allow.txt" >"$tmp/out" 2>&1; then
        echo "FAIL: public.py accepted $1" >&2
        exit 1
    fi
    grep -qF "$2" "$tmp/out" || { echo "FAIL: expected \"$2\" in:" >&2; cat "$tmp/out" >&2; exit 1; }
    echo "ok: $1 is refused"
}

setup
python3 "$here/public.py" "$tmp/tree" "$tmp/allow.txt" >/dev/null || { echo "FAIL: the copy itself is refused" >&2; exit 1; }
printf 'int ptdp_tensor_nobody_calls(int x);\n' >>"$tmp/tree/include/ptdp/tensor.h"
refused "a public function nobody outside src/ calls" \
    'ptdp_tensor_nobody_calls (include/ptdp/tensor.h) is used by nothing outside src/'

setup
sed -i '/^ptdp_layernorm_forward /d' "$tmp/allow.txt"
refused "ptdp_layernorm_forward without its allow-list line" \
    'ptdp_layernorm_forward (include/ptdp/ops.h) is used by nothing outside src/'
