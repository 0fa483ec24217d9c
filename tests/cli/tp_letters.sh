#!/usr/bin/env bash
# tp_letters.sh PTDP SOURCE_DIR — in lesson 03 and its figure, "B" means
# one thing: fc2's weight.
#
# The Megatron MLP block is y = GELU(x A^T + a) B^T + b, so B is fc2's weight.
# The number of samples is written "batch" (x is batch x h) and a size in
# bytes "bytes", never "B", in:
#
#  1. tp_splits.svg as `ptdp figures --only tp_splits` draws it now, and as
#     figures/tp_splits.svg holds it (the copy the lessons show);
#  2. cli/figures/figure_tp.c, which draws it;
#  3. lesson 03's README.md, check.c, exercise.c, solution.c and lesson.h.
#
# Lines of a CLI table quoted in the README (sizes in KiB or MiB, where
# "0 B" is ptdp's own unit) are left alone.  The pattern check proves it can
# fail: the old wording ("B x h", "B = 6 samples", "S = 384 B") is refused.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"
src=${2:?usage: tp_letters.sh PATH_TO_PTDP SOURCE_DIR}

# batch_as_b FILE… — lines where B is a batch: "B x h", "B × 64",
# "B \u00d7 %d", "B = 6", "B numbers", "B samples".
batch_as_b() {
    grep -nH -E '(^|[^[:alnum:]_])B ( ?x |× |\\u00d7 |= [0-9]|numbers|samples)' "$@"
}
# bytes_as_b FILE… — "384 B", "%d B", "%.0f B" outside KiB/MiB table lines.
bytes_as_b() {
    grep -nH -E '([0-9]|%[-.0-9]*[dfguz]+) B([^[:alnum:]_]|$)' "$@" | grep -v -E 'KiB|MiB'
}

# 1. The figure, drawn now and as committed.
if ! OPENBLAS_NUM_THREADS=1 "$ptdp" figures --only tp_splits --out "$tmp/fig" >"$tmp/out" 2>&1; then
    fail "ptdp figures --only tp_splits failed:"; sed 's/^/      /' "$tmp/out"
fi
for svg in "$tmp/fig/tp_splits.svg" "$src/figures/tp_splits.svg"; do
    name=${svg#"$tmp"/fig/}; name=${name#"$src"/}
    if [[ ! -s $svg ]]; then
        fail "$name is missing"
        continue
    fi
    if bad=$(batch_as_b "$svg"); [[ -n $bad ]]; then
        fail "$name writes the batch as B:"; printf '      %s\n' "$bad"
    fi
    grep -q 'batch × ' "$svg" || fail "$name does not write the batch as 'batch ×'"
    grep -q 'fc2.weight B ' "$svg" || fail "$name no longer names fc2's weight B"
done

# 2 and 3. The sources.
lesson=$src/tutorials/03-tensor-parallel
files=("$src/cli/figures/figure_tp.c" "$lesson/README.md" "$lesson/check.c" "$lesson/exercise.c"
       "$lesson/solution.c" "$lesson/lesson.h")
for f in "${files[@]}"; do
    [[ -f $f ]] || fail "${f#"$src"/} is missing"
done
if bad=$(batch_as_b "${files[@]}"); [[ -n $bad ]]; then
    fail "these lines write the batch as B (B is fc2's weight):"; printf '      %s\n' "${bad//$src\//}"
fi
if bad=$(bytes_as_b "${files[@]}"); [[ -n $bad ]]; then
    fail "these lines write bytes as B (B is fc2's weight):"; printf '      %s\n' "${bad//$src\//}"
fi
grep -q 'batch × h' "$lesson/README.md" || fail "lesson 03's README does not write 'batch × h'"
grep -q 'batch x h = %d x %d reals, S = %d bytes' "$lesson/check.c" ||
    fail "lesson 03's check does not say 'batch x h = … reals, S = … bytes'"

# The patterns refuse the old wording.
cat >"$tmp/old.txt" <<'EOF'
         each all-reduce sums B x h = 6 x 8 reals, S = 384 B: every device sends 2(tp-1)/tp * S
The check computes the dense block on the host with B = 6, h = 8,
    snprintf(shape, sizeof shape, "B \u00d7 %d", h);
<text x="72" y="112" font-size="11" text-anchor="middle">B × 64</text>
  0 (0,0,0)                    0 B     818.27 KiB            0 B  818.27 KiB
EOF
n=$(batch_as_b "$tmp/old.txt" | wc -l)
[[ $n -eq 4 ]] || fail "the batch pattern found $n of the 4 old lines"
n=$(bytes_as_b "$tmp/old.txt" | wc -l)
[[ $n -eq 1 ]] || fail "the bytes pattern found $n of the 1 old line (and must leave the KiB table alone)"

finish tp_letters "B is fc2's weight only, in tp_splits.svg, figure_tp.c and lesson 03"
