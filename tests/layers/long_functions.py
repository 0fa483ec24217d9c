#!/usr/bin/env python3
"""long_functions.py [--allow FILE] SOURCE_DIR [ROOT...] — no function over 80 lines in src/ or cli/.

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

long_functions_allow.txt keeps, for a while, functions that are someone
else's to split (each line `FILE FUNCTION  why`); a line that no longer
names a function over the limit is stale and refused too, so the file
only ever shrinks to empty.  ROOT arguments (long_functions_can_fail.sh)
scan other trees with the same rule, and no allow file but --allow's.
Exit 1 listing each function over the limit (and each stale allow line).
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


def allowed(path):
    """{(file, function): line number in the allow file}."""
    keep = {}
    if path is not None and os.path.exists(path):
        for no, line in enumerate(open(path, encoding="utf-8"), 1):
            words = line.split()
            if len(words) >= 2 and not words[0].startswith("#"):
                keep[(words[0], words[1])] = no
    return keep


def long_ones(root, tops):
    """(file, line, name, lines) of each function over LIMIT lines."""
    hits = []
    for rel in c_files(root, tops):
        for start, name, n in functions(os.path.join(root, rel)):
            if n > LIMIT:
                hits.append((rel, start, name, n))
    return hits


def main():
    args, allow = sys.argv[1:], None
    if args[:1] == ["--allow"]:
        allow, args = args[1], args[2:]
    src, roots = args[0], args[1:]
    if roots:
        hits = [h for r in roots for h in long_ones(r, ["."])]
    else:
        hits = long_ones(src, TOPS)
        allow = allow or os.path.join(HERE, "long_functions_allow.txt")
    keep = allowed(allow)
    bad = [h for h in hits if (h[0], h[2]) not in keep]
    still = {(h[0], h[2]) for h in hits}
    stale = sorted((no, f, fn) for (f, fn), no in keep.items() if (f, fn) not in still)
    for f, start, name, n in sorted(bad, key=lambda h: (-h[3], h[0], h[1])):
        print("%s:%d %s %d" % (f, start, name, n))
    for no, f, fn in stale:
        print("%s:%d: %s %s is not over %d lines (any more): remove the line"
              % (os.path.basename(allow), no, f, fn, LIMIT))
    if bad or stale:
        print("long_functions: %d function(s) over %d lines%s; split each along its logic, "
              "a named step a piece" % (len(bad), LIMIT,
                                        ", %d stale allow line(s)" % len(stale) if stale else ""))
        return 1
    where = ", ".join(roots) if roots else "src/ and cli/"
    print("long_functions: no function over %d lines in %s%s" %
          (LIMIT, where, " (%d allowed for now: %s)" % (len(keep), os.path.basename(allow)) if keep else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
