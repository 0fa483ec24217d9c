#!/usr/bin/env python3
"""model_names.py SOURCE_DIR [ROOT...] — no model name outside the models.

A model owns its identity: its name, its kind and its settings are known
to its own files (src/models/), to the registry that lists it
(src/models/models.c) and to its own command-line file (cli/models/).
Everything else — the parallel layer, the training loop, the planner, the
commands — asks the registry (models.h), the model's table (model.h,
model_plan.h) or its CLI table (cli/model_flags.h).  So in the code of
src/ and cli/ outside those places (comments aside: they may explain),
this finds none of

    a registered name as a word      gpt, mlp  (from `.name = "…"` in src/models/)
    a model's symbols                ptdp_gpt_*, PTDP_GPT_*, ptdp_mlp_*, …
    a model's headers                #include "ptdp/gpt.h", "ptdp/gpt_cost.h", …

ROOT arguments (tests/layers/model_names_can_fail.sh) scan other trees
with the same rules.  Exit 1 naming file:line and the word for each hit.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from c_source import strip_comments  # noqa: E402

ALLOWED = ("src/models/", "cli/models/")


def model_names(src):
    names = set()
    models = os.path.join(src, "src", "models")
    for f in sorted(os.listdir(models)):
        if f.endswith(".c"):
            with open(os.path.join(models, f), encoding="utf-8") as fh:
                names.update(re.findall(r'\.name\s*=\s*"([a-z0-9_]+)"', fh.read()))
    return sorted(names)


def pattern(names):
    alt = "|".join(re.escape(n) for n in names)
    return re.compile(r"(?i)\b(?:ptdp_(?:model_)?(?:%s)\w*|(?:%s))\b|#\s*include\s*\"ptdp/(?:%s)\w*\.h\"" %
                      (alt, alt, alt))


def scan_one(root, rel, pat):
    with open(os.path.join(root, rel), encoding="utf-8") as fh:
        code = strip_comments(fh.read())
    return ["%s:%d: %s" % (rel, no, m.group(0))
            for no, line in enumerate(code.split("\n"), 1) for m in pat.finditer(line)]


def scan(root, rel_roots, pat):
    hits = []
    for top in rel_roots:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if rel.startswith(ALLOWED):
                    continue
                hits += scan_one(root, rel, pat)
    return hits


def main():
    src = sys.argv[1]
    names = model_names(src)
    if not names:
        print("model_names: no `.name = \"…\"` found in src/models/", file=sys.stderr)
        return 1
    pat = pattern(names)
    roots = sys.argv[2:]
    hits = []
    if roots:
        for r in roots:
            hits += scan(r, ["."], pat)
    else:
        hits = scan(src, ["src", "cli"], pat)
    for h in hits:
        print("model name outside the models: " + h)
    if hits:
        print("model_names: %d hit(s); ask the registry (models.h) or the model's table instead" % len(hits))
        return 1
    print("model_names: no model name (%s) outside src/models/ and cli/models/" % ", ".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
