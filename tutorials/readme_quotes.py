#!/usr/bin/env python3
"""readme_quotes.py — every output a lesson's README quotes is what the code prints today.

A README shows what a student will see: the check's verdicts (right, wrong,
unfinished) and the output of the `ptdp` commands it suggests.  Each such
number is a claim, so this script reruns what printed it and fails, naming
the line, when the README no longer matches:

    ```sh                               a command block: each line that runs
    ./build-student/cli/ptdp-f64 …      ptdp or ptdp-f64 is run here (with
    ```                                 the build's executables)
    ```                                 the block right after it: every line
    ptdp train (f64): 2 devices …       must be a line those commands print
    …                                   ("…" stands for lines left out)
    ```

    <!-- output of: ptdp train --model gpt -->
    ```                                 a block after such a comment: the
    activations a micro-batch keeps …   output of that command
    ```

    ```                                 a block with a check's verdict lines
    lesson 08: …                        ("lesson NN:", "  ok", "  WRONG"):
      ok     N 1: …                     every line must be printed by the
    ```                                 check, its untouched exercise or one of
                                        its wrong answers (wrong/*.txt)

Other blocks (pictures, formulas, setup commands) are left alone.  Lines
are compared with their whitespace collapsed and wall-clock times dropped;
a difference at rounding (n.ne-NN below 1e-4) matches any other such.

    readme_quotes.py README PTDP PTDP_F64 CHECK [OTHER_CHECK…]
"""
import os
import re
import subprocess
import sys

VERDICT = re.compile(r"^(lesson [0-9]{2}[a-z]?:|  ok |  WRONG )")
OUTPUT_OF = re.compile(r"^<!-- output of: (.*) -->$")
RUNS_PTDP = re.compile(r"^(?:\$ )?(?:\./)?(?:[\w.-]+/)*cli/(ptdp(?:-f64)?)\s+(.*)$|^(?:\$ )?(ptdp(?:-f64)?)\s+(.*)$")


# A difference at float's rounding (below 1e-4, written n.ne-NN) depends on
# the order of the sums, which the BLAS's kernels choose by CPU: a quoted
# one matches any such number, so the quote still says "rounding, below the
# tolerance" and not which machine printed it.
ROUNDING = re.compile(r"(?<![\w.])[0-9]\.[0-9]e-(?:0[5-9]|[1-9][0-9])(?![\w.])")


def normal(line):
    line = re.sub(r"wall\s+[0-9.]+ (?:ms|s)", "wall", line)
    line = ROUNDING.sub("<rounding>", line)
    return " ".join(line.split())


def blocks(text):
    """(info string, lines, the non-blank line before the fence) per fenced block."""
    out, lines = [], text.split("\n")
    i, before = 0, ""
    while i < len(lines):
        if lines[i].startswith("```"):
            info = lines[i][3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append((info, lines[i + 1:j], before))
            i = j + 1
            before = ""
            continue
        if lines[i].strip():
            before = lines[i].strip()
        i += 1
    return out


def command(line, exes):
    """The argv of a README line that runs ptdp, or None."""
    m = RUNS_PTDP.match(line.split("  #")[0].strip())
    if not m:
        return None
    name, rest = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    rest = rest.replace("\\", " ")
    return [exes[name]] + rest.split()


def run(argv):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=300)
    return proc.stdout.decode("utf-8", "replace")


def joined_commands(lines):
    """Command lines with their trailing-backslash continuations joined."""
    out, cur = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
        else:
            out.append(cur + line)
            cur = ""
    if cur:
        out.append(cur)
    return out


def main(argv):
    if len(argv) < 5:
        sys.exit("usage: readme_quotes.py README PTDP PTDP_F64 CHECK [OTHER_CHECK...]")
    readme, exes = argv[1], {"ptdp": argv[2], "ptdp-f64": argv[3]}
    checks = argv[4:]
    with open(readme, encoding="utf-8") as f:
        bs = blocks(f.read())
    problems, quoted = [], 0
    verdicts = None          # the checks' output, run once when first needed
    pending = None           # the output of the last command block
    for info, lines, before in bs:
        if info in ("sh", "bash", "console"):
            cmds = [c for c in (command(l, exes) for l in joined_commands(lines)) if c]
            pending = [normal(l) for c in cmds for l in run(c).split("\n")] if cmds else None
            continue
        expected = pending
        pending = None
        m = OUTPUT_OF.match(before)
        if m:
            c = command(m.group(1), exes)
            if c is None:
                problems.append(f"'{before}' names no ptdp command")
                continue
            expected = [normal(l) for l in run(c).split("\n")]
        elif expected is None and any(VERDICT.match(l) for l in lines):
            if verdicts is None:
                verdicts = set(normal(l) for exe in checks for l in run([exe]).split("\n"))
            expected = verdicts
        if expected is None:
            continue
        have = set(expected)
        for line in lines:
            if not line.strip() or line.strip() == "…":
                continue
            quoted += 1
            if normal(line) not in have:
                problems.append(f"nothing prints this line the README quotes:\n    {line.strip()}")
    for p in problems:
        print(f"readme_quotes: {p}")
    if problems:
        return 1
    print(f"readme_quotes: ok — all {quoted} quoted lines of {os.path.basename(os.path.dirname(readme))}'s "
          f"README are printed today")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
