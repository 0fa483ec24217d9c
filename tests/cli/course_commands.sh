#!/usr/bin/env bash
# course_commands.sh PTDP SOURCE_DIR — one student build, named the same way
# everywhere a beginner is told how to check a lesson.
#
# The default build checks every lesson against its reference solution, so
# its tutorial-NN tests pass with nothing written; a student must work in a
# build of their own exercise files, and every page must say so with the
# same two commands:
#
#     meson setup build-student -Dexercises=student
#     meson test -C build-student --suite tutorial-NN -v
#
#  1. `ptdp demo --steps 1` ends with those two commands (lesson 01);
#  2. ./quickstart's closing message names them too;
#  3. README.md, tutorials/README.md and every lesson's README.md and
#     exercise.c: no other `meson setup … -Dexercises` line, no
#     `--suite tutorial-NN` with a build directory other than build-student,
#     no `build/tutorials/tutorial-NN` outside build-student; and every
#     lesson's README.md and exercise.c name both commands with its own NN.
#
# Step 3 is a function of the files it is given, so the test proves it can
# fail: a page written the old way (`meson setup build -Dexercises=student`,
# `meson test -C build --suite tutorial-01 -v`) must be refused.
set -uo pipefail

# shellcheck source=usage_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/usage_lib.sh"
src=${2:?usage: course_commands.sh PATH_TO_PTDP SOURCE_DIR}

setup_cmd='meson setup build-student -Dexercises=student'
test_cmd() { printf 'meson test -C build-student --suite tutorial-%s -v' "$1"; }

# bad_lines FILE… — print every line that names another student build.
bad_lines() {
    grep -nH -E 'meson (setup|configure).*-Dexercises' "$@" | grep -vF "$setup_cmd"
    grep -nH -E -e '--suite tutorial-[0-9]{2}' "$@" |
        grep -v -E 'meson test -C build-student --suite tutorial-[0-9]{2}[a-z]? -v( |$|`|\)|\\n)'
    grep -nH -E 'build/tutorials/tutorial-[0-9]{2}' "$@"
}

# 1. The demo's last lines.
if ! OPENBLAS_NUM_THREADS=1 "$ptdp" demo --steps 1 --html "$tmp/demo.html" >"$tmp/demo" 2>"$tmp/err"; then
    fail "ptdp demo --steps 1 failed:"; sed 's/^/      /' "$tmp/err" "$tmp/demo" | tail -20
fi
tail -n 6 "$tmp/demo" >"$tmp/demo.tail"
for want in "$setup_cmd" "$(test_cmd 01)" "tutorials/01-collectives/README.md"; do
    grep -qF -- "$want" "$tmp/demo.tail" || fail "ptdp demo's last lines do not say: $want"
done
if bad=$(bad_lines "$tmp/demo.tail"); [[ -n $bad ]]; then
    fail "ptdp demo's last lines name another build:"; printf '      %s\n' "$bad"
fi

# 2. The quickstart's closing message (everything after the demo runs).
sed -n '/"\$ptdp" demo\( \|$\)/,$p' "$src/quickstart" >"$tmp/quickstart.tail"
[[ -s $tmp/quickstart.tail ]] || fail "quickstart: no closing message after the demo found"
for want in "$setup_cmd" "$(test_cmd 01)"; do
    grep -qF -- "$want" "$tmp/quickstart.tail" || fail "quickstart's closing message does not say: $want"
done

# 3. The pages.
lessons=()
for d in "$src"/tutorials/[0-9][0-9]*-*/; do     # 01-collectives, 04b-recomputation, …
    [[ -f $d/README.md ]] && lessons+=("${d%/}")
done
[[ ${#lessons[@]} -ge 6 ]] || fail "found ${#lessons[@]} lessons under $src/tutorials, expected at least 6"
pages=("$src/README.md" "$src/tutorials/README.md" "$src/quickstart" "$src/cli/demo.c")
# A lesson without an exercise.c of its own (11 runs lesson 01's on
# processes) has its README checked alone.
for d in "${lessons[@]}"; do
    pages+=("$d/README.md")
    [[ -f $d/exercise.c ]] && pages+=("$d/exercise.c")
done
if bad=$(bad_lines "${pages[@]}"); [[ -n $bad ]]; then
    fail "these lines name a student build other than build-student:"
    printf '      %s\n' "${bad//$src\//}"
fi
for page in "$src/README.md" "$src/tutorials/README.md"; do
    for want in "$setup_cmd" "$(test_cmd 01)"; do
        grep -qF -- "$want" "$page" || fail "${page#"$src"/} does not say: $want"
    done
done
for d in "${lessons[@]}"; do
    nn=$(basename "$d"); nn=${nn%%-*}
    for page in "$d/README.md" "$d/exercise.c"; do
        [[ -f $page || $page == */README.md ]] || continue
        for want in "$setup_cmd" "$(test_cmd "$nn")"; do
            grep -qF -- "$want" "$page" || fail "${page#"$src"/} does not say: $want"
        done
    done
done

# 3'. …and the check refuses a page written the old way.
cat >"$tmp/old.md" <<'EOF'
meson setup build -Dexercises=student        # once
meson test -C build --suite tutorial-01 -v   # or ./build/tutorials/tutorial-01
EOF
n=$(bad_lines "$tmp/old.md" | wc -l)
[[ $n -eq 3 ]] || fail "the page check found $n of the 3 old commands in a page written the old way"
printf '%s\n%s\n' "$setup_cmd" "$(test_cmd 01)" >"$tmp/new.md"
n=$(bad_lines "$tmp/new.md" | wc -l)
[[ $n -eq 0 ]] || fail "the page check refused the right commands"

finish course_commands "demo, quickstart and ${#pages[@]} pages name one student build, build-student"
