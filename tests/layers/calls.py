#!/usr/bin/env python3
"""calls.py SOURCE_DIR ARCHIVE... — no two files of src/ call each other.

The folders of src/ form a stack (layers.sh checks the includes); inside a
folder the files should form one too.  Two files that call each other are
one idea cut in two, or a lower piece living in the upper file:

    A.c ──calls f()──▶ B.c          a pair: A needs B and B needs A, so
    A.c ◀──calls g()── B.c          neither can be read (or replaced) alone

The compiled objects say who calls whom without parsing C: `nm` lists, for
each object, the global functions it defines (T, W) and the names it needs
from elsewhere (U).  A uses B when one of A's needs is one of B's functions;
taking a function's address (an ops table) counts as using it.  Objects are
named after their source by the build (src/comm/shm/shm.c becomes member
src_comm_shm_shm.c.o); SOURCE_DIR turns them back into paths.

Prints every pair with the functions that tie it, and exits 1 if there is one.
"""
import os
import subprocess
import sys
from collections import defaultdict


def source_names(source_dir):
    """member name of an object -> its source path from the root"""
    names = {}
    for root, _, files in os.walk(os.path.join(source_dir, 'src')):
        for f in files:
            if f.endswith('.c'):
                rel = os.path.relpath(os.path.join(root, f), source_dir)
                names[rel.replace('/', '_') + '.o'] = rel
    return names


def symbols(archive):
    """(object, kind, symbol) for every symbol of every object in archive"""
    out = subprocess.run(['nm', '-A', '-P', archive], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():       # "lib.a[member.o]: name T addr size"
        where, _, rest = line.partition(': ')
        fields = rest.split()
        if where.endswith(']') and len(fields) >= 2:
            yield where[where.rindex('[') + 1:-1], fields[1], fields[0]


def main():
    if len(sys.argv) < 3:
        sys.exit('usage: calls.py SOURCE_DIR ARCHIVE...')
    names = source_names(sys.argv[1])
    defined = {}                         # function -> file defining it
    needs = defaultdict(set)             # file -> functions it needs
    for archive in sys.argv[2:]:
        for obj, kind, sym in symbols(archive):
            path = names.get(obj, obj)
            if kind in ('T', 'W', 'D', 'R', 'B', 'V'):
                defined[sym] = path
            elif kind == 'U':
                needs[path].add(sym)

    uses = defaultdict(lambda: defaultdict(list))   # a -> b -> [functions]
    for a, syms in needs.items():
        for s in sorted(syms):
            b = defined.get(s)
            if b is not None and b != a:
                uses[a][b].append(s)

    pairs = 0
    for a in sorted(uses):
        for b in sorted(uses[a]):
            if a < b and a in uses[b]:
                pairs += 1
                print(f'calls: {a} and {b} call each other:')
                print(f'    {a} -> {b}: {", ".join(uses[a][b])}')
                print(f'    {b} -> {a}: {", ".join(uses[b][a])}')
    if pairs:
        print(f'calls: {pairs} pair(s) of files that call each other', file=sys.stderr)
        return 1
    print(f'calls: no two of {len(needs)} files call each other')
    return 0


if __name__ == '__main__':
    sys.exit(main())
