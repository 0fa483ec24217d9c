# usage_lib.sh — what schedule_ii.sh and terapipe.sh share, sourced after
# they set $ptdp, $out, $err and failures=0.
#
#   fail MESSAGE                    count a failure, show the last run's output
#   expect_usage "TEXT" -- ARGS...  ptdp ARGS exits 2, TEXT on stderr, nothing on stdout

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
