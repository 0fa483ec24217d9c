#!/usr/bin/env bash
# run.sh [--script NAME.py] PTDP [flags] — run check_baseline.py (or NAME.py,
# e.g. check_bf16.py, check_llama.py; all next to this file) with the first Python that has
# torch and numpy: $PTDP_PYTHON, then python3 on PATH, then /usr/bin/python3
# (Debian's python3-torch lives under the system Python, and the python3
# first on PATH may be another one, e.g. pyenv's).
#
# No such Python: print why and exit 77, which Meson reports as SKIP — the
# PyTorch cross-check is optional; every other suite runs without it.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=check_baseline.py
if [[ ${1:-} == --script ]]; then
    script=$2
    shift 2
fi
tried=()
for py in "${PTDP_PYTHON:-}" python3 /usr/bin/python3; do
    [[ -n $py ]] || continue
    tried+=("$py")
    if "$py" -c 'import numpy, torch' >/dev/null 2>&1; then
        exec "$py" "$here/$script" "$@"
    fi
done
echo "SKIP: no Python with both torch and numpy (tried: ${tried[*]})."
echo "      Install them (Debian: apt-get install python3-torch python3-numpy)"
echo "      or point PTDP_PYTHON at a Python that has them."
exit 77
