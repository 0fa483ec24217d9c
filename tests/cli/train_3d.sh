#!/usr/bin/env bash
# train_3d.sh PTDP — `ptdp train` on a dp x tp x pp mesh: the header, the
# errors, ZeRO, and the per-run report (table and --report JSON).
#
#   header   the mesh (which rank is which coordinate), DP = world / (TP x PP)
#            and gradient-accumulation steps = B / (micro-batch x DP), with values
#   errors   exit 2, a message that suggests valid values, nothing on stdout
#   report   the JSON parses (python3 if available, else grep) and its figures
#            match the formulas: params = elements x bytes; DP sent per step
#            = S (for N = 2, 2(N-1)/N = 1) + the norm's one double under ZeRO;
#            TP per step = (2 L_stage [+1 on the last stage]) B_dp h R + ...;
#            ZeRO-1 optimizer state = 2 chunk x R
set -uo pipefail

ptdp=${1:?usage: train_3d.sh PATH_TO_PTDP}
failures=0
cases=0
dir=$(mktemp -d)
out=$dir/out
err=$dir/err
trap 'rm -rf "$dir"' EXIT

fail() {
    failures=$((failures + 1))
    echo "FAIL  $*"
}

# expect_error "TEXT THAT MUST APPEAR ON STDERR" -- ARGS...  (exit 2, stdout empty)
expect_error() {
    local want_text=$1
    shift 2
    cases=$((cases + 1))
    "$ptdp" train "$@" >"$out" 2>"$err" </dev/null
    local status=$?
    if [[ $status -ne 2 ]]; then
        fail "ptdp train $*: exit status $status, expected 2"
        sed 's/^/      /' "$err"
    elif ! grep -qF -- "$want_text" "$err"; then
        fail "ptdp train $*: stderr lacks \"$want_text\""
        sed 's/^/      stderr: /' "$err"
    elif [[ -s $out ]]; then
        fail "ptdp train $*: printed on stdout: $(head -c 200 "$out")"
    else
        echo "ok    ptdp train $*  ->  $(head -n 1 "$err")"
    fi
}

# expect_stdout "TEXT ON STDOUT"... -- ARGS...  (exit 0, every text present)
expect_stdout() {
    local texts=()
    while [[ $1 != -- ]]; do texts+=("$1"); shift; done
    shift
    cases=$((cases + 1))
    if ! "$ptdp" train "$@" >"$out" 2>"$err" </dev/null; then
        fail "ptdp train $*: exit status $?"
        sed 's/^/      /' "$err"
        return
    fi
    for t in "${texts[@]}"; do
        if ! grep -qF -- "$t" "$out"; then
            fail "ptdp train $*: stdout lacks \"$t\""
            sed 's/^/      stdout: /' "$out"
            return
        fi
    done
    echo "ok    ptdp train $*"
}

small=(--steps 2 --quiet)

# ---- the header: mesh and relations, with values
expect_stdout "8 devices = dp 2 x tp 2 x pp 2" \
    "DP = world / (TP x PP) = 8 / (2 x 2) = 2" \
    "gradient-accumulation steps = B / (micro-batch x DP) = 64 / (8 x 2) = 4" \
    "r5=(dp0,tp1,pp1)" "r6=(dp1,tp0,pp1)" \
    -- --dp 2 --tp 2 --pp 2 --micro-batches 4 "${small[@]}"
# --devices instead of --dp, and beside it
expect_stdout "12 devices = dp 3 x tp 2 x pp 2" "DP = world / (TP x PP) = 12 / (2 x 2) = 3" \
    -- --devices 12 --tp 2 --pp 2 --batch 48 "${small[@]}"
expect_stdout "4 devices = dp 1 x tp 4 x pp 1" -- --devices 4 --dp 1 --tp 4 "${small[@]}"

# ---- errors: exit 2 and a suggestion
expect_error "--devices 6 must equal --dp 2 x --tp 2 x --pp 2 = 8"            -- --devices 6 --dp 2 --tp 2 --pp 2
expect_error "--devices 6 is not a multiple of --tp 4 x --pp 1 = 4 (try --devices 4 or 8)" -- --devices 6 --tp 4
expect_error "--tp 3 must divide --ffn 256 and --classes 16 (valid --tp: 1, 2, 4, 8, 16)" -- --tp 3
expect_error "--tp 5 must divide --ffn 96 and --classes 12 (valid --tp: 1, 2, 3, 4, 6, 12)" -- --devices 10 --tp 5 --ffn 96 --classes 12
expect_error "--pp 9: more stages than --layers 8 (each stage needs at least one block: --pp 1 to 8)" -- --pp 9
expect_error "--dp 16 x --tp 8 x --pp 1 = 128 devices: at most 64 are supported (with --tp 8 and --pp 1, --dp at most 8)" -- --dp 16 --tp 8
expect_error "--devices 65: must be between 1 and 64"                          -- --devices 65
expect_error "--zero 4: must be between 0 and 3"                               -- --zero 4
expect_error "--batch 64 must be divisible by --dp x --micro-batches = 3 x 1 = 3 (nearest valid: 63 or 66)" -- --devices 6 --tp 2

# ---- ZeRO: --check passes; the table shows the saving and the trade
expect_stdout "check PASSED" "ZeRO-1 on device 0: optimizer state" "the same bytes as plain DP" \
    -- --dp 2 --tp 2 --pp 2 --micro-batches 2 --zero 1 --check "${small[@]}"
expect_stdout "check PASSED" "formula (M+1)(N-1)/N S" "(M+1)(N-1)/N S instead of 2(N-1)/N S (x2.50 bytes)" \
    "gradients" "(1/4 of" -- --dp 4 --micro-batches 4 --zero 2 --check "${small[@]}"

# ---- the report: table and JSON
report=$dir/report.json
expect_stdout "peak memory per device" "bytes sent per device and step" "dp sent" "tp sent" "pp sent" "idle us" \
    "data parallelism, N = 2: DP bytes sent per device and step, formula 2(N-1)/N S" \
    -- --dp 2 --tp 2 --pp 2 --micro-batches 2 --zero 1 --report "$report" "${small[@]}"
cases=$((cases + 1))
if [[ ! -s $report ]]; then
    fail "--report $report: no file"
elif compgen -G "$dir/*.tmp.*" >/dev/null; then
    fail "--report left a temporary file: $(ls "$dir")"
elif command -v python3 >/dev/null 2>&1; then
    if python3 - "$report" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
c, m = r["config"], r["config"]["model"]
R = r["real_bytes"]
assert r["schema"] == "ptdp-train-report/1", r["schema"]
assert (c["world"], c["dp"], c["tp"], c["pp"], c["zero"]) == (8, 2, 2, 2, 1), c
assert len(r["devices"]) == 8
h, B, M, L = m["hidden"], c["batch"], c["micro_batches"], m["layers"]
Bdp = B // c["dp"]                               # samples per DP shard and step
for d in r["devices"]:
    mem, sent, t = d["memory_peak_bytes"], d["bytes_sent_per_step"], d["virtual_s"]
    P = d["param_elements"]
    assert mem["params"] == P * R, (d["rank"], mem["params"], P * R)
    assert mem["grads"] == P * R                 # ZeRO-1 keeps the full gradient
    chunk = (P + 1 - d["dp_rank"]) // 2          # ptdp_share(P, 2, dp_rank)
    assert mem["optim"] == 2 * chunk * R, (mem["optim"], chunk)
    # DP, N = 2: reduce-scatter + all-gather = S, plus the norm's one double
    assert sent["dp"] == P * R + 8, (d["rank"], sent["dp"], P * R)
    last = d["pp_rank"] == c["pp"] - 1
    Ls = L // c["pp"]
    tp = (2 * Ls + (1 if last else 0)) * Bdp * h * R + (3 * Bdp * 8 if last else 0) + 8
    assert sent["tp"] == tp, (d["rank"], sent["tp"], tp)
    assert sent["pp"] == Bdp * h * R + 8, (d["rank"], sent["pp"])
    assert sent["total"] == sent["dp"] + sent["tp"] + sent["pp"]
    assert d["bytes_sent"]["other"] == 0
    assert abs(t["compute"] + t["comm"] + t["idle"] - t["end"]) <= 1e-12 * t["end"]
    assert d["rank"] == d["tp_rank"] + 2 * (d["dp_rank"] + 2 * d["pp_rank"])
assert r["run"]["bubble_formula"] == 1 / 3
EOF
    then echo "ok    --report JSON (python3): every figure matches its formula"
    else fail "--report JSON does not match the formulas"; fi
else
    if grep -q '"schema": "ptdp-train-report/1"' "$report" && [[ $(grep -c '"rank":' "$report") -eq 8 ]] &&
       grep -q '"memory_peak_bytes"' "$report" && grep -q '"bytes_sent_per_step"' "$report"; then
        echo "ok    --report JSON (grep; no python3)"
    else fail "--report JSON lacks its keys"; fi
fi
# an unwritable report fails the run (exit 1) and names the file
cases=$((cases + 1))
"$ptdp" train --report "$dir/no/such/dir/r.json" "${small[@]}" >"$out" 2>"$err" </dev/null
status=$?
if [[ $status -eq 2 ]] && grep -qF -- "--report $dir/no/such/dir/r.json: cannot be written: the directory $dir/no/such/dir does not exist" "$err" &&
    ! grep -q '^step' "$out"; then
    echo "ok    --report to a missing directory -> $(head -n 1 "$err")"
else
    fail "--report to a missing directory: exit $status (want 2, before any step), stderr: $(cat "$err")"
fi

echo "train_3d.sh: $((cases - failures)) of $cases cases behaved"
[[ $failures -eq 0 ]]
