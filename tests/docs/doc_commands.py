#!/usr/bin/env python3
"""doc_commands.py — every `ptdp …` command the documentation shows in a fence runs.

README.md and docs/*.md show commands in fenced blocks, and a reader copies
them.  Each one is run here, `ptdp` and `ptdp-f64` (bare, or as
build/cli/ptdp…) mapped to the build's executables, in a fresh temporary
folder per page and in page order (so a `--save` feeds a later `--load`).
It must exit 0, or the status its page states.

What is a command, in a fence:
    a line `$ CMD` (a console block: only its `$` lines are commands), or, in
    a block with no `$` line, any line that starts with CMD;
    CMD = [path/]ptdp[-f64] WORD … (WORD a subcommand or a flag), or
          mpirun … ptdp …;
    a trailing `\\` joins the next line, `  # …` ends the command, and the
    shell runs the rest of the line (its quotes, a `> /dev/null`);
    an indented line of a block without `$` is a picture's, not a command.

What the page says about a fence, in a comment on the line right before it:
    <!-- exit: 2 -->            its commands must exit 2
    <!-- slow: reason -->       run only by the full test (suite `slow`),
                                not with --fast (the default suite's)
    <!-- not run: reason -->    never run (mpirun, a run of minutes): counted
An mpirun command in a fence without "not run" is an error: it cannot run here.

    doc_commands.py SOURCE_DIR PTDP PTDP_F64 [--fast] [--list] [FILE.md …]

FILE.md… default to SOURCE_DIR's README.md and docs/*.md.  --list prints each
command with what would be done, and runs nothing.  Prints every command
that failed with its output's tail; the last line counts run, slow (skipped),
not run, and the seconds taken.  Exit status 1 if any failed.
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True    # leave no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tutorials"))
from readme_quotes import joined_commands as joined  # noqa: E402  (continuations joined, as the lessons' quotes)

SUBCOMMANDS = {"train", "sample", "plan", "schedule", "fp8", "figures", "demo", "bench",
               "selftest", "version", "help"}
EXE = re.compile(r"^(?:\./)?(?:[\w.-]+/)*(ptdp(?:-f64)?)$")
MARK = re.compile(r"^<!--\s*(exit|slow|not run)\s*:\s*(.*?)\s*-->$")
TIMEOUT = 600


def fences(text):
    """(lines of the block, the comment right before its fence or None) per fenced block."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        if lines[i].startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            before = lines[i - 1].strip() if i > 0 else ""
            out.append((i + 1, lines[i + 1:j], before))
            i = j + 1
        else:
            i += 1
    return out


def command(line):
    """(exe, the rest of the line) for a line that runs ptdp, ('mpirun', None), or None.
    exe is 'ptdp' or 'ptdp-f64'; the rest is left to the shell (quotes, > FILE)."""
    line = line.split("  #")[0].strip()
    words = line.split()
    if len(words) >= 2 and words[0] == "mpirun" and any(EXE.match(w) for w in words):
        return ("mpirun", None)
    if len(words) < 2:
        return None
    m = EXE.match(words[0])
    if not m:
        return None
    if words[1] not in SUBCOMMANDS and not words[1].startswith("-"):
        return None          # not a command of ptdp's
    if re.search(r"\s\([^()]*\):(\s|$)", line):
        return None          # "ptdp train (f64): …", "ptdp bench zero (f32): …" are what a run prints
    return (m.group(1), line[len(words[0]):].strip())


def commands(path):
    """(line number, the command's text, exe, args, mark, value) of every command of a page."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out = []
    for start, lines, before in fences(text):
        m = MARK.match(before)
        mark, value = (m.group(1), m.group(2)) if m else (None, None)
        console = any(l.startswith("$ ") for l in lines)
        for n, line in enumerate(joined(lines)):
            if console:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            elif line[:1].isspace():
                continue         # an indented line is a picture's or an output's
            c = command(line)
            if c:
                out.append((start + n + 1, line.split("  #")[0].strip(), c[0], c[1], mark, value))
    return out


def run(exe, rest, cwd):
    """Run `exe rest` by the shell in cwd: (exit status or None, output)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    try:
        p = subprocess.run(["bash", "-c", shlex.quote(exe) + " " + rest], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=env, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"(no exit after {TIMEOUT} s)"
    return p.returncode, p.stdout.decode("utf-8", "replace")


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    fast, listing = "--fast" in argv, "--list" in argv
    if len(args) < 3:
        sys.exit("usage: doc_commands.py SOURCE_DIR PTDP PTDP_F64 [--fast] [--list] [FILE.md ...]")
    src, exes = args[0], {"ptdp": os.path.abspath(args[1]), "ptdp-f64": os.path.abspath(args[2])}
    pages = args[3:] or [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    ran = slow = not_run = 0
    problems, t0 = [], time.monotonic()
    for page in pages:
        name = os.path.relpath(page, src)
        with tempfile.TemporaryDirectory(prefix="doc_commands.") as tmp:
            for line, text, exe, rest, mark, value in commands(page):
                where = f"{name}:{line}"
                if mark == "not run":
                    not_run += 1
                    if listing:
                        print(f"{where}: not run ({value}): {text}")
                    continue
                if exe == "mpirun":
                    problems.append(f"{where}: needs mpirun, and its fence has no <!-- not run: … -->:\n    {text}")
                    continue
                if mark == "slow" and fast:
                    slow += 1
                    if listing:
                        print(f"{where}: slow ({value}), not with --fast: {text}")
                    continue
                want = int(value) if mark == "exit" else 0
                if listing:
                    print(f"{where}: run, exit {want}: {text}")
                    continue
                t = time.monotonic()
                rc, out = run(exes[exe], rest, tmp)
                ran += 1
                took = time.monotonic() - t
                print(f"{where}: exit {rc} ({took:.1f} s): {text}", flush=True)
                if rc != want:
                    tail = "\n".join("      " + l for l in out.rstrip().split("\n")[-8:])
                    problems.append(f"{where}: exit {rc}, the page says {want} ({took:.1f} s):\n    {text}\n{tail}")
    for p in problems:
        print(f"doc_commands: FAIL {p}")
    took = time.monotonic() - t0
    print(f"doc_commands: {ran} commands run{' (--fast)' if fast else ''}, {len(problems)} failed; "
          f"{slow} slow ones left to the full test; {not_run} marked not run; "
          f"{len(pages)} pages, {took:.1f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
