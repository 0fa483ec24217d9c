# cases_lib.sh — what the CLI scripts that count their cases one by one
# (gpt, hardening) share, sourced first thing with the script's own
# arguments: $ptdp is the binary ($1), $dir a temporary folder removed at
# exit.
#
#   ok MESSAGE / fail MESSAGE   a case that behaved, or did not: counted, said
#   behaved                     the closing line; the status is 0 only if no
#                               case failed

ptdp=${1:?usage: $(basename "$0") PATH_TO_PTDP}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
cases=0

ok() { cases=$((cases + 1)); echo "ok    $*"; }
fail() { cases=$((cases + 1)); failures=$((failures + 1)); echo "FAIL  $*"; }

behaved() {
    echo "$(basename "$0"): $((cases - failures)) of $cases cases behaved"
    [[ $failures -eq 0 ]]
}
