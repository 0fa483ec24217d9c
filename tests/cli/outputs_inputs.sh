#!/usr/bin/env bash
# outputs_inputs.sh PTDP — an output never overwrites an input or another output.
#
# Every file flag names a file, however it is spelt: x.st, ./x.st,
# sub/../x.st and a hard link are one file.  `ptdp train` compares each
# output (--save, --save-init, --log, --trace, --report, --dump-data) with
# the inputs (--load, --data) and with the other outputs by the file itself
# (device and inode, or its directory's and its name when it does not exist
# yet), and refuses before any work: exit 2, both flags named, the input
# byte for byte as it was.
set -uo pipefail
# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"
ptdp=$(cd "$(dirname "$ptdp")" && pwd)/$(basename "$ptdp")   # the cases run in $tmp
small=(--d-in 8 --hidden 16 --ffn 32 --layers 2 --classes 4)
gpt=(--model gpt --hidden 16 --heads 2 --layers 1 --seq-len 8 --batch 4)

run_ok train "${small[@]}" --steps 1 --quiet --save "$tmp/in.st" || true
printf '1+2=3\n4+5=9\n12+30=42\n7+8=15\n' >"$tmp/d.txt"
cp "$tmp/in.st" "$tmp/in.copy"
cp "$tmp/d.txt" "$tmp/d.copy"
mkdir -p "$tmp/sub"
ln "$tmp/in.st" "$tmp/link.st"

# kept NAME ORIGINAL COPY: the input is unchanged
kept() {
    cases=$((cases + 1))
    if cmp -s "$2" "$3"; then echo "ok    $1 is unchanged"; else fail "$1 was changed"; fi
}

cd "$tmp" || exit 1
expect_usage "--load and --log name the same file in.st" -- train "${small[@]}" --load in.st --log in.st --steps 2
kept in.st in.st in.copy
expect_usage "--load and --dump-data name the same file in.st" -- train "${small[@]}" --load in.st --dump-data in.st --steps 2
kept in.st in.st in.copy
expect_usage "--load and --report name the same file in.st (as ./sub/../in.st)" -- \
    train "${small[@]}" --load in.st --report ./sub/../in.st --steps 2
expect_usage "--load and --save name the same file in.st (as link.st)" -- train "${small[@]}" --load in.st --save link.st --steps 2
expect_usage "--load and --trace name the same file" -- train "${small[@]}" --load "$tmp/in.st" --trace in.st --steps 2
kept in.st in.st in.copy
expect_usage "--data and --report name the same file d.txt" -- train "${gpt[@]}" --data d.txt --report d.txt --steps 1
kept d.txt d.txt d.copy
expect_usage "--data and --save-init name the same file d.txt (as ./d.txt)" -- \
    train "${gpt[@]}" --data d.txt --save-init ./d.txt --steps 1
kept d.txt d.txt d.copy

# two outputs, one file (neither exists yet): the same directory and name
expect_usage "--save and --log name the same file x.st (as ./x.st)" -- train "${small[@]}" --save x.st --log ./x.st
expect_usage "--log and --report name the same file sub/r.json (as sub/../sub/r.json)" -- \
    train "${small[@]}" --log sub/r.json --report sub/../sub/r.json
[[ -e x.st || -e sub/r.json ]] && fail "a refused run wrote a file"

# distinct files still work: an input, and outputs beside it
if run_ok train "${small[@]}" --load in.st --steps 2 --quiet --save out.st --log out.json --report ./sub/r.json; then
    cases=$((cases + 1))
    if [[ -s out.st && -s out.json && -s sub/r.json ]]; then echo "ok    --load in.st, outputs beside it: written"
    else fail "--load in.st with three outputs: a file is missing"; fi
fi
kept in.st in.st in.copy

finish outputs_inputs "$cases cases: an output that is an input or another output is refused (exit 2)"
