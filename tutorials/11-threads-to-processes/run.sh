#!/usr/bin/env bash
# run.sh — lesson 11's check: processes.c under mpirun with 3 and 4
# processes, or the counts given after it (--oversubscribe: more processes
# than cores is fine for a lesson; --allow-run-as-root only when root, as
# in a container).  Exit 77 (skipped, with the reason) without MPI.
set -u
exe=${1:?usage: run.sh TUTORIAL-11-PROCESSES|none [PROCESSES…]}
shift
counts=("$@")
[[ ${#counts[@]} -eq 0 ]] && counts=(3 4)
if [[ $exe == none ]]; then
    echo "SKIP: ptdp was built without MPI: install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev) and reconfigure with -Dmpi=enabled"
    exit 77
fi
if ! command -v mpirun >/dev/null; then
    echo "SKIP: mpirun not found (Debian: apt-get install openmpi-bin)"
    exit 77
fi
args=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && args+=(--allow-run-as-root)
status=0
for n in "${counts[@]}"; do
    mpirun -n "$n" "${args[@]}" "$exe" || status=1
done
exit $status
