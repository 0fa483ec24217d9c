# usage_lib.sh — what the newer CLI scripts (bf16, plan, schedule_ii,
# terapipe, zero3) share, sourced first thing with the script's own
# arguments: $ptdp is the binary ($1), $out and $err the last run's
# output in a temporary folder removed at exit, failures counts.
#
#   fail MESSAGE                    count a failure, show the last run's output
#   expect_usage "TEXT" -- ARGS...  ptdp ARGS exits 2, TEXT on stderr, nothing on stdout

ptdp=${1:?usage: $(basename "$0") PATH_TO_PTDP}
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
err=$tmp/err

fail() {
    failures=$((failures + 1))
    echo "FAIL  $*"
    sed 's/^/      stdout: /' "$out" | head -n 20
    sed 's/^/      stderr: /' "$err" | head -n 10
}

expect_usage() {
    local want=$1
    shift 2
    "$ptdp" "$@" >"$out" 2>"$err" </dev/null
    local status=$?
    if [[ $status -ne 2 ]]; then fail "ptdp $*: exit status $status, expected 2"
    elif ! grep -qF -- "$want" "$err"; then fail "ptdp $*: stderr lacks \"$want\""
    elif [[ -s $out ]]; then fail "ptdp $*: printed on stdout"
    else echo "ok    ptdp $*  ->  $(head -n 1 "$err")"
    fi
}
