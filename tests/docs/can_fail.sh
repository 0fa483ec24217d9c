#!/usr/bin/env bash
# can_fail.sh SOURCE_DIR — docs/check_paths.sh refuses a page that names a
# file, a path or a link target that is not in the tree; readme_map.sh a
# map of the code (docs/code-map.md) with a wrong arrow or a source file it does not name.
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2016  # the backquotes are Markdown's
printf '%s\n' 'See `src/core/nothere.c`, [a link](no/such/page.md) and `gone.c`.' >"$tmp/page.md"
if bash "$src/docs/check_paths.sh" "$tmp/page.md" >"$tmp/out" 2>&1; then
    echo "FAIL: check_paths.sh accepted a page naming missing files" >&2
    exit 1
fi
for want in src/core/nothere.c no/such/page.md gone.c; do
    grep -qF "$want does not exist" "$tmp/out" || { echo "FAIL: $want not reported:" >&2; cat "$tmp/out" >&2; exit 1; }
done
echo "ok: the three missing names are reported"

# readme_map.sh refuses a map with a wrong arrow or a file missing from its table.
sed -e 's|^src/nn/        ─► runtime/ core/|src/nn/        ─► core/|' \
    -e 's|`ranks.c` [^·]*· ||' "$src/docs/code-map.md" >"$tmp/code-map.md"
if bash "$src/tests/docs/readme_map.sh" "$src" "$tmp/code-map.md" >"$tmp/out" 2>&1; then
    echo "FAIL: readme_map.sh accepted a map with a wrong arrow and a missing file" >&2
    exit 1
fi
for want in "src/nn/ is drawn using" "src/core/ranks.c is not named"; do
    grep -qF "$want" "$tmp/out" || { echo "FAIL: '$want' not reported:" >&2; cat "$tmp/out" >&2; exit 1; }
done
echo "ok: the wrong arrow and the missing file are reported"
