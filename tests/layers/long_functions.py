#!/usr/bin/env python3
"""long_functions.py SOURCE_DIR [ROOT...] — no function over 80 lines in src/ or cli/.

A function reads like the math it does: a forward is a short list of op
calls, a command is parse, validate, run, each a handful of named steps.
Past a screenful a function is doing two things, and the second one has
no name yet: split it along its logic, each piece a named step.  So this
reads every C file of src/ and cli/ and lists each function whose body
is longer than LIMIT lines, as

    FILE:LINE NAME LINES      cli/train/train_cmd.c:297 parse 100

Lines are counted as the developers' funclen.py counts them (the same
rule, so the two agree): with
comments blanked and literals dropped, a function starts at the line of a
'{' that opens at brace depth 0 after a ')' and ends at the line of its
closing '}', both counted.  Its name is the first `word (` after the
last ';', '{' or '}' at depth 0 before that brace.

There is no list of exceptions: the last long functions were split, and
a new one is split before it lands.  ROOT arguments
(long_functions_can_fail.sh) scan other trees with the same rule.
Exit 1 listing each function over the limit.
"""
import os
import re
import sys

LIMIT = 80
TOPS = ("src", "cli")
HERE = os.path.dirname(os.path.abspath(__file__))


def functions(path):
    """(first line, name, lines) of every top-level function body in a C
    file: funclen.py's rule."""
    with open(path, errors="replace") as fh:
        src = fh.read()
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    src = re.sub(r'//[^\n]*|"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', "", src)
    out = []
    depth, start, name, line, head = 0, None, None, 1, ""
    for ch in src:
        if ch == "\n":
            line += 1
        if ch == "{":
            if depth == 0 and re.search(r"\)\s*$", head):
                m = re.findall(r"(\w+)\s*\(", head)
                start, name = line, (m[0] if m else "?")
            depth += 1
            head = ""
        elif ch == "}":
            depth -= 1
            if depth == 0 and start is not None:
                out.append((start, name, line - start + 1))
                start = None
            head = ""
        elif ch == ";" and depth == 0:
            head = ""
        elif depth == 0:
            head = (head + ch)[-400:]
    return out


def c_files(root, tops):
    for top in tops:
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(".c"):
                    yield os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")


def long_ones(root, tops):
    """(file, line, name, lines) of each function over LIMIT lines."""
    hits = []
    for rel in c_files(root, tops):
        for start, name, n in functions(os.path.join(root, rel)):
            if n > LIMIT:
                hits.append((rel, start, name, n))
    return hits


def main():
    src, roots = sys.argv[1], sys.argv[2:]
    hits = [h for r in roots for h in long_ones(r, ["."])] if roots else long_ones(src, TOPS)
    for f, start, name, n in sorted(hits, key=lambda h: (-h[3], h[0], h[1])):
        print("%s:%d %s %d" % (f, start, name, n))
    if hits:
        print("long_functions: %d function(s) over %d lines; split each along its logic, "
              "a named step a piece" % (len(hits), LIMIT))
        return 1
    print("long_functions: no function over %d lines in %s" % (LIMIT, ", ".join(roots) if roots else "src/ and cli/"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
