#!/usr/bin/env bash
# plan.sh PTDP — `ptdp plan`: the layouts of a GPT on a cluster, best first.
#
#  1. The table: the header names the model (its parameters), the cluster
#     and the counts (considered >= valid >= fit > 0), then --top rows.
#  2. --json: {"candidates": [...]}, one candidate a line, every key the
#     issue names, best first (step_s never falls), memory within the GPU.
#  3. Fixed flags are honoured in every candidate (--tp --pp --zero
#     --recompute --schedule --micro-batch-size --sp --cp).
#  4. --explain: memory, time and FLOPs term by term, and a `ptdp train`
#     line that runs (exit 0) the layout in the simulator.
#  5. Bad inputs exit 2 naming the flag and what would do, nothing on
#     stdout; a model that fits nowhere exits 1 saying how far it came.
#  5b. A mixture of experts: --json's ep (dividing dp x cp and E), no ZeRO-3
#     or SP; --ep fixed; --explain's assumption and its run line; refusals.
#  5c. A llama: its shape flags (--kv-heads, --ffn or --ffn-multiple), tp by
#     its kv heads or past them, --explain's run line; every bad shape, eps or
#     theta, and what it has not (experts) refused naming the flag.
#  6. The PTD-P paper's 1T GPT on 3072 GPUs: the search finishes with a
#     plan (its wall time is printed; the 5 s target is `ptdp bench plan`'s).
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"

# a small GPT on 8 GPUs of the default cluster, 1 GiB each
small=(plan --model gpt --layers 4 --hidden 64 --heads 4 --seq-len 32 --vocab 256 --batch 16 --gpus 8
       --profile dgx-a100 --device-mem 1G)

# ---- 1. the table ---------------------------------------------------------------
before=$failures
if run_ok "${small[@]}" --top 3; then
    expect_out "GPT of 218K parameters (layers 4, hidden 64, heads 4, ffn 256, seq-len 32, vocab 256), batch 16" \
               "on 8 GPUs of dgx-a100" "the best 3:" "schedule" "memory/GPU" "tokens/s"
    counts=$(sed -n 's/^layouts: \([0-9]*\) considered, \([0-9]*\) valid, \([0-9]*\) fit.*/\1 \2 \3/p' "$out")
    read -r considered valid fit <<<"$counts"
    if [[ -z $counts ]] || ! (( considered >= valid && valid >= fit && fit > 0 )); then
        fail "the counts line is wrong: '$counts'"
    fi
    rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ ' "$out")
    [[ $rows -eq 3 ]] || fail "--top 3 printed $rows rows"
    [[ $failures -eq $before ]] && echo "ok    the table: $counts (considered, valid, fit), 3 rows"
fi

# ---- 2. --json ------------------------------------------------------------------
keys='dp tp pp cp micro_batch_size virtual_stages schedule recompute zero sp memory_per_gpu_bytes step_s
      tokens_per_s model_tflops_per_gpu hardware_tflops_per_gpu'
json_ok() {   # json_ok N: stdout is {"candidates": [ N lines ]}, every key, best first, within 1 GiB
    local n=$1
    [[ $(head -n 1 "$out") == '{"candidates": [' ]] || fail "--json: first line is not {\"candidates\": ["
    [[ $(tail -n 1 "$out") == ']}' ]] || fail "--json: last line is not ]}"
    local lines
    lines=$(grep -c '^  {"dp": ' "$out")
    [[ $lines -eq $n ]] || fail "--json: $lines candidates, expected $n"
    for k in $keys; do
        [[ $(grep -c "\"$k\": " "$out") -ge $n ]] || fail "--json: a candidate lacks \"$k\""
    done
    local bad
    bad=$(awk -v dev=$((1 << 30)) '/^  \{"dp": / {
              match($0, /"step_s": [^,]*/); s = substr($0, RSTART + 10, RLENGTH - 10) + 0
              match($0, /"memory_per_gpu_bytes": [^,]*/); m = substr($0, RSTART + 24, RLENGTH - 24) + 0
              if (!(s > 0)) print "step_s " s " not positive"
              if (n++ && s < last * (1 - 1e-6)) print "step_s " s " after " last ": not best first"
              if (!(m > 0) || m > dev) print "memory " m " not within the GPU"
              last = s }' "$out")
    [[ -z $bad ]] || fail "--json: $bad"
}
before=$failures
if run_ok "${small[@]}" --top 5 --json; then
    json_ok 5
    [[ $failures -eq $before ]] && echo "ok    --json: 5 candidates, every key, best first, within the GPU"
fi

# ---- 3. fixed flags -------------------------------------------------------------
before=$failures
if run_ok "${small[@]}" --tp 2 --pp 2 --zero 1 --recompute full --schedule gpipe --micro-batch-size 2 --sp on \
       --top 100 --json; then
    n=$(grep -c '^  {"dp": ' "$out")
    [[ $n -ge 1 ]] || fail "fixed flags: no candidate"
    for want in '"tp": 2,' '"pp": 2,' '"zero": 1,' '"recompute": "full",' '"schedule": "gpipe",' \
                '"micro_batch_size": 2,' '"sp": true,'; do
        [[ $(grep -cF -- "$want" "$out") -eq $n ]] || fail "fixed flags: not every candidate has $want"
    done
    [[ $failures -eq $before ]] && echo "ok    fixed flags: all $n candidates keep tp 2 pp 2 zero 1 full gpipe b 2 sp"
fi
before=$failures
if run_ok "${small[@]}" --cp 2 --schedule interleaved --virtual-stages 2 --top 100 --json; then
    n=$(grep -c '^  {"dp": ' "$out")
    for want in '"cp": 2,' '"virtual_stages": 2,' '"schedule": "interleaved",'; do
        [[ $(grep -cF -- "$want" "$out") -eq $n && $n -ge 1 ]] || fail "fixed flags: not every candidate has $want"
    done
    [[ $failures -eq $before ]] && echo "ok    fixed flags: all $n candidates keep cp 2, interleaved v 2"
fi
before=$failures
# DualPipeV only when asked: --pp counts devices, two chunks each (v stays 1: the flag's)
if run_ok "${small[@]}" --schedule dualpipev --top 100 --json; then
    n=$(grep -c '^  {"dp": ' "$out")
    [[ $(grep -cF -- '"schedule": "dualpipev",' "$out") -eq $n && $n -ge 1 ]] ||
        fail "dualpipev: not every candidate is dualpipev"
    grep -qF -- '"pp": 1,' "$out" && fail "dualpipev: a candidate on one device"
    [[ $failures -eq $before ]] && echo "ok    --schedule dualpipev: all $n candidates dualpipev, pp >= 2"
fi
before=$failures
if run_ok "${small[@]}" --top 100 --json; then
    grep -qF -- '"schedule": "dualpipe' "$out" && fail "no --schedule: a DualPipe layout offered unasked"
    [[ $failures -eq $before ]] && echo "ok    without --schedule no DualPipe layout is offered"
fi

# The run line --explain printed (after "run it in the simulator:"), joined
# and cut to one quiet step, runs: sets $line; fails naming WHAT if not.
run_explained_line() {   # run_explained_line WHAT
    line=$(sed -n '/^run it in the simulator:/,$p' "$out" | tail -n +2 | tr -d '\\\n' | tr -s ' ')
    line=${line#*ptdp train }
    line=${line/--steps 2 --report report.json/--steps 1 --quiet}
    # shellcheck disable=SC2086
    if ! "$ptdp" train $line >"$tmp/train_out" 2>"$tmp/train_err" </dev/null; then
        fail "${1:+$1 }--explain's run line failed: ptdp train $line"
        sed 's/^/      /' "$tmp/train_err" | head -n 5
    fi
}

# ---- 4. --explain ---------------------------------------------------------------
before=$failures
if run_ok "${small[@]}" --tp 2 --pp 2 --top 1 --explain; then
    expect_out "memory per GPU" "parameters" "gradients" "optimizer" "activations" "in flight" \
               "forward  F" "backward B" "bubble" "TP comm" "DP/ZeRO comm" "step " \
               "72 B s L h² (1 + s/6h + V/12Lh)" "hardware" "run it in the simulator:" "ptdp train --model gpt"
    run_explained_line ""   # the run line, joined, runs the layout (one step)
    [[ $failures -eq $before ]] && echo "ok    --explain: every term, and its line runs: ptdp train $line"
fi
before=$failures
if run_ok "${small[@]}" --top 2 --json --explain; then
    json_ok 2
    grep -qF "memory per GPU" "$err" || fail "--json --explain: the explanation is not on stderr"
    [[ $failures -eq $before ]] && echo "ok    --json --explain: JSON on stdout, the explanation on stderr"
fi

# ---- 5. bad inputs --------------------------------------------------------------
m=(plan --model gpt --layers 4 --hidden 64 --heads 4 --seq-len 32 --vocab 256)
expect_usage "--profile nope: unknown (the profiles: dgx-a100"  -- "${m[@]}" --batch 16 --gpus 8 --profile nope
expect_usage "--profile is required"                           -- "${m[@]}" --batch 16 --gpus 8
expect_usage "--gpus is required"                              -- "${m[@]}" --batch 16 --profile dgx-a100
expect_usage "--batch is required"                             -- "${m[@]}" --gpus 8 --profile dgx-a100
expect_usage "--heads is required"                             -- plan --model gpt --layers 4 --hidden 64 --seq-len 32 --vocab 256 --batch 16 --gpus 8 --profile dgx-a100
expect_usage "--model is required"                             -- plan --layers 4 --hidden 64 --heads 4 --seq-len 32 --vocab 256 --batch 16 --gpus 8 --profile dgx-a100
expect_usage "--model mlp: the planner plans the GPT and the llama model only" -- plan --model mlp --gpus 8
expect_usage "--tp 3 must divide --heads 4"                    -- "${m[@]}" --batch 16 --gpus 6 --profile dgx-a100 --tp 3
expect_usage "--heads 3 must divide --hidden 64"               -- plan --model gpt --layers 4 --hidden 64 --heads 3 --seq-len 32 --vocab 256 --batch 16 --gpus 8 --profile dgx-a100
expect_usage "--gpus 6 is not a multiple of --tp x --pp x --cp = 4 (nearest: --gpus 4 or 8)" \
                                                               -- "${m[@]}" --batch 16 --gpus 6 --profile dgx-a100 --tp 2 --pp 2
expect_usage "--pp 5: more stages than --layers 4"             -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --pp 5
expect_usage "--cp 3: --seq-len 32 must divide into 2 x cp = 6" -- "${m[@]}" --batch 16 --gpus 6 --profile dgx-a100 --cp 3
expect_usage "no layout of 8 GPUs can run this"                -- "${m[@]}" --batch 3 --gpus 8 --profile dgx-a100 --tp 2 --pp 2 --cp 1
expect_usage "nearest that would: --gpus"                      -- "${m[@]}" --batch 3 --gpus 8 --profile dgx-a100 --tp 2 --pp 2 --cp 1
expect_usage "--micro-batch-size 3 does not divide --batch 16" -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --micro-batch-size 3
expect_usage "--sp on shares the TP group's work"              -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --tp 1 --sp on
expect_usage "--recompute some"                                -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --recompute some
expect_usage "--schedule 2f2b"                                 -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --schedule 2f2b
expect_usage "--zero 4"                                        -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --zero 4
expect_usage "--device-mem 12Q"                                -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --device-mem 12Q
expect_usage "--virtual-stages 2: the gpipe schedule runs one chunk per stage" \
                                                               -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --schedule gpipe --virtual-stages 2
expect_usage "--precision bf16 with --schedule dualpipev"      -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --schedule dualpipev --precision bf16
expect_usage "--zero 3 with --schedule dualpipe"               -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --schedule dualpipe --zero 3
expect_usage "--virtual-stages 2: the dualpipev schedule holds two chunks per device" \
                                                               -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --schedule dualpipev --virtual-stages 2
expect_usage "--schedule dualpipev needs --pp 2 or more"       -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --schedule dualpipev --pp 1
expect_usage "--schedule dualpipe needs an even --pp"          -- "${m[@]}" --batch 16 --gpus 6 --profile dgx-a100 --schedule dualpipe --pp 3
expect_usage "--layers 4 cannot be cut into the 8 stages of --schedule dualpipev on --pp 4" \
                                                               -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --schedule dualpipev --pp 4
expect_usage "--batch 2.5: must be a whole number"             -- "${m[@]}" --batch 2.5 --gpus 8 --profile dgx-a100

# nothing fits: exit 1, how far the best came, what would do
before=$failures
"$ptdp" "${small[@]/1G/64K}" >"$out" 2>"$err" </dev/null
status=$?
if [[ $status -ne 1 ]]; then fail "64K GPUs: exit status $status, expected 1"
else
    for want in "no layout fits in 64.00 KiB per GPU" "the smallest peak of the" "valid layouts is" "--device-mem"; do
        grep -qF -- "$want" "$err" || fail "64K GPUs: stderr lacks \"$want\""
    done
    [[ -s $out ]] && fail "64K GPUs: printed on stdout"
fi
[[ $failures -eq $before ]] && echo "ok    nothing fits: exit 1 -> $(head -c 200 "$err")"

# ---- 5b. a mixture of experts ---------------------------------------------------
moe=(plan --model gpt --layers 4 --hidden 64 --heads 4 --seq-len 32 --vocab 256 --batch 16 --gpus 8
     --profile dgx-a100 --device-mem 1G --moe-experts 4 --moe-top-k 2 --moe-ffn 128)
before=$failures
if run_ok "${moe[@]}" --top 100000 --json; then
    n=$(grep -c '^  {"dp": ' "$out")
    [[ $n -ge 1 ]] || fail "moe: no candidate"
    for k in ep psi_experts ep_comm_s; do
        [[ $(grep -c "\"$k\": " "$out") -eq $n ]] || fail "moe --json: a candidate lacks \"$k\""
    done
    # every ep it chose divides dp x cp (folded, etp below tp: the tp/etp slices x dp x cp) and the 4
    # experts; some layouts spread them
    bad=$(awk '/^  \{"dp": / { match($0, /"dp": [0-9]+/); d = substr($0, RSTART + 6, RLENGTH - 6) + 0
                             match($0, /"cp": [0-9]+/); c = substr($0, RSTART + 6, RLENGTH - 6) + 0
                             match($0, /"tp": [0-9]+/); t = substr($0, RSTART + 6, RLENGTH - 6) + 0
                             match($0, /"ep": [0-9]+/); e = substr($0, RSTART + 6, RLENGTH - 6) + 0
                             s = 1; if (match($0, /"etp": [0-9]+/)) { s = t / (substr($0, RSTART + 7, RLENGTH - 7) + 0) }
                             if ((s * d * c) % e || 4 % e) print "dp " d " cp " c " slices " s " ep " e; if (e > 1) spread++ }
               END { if (!spread) print "no layout with ep > 1" }' "$out")
    [[ -z $bad ]] || fail "moe --json: $bad"
    grep -qF '"zero": 3,' "$out" && fail "moe --json: a ZeRO-3 layout (the model refuses it)"
    grep -qF '"sp": true,' "$out" && fail "moe --json: an SP layout (the model refuses it)"
    [[ $failures -eq $before ]] && echo "ok    moe --json: $n candidates, ep | dp cp and ep | E, no ZeRO-3 or SP"
fi
before=$failures
if run_ok "${moe[@]}" --ep 2 --top 100 --json; then
    n=$(grep -c '^  {"dp": ' "$out")
    [[ $n -ge 1 && $(grep -cF '"ep": 2,' "$out") -eq $n ]] || fail "moe --ep 2: not every candidate has ep 2"
    [[ $failures -eq $before ]] && echo "ok    moe --ep 2: all $n candidates keep it"
fi
before=$failures
if run_ok "${moe[@]}" --ep 2 --tp 1 --pp 2 --top 1 --explain; then
    expect_out "a mixture of 4 experts in every block's MLP: top-2, expert ffn 128, dropless" " ep " \
               "assumed: uniform routing" "experts'" "EP all-to-alls" "--moe-experts 4 --moe-top-k 2 --moe-ffn 128" \
               "--ep 2"
    run_explained_line "moe"
    [[ $failures -eq $before ]] && echo "ok    moe --explain: the assumption, the EP terms, and its line runs"
fi
if run_ok "${moe[@]}" --top 1; then
    expect_out "  #    dp  ep  tp"
fi
expect_usage "--moe-top-k needs --moe-experts E"                -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --moe-top-k 2
expect_usage "--ep 2 spreads a mixture of experts' experts"     -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --ep 2
expect_usage "--moe-experts 4 must divide by --ep 3"            -- "${moe[@]}" --ep 3
expect_usage "--moe-experts 4 with --zero 3"                    -- "${moe[@]}" --zero 3
expect_usage "--moe-experts 4 with --sp"                        -- "${moe[@]}" --tp 2 --sp on
expect_usage "--moe-top-k 5: must be at most --moe-experts 4"   -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --moe-experts 4 --moe-top-k 5
expect_usage "--moe-capacity-factor -1"                          -- "${moe[@]}" --moe-capacity-factor -1
expect_usage "--ep 0"                                            -- "${moe[@]}" --ep 0
expect_usage "--moe-aux-loss: the planner does not take it"      -- "${moe[@]}" --moe-aux-loss 0.01
expect_usage "--ep 8 must divide dp x cp"                        -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --moe-experts 8 --ep 8 --tp 2 --etp 2
expect_usage "--etp 3 must divide --tp 2"                        -- "${moe[@]}" --tp 2 --etp 3
expect_usage "--etp 1 sets a mixture of experts' own TP size"   -- "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --etp 1
expect_usage "--etp 0"                                           -- "${moe[@]}" --etp 0
# MoE parallel folding: ep 8 over 4 DP ranks of tp 2 only by folding the TP pairs (etp 1)
before=$failures
if run_ok "${m[@]}" --batch 16 --gpus 8 --profile dgx-a100 --moe-experts 8 --ep 8 --tp 2 --top 100 --json; then
    n=$(grep -c '^  {"dp": ' "$out")
    [[ $n -ge 1 && $(grep -cF '"ep": 8, "etp": 1,' "$out") -eq $n ]] || fail "--ep 8 --tp 2 on 8 GPUs: not every layout folded (etp 1)"
    [[ $failures -eq $before ]] && echo "ok    --ep 8 --tp 2: all $n candidates fold the experts (etp 1)"
fi

# ---- 5c. a llama ----------------------------------------------------------------
# its shape flags as ptdp train takes them; tp by its kv heads, or past them
ll=(plan --model llama --layers 4 --hidden 64 --heads 8 --kv-heads 2 --seq-len 32 --vocab 64 --batch 16 --gpus 8
    --profile dgx-a100 --device-mem 1G)
before=$failures
if run_ok "${ll[@]}" --top 100000 --json; then
    json_ok "$(grep -c '^  {"dp": ' "$out")"
    bad=$(awk '/^  \{"dp": / { match($0, /"tp": [0-9]+/); t = substr($0, RSTART + 6, RLENGTH - 6) + 0
                             if (!(2 % t == 0 || (t % 2 == 0 && 8 % t == 0))) print "tp " t; if (t > 2) past++ }
               END { if (!past) print "no layout with tp > kv heads" }' "$out")
    [[ -z $bad ]] || fail "llama --json: $bad"
    [[ $failures -eq $before ]] && echo "ok    llama --json: every tp divides the kv heads or is a multiple of them"
fi
before=$failures
if run_ok "${ll[@]}" --tp 4 --pp 2 --sp on --top 1 --explain; then
    expect_out "llama of " "kv heads 2, ffn 256" "3 B s (L (4 h² + 4 h K d + 6 h F + 4 s h) + 2 h V)" \
               "ptdp train --model llama --layers 4 --hidden 64 --ffn 256 --heads 8 --kv-heads 2"
    run_explained_line "llama"
    [[ $failures -eq $before ]] && echo "ok    llama --explain: its FLOPs, and its line runs: ptdp train $line"
fi
if run_ok "${ll[@]}" --ffn 96 --top 1; then
    expect_out "ffn 96,"
fi
if run_ok "${ll[@]}" --ffn-multiple 48 --top 1; then
    expect_out "ffn 192,"   # Meta's rule: 48 ceil(int(8 x 64 / 3) / 48)
fi
l2=(plan --model llama --layers 2 --hidden 64 --seq-len 32 --batch 8 --profile dgx-a100)
expect_usage "--kv-heads 3 must divide --heads 4"                -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --kv-heads 3
expect_usage "--tp 3 must divide --kv-heads 4"                   -- "${l2[@]}" --heads 4 --vocab 64 --tp 3 --gpus 6
expect_usage "--tp 8 must divide --heads 4"                      -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --kv-heads 2 --tp 8
expect_usage "--tp 2 must divide --ffn 3"                        -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --ffn 3 --tp 2
expect_usage "and --vocab 63 (the vocab-parallel embedding"      -- "${l2[@]}" --gpus 8 --heads 4 --vocab 63 --tp 2
expect_usage "is odd, and rotary positions rotate pairs"         -- plan --model llama --layers 2 --hidden 12 --heads 4 --seq-len 32 --vocab 64 --batch 8 --gpus 8 --profile dgx-a100
expect_usage "--rope-theta 0: must be above 0"                   -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --rope-theta 0
expect_usage "--rope-theta -1: must be above 0"                  -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --rope-theta -1
expect_usage "--rope-theta nan"                                  -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --rope-theta nan
expect_usage "--rope-theta inf"                                  -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --rope-theta inf
expect_usage "--norm-eps 0: must be above 0"                     -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --norm-eps 0
expect_usage "--norm-eps nan"                                    -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --norm-eps nan
expect_usage "--norm-eps inf"                                    -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --norm-eps inf
expect_usage "and --ffn 100 is given: leave one out"             -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --ffn 100 --ffn-multiple 64
expect_usage "--ffn-multiple 0"                                  -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --ffn-multiple 0
expect_usage "--kv-heads 0"                                      -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --kv-heads 0
expect_usage "--heads is required"                               -- "${l2[@]}" --gpus 8 --vocab 64
expect_usage "--vocab is required"                               -- "${l2[@]}" --gpus 8 --heads 4
expect_usage "--cp 3: --seq-len 32 must divide into 2 x cp = 6"  -- "${l2[@]}" --heads 4 --vocab 64 --cp 3 --gpus 6
# the llama's mixture of SwiGLU experts, DeepSeek's pieces among its flags
lm=("${l2[@]}" --gpus 8 --heads 4 --vocab 64 --moe-experts 4 --moe-top-k 4 --moe-ffn 64)
before=$failures
if run_ok "${lm[@]}" --moe-score sigmoid --moe-groups 2 --moe-group-top-k 2 --moe-shared-experts 1 \
          --moe-dense-first 1 --ep 2 --pp 2 --tp 1 --top 1 --explain; then
    expect_out "a mixture of 4 SwiGLU experts in 1 of the 2 blocks: top-4, expert ffn 64, 1 shared, dropless" \
               "assumed: uniform routing" "EP all-to-alls" "6 F_e (k + S) + 2 E - 6 F" \
               "--moe-dense-first 1 --moe-shared-experts 1 --moe-score sigmoid --moe-groups 2 --moe-group-top-k 2"
    run_explained_line "llama moe"
    [[ $failures -eq $before ]] && echo "ok    llama moe --explain: DeepSeek's flags, and its line runs: ptdp train $line"
fi
expect_usage "--moe-top-k needs --moe-experts E"                 -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --moe-top-k 2
expect_usage "and this llama model is dense: give --moe-experts" -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --ep 2
expect_usage "--moe-score tanh: must be one of softmax, sigmoid" -- "${lm[@]}" --moe-score tanh
expect_usage "--moe-experts 4 must divide by --ep 3"             -- "${lm[@]}" --ep 3
expect_usage "--moe-experts 4 with --ep 2 and --zero 3"           -- "${lm[@]}" --zero 3 --ep 2
expect_usage "--moe-aux-loss: the planner does not take it"      -- "${lm[@]}" --moe-aux-loss 0.01
expect_usage "unknown flag --vocab-multiple"                     -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --vocab-multiple 64
expect_usage "unknown flag --dropout"                            -- "${l2[@]}" --gpus 8 --heads 4 --vocab 64 --dropout 0.1

# ---- 6. the 1T GPT on 3072 GPUs -------------------------------------------------
before=$failures
t0=$(date +%s.%N)
if run_ok plan --model gpt --layers 128 --hidden 25600 --heads 160 --seq-len 2048 --vocab 51200 --batch 3072 \
       --gpus 3072 --profile dgx-a100-80g --precision bf16 --top 3; then
    t1=$(date +%s.%N)
    expect_out "GPT of 1.01T parameters" "on 3072 GPUs of dgx-a100-80g" "the best 3:"
    rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ ' "$out")
    [[ $rows -eq 3 ]] || fail "1T: $rows rows, expected 3"
    [[ $failures -eq $before ]] &&
        echo "ok    1T on 3072 GPUs: $(grep '^layouts:' "$out") in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s"
fi

if [[ $failures -gt 0 ]]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "all ptdp plan checks passed"
