#!/usr/bin/env bash
# layers.sh SOURCE_DIR — the folders of src/ form a stack with no cycle.
#
#   core → io → runtime → comm → nn → parallel → models → train → plan
#
# A file may include headers of its own folder and of the folders before it
# in this list, never of a folder after it.  A public header include/ptdp/X.h
# belongs to the folder of its implementation src/<folder>/X.c (ops.h, the
# numerical ops, to nn/); a private header is named by its path from src/
# ("comm/comm_impl.h").  Also: only comm/ reaches into a backend (comm/shm/),
# and nothing outside src/ includes a private header.
#
# Prints what each folder uses, then every include that breaks the order,
# and exits 1 if there is one.
set -euo pipefail
src_dir=$1
cd "$src_dir"
layers=(core io runtime comm nn parallel models train plan)

declare -A rank             # folder -> its place in the stack
for i in "${!layers[@]}"; do
    rank[${layers[$i]}]=$i
done

# public header -> folder of its implementation
declare -A owner
while IFS= read -r impl; do              # src/<folder>/…/X.c
    base=${impl##*/}
    folder=${impl#src/}
    owner[${base%.c}]=${folder%%/*}
done < <(find src -name '*.c')
owner[ops]=nn               # linear.c, gelu.c, xent.c
owner[plan]=plan            # plan_layout.c, plan_memory.c, plan_time.c, …
owner[model_plan]=models    # the planning table a model fills (gpt_plan.c)
owner[ptdp]=cli             # the learner's umbrella header: never inside src/

bad=0
declare -A uses
while IFS= read -r file; do
    folder=${file#src/}
    folder=${folder%%/*}
    me=${rank[$folder]:--1}
    if [[ $me -lt 0 ]]; then
        echo "layers: $file is in src/$folder/, which is not a layer of the stack" >&2
        bad=1
        continue
    fi
    while IFS= read -r inc; do
        case $inc in
            ptdp/*) base=${inc#ptdp/}; target=${owner[${base%.h}]:-?} ;;
            */*)    target=${inc%%/*} ;;
            *)      continue ;;       # a header beside the file itself
        esac
        them=${rank[$target]:--1}
        if [[ $them -lt 0 || $them -gt $me ]]; then
            echo "layers: $file includes \"$inc\" (folder $target), above src/$folder/" >&2
            bad=1
        elif [[ $inc == comm/shm/* && $folder != comm ]]; then
            echo "layers: $file reaches into the shm backend (\"$inc\"): only comm/ may" >&2
            bad=1
        elif [[ $target != "$folder" ]]; then
            uses[$folder]+=" $target"
        fi
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file")
done < <(find src -name '*.[ch]' | sort)

# Outside the library: public headers only.
while IFS= read -r hit; do
    echo "layers: $hit: a private header of the library outside src/" >&2
    bad=1
done < <(grep -rn --include='*.[ch]' -E '#include "(core|io|runtime|comm|nn|parallel|models|train|plan)/' \
             cli tests tutorials bench 2>/dev/null || true)

for l in "${layers[@]}"; do
    deps=$(echo "${uses[$l]:-}" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
    printf '%-9s uses %s\n' "$l" "${deps:-(nothing)}"
done
[[ $bad -eq 0 ]] && echo "layers: no include points up the stack"
exit $bad
