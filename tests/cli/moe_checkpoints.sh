#!/usr/bin/env bash
# moe_checkpoints.sh — a mixture of experts' flags and checkpoints, for the
# GPT and the llama alike (the shared MoE settings):
#
#   flags that make no block a mixture   refused (exit 2, naming --moe-every
#                                        and --layers) by train and plan, so
#                                        no dense checkpoint says moe_experts
#   what changes the math is recorded    moe_capacity_factor and moe_aux_loss
#                                        in the metadata; a resumed run without
#                                        the flags goes on as one uninterrupted
#                                        run; a typed flag overrides, said
#   older checkpoints                    without those keys still load, as the
#                                        defaults then (dropless, 0.01)
#   ptdp sample                          samples a GPT and a llama with experts
#   no __metadata__                      said, not taken for the default model
#
#   moe_checkpoints.sh PATH_TO_PTDP
source "$(dirname "$0")/usage_lib.sh" "$@"

# ---- no block a mixture: refused before any work, nothing saved
g=(train --model gpt --hidden 32 --heads 4 --ffn 64 --seq-len 8 --batch 8)
expect_usage "--moe-experts 4 --moe-every 3: no block of --layers 2 would be a mixture of experts" \
    -- "${g[@]}" --steps 1 --moe-experts 4 --moe-every 3 --save "$tmp/none.st"
[[ -e $tmp/none.st ]] && fail "a refused run wrote its checkpoint"
expect_usage "give --moe-every 2 or less, or --layers 3 or more" -- "${g[@]}" --steps 1 --moe-experts 4 --moe-every 3 --ep 2 --dp 2
expect_usage "--moe-experts 4 --moe-every 3: no block of --layers 2" \
    -- train --model llama --steps 1 --vocab 64 --moe-experts 4 --moe-every 3
p=(plan --model gpt --layers 32 --hidden 4096 --heads 32 --seq-len 4096 --vocab 32000 --ffn 14336 --batch 1024
   --profile dgx-h100 --gpus 64)
expect_usage "--moe-experts 8 --moe-every 64: no block of --layers 32" -- "${p[@]}" --moe-experts 8 --moe-every 64
run_ok "${g[@]}" --steps 1 --moe-experts 4 --moe-every 2 --quiet || fail "--moe-every 2 on 2 layers (block 1 a mixture) refused"

# ---- the router's settings recorded: a resumed run without the flags is the uninterrupted one
loss() { sed 's/.*"loss": \([^,]*\),.*/\1/' "$1"; }
m=("${g[@]}" --moe-experts 4 --moe-top-k 1 --quiet)
router=(--moe-capacity-factor 1 --moe-aux-loss 0.5)
run_ok "${m[@]}" "${router[@]}" --steps 4 --log "$tmp/whole.jsonl" &&
run_ok "${m[@]}" "${router[@]}" --steps 2 --save "$tmp/a.st" &&
run_ok "${m[@]}" --steps 2 --load "$tmp/a.st" --log "$tmp/b.jsonl" --report "$tmp/b.json"
if [[ -s $tmp/b.jsonl && "$(loss "$tmp/b.jsonl")" == "$(tail -n 2 "$tmp/whole.jsonl" | loss /dev/stdin)" ]]; then
    echo "ok    resumed without --moe-capacity-factor and --moe-aux-loss: the losses of one run, bit for bit"
else
    fail "resumed without the router's flags: $(loss "$tmp/b.jsonl" 2>/dev/null | tr '\n' ' ') vs the whole run's" \
         "$(tail -n 2 "$tmp/whole.jsonl" 2>/dev/null | loss /dev/stdin | tr '\n' ' ')"
fi
grep -q '"moe_capacity_factor": 1, "moe_aux_loss": 0.5' "$tmp/b.json" 2>/dev/null ||
    fail "the resumed run's report does not show the checkpoint's capacity factor and balance weight"
grep -qa '"moe_capacity_factor":"1.0000000000000000e+00","moe_aux_loss":"5.0000000000000000e-01"' "$tmp/a.st" ||
    fail "the checkpoint's metadata lack the capacity factor and the balance weight"
if run_ok "${m[@]}" --steps 1 --load "$tmp/a.st" --moe-aux-loss 0.25; then
    has "note: --moe-aux-loss 0.25 is used, not the checkpoint's moe_aux_loss=0.5" ||
        fail "a typed --moe-aux-loss overriding the checkpoint's was not said"
    has "note: --moe-capacity" && fail "an untyped --moe-capacity-factor was said to override"
fi
run_ok "${m[@]}" --steps 1 --load "$tmp/a.st" "${router[@]}" && has "note:" && fail "the checkpoint's own values noted"

# ---- a llama with experts: the same settings, the same defaults
l=(train --model llama --vocab 64 --hidden 32 --seq-len 16 --batch 8 --moe-experts 4 --quiet)
run_ok "${l[@]}" --steps 2 --moe-capacity-factor 1.5 --moe-aux-loss 0 --save "$tmp/llama.st" &&
run_ok "${l[@]}" --steps 1 --load "$tmp/llama.st" --report "$tmp/llama.json" &&
{ grep -q '"moe_capacity_factor": 1.5, "moe_aux_loss": 0' "$tmp/llama.json" ||
      fail "a resumed llama did not take its checkpoint's capacity factor and balance weight"; }

# ---- ptdp sample: what any ptdp train checkpoint holds
for ck in a llama; do
    run_ok sample --load "$tmp/$ck.st" --prompt "1+2=" --tokens 4 ||
        fail "ptdp sample refused the $ck checkpoint with experts"
done

# ---- older checkpoints: without the keys, the defaults then (dropless, 0.01)
if command -v python3 >/dev/null; then
    edit() {   # edit IN OUT PYTHON: OUT is IN with its header's metadata dict `m` changed by PYTHON
        python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
m = h.get("__metadata__", {})
exec(sys.argv[3])
if m:
    h["__metadata__"] = m
else:
    h.pop("__metadata__", None)
hb = json.dumps(h, separators=(",", ":")).encode()
hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PY
    }
    edit "$tmp/a.st" "$tmp/old.st" 'del m["moe_capacity_factor"]; del m["moe_aux_loss"]'
    if run_ok "${m[@]}" --steps 1 --load "$tmp/old.st" --report "$tmp/old.json"; then
        grep -q '"moe_capacity_factor": null, "moe_aux_loss": 0.01' "$tmp/old.json" ||
            fail "a checkpoint without the keys did not resume as dropless with alpha 0.01"
    fi
    run_ok sample --load "$tmp/old.st" --prompt "1+" --tokens 2 || fail "ptdp sample refused a checkpoint without the keys"
    edit "$tmp/a.st" "$tmp/bad.st" 'm["moe_aux_loss"] = "-1.0e+00"'
    run_status 1 "${m[@]}" --steps 1 --load "$tmp/bad.st" &&
        { grep -q "metadata 'moe_aux_loss' is '-1.0e+00', which --moe-aux-loss does not take" "$err" ||
              fail "a negative recorded balance weight was not named"; }
    edit "$tmp/a.st" "$tmp/nometa.st" 'm.clear()'
    for cmd in "${m[*]} --steps 1 --load $tmp/nometa.st" "sample --load $tmp/nometa.st"; do
        # shellcheck disable=SC2086
        run_status 1 $cmd && { grep -q "the checkpoint has no __metadata__" "$err" ||
                                   fail "ptdp ${cmd%% *}: a file without metadata is not said to lack them"; }
        grep -q "mlp" "$err" && fail "ptdp ${cmd%% *}: a file without metadata is taken for the MLP's"
    done
fi
finish "moe-checkpoints" "no mixture refused; the router's settings recorded and resumed; MoE checkpoints sampled"
