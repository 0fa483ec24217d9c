#!/usr/bin/env bash
# model_names_can_fail.sh SOURCE_DIR — model_names.py is a test that can
# fail: a file outside the models that includes a model's header, calls its
# symbols and spells its name (named/lookup.c) is refused, each hit named
# with its file and line; what a comment says is not counted.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if python3 "$here/model_names.py" "$1" "$here/named" >"$tmp" 2>&1; then
    echo "FAIL: model_names.py accepted named/lookup.c, which names the GPT and the MLP" >&2
    cat "$tmp" >&2
    exit 1
fi
for want in 'lookup.c:4: #include "ptdp/gpt.h"' 'lookup.c:8: ptdp_gpt_ops' 'lookup.c:8: ptdp_gpt' \
            'lookup.c:13: mlp'; do
    grep -qF -- "$want" "$tmp" || { echo "FAIL: expected \"$want\" in:" >&2; cat "$tmp" >&2; exit 1; }
done
if grep -q 'a comment may say' "$tmp"; then
    echo "FAIL: a comment was counted:" >&2
    cat "$tmp" >&2
    exit 1
fi
echo "ok: a file outside the models that names one is refused, line by line"
