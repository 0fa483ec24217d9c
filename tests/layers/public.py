#!/usr/bin/env python3
"""public.py SOURCE_DIR — the public headers hold what users use.

A function declared in include/ptdp/*.h is the library's promise to its
users: the CLI, the tests, the lessons, the benchmarks and the docs.  One
that only src/ calls is an internal that leaked; it belongs in a private
header under src/<folder>/ ("parallel/zero_impl.h"), which nothing outside
src/ may include (layers.sh).

    include/ptdp/*.h ─ declared ─┬─ named outside src/ ............. public
                                 ├─ named by a public macro or inline  public
                                 │  (ptdp_all_reduce → ptdp_all_reduce_at)
                                 ├─ in public_allow.txt ............. public on purpose
                                 └─ otherwise ........................ refused

public_allow.txt lists the few kept on purpose (the teaching API a user of
the library naturally calls), each with why; "header.h *" keeps a whole
header.  Prints every refused function with its header and exits 1 if there
is one; an allow-list entry that nothing needs any more is only noted.
"""
import os
import re
import sys

OUTSIDE = ['cli', 'tests', 'tutorials', 'bench', 'docs', 'quickstart', 'README.md']
# this check's own files name the functions they judge
SELF = {'public.py', 'public_allow.txt', 'public_can_fail.sh'}
IDENT = re.compile(r'\bptdp_\w+')


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    return re.sub(r'//[^\n]*', ' ', text)


def read_header(path):
    """(declared functions, names used by its macros and inline bodies)."""
    text = strip_comments(open(path, encoding='utf-8').read())
    text = text.replace('\\\n', ' ')           # a macro is one logical line
    declared, used = set(), set()
    code = []
    for line in text.split('\n'):
        if line.lstrip().startswith('#'):
            if re.match(r'\s*#\s*define\b', line):
                used.update(IDENT.findall(line.split(None, 2)[-1] if line.split()[1:] else ''))
        else:
            code.append(line)
    code = '\n'.join(code)
    depth = 0
    top = []                                    # text at brace depth 0
    for ch in code:
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
        elif depth == 0:
            top.append(ch)
            continue
        if depth > 0 and ch not in '{}':
            top.append(' ')
    top = ''.join(top)
    # inline bodies: everything at depth > 0 that is not a struct's fields
    for m in re.finditer(r'static\s+inline[^;{]*?\b(ptdp_\w+)\s*\(', code):
        declared.add(m.group(1))
        body = code[code.index('{', m.end()):]
        d, j = 0, 0
        for j, ch in enumerate(body):
            d += ch == '{'
            d -= ch == '}'
            if d == 0:
                break
        used.update(IDENT.findall(body[:j]))
    # prototypes at file scope: a name followed by "(" after a type
    for m in re.finditer(r'[\w*\s]\*?\s*(ptdp_\w+)\s*\(', top):
        start = top.rfind(';', 0, m.start()) + 1
        head = top[start:m.start()].strip()
        if head and not head.endswith(('=', ',', '(', 'return')):
            declared.add(m.group(1))
    return declared, used


def read_allow(path):
    names, headers = {}, set()
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        line = line.split('#', 1)[0].split()
        if not line:
            continue
        if len(line) == 2 and line[1] == '*':
            headers.add(line[0])
        else:
            names[line[0]] = n
    return names, headers


def names_outside(src):
    """Every ptdp_ name in a file outside src/ (and outside build trees)."""
    paths = []
    for top in OUTSIDE:
        path = os.path.join(src, top)
        if os.path.isfile(path):
            paths.append(path)
        for root, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(('build', '.'))]
            paths += [os.path.join(root, f) for f in files if f not in SELF]
    seen = set()
    for p in paths:
        with open(p, encoding='utf-8', errors='ignore') as f:
            seen.update(IDENT.findall(f.read()))
    return seen


def main():
    src = sys.argv[1]
    allow_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'public_allow.txt')
    if len(sys.argv) > 2:
        allow_path = sys.argv[2]
    allow, allow_headers = read_allow(allow_path)
    inc = os.path.join(src, 'include', 'ptdp')
    declared, by_header = {}, set()
    for h in sorted(os.listdir(inc)):
        if h.endswith('.h'):
            d, u = read_header(os.path.join(inc, h))
            for f in d:
                declared.setdefault(f, h)
            by_header |= u
    outside = names_outside(src)
    bad = 0
    internal = 0
    for f in sorted(declared):
        h = declared[f]
        if f in outside or f in by_header:
            continue
        internal += 1
        if f in allow or h in allow_headers:
            continue
        print(f'public: {f} (include/ptdp/{h}) is used by nothing outside src/: '
              f'declare it in a private header under src/, or keep it in '
              f'tests/layers/public_allow.txt saying why', file=sys.stderr)
        bad = 1
    for f in sorted(allow):
        if f not in declared or f in outside or f in by_header:
            print(f'public: note: {f} in public_allow.txt is no longer needed there')
    print(f'public: {len(declared)} public functions, {internal} used only inside src/ '
          f'(all kept on purpose in public_allow.txt)' if not bad else
          f'public: {len(declared)} public functions, {internal} used only inside src/')
    return bad


if __name__ == '__main__':
    sys.exit(main())
