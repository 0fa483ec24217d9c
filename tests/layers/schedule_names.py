#!/usr/bin/env python3
"""schedule_names.py SOURCE_DIR [ROOT...] — no schedule name outside the registry.

A schedule is its registry row (include/ptdp/schedule.h): its name, what
it can run with and why not, its bubble formula, what a stage keeps, how
its timing grows.  Its name is written once, in the row
(src/parallel/schedule_registry.c); `--schedule NAME` is looked up once
where a command line is read, and everything else — validation, the
executor, the planner, `ptdp schedule`, the figures, the help texts and
the reports — reads the row's fields or takes a row the registry exports
(ptdp_schedule_row_gpipe, …).  So in the code of src/ and cli/ outside the
registry file this finds no string literal that holds a registered name
as a word:

    "gpipe"                                a name looked up or compared
    "use --schedule 1f1b or gpipe"         a message that re-teaches the rows
    "--schedule interleaved|zb-h1"         a help text that lists them by hand

Comments may name schedules (they explain), and so may the lines kept on
purpose in schedule_names_allow.txt (a figure's file, named after the
schedule it draws).  ROOT arguments (schedule_names_can_fail.sh) scan
other trees with the same rules.  Exit 1 naming file:line and the literal.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from c_source import strip_comments  # noqa: E402

REGISTRY = "src/parallel/schedule_registry.c"
HERE = os.path.dirname(os.path.abspath(__file__))


def schedule_names(src):
    with open(os.path.join(src, REGISTRY), encoding="utf-8") as fh:
        return sorted(set(re.findall(r'\.name\s*=\s*"([a-z0-9_-]+)"', fh.read())))


def allowed(src):
    """(file, literal) pairs kept on purpose: 'FILE "LITERAL"  why' lines."""
    keep = set()
    path = os.path.join(HERE, "schedule_names_allow.txt")
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            m = re.match(r'\s*(\S+)\s+"([^"]*)"', line)
            if m and not line.lstrip().startswith("#"):
                keep.add((m.group(1), m.group(2)))
    return keep


def scan_one(root, rel, word, keep):
    with open(os.path.join(root, rel), encoding="utf-8") as fh:
        code = strip_comments(fh.read())
    hits = []
    for no, line in enumerate(code.split("\n"), 1):
        for lit in re.finditer(r'"((?:\\.|[^"\\])*)"', line):
            if word.search(lit.group(1)) and (rel, lit.group(1)) not in keep:
                hits.append('%s:%d: "%s"' % (rel, no, lit.group(1)))
    return hits


def scan(root, tops, word, keep):
    hits = []
    for top in tops:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
                if rel != REGISTRY:
                    hits += scan_one(root, rel, word, keep)
    return hits


def main():
    src = sys.argv[1]
    names = schedule_names(src)
    if not names:
        print("schedule_names: no `.name = \"…\"` found in " + REGISTRY, file=sys.stderr)
        return 1
    # a name as a word: not inside a longer name or identifier (1f1b-naive is its own)
    word = re.compile(r"(?<![A-Za-z0-9_-])(?:%s)(?![A-Za-z0-9_-])" % "|".join(re.escape(n) for n in names))
    roots = sys.argv[2:]
    hits = []
    if roots:
        for r in roots:
            hits += scan(r, ["."], word, set())
    else:
        hits = scan(src, ["src", "cli"], word, allowed(src))
    for h in hits:
        print("schedule name outside the registry: " + h)
    if hits:
        print("schedule_names: %d hit(s); read the row (schedule.h) or take one the registry exports" % len(hits))
        return 1
    print("schedule_names: no schedule name (%s) in a literal of src/ or cli/ outside %s" %
          (", ".join(names), REGISTRY))
    return 0


if __name__ == "__main__":
    sys.exit(main())
