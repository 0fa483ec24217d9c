#!/usr/bin/env bash
# doc_can_fail.sh SOURCE_DIR PTDP PTDP_F64 — doc_links.py and doc_commands.py
# refuse what they are there to refuse, and accept what the pages may say.
#
#   doc_links.py:    a missing file, a missing heading in another page and in
#                    the page itself, a heading its contents do not link are
#                    each reported; a good link and good contents are not.
#   doc_commands.py: a command that exits 2 where the page says nothing, an
#                    mpirun without "not run", are reported; the same command
#                    under <!-- exit: 2 -->, a "not run" mpirun and a "slow"
#                    command under --fast pass, and are counted.
set -euo pipefail
src=$1 ptdp=$2 ptdp64=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$tmp/out" >&2; exit 1; }

# --- links ----------------------------------------------------------------------
mkdir "$tmp/docs"
printf '# Other page\n\n- [a heading](#a-heading-with-code)\n\n## A heading: with `code`\n' >"$tmp/docs/other.md"
cat >"$tmp/docs/page.md" <<'MD'
# A page

## Here

## Not in the contents

[fine](other.md#a-heading-with-code) [fine too](#here) `[not a link](nowhere.md)`
[gone](no/such/page.md) [no heading](other.md#not-there) [no heading here](#nor-here)
MD
if python3 "$src/tests/docs/doc_links.py" "$tmp" "$tmp/docs/page.md" >"$tmp/out" 2>&1; then
    fail "doc_links.py accepted three broken links and a page without contents"
fi
for want in "no/such/page.md does not exist" "other.md has no heading #not-there" \
            "page.md has no heading #nor-here" "do not link the heading 'Here'" \
            "do not link the heading 'Not in the contents'" "5 relative links in 1 pages, 5 broken"; do
    grep -qF "$want" "$tmp/out" || fail "doc_links.py did not report: $want"
done
python3 "$src/tests/docs/doc_links.py" "$tmp" "$tmp/docs/other.md" >"$tmp/out" 2>&1 ||
    fail "doc_links.py refused a page whose contents link its heading"
echo "ok: doc_links.py reports the missing file, both missing headings and the missing contents"

# --- commands -------------------------------------------------------------------
cat >"$tmp/bad.md" <<'MD'
```sh
build/cli/ptdp train --no-such-flag
mpirun -n 2 build/cli/ptdp train --backend mpi --dp 2
```
MD
if python3 "$src/tests/docs/doc_commands.py" "$src" "$ptdp" "$ptdp64" "$tmp/bad.md" >"$tmp/out" 2>&1; then
    fail "doc_commands.py accepted a failing command and an unmarked mpirun"
fi
for want in "bad.md:2: exit 2, the page says 0" "bad.md:3: needs mpirun"; do
    grep -qF "$want" "$tmp/out" || fail "doc_commands.py did not report: $want"
done
cat >"$tmp/good.md" <<'MD'
<!-- exit: 2 -->
```console
$ ptdp train --no-such-flag
ptdp train: what a run prints is not a command
```
<!-- not run: needs mpirun -->
```sh
mpirun -n 2 build/cli/ptdp train --backend mpi --dp 2
```
<!-- slow: never under --fast -->
```sh
ptdp-f64 train --no-such-flag-either
```
```
   ptdp train --dp 2     (an indented line is a picture's)
```
MD
python3 "$src/tests/docs/doc_commands.py" "$src" "$ptdp" "$ptdp64" --fast "$tmp/good.md" >"$tmp/out" 2>&1 ||
    fail "doc_commands.py refused a page that says what its commands do"
grep -qF "1 commands run (--fast), 0 failed; 1 slow ones left to the full test; 1 marked not run" "$tmp/out" ||
    fail "doc_commands.py counted the good page wrong"
echo "ok: doc_commands.py reports the failing command and the unmarked mpirun, and reads the marks"
