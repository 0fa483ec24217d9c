#!/usr/bin/env python3
"""svg_text_fits.py FIGURE.svg… — every text of a figure fits its width, and
no two texts are drawn on top of each other.

A text's width is estimated from its characters (Helvetica's advance widths,
in ems: narrow i l . , ' 0.28, wide M W m w 0.85, capitals 0.67, digits and
other lower case 0.55, a space 0.28) times its font size; its box is that
width by 0.75 x the size above its baseline, placed by its text-anchor and
moved by the translate() of the groups around it.

    x ─────────── width ───────────►
    ┌──────────────────────────────┐ ▲ 0.75 size
    │Filling the bubble: p = 4 …   │ │
    └──────────────────────────────┘ ┘ baseline y        (inside 0 … svg width)

Two boxes overlap when they share more than 2 px each way.  Exit 1 naming
the figure, the text and what it runs into."""
import re
import sys
import xml.dom.minidom

NARROW, WIDE = set("il.,:;'|!ijtfI()[] "), set("MWmw@%")


def em_width(text):
    w = 0.0
    for c in text:
        if c in NARROW:
            w += 0.28
        elif c in WIDE:
            w += 0.85
        elif c.isupper():
            w += 0.67
        else:
            w += 0.55
    return w


def boxes(node, dx=0.0, dy=0.0, out=None):
    out = [] if out is None else out
    for child in node.childNodes:
        if child.nodeType != child.ELEMENT_NODE:
            continue
        cx, cy = dx, dy
        m = re.search(r"translate\(\s*([-\d.e]+)[ ,]+([-\d.e]+)\s*\)", child.getAttribute("transform") or "")
        if m:
            cx, cy = dx + float(m.group(1)), dy + float(m.group(2))
        if child.tagName == "text":
            text = "".join(t.data for t in child.childNodes if t.nodeType == t.TEXT_NODE)
            size = float(child.getAttribute("font-size") or 12)
            width = em_width(text) * size
            x = cx + float(child.getAttribute("x") or 0)
            y = cy + float(child.getAttribute("y") or 0)
            anchor = child.getAttribute("text-anchor") or "start"
            left = x - width / 2 if anchor == "middle" else x - width if anchor == "end" else x
            if child.getAttribute("transform") and "rotate" in child.getAttribute("transform"):
                continue   # a rotated axis label: not a horizontal box
            out.append((left, y - 0.75 * size, left + width, y, text))
        else:
            boxes(child, cx, cy, out)
    return out


def check(path):
    doc = xml.dom.minidom.parse(path)
    svg = doc.documentElement
    width = float(svg.getAttribute("width"))
    bad = []
    bs = [b for b in boxes(svg) if b[4].strip()]
    for (x0, y0, x1, y1, text) in bs:
        if x0 < -2 or x1 > width + 2:
            bad.append(f"{path}: '{text[:60]}' runs from x {x0:.0f} to {x1:.0f}, past the width {width:.0f}")
    for i, a in enumerate(bs):
        for b in bs[i + 1:]:
            if min(a[2], b[2]) - max(a[0], b[0]) > 2 and min(a[3], b[3]) - max(a[1], b[1]) > 2:
                bad.append(f"{path}: '{a[4][:40]}' and '{b[4][:40]}' are drawn on top of each other "
                           f"(x {a[0]:.0f}-{a[2]:.0f} and {b[0]:.0f}-{b[2]:.0f}, y {a[3]:.0f} and {b[3]:.0f})")
    return bad


def main():
    bad = [line for path in sys.argv[1:] for line in check(path)]
    for line in bad:
        print("FAIL  " + line)
    if not bad:
        print(f"ok    {len(sys.argv) - 1} figures: every text inside the width, none on top of another")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
