#!/usr/bin/env bash
# check_paths.sh — every file and folder the documentation names exists.
#
#   docs/check_paths.sh [FILE.md …]      (default: README.md docs/*.md)
#
# What counts as a name, in each Markdown file:
#   a link target        [text](path)     resolved from the file's own folder
#   a word in `code`     `src/nn/gelu.c`  resolved from the repository's root,
#   a word in a ``` block                 if it has a '/' or ends in a source
#                                         extension (.c .h .sh .py .md .build .svg)
# A bare file name (`gelu.c`) must exist somewhere in the tree — and, on a row
# of a table whose first cell is a folder (| `src/nn/` | …), inside that
# folder: that is what makes the README's map say where each idea lives.
# Not checked: build outputs (build*/), formulas such as 4C/tp, units (tokens/s, TFLOP/s/GPU), a user's own files (hello.c, r.json,
# run.json), what `meson install` writes (*.pc), URLs, absolute and ~ paths.
#
# Prints each missing name with its file and line; exit status 1 if any.
# shellcheck disable=SC2094  # `miss` names the file being read; it writes only to stderr
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Paths the documentation names before they land in the tree: accepted while
# they are absent, checked like any other once they exist.
pending=" "
pending=" $(tr -s ' \n' '  ' <<<"$pending") "    # one space between names
not_ours=" hello hello.c r.json run.json ptdp.pc ptdp-f64.pc ptdp-train-report/1 ptdp-schedule-report/1 "

if [[ $# -eq 0 ]]; then set -- README.md docs/*.md; fi
set -f                      # from here on, a word of the docs is never a glob
missing=0

miss() { echo "$1:$2: $3 does not exist" >&2; missing=$((missing + 1)); }

normal() {      # normal PATH: REPLY = PATH without ./ and dir/.. (no process started)
    local p=$1 prev
    while :; do
        prev=$p
        p=${p//\/.\//\/}
        p=${p#./}
        if [[ $p =~ ^(.*/)?([^/.][^/]*)/\.\./(.*)$ ]]; then
            p=${BASH_REMATCH[1]}${BASH_REMATCH[3]}
        fi
        [[ $p == "$prev" ]] && break
    done
    REPLY=$p
}

exists() {      # exists PATH: a file or folder of the tree, or a pending one
    [[ -e $1 ]] || [[ $pending == *" $1 "* ]] || [[ $pending == *" ${1%/}/ "* ]]
}

# Every file of the tree once (build directories left out), by name: the
# folders it is found in, so a lookup costs no process.
declare -A where
while IFS= read -r f; do
    where[${f##*/}]+=" ${f%/*}/"
done < <(find . \( -name 'build*' -o -name .git \) -prune -o -type f -print | sed 's#^\./##')

in_tree() {     # in_tree NAME [FOLDER]: a file of that name under FOLDER (default .)
    local dirs=" ${where[$1]:-} " folder=${2:-}
    folder=${folder#./}
    if [[ -z $folder ]]; then [[ $dirs != "  " ]] && return 0
    elif [[ $dirs == *" $folder"* ]]; then return 0
    fi
    [[ $pending == *"/$1 "* ]]
}

check_word() {  # check_word FILE LINE WORD ROW_FOLDER
    local file=$1 line=$2 word=$3 folder=$4
    word=${word%[.,;:]}                              # a sentence's punctuation
    [[ $word =~ ^[A-Za-z0-9_.][A-Za-z0-9_./-]*$ ]] || return 0
    [[ $word == build* || $word == */build/* ]] && return 0
    [[ $word =~ ^[0-9][0-9A-Za-z]*/ ]] && return 0   # a formula (4C/tp, 2x256/2), not a path
    [[ $word =~ /(s|GPU)(/|$) ]] && return 0          # a unit (tokens/s, TFLOP/s/GPU, memory/GPU)
    normal "$word"
    word=$REPLY
    [[ $not_ours == *" $word "* ]] && return 0
    if [[ $word == */* ]]; then
        exists "$word" || miss "$file" "$line" "$word"
    elif [[ $word =~ \.(c|h|sh|py|md|build|svg)$ ]]; then
        if [[ -n $folder ]]; then
            in_tree "$word" "$folder" || miss "$file" "$line" "$folder$word"
        else
            in_tree "$word" || miss "$file" "$line" "$word"
        fi
    fi
}

for file in "$@"; do
    dir=$(dirname "$file")
    n=0
    in_block=0
    while IFS= read -r text || [[ -n $text ]]; do
        n=$((n + 1))
        if [[ $text == '```'* ]]; then in_block=$((1 - in_block)); continue; fi

        # links: [text](target), resolved from the file's folder
        rest=$text
        while [[ $rest =~ \]\(([^\)#]+)(.*)$ ]]; do
            target=${BASH_REMATCH[1]}
            rest=${BASH_REMATCH[2]}
            [[ -z $target || $target == *://* || $target == mailto:* ]] && continue
            normal "$dir/$target"
            exists "$REPLY" || miss "$file" "$n" "$target"
        done

        if [[ $in_block -eq 1 ]]; then
            # a code block: every word; a lone folder (`models/`) in the layer
            # picture is a folder of src/
            for word in $text; do
                if [[ $word =~ ^[a-z]+/$ && ! -e $word ]]; then
                    exists "src/$word" || miss "$file" "$n" "src/$word"
                else
                    check_word "$file" "$n" "$word" ""
                fi
            done
            continue
        fi

        # a table row whose first cell is a folder names files in that folder
        folder=""
        if [[ $text =~ ^\|\ \`([A-Za-z0-9_./-]+/)\` ]]; then folder=${BASH_REMATCH[1]}; fi
        # every word of every `code span`
        rest=$text
        while [[ $rest =~ \`([^\`]+)\`(.*)$ ]]; do
            code=${BASH_REMATCH[1]}
            rest=${BASH_REMATCH[2]}
            for word in $code; do check_word "$file" "$n" "$word" "$folder"; done
        done
    done <"$file"
done

if [[ $missing -gt 0 ]]; then
    echo "check_paths.sh: $missing name(s) in the documentation do not exist" >&2
    exit 1
fi
echo "check_paths.sh: every path named in $* exists"
