#!/usr/bin/env bash
# gpt.sh PTDP — ptdp train --model gpt and ptdp sample from the command line.
#
#   bad input     every GPT flag validated: exit 2 naming the flag and what
#                 would work, before any step
#   --check       a 3D mesh with dropout equals one device
#   checkpoints   saved at tp 2 x pp 2, resumed at tp 3 x pp 1 and back: the
#                 same losses as a run that never stopped
#   learning      the default GPT's loss falls on the built-in sums
#   sample        greedy and seeded text from a checkpoint; an MLP checkpoint
#                 and a missing file are clear errors
#   demo gpt      1 device and dp 2 x tp 2 x pp 2 side by side, equal; then
#                 the 8-device model continues the prompt
#   selective     --recompute selective: bad input; --check with dropout on a
#                 3D mesh with SP; the probabilities left out of the printed
#                 formula; more compute on the virtual clock than without
#   --cp          context parallelism: bad input; --check on dp x cp x tp x pp;
#                 zigzag balances the attention (scores equal, virtual compute
#                 within 5%), contiguous does not; the report's cp bytes
#   --sp          sequence parallelism: bad input; --check on a 3D mesh; the
#                 TP bytes of the default GPT as printed: TP alone's, the
#                 LayerNorms' all-reduce and the kept shards gathered again;
#                 its activation formula printed, smaller than TP's; its
#                 arena peak at most 0.65 of TP's at tp 4 (C 256, T 64)
set -uo pipefail

# shellcheck source=cases_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cases_lib.sh"

# usage TEXT ARGS...: exit 2 with TEXT on stderr, nothing on stdout
usage() {
    local want=$1
    shift
    "$ptdp" "$@" >"$dir/u.out" 2>"$dir/u.err" </dev/null
    local status=$?
    if [[ $status -eq 2 ]] && grep -qF -- "$want" "$dir/u.err" && [[ ! -s $dir/u.out ]]; then
        ok "ptdp $*  ->  $(head -n 1 "$dir/u.err")"
    else
        fail "ptdp $*: exit $status, want 2 and \"$want\"; stderr: $(cat "$dir/u.err")"
    fi
}

printf '' >"$dir/empty.txt"
printf 'abc' >"$dir/short.txt"
printf 'hello, world\n%.0s' {1..20} >"$dir/text.txt"
mkfifo "$dir/fifo"
g=(train --model gpt --steps 1)
usage "--heads 5 must divide --hidden 64 (valid --heads: 1, 2, 4, 8, 16, 32, 64)" "${g[@]}" --heads 5
usage "--tp 3 must divide --heads 4, --ffn 256 and the padded vocabulary" "${g[@]}" --tp 3
usage "--tp 8 must divide --heads 4" "${g[@]}" --tp 8
usage "--seq-len 1: must be between 2 and" "${g[@]}" --seq-len 1
usage "--seq-len 10: the data has 3 tokens, one sequence needs 11" "${g[@]}" --seq-len 10 --data "$dir/short.txt"
usage "--data $dir/missing.txt: cannot open" "${g[@]}" --data "$dir/missing.txt"
usage "--data $dir/empty.txt: the file is empty" "${g[@]}" --data "$dir/empty.txt"
usage "not a regular file" "${g[@]}" --data "$dir/fifo"
usage "--vocab 50: the data holds token 61, so --vocab must be at least 62" "${g[@]}" --vocab 50
usage "--vocab 100: the data holds token 119, so --vocab must be at least 120" "${g[@]}" --vocab 100 --data "$dir/text.txt"
usage "--heads is a flag of --model gpt" train --heads 4
usage "--data is a flag of --model gpt" train --data "$dir/text.txt"
usage "--classes is a flag of --model mlp" "${g[@]}" --classes 10
usage "--model transformer: " train --model transformer

# --check on a 3D mesh, with dropout and the tied embedding across stages
m=(--model gpt --hidden 32 --heads 4 --ffn 64 --layers 2 --seq-len 8 --batch 16 --quiet)
if "$ptdp" train "${m[@]}" --dp 2 --tp 2 --pp 2 --micro-batches 2 --dropout 0.1 --steps 3 --check \
        >"$dir/check.out" 2>&1 && grep -q "check PASSED" "$dir/check.out"; then
    ok "gpt dp 2 x tp 2 x pp 2 with dropout: --check passed"
else
    fail "gpt --check: $(tail -3 "$dir/check.out")"
fi

# checkpoints: tp 2 x pp 2 -> tp 3 x pp 1 -> tp 2 x pp 2 against one uninterrupted run;
# V_pad 192 divides by 2 and 3 (--vocab-multiple 96 at tp 2)
r=(--model gpt --hidden 48 --heads 6 --ffn 96 --layers 2 --seq-len 16 --batch 12 --vocab-multiple 96 --quiet)
"$ptdp" train "${r[@]}" --tp 2 --pp 2 --micro-batches 2 --steps 6 --log "$dir/whole.json" >/dev/null 2>&1
"$ptdp" train "${r[@]}" --tp 2 --pp 2 --micro-batches 2 --steps 2 --save "$dir/a.st" >/dev/null 2>&1
"$ptdp" train "${r[@]}" --tp 3 --steps 2 --load "$dir/a.st" --save "$dir/b.st" --log "$dir/b.json" >/dev/null 2>&1
"$ptdp" train "${r[@]}" --tp 2 --pp 2 --micro-batches 2 --steps 2 --load "$dir/b.st" --log "$dir/c.json" \
    >/dev/null 2>&1
loss() { sed -n "$2p" "$1" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }
# --check's rule: |a - b| <= tol max(1, |b|), 1e-4 in float, 1e-10 in double
tol=1e-4
[[ $("$ptdp" version) == *f64* ]] && tol=1e-10
close() { awk -v a="$1" -v b="$2" -v t="$tol" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b;
                                                      if (m < 1) m = 1; exit !(a != "" && d <= t * m) }'; }
same=1
for s in 3 4; do close "$(loss "$dir/b.json" $((s - 2)))" "$(loss "$dir/whole.json" $s)" || same=0; done
for s in 5 6; do close "$(loss "$dir/c.json" $((s - 4)))" "$(loss "$dir/whole.json" $s)" || same=0; done
if [[ $same -eq 1 && -s $dir/c.json ]]; then
    ok "saved at tp 2 x pp 2, resumed at tp 3, then at tp 2 x pp 2: the losses of one run"
else
    fail "re-sharding: whole $(cut -c1-50 "$dir/whole.json" | tr '\n' ' '); b $(cut -c1-50 "$dir/b.json" 2>/dev/null | tr '\n' ' ')"
fi
if grep -qa '"transformer.h.1.attn.c_attn.weight"' "$dir/a.st" && grep -qa '"model":"gpt"' "$dir/a.st" &&
    grep -qa '"vocab_padded":"192"' "$dir/a.st" && ! grep -qa 'lm_head' "$dir/a.st"; then
    ok "the checkpoint has nanoGPT's names, the model and V_pad; the tied head stored once"
else
    fail "checkpoint header: $(head -c 400 "$dir/a.st" | tr -c '[:print:]' '.')"
fi

# the default GPT learns the sums
"$ptdp" train --model gpt --steps 120 --save "$dir/gpt.st" --log "$dir/learn.json" --quiet >/dev/null 2>&1
first=$(loss "$dir/learn.json" 1)
last=$(loss "$dir/learn.json" 120)
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 4 && b < 2.6) }'; then
    ok "the default GPT's loss falls from $first to $last in 120 steps"
else
    fail "the default GPT's loss: $first -> $last"
fi

# sample
a=$("$ptdp" sample --load "$dir/gpt.st" --prompt "12+35=" --tokens 20 2>&1)
b=$("$ptdp" sample --load "$dir/gpt.st" --prompt "12+35=" --tokens 20 2>&1)
c=$("$ptdp" sample --load "$dir/gpt.st" --prompt "12+35=" --tokens 20 --temperature 1 --seed 4 2>&1)
d=$("$ptdp" sample --load "$dir/gpt.st" --prompt "12+35=" --tokens 20 --temperature 1 --seed 4 2>&1)
if [[ $a == "$b" && $c == "$d" && $a == 12+35=* && ${#a} -ge 26 ]]; then
    ok "sample: greedy twice the same, seeded twice the same: $(head -n 1 <<<"$a")"
else
    fail "sample: '$a' / '$b' / '$c' / '$d'"
fi
"$ptdp" train --steps 1 --save "$dir/mlp.st" --quiet >/dev/null 2>&1
"$ptdp" sample --load "$dir/mlp.st" >"$dir/s.out" 2>"$dir/s.err"
status=$?
if [[ $status -eq 1 ]] && grep -qF "holds the MLP (--model mlp), which cannot be sampled" "$dir/s.err" &&
    grep -qF "needs a checkpoint of --model gpt" "$dir/s.err"; then
    ok "sample of an MLP checkpoint: a clear error naming the models that can be sampled"
else
    fail "sample of an MLP checkpoint: exit $status; $(cat "$dir/s.err")"
fi
usage "--load CKPT is needed" sample
usage "--temperature -1: must be between 0 and 100" sample --load x --temperature -1
"$ptdp" sample --load "$dir/gpt.st" --prompt "$(printf '1+%.0s' {1..30})" --tokens 2 >/dev/null 2>"$dir/long.err"
if grep -qF "the prompt has 60 bytes, the model sees 32: it keeps the last 32" "$dir/long.err"; then
    ok "sample: a prompt longer than seq-len keeps its end, and says so"
else
    fail "long prompt: $(cat "$dir/long.err")"
fi

# demo gpt: 40 steps side by side, 5 more for B alone, then its text
"$ptdp" demo gpt --steps 45 >"$dir/demo.out" 2>&1
status=$?
if [[ $status -eq 0 ]] && grep -qF "after 40 steps" "$dir/demo.out" && grep -qF "the same training run" "$dir/demo.out" &&
    grep -qE "^ +45 +[0-9.]+$" "$dir/demo.out" && grep -q "^12+35=" "$dir/demo.out"; then
    ok "demo gpt: $(grep -F "after 40 steps" "$dir/demo.out" | sed 's/^ *//')"
else
    fail "demo gpt: exit $status; $(tail -n 20 "$dir/demo.out")"
fi
"$ptdp" sample --load "$dir/gpt.st" --held-out >"$dir/held.out" 2>&1
if grep -qE "^held-out sums: [0-9]+ of [0-9]+ answered exactly \([0-9.]+%\), sums never in the training text$" "$dir/held.out"; then
    ok "sample --held-out: $(cat "$dir/held.out")"
else
    fail "sample --held-out: $(cat "$dir/held.out")"
fi
usage "'nosuch' has no demo of its own" demo nosuch
usage "--prompt: 'x' is not in the sums' alphabet" demo gpt --prompt x
usage "--steps 0: must be between 1 and 5000" demo gpt --steps 0

# sequence parallelism
usage "--sp splits the sequence, and the MLP has none" train --sp --tp 2 --steps 1
usage "--sp shares the TP group's work along the sequence: it needs --tp 2 or more" "${g[@]}" --sp
usage "--sp: --seq-len 30 must divide by --tp 4" "${g[@]}" --sp --tp 4 --seq-len 30
if "$ptdp" train --model gpt --sp --dp 2 --tp 2 --pp 2 --micro-batches 2 --dropout 0.1 --steps 2 --check \
        >"$dir/sp.out" 2>&1 && grep -q "^check PASSED" "$dir/sp.out" &&
    grep -qF "with sequence parallelism" "$dir/sp.out"; then
    ok "--sp on dp 2 x tp 2 x pp 2 with dropout: $(grep "^check PASSED" "$dir/sp.out")"
else
    fail "--sp --check: $(tail -n 5 "$dir/sp.out")"
fi
# tp bytes per step of device 0 in a --report
tp_bytes() { tr -d ' \n' <"$1" | sed 's/.*"bytes_sent_per_step":{[^}]*"tp":\([0-9.eE+]*\).*/\1/'; }
"$ptdp" train --model gpt --tp 2 --steps 2 --report "$dir/tp.json" --quiet >/dev/null 2>&1
"$ptdp" train --model gpt --tp 2 --sp --steps 2 --report "$dir/sp.json" >"$dir/spq.out" 2>&1
a=$(tp_bytes "$dir/tp.json") b=$(tp_bytes "$dir/sp.json")
# SP sends TP's bytes + the LayerNorms' gradient all-reduce + each kept
# LayerNorm shard gathered again in the backward: the printed formula's
# "TP alone" is the TP run's measured bytes, to the byte
# (5 LayerNorms of 2C = 128 reals, each all-reduce sending 2(N-1)/N of them;
# 5 shards of R C = 2048 x 64 reals, each gather sending (N-1)/N of them)
e=4; [[ $("$ptdp" version) == *f64* ]] && e=8
ln=$((5 * 128 * e)) again=$((5 * 1024 * 64 * e))
line=$(grep -F "  device 0 (stage 0): " "$dir/spq.out")
said=$(sed -n "s/^  device 0 (stage 0): \([0-9]*\) B = \([0-9]*\) B (TP alone) + $ln B (5 LayerNorms) + $again B (5 shards x 1 micro-batch.*/\1 \2/p" "$dir/spq.out")
if [[ $said == "$b $a" ]] && awk -v a="$a" 'BEGIN { exit !(a > 0) }'; then
    ok "--sp sends $b B per step over TP: TP alone's $a B + the LayerNorms' $ln B + the shards gathered again, $again B"
else
    fail "--sp tp bytes: $b against TP's $a; the report says '$line'"
fi
# SP keeps only its shard of the LayerNorm outputs (gathered again for dW):
# at tp 4, C 256, F 1024, T 64 the arena's activation peak is at most 0.65
# of TP alone's (keeping the gathered shards it was 0.82)
acts_peak() { tr -d ' \n' <"$1" | sed 's/.*"memory_peak_bytes":{[^}]*"acts":\([0-9]*\).*/\1/'; }
big=(--model gpt --tp 4 --hidden 256 --ffn 1024 --seq-len 64 --steps 1 --quiet)
"$ptdp" train "${big[@]}" --report "$dir/big_tp.json" >/dev/null 2>&1
"$ptdp" train "${big[@]}" --sp --report "$dir/big_sp.json" >/dev/null 2>&1
a=$(acts_peak "$dir/big_tp.json") b=$(acts_peak "$dir/big_sp.json")
if awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && b > 0 && b <= 0.65 * a) }'; then
    ok "--sp at tp 4 (C 256, F 1024, T 64): activation peak $b B, TP alone $a B ($(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')x)"
else
    fail "--sp activation peak at tp 4: $b B against TP alone's $a B (want at most 0.65x)"
fi
# --overlap: SP's backward gathers run on the communication stream (more
# stream time than TP's overlap alone, part of it hidden), the same losses
stream_s() { tr -d ' \n' <"$1" | sed 's/.*"comm_stream":\([0-9.eE+-]*\).*/\1/'; }
ov=(--model gpt --tp 2 --dp 2 --steps 2 --quiet)
"$ptdp" train "${ov[@]}" --sp --log "$dir/sp_block.jsonl" >/dev/null 2>&1
"$ptdp" train "${ov[@]}" --sp --overlap --log "$dir/sp_ov.jsonl" --report "$dir/sp_ov.json" >/dev/null 2>&1
"$ptdp" train "${ov[@]}" --overlap --report "$dir/tp_ov.json" >/dev/null 2>&1
a=$(stream_s "$dir/tp_ov.json") b=$(stream_s "$dir/sp_ov.json")
if [[ -s $dir/sp_ov.jsonl ]] && cmp -s <(grep -o '"loss": *[^,]*' "$dir/sp_block.jsonl") <(grep -o '"loss": *[^,]*' "$dir/sp_ov.jsonl") &&
    awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && b > a) }'; then
    ok "--sp --overlap: the same losses; the comm stream carries SP's gathers too ($b s against TP's $a s)"
else
    fail "--sp --overlap: stream $b s against TP's $a s; losses $(grep -c loss "$dir/sp_ov.jsonl")"
fi
# at dp 1 SP's gathers are the only traffic --overlap hides: accepted, on the stream, the same losses
one=(--model gpt --tp 2 --sp --steps 2 --quiet)
"$ptdp" train "${one[@]}" --log "$dir/sp1.jsonl" >/dev/null 2>&1
"$ptdp" train "${one[@]}" --overlap --log "$dir/sp1_ov.jsonl" --report "$dir/sp1_ov.json" >/dev/null 2>&1
c=$(stream_s "$dir/sp1_ov.json")
if [[ -s $dir/sp1_ov.jsonl ]] && cmp -s <(grep -o '"loss": *[^,]*' "$dir/sp1.jsonl") <(grep -o '"loss": *[^,]*' "$dir/sp1_ov.jsonl") &&
    awk -v c="$c" 'BEGIN { exit !(c > 0) }'; then
    ok "--sp --overlap at dp 1: the same losses, SP's gathers on the stream ($c s)"
else
    fail "--sp --overlap at dp 1: stream '$c' s; losses $(grep -c loss "$dir/sp1_ov.jsonl" 2>/dev/null)"
fi
"$ptdp" train --model gpt --tp 2 --sp --attention full --steps 1 >"$dir/spf.out" 2>&1
if grep -qF "activations a micro-batch keeps per block (sp): B T (8C/tp + 2F/tp + 4/tp) + B (nh/tp) T^2" \
        "$dir/spf.out" && grep -qF "= 64 x 32 x (8x64/2 + 2x256/2 + 4/2) + 64 x (4/2) x 32^2 = 1183744 elements" \
        "$dir/spf.out"; then
    ok "--sp prints its activation formula: $(grep -F "1183744 elements" "$dir/spf.out" | sed 's/^ *//')"
else
    fail "--sp activation formula: $(grep -A1 "activations a micro-batch" "$dir/spf.out")"
fi

# selective recomputation
usage "--recompute bogus: must be one of full, selective" "${g[@]}" --recompute bogus
usage "--recompute selective redoes the attention core, and the MLP has no attention" train --recompute selective
if "$ptdp" train --model gpt --recompute selective --sp --dp 2 --tp 2 --pp 2 --micro-batches 2 --dropout 0.1 \
        --steps 2 --check >"$dir/sel.out" 2>&1 && grep -q "^check PASSED" "$dir/sel.out" &&
    grep -qF "activations a micro-batch keeps per block (sp) (selective recompute): B T (8C/tp + 2F/tp + 4/tp)" \
        "$dir/sel.out" && grep -qF "attention probabilities are computed again in the backward" "$dir/sel.out"; then
    ok "--recompute selective with --sp and dropout: $(grep "^check PASSED" "$dir/sel.out")"
else
    fail "--recompute selective: $(tail -n 6 "$dir/sel.out")"
fi
compute_s() { tr -d ' \n' <"$1" | sed 's/.*"virtual_s":{"compute":\([0-9.eE+-]*\).*/\1/'; }
"$ptdp" train --model gpt --steps 1 --attention full --report "$dir/full.json" --quiet >/dev/null 2>&1
"$ptdp" train --model gpt --steps 1 --recompute selective --report "$dir/selr.json" --quiet >/dev/null 2>&1
a=$(compute_s "$dir/full.json") b=$(compute_s "$dir/selr.json")
if awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && b > a) }' && grep -q '"recompute_mode": "selective"' "$dir/selr.json"; then
    ok "--recompute selective: virtual compute $b s against $a s without (the attention core twice)"
else
    fail "--recompute selective compute: $b s against $a s; $(grep -o '"recompute_mode": "[a-z]*"' "$dir/selr.json")"
fi

# context parallelism
usage "--cp 2 splits each sequence over devices, and the MLP's samples have no sequence" train --cp 2 --steps 1
usage "--cp 3: --seq-len 32 must divide into 6 zigzag chunks" "${g[@]}" --cp 3
usage "--cp 3: --seq-len 32 must divide into 3 contiguous chunks" "${g[@]}" --cp 3 --cp-layout contiguous
usage "--cp-layout diagonal: must be one of zigzag, contiguous" "${g[@]}" --cp 2 --cp-layout diagonal
usage "--cp-layout contiguous needs --cp 2 or more" "${g[@]}" --cp-layout contiguous
usage "--sp with --cp 2: each device's 15 positions must divide by --tp 2" "${g[@]}" --cp 2 --sp --tp 2 --seq-len 30 --cp-layout contiguous
usage "--devices 6 is not a multiple of --cp 4 x --tp 1 x --pp 1 = 4" "${g[@]}" --cp 4 --devices 6
if "$ptdp" train --model gpt --cp 2 --dp 2 --tp 2 --sp --micro-batches 2 --dropout 0.1 --steps 2 --check \
        --report "$dir/cp.json" >"$dir/cp.out" 2>&1 && grep -q "^check PASSED" "$dir/cp.out" &&
    grep -qF "8 devices = dp 2 x cp 2 (zigzag) x tp 2 x pp 1 with sequence parallelism" "$dir/cp.out" &&
    grep -q '"cp": [1-9][0-9]*' "$dir/cp.json" && grep -q '"cp_rank": 1' "$dir/cp.json"; then
    ok "--cp 2 on dp 2 x cp 2 x tp 2 with --sp and dropout: $(grep "^check PASSED" "$dir/cp.out")"
else
    fail "--cp --check: $(tail -n 5 "$dir/cp.out"); $(grep -o '"bytes_sent": {[^}]*}' "$dir/cp.json" | head -1)"
fi
"$ptdp" train --model gpt --cp 4 --steps 1 >"$dir/zz.out" 2>&1
"$ptdp" train --model gpt --cp 4 --cp-layout contiguous --steps 1 >"$dir/ct.out" 2>&1
zz=$(sed -n 's/.*largest \/ smallest: \([0-9.]*\) (the scores), \([0-9.]*\).*/\1 \2/p' "$dir/zz.out")
ct=$(sed -n 's/.*largest \/ smallest: \([0-9.]*\) (the scores), \([0-9.]*\).*/\1 \2/p' "$dir/ct.out")
if [[ $zz == "1.00 "* ]] && awk -v v="${zz#* }" 'BEGIN { exit !(v <= 1.05) }' && [[ $ct == "4.00 "* ]] &&
    awk -v v="${ct#* }" 'BEGIN { exit !(v > 1.0) }'; then
    ok "--cp 4: zigzag scores and compute balanced ($zz), contiguous not ($ct)"
else
    fail "--cp balance: zigzag '$zz', contiguous '$ct'"
fi

behaved
