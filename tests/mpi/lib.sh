# lib.sh — what the MPI suite's scripts share, sourced first with the
# script's arguments: $ptdp is the binary ($1, made absolute), $dir a
# temporary folder removed at exit and made the working directory,
# failures counts.
#
#   need_mpi                  skip the script (exit 77, with the reason) when
#                             mpirun is missing or ptdp was built without MPI
#   run_mpi N ARGS...         mpirun -n N ARGS: --oversubscribe (8 processes
#                             on 2 cores), --allow-run-as-root when root
#   fail MESSAGE / ok MESSAGE count and say
#   finish WHAT               exit 1 with the failures counted, or say that
#                             all WHAT passed

ptdp=$(realpath "${1:?usage: $(basename "$0") PTDP …}")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
cd "$dir" || exit 1

fail() { failures=$((failures + 1)); echo "FAIL  $*"; }
ok()   { echo "ok    $*"; }

need_mpi() {
    if ! command -v mpirun >/dev/null; then
        echo "SKIP: mpirun not found: the MPI suite needs Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev)"
        exit 77
    fi
    # A ptdp without the backend says how to get it, and exits 2.
    local err=$dir/need_mpi.err
    if ! "$ptdp" train --backend mpi --steps 0 >/dev/null 2>"$err"; then
        if grep -qF -- "-Dmpi=enabled" "$err"; then
            echo "SKIP: this ptdp was built without MPI ($(head -n 1 "$err"))"
            exit 77
        fi
        echo "FAIL  ptdp train --backend mpi --steps 0 failed: $(cat "$err")"
        exit 1
    fi
}

run_mpi() {
    local n=$1
    shift
    local args=(-n "$n" --oversubscribe)
    if [[ $(id -u) -eq 0 ]]; then
        args+=(--allow-run-as-root)   # Open MPI refuses root otherwise
    fi
    mpirun "${args[@]}" "$@"
}

# The step lines and the report without the wall-clock times, the only
# numbers a run on another backend may change.
no_wall() { sed -E 's/wall +[0-9.]+ ms//; s/"wall_s": [^,}]*[,}]//g' "$1"; }

finish() {
    if [[ $failures -ne 0 ]]; then
        echo "$failures failure(s)"
        exit 1
    fi
    echo "all $* passed"
}
