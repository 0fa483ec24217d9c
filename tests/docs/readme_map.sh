#!/usr/bin/env bash
# readme_map.sh SOURCE_DIR [MAP] — the map of the code (docs/code-map.md) is true.
#
#   1. The arrows: each line "src/X/ ─► a/ b/ …" of the map's picture names
#      exactly the folders X's files include, as tests/layers/layers.sh
#      measures them ("X uses a b …"), and every folder of src/ has a line.
#   2. The table: every source file of the library (src/**/*.c) is named in
#      it, so a file added without its line in the map is caught.
#
# (That every name the map gives exists is docs/check_paths.sh's job.)
# Prints what differs and exits 1; or one line saying the map is true.
set -euo pipefail
src=$1
readme=${2:-$src/docs/code-map.md}
bad=0

# --- 1. the arrows --------------------------------------------------------------
declare -A measured
while read -r folder word rest; do
    [[ $word == uses ]] || continue
    [[ $rest == "(nothing)" ]] && rest=""
    measured[$folder]=$(tr ' ' '\n' <<<"$rest" | sed '/^$/d' | sort | tr '\n' ' ')
done < <(bash "$src/tests/layers/layers.sh" "$src" 2>/dev/null)

declare -A drawn
while IFS= read -r line; do
    folder=${line#src/}
    folder=${folder%%/*}
    deps=${line#*─►}
    deps=${deps%%(*}                      # a remark in parentheses
    if [[ $deps == *"C library"* ]]; then deps=""; fi
    drawn[$folder]=$(tr ' ' '\n' <<<"$deps" | sed 's|/$||; /^$/d' | sort | tr '\n' ' ')
done < <(grep -E '^src/[a-z]+/ +─►' "$readme")

for folder in "${!measured[@]}"; do
    if [[ -z ${drawn[$folder]+set} ]]; then
        echo "readme_map: the map has no line for src/$folder/ (it uses: ${measured[$folder]:-nothing})" >&2
        bad=1
    elif [[ ${drawn[$folder]} != "${measured[$folder]}" ]]; then
        echo "readme_map: src/$folder/ is drawn using '${drawn[$folder]}' but its includes use '${measured[$folder]}'" >&2
        bad=1
    fi
done
for folder in "${!drawn[@]}"; do
    [[ -n ${measured[$folder]+set} ]] || { echo "readme_map: the map draws src/$folder/, which is not a layer" >&2; bad=1; }
done

# --- 2. the table ---------------------------------------------------------------
table=$(grep -E '^\| `src/' "$readme" || true)
while IFS= read -r file; do
    name=${file##*/}
    if ! grep -qF "\`$name\`" <<<"$table"; then
        echo "readme_map: $file is not named in the table of src/ of docs/code-map.md" >&2
        bad=1
    fi
done < <(cd "$src" && find src -name '*.c' | sort)

[[ $bad -eq 0 ]] && echo "readme_map: every arrow and every file of src/ is in the map of the code (docs/code-map.md)"
exit $bad
