#!/usr/bin/env bash
# bad_inputs.sh — the backend's mistakes are refused before any work, each
# with exit status 2 and one message that names the flag.
#
#   tests/mpi/bad_inputs.sh PTDP
#
# Without MPI (in the build or on the machine) the checks that need mpirun
# are left out, and the script says so; those that need no MPI run always:
# an unknown backend, --algo mpi on threads, a process that an MPI launcher
# started without --backend mpi (its environment is enough to tell), and,
# in a build without MPI, --backend mpi itself.
set -u
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh" "$@"

# expect_usage TEXT -- ARGS…: exit 2, TEXT on stderr once, nothing on stdout.
expect_usage() {
    local want=$1
    shift 2
    "$@" >out.txt 2>err.txt </dev/null
    local status=$? count
    count=$(grep -cF -- "$want" err.txt)
    if [[ $status -ne 2 ]]; then fail "$*: exit status $status, expected 2"; head -n 3 err.txt
    elif [[ $count -ne 1 ]]; then fail "$*: \"$want\" on stderr $count times, expected once"; head -n 3 err.txt
    elif grep -q "^step" out.txt; then fail "$*: it trained"
    else ok "$*  ->  $(grep -m1 -F -- "$want" err.txt | cut -c1-160)"
    fi
}

expect_usage "--backend gpu" -- "$ptdp" train --backend gpu
expect_usage "--algo mpi is MPI's own MPI_Allreduce: it needs --backend mpi" -- "$ptdp" train --algo mpi
expect_usage "add --backend mpi" -- env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$ptdp" train --dp 2

"$ptdp" train --backend mpi --steps 0 >/dev/null 2>err.txt
if grep -qF -- "-Dmpi=enabled" err.txt; then
    expect_usage "rebuild with meson setup --reconfigure BUILD -Dmpi=enabled" -- "$ptdp" train --backend mpi
    echo "note: built without MPI: the checks under mpirun are left out"
elif ! command -v mpirun >/dev/null; then
    echo "note: mpirun not found: the checks under mpirun are left out"
else
    # Under mpirun: every rank exits 2, rank 0 alone says why.
    expect_usage "mpirun started 3 processes, but the mesh --dp 2 x --cp 1 x --tp 1 x --pp 1 needs 2" -- \
        run_mpi 3 "$ptdp" train --backend mpi --dp 2
    expect_usage "add --backend mpi" -- run_mpi 2 "$ptdp" train --dp 2
fi

finish "bad-input checks"
