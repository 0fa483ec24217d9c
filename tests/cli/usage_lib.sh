# usage_lib.sh — what the CLI scripts (bf16, plan, schedule_ii, train_pp,
# terapipe, zero3) share, sourced first thing with the script's own
# arguments: $ptdp is the binary ($1), $out and $err the last run's
# output in a temporary folder removed at exit, failures and cases count.
#
#   fail MESSAGE                    count a failure, show the last run's output
#   expect_usage "TEXT" -- ARGS...  ptdp ARGS exits 2, TEXT on stderr, nothing on stdout
#   run_status N ARGS...            ptdp ARGS exits N (stdout in $out, stderr in $err),
#                                   else a failure; returns 1 then
#   run_ok ARGS...                  run_status 0 ARGS...
#   has TEXT                        the last run's stdout contains TEXT
#   finish NAME TEXT                the closing line: NAME's failures and exit 1,
#                                   or "NAME: ok — TEXT"
#   report_config FILE KEY VALUE    a --report's config.KEY is VALUE (JSON): in the
#                                   text, and parsed when there is a python3

ptdp=${1:?usage: $(basename "$0") PATH_TO_PTDP}
failures=0
cases=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
err=$tmp/err

fail() {
    failures=$((failures + 1))
    echo "FAIL  $*"
    [[ -f $out ]] && sed 's/^/      stdout: /' "$out" | head -n 40
    [[ -f $err ]] && sed 's/^/      stderr: /' "$err" | head -n 20
    return 0
}

expect_usage() {
    local want=$1
    shift 2
    cases=$((cases + 1))
    "$ptdp" "$@" >"$out" 2>"$err" </dev/null
    local status=$?
    if [[ $status -ne 2 ]]; then fail "ptdp $*: exit status $status, expected 2"
    elif ! grep -qF -- "$want" "$err"; then fail "ptdp $*: stderr lacks \"$want\""
    elif [[ -s $out ]]; then fail "ptdp $*: printed on stdout"
    else echo "ok    ptdp $*  ->  $(head -n 1 "$err")"
    fi
}

run_status() {
    local want=$1
    shift
    cases=$((cases + 1))
    "$ptdp" "$@" >"$out" 2>"$err" </dev/null
    local status=$?
    if [[ $status -ne $want ]]; then
        fail "ptdp $*: exit status $status, expected $want"
        return 1
    fi
    return 0
}

run_ok() { run_status 0 "$@"; }

has() { grep -qF -- "$1" "$out"; }

# The bubble a run printed (after run_ok), as $line, $measured and
# $formula: `ptdp schedule`'s "bubble: measured X … = Y (uniform …" or
# `ptdp train`'s "pipeline (…) … bubble measured X, … = Y".
read_bubble() {   # read_bubble schedule|train
    if [[ $1 == schedule ]]; then
        line=$(grep -m 1 '^bubble:' "$out")
        measured=$(sed -n 's/^bubble: measured \([0-9.]*\).*/\1/p' <<<"$line")
        formula=$(sed -n 's/.* = \([0-9.]*\) (uniform.*/\1/p' <<<"$line")
    else
        line=$(grep -m 1 '^pipeline (' "$out")
        measured=$(sed -n 's/.*bubble measured \([0-9.]*\),.*/\1/p' <<<"$line")
        formula=$(sed -n 's/.* = \([0-9.]*\)$/\1/p' <<<"$line")
    fi
}

expect_out() {     # expect_out "TEXT ON STDOUT"...: after run_ok
    for want in "$@"; do
        grep -qF -- "$want" "$out" || fail "stdout lacks \"$want\""
    done
}

expect_line() {    # expect_line 'EXTENDED REGEX'...: after run_ok, a stdout line matches each
    for want in "$@"; do
        grep -qE -- "$want" "$out" || fail "no stdout line matches '$want'"
    done
}

report_config() {
    local file=$1 key=$2 value=$3
    grep -qE "\"$key\": $value[,}]" "$file" && echo "ok    --report has \"$key\": $value" \
        || fail "the report lacks \"$key\": $value"
    if command -v python3 >/dev/null; then
        python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["config"][sys.argv[2]] == json.loads(sys.argv[3])' \
            "$file" "$key" "$value" \
            && echo "ok    the report parses, config.$key = $value" || fail "the report does not parse with config.$key $value"
    fi
}

finish() {
    if [[ $failures -gt 0 ]]; then
        echo "$1: $failures failure(s)"
        exit 1
    fi
    echo "$1: ok — $2"
}
