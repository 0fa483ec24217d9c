# can_fail_lib.sh — what every *_can_fail.sh shares: a check of the tree is
# a test only if it can fail, so run it where it must, and insist it fails
# saying what it should.  Source it after `set -euo pipefail`; it makes
# $tmp (removed on exit) and defines:
#
#   copy_tree SRC [TOP…]          $tmp/tree: a copy of SRC's src/ and include/
#                                 (or the TOPs given)
#   must_refuse WHAT CMD [ARG…]   CMD must exit non-zero (its output: $tmp/out);
#                                 WHAT names the mistake in the failure message
#   must_say TEXT…                each TEXT is in $tmp/out
#   must_not_say TEXT WHY         TEXT is not in $tmp/out (a grep -E pattern)
#   refuses_line SRC FILE LINE TEXT CMD [ARG…]
#                                 a copy of SRC with LINE appended to
#                                 src/FILE must be refused by CMD (run on
#                                 "$tmp/tree"), saying TEXT
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

copy_tree() {
    local src=$1
    shift
    local tops=("$@")
    [[ ${#tops[@]} -gt 0 ]] || tops=(src include)
    rm -rf "$tmp/tree"
    mkdir -p "$tmp/tree"
    for top in "${tops[@]}"; do
        cp -R "$src/$top" "$tmp/tree/"
    done
}

must_refuse() {
    local what=$1
    shift
    if "$@" >"$tmp/out" 2>&1; then
        echo "FAIL: $(basename "$2" 2>/dev/null || echo "$1") accepted $what" >&2
        cat "$tmp/out" >&2
        exit 1
    fi
}

must_say() {
    for want in "$@"; do
        grep -qF -- "$want" "$tmp/out" || { echo "FAIL: expected \"$want\" in:" >&2; cat "$tmp/out" >&2; exit 1; }
    done
}

must_not_say() {
    if grep -qE -- "$1" "$tmp/out"; then
        echo "FAIL: $2:" >&2
        cat "$tmp/out" >&2
        exit 1
    fi
}

refuses_line() {
    local src=$1 file=$2 line=$3 text=$4
    shift 4
    copy_tree "$src"
    printf '%s\n' "$line" >>"$tmp/tree/src/$file"
    must_refuse "src/$file with \"$line\"" "$@"
    must_say "$text"
    echo "ok: src/$file with \"$line\" is refused"
}
