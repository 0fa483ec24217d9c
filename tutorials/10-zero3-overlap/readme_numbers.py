#!/usr/bin/env python3
"""readme_numbers.py PTDP PTDP_F64 CHECK README — lesson 10's pasted outputs are real.

The lesson's README quotes the library's ZeRO-3 (`ptdp train … --zero 3
[--overlap]`), the same run priced as a laptop core, a double-precision
`--check`, and the end of its own check's output.  This script reruns
every one of those commands and fails unless each line the README quotes
is a line the command prints today (wall-clock times aside, which no rerun
repeats; the README's memory rows carry the run's flags after them, which
are dropped before comparing).  So when the library changes what it
prints, this test says which line of the lesson to paste again.
"""
import os
import re
import subprocess
import sys

MODEL = ["train", "--dp", "4", "--hidden", "256", "--batch", "1024", "--steps", "1"]

# (which executable, arguments, the kinds of lines the README quotes from it)
RUNS = [
    ("ptdp", MODEL + ["--zero", "0"], ["memory row", "dp bytes"]),
    ("ptdp", MODEL + ["--zero", "3"], ["memory row", "dp bytes", "step 1"]),
    ("ptdp", MODEL + ["--zero", "3", "--overlap"], ["memory row", "model states", "overlap", "step 1"]),
    ("ptdp", MODEL + ["--zero", "3", "--profile", "laptop-cpu"], ["step 1"]),
    ("ptdp", MODEL + ["--zero", "3", "--overlap", "--profile", "laptop-cpu"], ["step 1", "overlap"]),
    ("ptdp-f64", ["train", "--dp", "4", "--zero", "3", "--overlap", "--steps", "3", "--check"],
     ["parameters", "check passed"]),
]

KINDS = {
    "memory row": r"^  0 \(0,0,0\) ",
    "dp bytes": r"^data parallelism, N = ",
    "step 1": r"^step    1 ",
    "model states": r"^  params [0-9]",
    "overlap": r"^overlap: ",
    "parameters": r"^  parameters: largest",
    "check passed": r"^check PASSED",
}


# A difference at rounding (below 1e-4: n.nnne-NN) and the parameter it
# fell on depend on the order of the sums, which the BLAS's kernels choose
# by CPU: the check's "parameters" line is compared with both left out, so
# it still says "rounding, below the tolerance" and not which machine ran.
ROUNDING = re.compile(r"(?<![\w.])[0-9]\.[0-9]+e-(?:0[5-9]|[1-9][0-9])(?![\w.])")


def normal(line):
    """Whitespace collapsed, wall time, a trailing '--zero …' note and
    rounding-size differences (with the parameter they fell on) dropped."""
    line = re.sub(r"wall\s+[0-9.]+ ms", "wall", line)
    line = re.sub(r"\s+--zero [0-9].*$", "", line)
    if ROUNDING.search(line):
        line = re.sub(r"\([\w.]+\)\s*$", "(a parameter)", ROUNDING.sub("<rounding>", line))
    return " ".join(line.split())


def run(exe, args):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=300)
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        sys.exit(f"readme_numbers: {exe} {' '.join(args)} failed ({proc.returncode}):\n{out}")
    return out


def main(argv):
    if len(argv) != 5:
        sys.exit("usage: readme_numbers.py PTDP PTDP_F64 CHECK README")
    exes = {"ptdp": argv[1], "ptdp-f64": argv[2]}
    with open(argv[4], encoding="utf-8") as f:
        readme = [normal(l) for l in f.read().split("\n")]
    problems = []
    for exe, args, kinds in RUNS:
        out = run(exes[exe], args).split("\n")
        command = f"{exe} {' '.join(args)}"
        for kind in kinds:
            printed = [normal(l) for l in out if re.match(KINDS[kind], l)]
            if not printed:
                problems.append(f"{command} no longer prints a '{kind}' line")
            elif printed[0] not in readme:
                problems.append(f"the README does not quote what {command} prints now ({kind}):\n    {printed[0]}")
    # The check's own output: the README's block after "Done", line by line.
    check = [normal(l) for l in run(argv[3], []).split("\n")]
    raw = open(argv[4], encoding="utf-8").read()
    at = raw.find("Done (the last configuration):")
    block = raw[at:].split("```")[1] if at >= 0 else ""
    quoted = [normal(l) for l in block.split("\n") if l.strip()]
    if not quoted:
        problems.append("the README quotes no block of the check's output after 'Done (the last configuration):'")
    for line in quoted:
        if line not in check:
            problems.append(f"the check no longer prints this line the README quotes:\n    {line}")
    for p in problems:
        print(f"readme_numbers: {p}")
    if problems:
        return 1
    print(f"readme_numbers: ok — {len(RUNS)} commands and the check print every line the README quotes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
