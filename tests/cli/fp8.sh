#!/usr/bin/env bash
# fp8.sh PTDP — `ptdp fp8 quantize`: bad input refused by name, files written atomically.
#
#  1. Exit 2 naming the flag or value: a missing or unknown recipe or format,
#     tiles of zero, negative or non-numeric size, a tile the recipe does not
#     allow (tensorwise and delayed have one; mxfp8's are 1x32 or 32x1), an
#     amax history with another recipe or holding a non-number, a missing
#     IN.st, OUT.st the same file as IN.st or in a missing directory, a
#     tensor that is not float (a checkpoint's step count), names that would
#     collide, --tensors naming a tensor IN.st lacks or one twice.
#  2. Exit 1 for a file that is not safetensors (truncated) or unreadable;
#     an earlier OUT.st is then left as it was, and no temporary file stays.
#  3. A good run: exit 0, the summary line per tensor, OUT.st holds t,
#     t.scale and t.dequant; a checkpoint's weights chosen with --tensors;
#     `ptdp fp8 --help` and `ptdp fp8 quantize --help`.
#  4. docs/fp8.md's example: each command quoted prints what the page says.
# (Every code, scale and value is checked by tests/fp8_reference.py.)
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# A safetensors file from its header and its data bytes (printf escapes):
# the 8-byte length, the JSON padded with spaces to a multiple of 8, the data.
st_file() {
    local path=$1 json=$2 data=$3
    while (( ${#json} % 8 != 0 )); do json+=" "; done
    printf "\\x$(printf %02x "${#json}")\\x00\\x00\\x00\\x00\\x00\\x00\\x00" >"$path"
    printf '%s' "$json" >>"$path"
    printf "$data" >>"$path"
}
one='\x00\x00\x80\x3f'      # 1.0f, little-endian
st_file "$tmp/in.st" '{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}' "$one$one$one$one$one$one"
st_file "$tmp/int.st" '{"n":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}' '\x01\x00\x00\x00\x00\x00\x00\x00'
st_file "$tmp/clash.st" '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a.scale":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}' "$one$one"
head -c 20 "$tmp/in.st" >"$tmp/short.st"
"$ptdp" train --model mlp --layers 1 --steps 1 --save "$tmp/ck.st" >/dev/null 2>&1 || fail "ptdp train --save: a checkpoint to quantize"
q=(fp8 quantize "$tmp/in.st" "$tmp/out.st")

# ---- 1. exit 2 ------------------------------------------------------------------
expect_usage "--recipe is needed" -- "${q[@]}" --format e4m3
expect_usage "--format is needed" -- "${q[@]}" --recipe tensorwise
expect_usage "--recipe fast: must be one of tensorwise, blockwise, mxfp8, delayed" -- "${q[@]}" --recipe fast --format e4m3
expect_usage "--format e4m4: must be one of e4m3, e5m2" -- "${q[@]}" --recipe tensorwise --format e4m4
expect_usage "--tile 0x128: a size is 0" -- "${q[@]}" --recipe blockwise --format e4m3 --tile 0x128
expect_usage "--tile -1x128: a size is negative" -- "${q[@]}" --recipe blockwise --format e4m3 --tile -1x128
expect_usage "--tile 1x-4: a size is negative" -- "${q[@]}" --recipe blockwise --format e4m3 --tile=1x-4
expect_usage "--tile 1xabc: not a tile: write ROWSxCOLS" -- "${q[@]}" --recipe blockwise --format e4m3 --tile 1xabc
expect_usage "--tile 128: not a tile" -- "${q[@]}" --recipe blockwise --format e4m3 --tile 128
expect_usage "--tile 1.5x2: not a tile" -- "${q[@]}" --recipe blockwise --format e4m3 --tile 1.5x2
expect_usage "--tile 99999999999x1: not a tile" -- "${q[@]}" --recipe blockwise --format e4m3 --tile 99999999999x1
expect_usage "--tile 1x128: tensorwise has one tile, the whole tensor" -- "${q[@]}" --recipe tensorwise --format e4m3 --tile 1x128
expect_usage "--tile 1x128: delayed has one tile" -- "${q[@]}" --recipe delayed --format e5m2 --tile 1x128
expect_usage "--tile 4x8: mxfp8's tiles hold 32 values (1x32 or 32x1), not 4x8" -- "${q[@]}" --recipe mxfp8 --format e4m3 --tile 4x8
expect_usage "--amax-history 1,x: item 2 is not an amax" -- "${q[@]}" --recipe delayed --format e4m3 --amax-history 1,x
expect_usage "--amax-history 1,-2: item 2 is not an amax" -- "${q[@]}" --recipe delayed --format e4m3 --amax-history 1,-2
expect_usage "--amax-history 1,,2: item 2 is not an amax" -- "${q[@]}" --recipe delayed --format e4m3 --amax-history 1,,2
expect_usage "--amax-history 1,nan: item 2 is not an amax" -- "${q[@]}" --recipe delayed --format e4m3 --amax-history 1,nan
expect_usage "--amax-history is for --recipe delayed, not --recipe blockwise" -- "${q[@]}" --recipe blockwise --format e4m3 --amax-history 1
expect_usage "IN.st $tmp/missing.st: no such file" -- fp8 quantize "$tmp/missing.st" "$tmp/out.st" --recipe mxfp8 --format e4m3
expect_usage "name the same file" -- fp8 quantize "$tmp/in.st" "$tmp/./in.st" --recipe mxfp8 --format e4m3
expect_usage "cannot be written" -- fp8 quantize "$tmp/in.st" "$tmp/no/such/out.st" --recipe mxfp8 --format e4m3
expect_usage "expected IN.st and OUT.st" -- fp8 quantize "$tmp/in.st" --recipe mxfp8 --format e4m3
expect_usage "unexpected argument" -- "${q[@]}" "$tmp/third.st" --recipe mxfp8 --format e4m3
expect_usage "tensor 'n' is I64: only float tensors (F32, F64, BF16) are quantized" -- \
    fp8 quantize "$tmp/int.st" "$tmp/out.st" --recipe tensorwise --format e4m3
expect_usage "tensors 'a' and 'a.scale' would both be written as 'a.scale'" -- \
    fp8 quantize "$tmp/clash.st" "$tmp/out.st" --recipe tensorwise --format e4m3
expect_usage "--tensors w,v: IN.st $tmp/in.st has no tensor 'v'" -- "${q[@]}" --recipe mxfp8 --format e4m3 --tensors w,v
expect_usage "--tensors w,w: 'w' is named twice" -- "${q[@]}" --recipe mxfp8 --format e4m3 --tensors w,w
expect_usage "--tensors w,: IN.st $tmp/in.st has no tensor ''" -- "${q[@]}" --recipe mxfp8 --format e4m3 --tensors w,
expect_usage "tensor 'optim.step' is I64: only float tensors" -- fp8 quantize "$tmp/ck.st" "$tmp/out.st" --recipe mxfp8 \
    --format e4m3
expect_usage "unknown command 'dequantize'" -- fp8 dequantize
expect_usage "usage: ptdp fp8" -- fp8

# ---- 2. exit 1, and OUT.st untouched ---------------------------------------------
printf 'earlier' >"$tmp/out.st"
if run_status 1 fp8 quantize "$tmp/short.st" "$tmp/out.st" --recipe tensorwise --format e4m3 &&
   grep -qF "IN.st $tmp/short.st" "$err"; then echo "ok    a truncated IN.st: exit 1 -> $(head -n 1 "$err")"
else fail "a truncated IN.st: not exit 1 naming it"; fi
if [[ $(id -u) -ne 0 ]]; then
    cp "$tmp/in.st" "$tmp/locked.st" && chmod 000 "$tmp/locked.st"
    if run_status 1 fp8 quantize "$tmp/locked.st" "$tmp/out.st" --recipe tensorwise --format e4m3; then
        echo "ok    an unreadable IN.st: exit 1 -> $(head -n 1 "$err")"
    fi
else
    echo "skip  an unreadable IN.st: root reads every file"
fi
[[ $(cat "$tmp/out.st") == earlier ]] && echo "ok    OUT.st left as it was" || fail "OUT.st was changed by a failed run"

# ---- 3. a good run ----------------------------------------------------------------
if run_ok "${q[@]}" --recipe blockwise --format e5m2 --tile 1x2; then
    if has "w: 2 x 3, 4 tiles of 1x2, amax 1, scale 1.74386e-05 .. 1.74386e-05; codes at max 6, NaN 0, zero 0; max |x - dequant| 0"; then
        echo "ok    blockwise e5m2 1x2: $(sed -n 2p "$out")"
    else fail "the summary line of w"; fi
    for name in '"w":{"dtype":"F8_E5M2","shape":[2,3]' '"w.scale":{"dtype":"F' '"shape":[2,2]' '"w.dequant":{"dtype":"F' \
                '"fp8.recipe":"blockwise"' '"fp8.tile":"1x2"'; do
        grep -qF -- "$name" "$tmp/out.st" && echo "ok    OUT.st has $name" || fail "OUT.st lacks $name"
    done
fi
# a checkpoint's weights, picked by name (its step count is an integer)
if run_ok fp8 quantize "$tmp/ck.st" "$tmp/ck8.st" --recipe blockwise --format e4m3 --tile 128x128 \
          --tensors blocks.0.fc1.weight,out.bias; then
    has "blocks.0.fc1.weight: 256 x 64, 2 tiles of 128x128" && has "out.bias: 1 x 16, 1 tile of 128x128" \
        && echo "ok    --tensors: $(sed -n 2p "$out")" || fail "--tensors: the summary lines"
    grep -qF '"blocks.0.fc1.weight.scale":{"dtype":"F' "$tmp/ck8.st" && ! grep -qF '"in.weight' "$tmp/ck8.st" \
        && echo "ok    --tensors: those tensors only" || fail "--tensors: other tensors written"
fi
cases=$((cases + 1))
"$ptdp" "${q[@]}" --recipe tensorwise --format e4m3 >/dev/full 2>"$err"
[[ $? -eq 1 ]] && grep -qF "writing standard output" "$err" && echo "ok    stdout on /dev/full: exit 1" \
    || fail "stdout on /dev/full: not exit 1"
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary file was left behind" || echo "ok    no temporary file left"
run_ok fp8 --help && has "quantize" && echo "ok    ptdp fp8 --help" || fail "ptdp fp8 --help"
run_ok fp8 quantize --help && has "mxfp8" && has "--amax-history" && echo "ok    ptdp fp8 quantize --help" \
    || fail "ptdp fp8 quantize --help"

# ---- 4. docs/fp8.md's example prints what ptdp prints ---------------------------
# Each "$ build/cli/ptdp …" line of its example is run in a folder of its own and
# its output compared with the lines quoted under it (the float build's numbers).
doc="$(dirname "${BASH_SOURCE[0]}")/../../docs/fp8.md"
if [[ $(basename "$ptdp") == ptdp && -f $doc ]]; then
    mkdir -p "$tmp/doc"
    bin="$(cd "$(dirname "$ptdp")" && pwd)/ptdp"
    awk '/^\$ build\/cli\/ptdp /{n++} n && /^```/{exit} n{print > ("'"$tmp/doc/"'" n ".txt")}' "$doc"
    for f in "$tmp"/doc/*.txt; do
        cmd=$(head -n 1 "$f")
        cases=$((cases + 1))
        (cd "$tmp/doc" && eval "\"$bin\" ${cmd#\$ build/cli/ptdp }") >"$tmp/doc/got" 2>&1
        if tail -n +2 "$f" | diff - "$tmp/doc/got" >/dev/null; then echo "ok    docs/fp8.md: ${cmd:0:90}"
        else fail "docs/fp8.md quotes another output of: $cmd"; diff <(tail -n +2 "$f") "$tmp/doc/got" | head -n 8; fi
    done
fi

finish fp8 "$cases cases"
