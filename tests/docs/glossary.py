#!/usr/bin/env python3
"""glossary.py SOURCE_DIR — the code's names keep docs/glossary.md's meanings.

docs/glossary.md gives "piece", "chunk" and "unit" one meaning each.  This
check reads every identifier of the C sources (comments and string
literals left out: prose and messages are the glossary's to explain) and
refuses one that uses a term where the glossary gives that idea another
word:

    term    means only                     so no identifier contains it in
    ------  -----------------------------  ----------------------------------
    piece   (nothing: retired)             any file
    chunk   the pipeline's model chunk     the layers below the pipeline and
                                           the non-pipeline parallelisms
                                           (segment, shard, share, slab there)
    unit    a model unit (ZeRO-3's)        the pipeline executor and the
                                           schedules (task; time is "time")

Prints each refused identifier as FILE:LINE and exits 1 if there is one.
"""
import fnmatch
import glob
import os
import re
import sys

# (term, files where no identifier may contain it, the words to use there)
RULES = [
    ('piece', ['**/*.[ch]'],
     'the glossary retires "piece": a pipeline model chunk, a ZeRO range, a cross-entropy partial'),
    ('chunk', ['src/core/*', 'src/io/*', 'src/runtime/*', 'src/comm/**/*', 'src/nn/*',
               'src/parallel/zero.c', 'src/parallel/zero_step.c', 'src/parallel/zero_own.c',
               'src/parallel/zero_sum.c', 'src/parallel/zero_stages.c', 'src/parallel/dp.c',
               'src/parallel/cp.c', 'src/parallel/sp.c', 'src/parallel/tp.c',
               'src/parallel/zero_impl.h', 'src/parallel/dp_impl.h',
               'include/ptdp/types.h', 'include/ptdp/arena.h', 'include/ptdp/comm.h',
               'include/ptdp/coll.h', 'include/ptdp/zero.h', 'include/ptdp/dp.h',
               'include/ptdp/cp.h', 'include/ptdp/sp.h', 'include/ptdp/tp.h',
               'tests/test_comm.c', 'tests/test_cp.c', 'tests/test_zero.c',
               'tutorials/01-*/*', 'tutorials/06-*/*', 'tutorials/08-*/*', 'tutorials/10-*/*',
               'cli/figures/figure_ring*.c'],
     '"chunk" is the pipeline\'s model chunk: here say segment (a collective\'s part '
     'of a buffer), shard (a rank\'s part of the state), share (ptdp_share\'s part) or slab'),
    ('unit', ['src/parallel/pp.c', 'src/parallel/schedule*.c', 'include/ptdp/schedule.h',
              'include/ptdp/pp.h', 'cli/figures/figure_pipeline.c'],
     '"unit" is a model unit: the pipeline\'s (micro-batch, slice) work is a task, '
     'a drawing\'s scale is per time'),
]
SOURCES = ['src', 'include', 'cli', 'tests', 'tutorials', 'bench']
TOKENS = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_only(text):
    """The text with comments and literals blanked, lines kept in place."""
    return TOKENS.sub(lambda m: '\n' * m.group(0).count('\n'), text)


def main():
    root = sys.argv[1]
    files = []
    for top in SOURCES:
        files += [os.path.relpath(p, root)
                  for p in glob.glob(os.path.join(root, top, '**', '*.[ch]'), recursive=True)]
    bad = 0
    for term, where, why in RULES:
        pattern = re.compile(r'\b\w*%s\w*\b' % term, re.I)
        for f in sorted(files):
            if not any(fnmatch.fnmatch(f, w) for w in where):
                continue
            with open(os.path.join(root, f), encoding='utf-8', errors='ignore') as fh:
                code = code_only(fh.read())
            for n, line in enumerate(code.split('\n'), 1):
                for ident in pattern.findall(line):
                    print(f'glossary: {f}:{n}: "{ident}" — {why} (docs/glossary.md)', file=sys.stderr)
                    bad = 1
    if not bad:
        print('glossary: every identifier uses piece, chunk and unit as docs/glossary.md says')
    return bad


if __name__ == '__main__':
    sys.exit(main())
