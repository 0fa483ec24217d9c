#!/usr/bin/env bash
# web/build.sh — the explorer's module: `ptdp schedule` and `ptdp plan`
# compiled to WebAssembly with emscripten, one file that opens from disk.
#
#     web/build.sh            -> build-web/ptdp-explorer.js   (then open web/index.html)
#
# The library's sources are the ones src/meson.build lists (read from it, so
# the two never differ), built without threads, BLAS or MPI: the explorer
# only generates, times and draws schedules and plans layouts.  What stands
# in for those (web/blas_none.c for GEMM, comm/mpi/mpi_none.c for MPI) is never
# called on the page's paths.  The CLI's files are the commands themselves
# (cli/schedule_cmd.c, cli/plan_cmd.c and what they call), so the page runs
# the same parser, validation, messages and JSON as a terminal.
#
# -sSINGLE_FILE puts the WebAssembly inside the .js, so a page loads it from
# file:// with no server.  Needs emcc (Debian: apt-get install emscripten;
# its JS optimiser runs under Node and finds acorn via NODE_PATH).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/build-web}
command -v emcc >/dev/null || { echo "web/build.sh: emcc not found (Debian: apt-get install emscripten)" >&2; exit 1; }
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}
mkdir -p "$out/obj"

# the library: every file src/meson.build lists in ptdp_sources, then the
# build without MPI (comm/mpi/mpi_none.c)
lib=$(sed -n "/^ptdp_sources = files(/,/^)/p" "$root/src/meson.build" | grep -o "'[^']*\.c'" | tr -d "'")
lib="$lib comm/mpi/mpi_none.c"
# the commands the page runs, and every file of cli/models/ that cli/meson.build
# lists (the models' CLI tables name their own demos, benchmarks and figures)
models=$(sed -n "/^cli_sources = files(/,/^)/p" "$root/cli/meson.build" | grep -o "'models/[^']*\.c'" | tr -d "'")
cli="args.c paths.c schedule_cmd.c html_schedule.c plan_cmd.c plan_print.c plan_compare.c html_plan.c model_flags.c
     $models figures/figures.c sample.c"
version=$(sed -n "s/^  version : '\(.*\)',/\1/p" "$root/meson.build")

flags=(-std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -fno-math-errno "-DPTDP_VERSION=\"$version\""
       -I"$root/web/include" -I"$root/include" -I"$root/src" -I"$root/cli")
sources=()
for f in $lib; do sources+=("$root/src/$f"); done
for f in $cli; do sources+=("$root/cli/$f"); done
sources+=("$root/web/blas_none.c" "$root/web/ptdp_web.c")

# compile two at a time (flags in a response file), each object named by its path
printf '%s\n' "${flags[@]}" | sed 's/"/\\"/g; s/^/"/; s/$/"/' >"$out/flags.rsp"
objs=() pairs=()
for s in "${sources[@]}"; do
    o="$out/obj/$(echo "${s#"$root"/}" | tr / _).o"
    objs+=("$o")
    pairs+=("$s" "$o")
done
# an object is rebuilt when it is older than its source or than any header
newest=flags
if cmp -s "$out/flags.rsp" "$out/flags.rsp.old"; then
    newest=$(find "$root/include" "$root/src" "$root/cli" "$root/web" -name '*.h' -newer "$out/flags.rsp.old" | head -1)
fi
todo=()
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
    if [[ -n $newest || ! ${pairs[i+1]} -nt ${pairs[i]} ]]; then todo+=("${pairs[i]}" "${pairs[i+1]}"); rm -f "${pairs[i+1]}"; fi
done
# shellcheck disable=SC2016  # $RSP, $1, $2 are for the sh that xargs starts
[[ ${#todo[@]} -eq 0 ]] || printf '%s\0' "${todo[@]}" | RSP="$out/flags.rsp" xargs -0 -n2 -P2 sh -c 'emcc @"$RSP" -c "$1" -o "$2"' sh
cp "$out/flags.rsp" "$out/flags.rsp.old"
for o in "${objs[@]}"; do [[ -f $o ]] || { echo "web/build.sh: $o was not built" >&2; exit 1; }; done

emcc -O2 "${objs[@]}" -o "$out/ptdp-explorer.js" \
    -sSINGLE_FILE=1 -sWASM_ASYNC_COMPILATION=0 -sALLOW_MEMORY_GROWTH=1 -sEXIT_RUNTIME=0 -sENVIRONMENT=web,node \
    -sEXPORTED_FUNCTIONS=_ptdp_web_run -sEXPORTED_RUNTIME_METHODS=ccall,FS -lm
echo "wrote $out/ptdp-explorer.js"
