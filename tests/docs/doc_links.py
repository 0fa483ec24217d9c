#!/usr/bin/env python3
"""doc_links.py — every relative link of the documentation leads somewhere.

In README.md and docs/*.md (or the pages given), each Markdown link or image
[text](target) outside code is checked:

    target = path            the file or folder exists, from the page's folder
    target = path#anchor     …and, for a Markdown file, it has a heading whose
    target = #anchor         GitHub anchor is `anchor` (this page's, for #…)

A heading's anchor is GitHub's: lower case, every character but letters,
digits, spaces, '-' and '_' dropped, spaces made '-'; a repeated heading
gets -1, -2, ….  URLs (http:, mailto:, …) and absolute paths are left alone.

And each page but a README opens with its table of contents: every `## `
heading is linked (#anchor) from the text above the first of them.

    doc_links.py SOURCE_DIR [FILE.md …]

Prints each broken link with its page and line; exit status 1 if any.
"""
import glob
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`]*`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose(text):
    """(line number, line) of a page outside its fenced blocks, code spans blanked."""
    fenced = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def slug(heading):
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)        # a link in a heading: its text
    h = h.strip().lower()
    h = "".join(c for c in h if c.isalnum() or c in " -_")
    return h.replace(" ", "-")


def anchors(path, cache={}):
    """The anchors of a Markdown page's headings."""
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        seen, out = {}, set()
        for _, line in prose(text):
            m = HEADING.match(line)
            if not m:
                continue
            a = slug(m.group(2))
            k = seen.get(a, 0)
            seen[a] = k + 1
            out.add(a if k == 0 else f"{a}-{k}")
        cache[path] = out
    return cache[path]


def check(page):
    """Problems of one page's links, as 'page:line: …' strings."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    problems, links = [], 0
    for n, line in prose(text):
        for m in LINK.finditer(CODE_SPAN.sub("``", line)):
            target = m.group(1)
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("/"):
                continue
            links += 1
            path, _, anchor = target.partition("#")
            file = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(file):
                problems.append(f"{page}:{n}: {target}: {path} does not exist")
                continue
            if anchor and file.endswith(".md") and anchor not in anchors(file):
                problems.append(f"{page}:{n}: {target}: {os.path.basename(file)} has no heading #{anchor}")
    return problems, links


def contents(page):
    """Problems of a page's table of contents: the ## headings it does not link."""
    if os.path.basename(page) == "README.md":
        return []
    with open(page, encoding="utf-8") as f:
        text = f.read()
    top, heads = [], []
    for _, line in prose(text):
        if line.startswith("## "):
            heads.append(line[3:].strip())
        elif not heads:
            top.append(line)
    linked = set(re.findall(r"\]\(#([^)\s]+)\)", "\n".join(top)))
    return [f"{page}: its contents at the top do not link the heading '{h}' (#{slug(h)})"
            for h in heads if slug(h) not in linked]


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: doc_links.py SOURCE_DIR [FILE.md ...]")
    src = argv[1]
    pages = argv[2:] or [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    problems, links = [], 0
    for page in pages:
        p, n = check(page)
        problems += p + contents(page)
        links += n
    for p in problems:
        print(f"doc_links: {p}")
    print(f"doc_links: {links} relative links in {len(pages)} pages, {len(problems)} broken "
          f"(or headings missing from a page's contents)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
