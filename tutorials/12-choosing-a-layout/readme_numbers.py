#!/usr/bin/env python3
"""readme_numbers.py PTDP CHECK README — lesson 12's README says what runs say.

Two pasted outputs in README.md are rerun and compared line by line:

  1. the memory lines of `ptdp plan … --explain` (the float build, PTDP):
     every line of the pasted block from "memory per GPU" to "total (peak)"
     must be in the command's output, verbatim;
  2. the end of the check's own output (CHECK, built with solution.c):
     every line of the "What you should see" block must be in its output.

A README whose numbers drifted from the code fails here, naming the line.
"""
import subprocess
import sys


def blocks(readme):
    """The fenced blocks of README.md, in order (a fence is a line starting ```)."""
    out, cur = [], None
    for line in readme.split("\n"):
        if line.startswith("```"):
            if cur is None:
                cur = []
            else:
                out.append("\n".join(cur))
                cur = None
        elif cur is not None:
            cur.append(line)
    return out


def main():
    ptdp, check, path = sys.argv[1:4]
    readme = open(path, encoding="utf-8").read()
    failures = 0

    plan = next(b for b in blocks(readme) if b.startswith("$ ptdp plan"))
    lines = plan.split("\n")
    cmd = " ".join(l.rstrip("\\").strip() for l in lines[:lines.index("…")])
    args = cmd.replace("$ ptdp", "").split()
    out = subprocess.run([ptdp] + args, capture_output=True, text=True).stdout
    wanted = [l for l in lines[lines.index("…") + 1:] if l.strip()]
    for line in wanted:
        if line not in out.split("\n"):
            print(f"FAIL  README's ptdp plan --explain line not in the output: {line!r}")
            failures += 1
    print(f"ok    {len(wanted) - failures} of {len(wanted)} pasted --explain lines as the planner prints them")

    seen = next(b for b in blocks(readme) if "lesson 12: all" in b)
    out = subprocess.run([check], capture_output=True, text=True).stdout.split("\n")
    lines = [l for l in seen.split("\n") if l.strip()]
    bad = 0
    for line in lines:
        if line not in out:
            print(f"FAIL  README's check line not in the check's output: {line!r}")
            bad += 1
    print(f"ok    {len(lines) - bad} of {len(lines)} pasted check lines as the check prints them")
    return 1 if failures + bad else 0


if __name__ == "__main__":
    sys.exit(main())
