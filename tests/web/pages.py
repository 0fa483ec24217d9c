#!/usr/bin/env python3
"""The --html pages of ptdp schedule, plan and train in a real browser.

    pages.py PTDP [--screenshots DIR]

tests/cli/html_page.py reads each page as text: its data equals the
command's JSON and every number it shows is that JSON's.  What only a
browser can say is checked here, in headless Chromium:

    every page     loads with no console message and no uncaught error, and
                   its embedded data still parses after the scripts ran
    schedule       the slider works: opened at page.html#mb=K, every box of
                   micro-batch K stays and every other box is dimmed, the
                   label says K; opened plainly, nothing is dimmed ("all")
    train          the timeline's boxes and the --check verdict are there

The pages are made here by the native CLI (PTDP).  Without Chromium the test
is skipped (exit 77) with a message, unless PTDP_WEB_REQUIRED=1 (CI), where a
skip is a failure.  --screenshots DIR saves a picture of each page (the
docs' html-*.png).
"""
import html.parser
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from browser import find_chromium, skip

PAGES = {
    "schedule": ["schedule", "--schedule", "1f1b", "--pp", "4", "--micro-batches", "8"],
    "plan": ["plan", "--model", "gpt", "--layers", "24", "--hidden", "2048", "--heads", "16", "--seq-len", "2048",
             "--vocab", "51200", "--batch", "512", "--gpus", "64", "--profile", "dgx-a100-80g", "--top", "5"],
    "train": ["train", "--dp", "2", "--tp", "2", "--pp", "2", "--micro-batches", "2", "--steps", "3", "--check"],
}


class Dom(html.parser.HTMLParser):
    """The schedule's boxes (data-mb, dimmed or not), the label, the data, the verdict."""

    def __init__(self):
        super().__init__()
        self.boxes, self.data, self.text = [], "", []
        self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "g" and "data-mb" in a:
            self.boxes.append((a["data-mb"], "dim" in (a.get("class") or "").split()))
        if tag == "script" and a.get("id") == "ptdp-data":
            self._in = "data"
        elif tag == "b" and a.get("id") == "mb-shown":
            self._in = "shown"

    def handle_endtag(self, tag):
        if tag in ("script", "b"):
            self._in = None

    def handle_data(self, data):
        if self._in == "data":
            self.data += data
        elif self._in == "shown":
            self.shown = data
        self.text.append(data)


def chromium_args(chromium, profile):
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"]


def open_page(chromium, url):
    with tempfile.TemporaryDirectory() as profile:
        p = subprocess.run(chromium_args(chromium, profile) + ["--dump-dom", url], capture_output=True, text=True,
                           timeout=180)
    dom = Dom()
    dom.feed(p.stdout)
    console = [line for line in p.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return dom, console


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--screenshots"):
        sys.exit(__doc__)
    ptdp = os.path.abspath(sys.argv[1])
    chromium = find_chromium()
    if chromium is None:
        skip("no Chromium (Debian: apt-get install chromium)")
    failures, checked = [], 0

    def expect(ok, what):
        nonlocal checked
        checked += 1
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        pages = {}
        for name, words in PAGES.items():
            page = pathlib.Path(tmp) / f"{name}.html"
            p = subprocess.run([ptdp] + words + ["--html", str(page)], capture_output=True, text=True, timeout=300,
                               cwd=tmp)
            if p.returncode != 0:
                sys.exit(f"pages: ptdp {' '.join(words)} --html failed ({p.returncode}):\n{p.stderr}")
            pages[name] = page.resolve().as_uri()
        for name, url in pages.items():
            dom, console = open_page(chromium, url)
            expect(console == [], f"{name}: console messages: {console}")
            try:
                json.loads(dom.data)
                expect(True, "")
            except ValueError:
                expect(False, f"{name}: after the scripts ran, the page's data no longer parses")
            if name == "schedule":
                expect(len(dom.boxes) >= 8 * 4 * 2, f"schedule: {len(dom.boxes)} boxes, not F and B of 8 on 4 stages")
                expect(not any(d for _, d in dom.boxes), "schedule: opened plainly, some box is dimmed")
                expect(getattr(dom, "shown", "") == "all", "schedule: opened plainly, the label is not 'all'")
                for k in ("0", "3", "7"):
                    at, console = open_page(chromium, url + f"#mb={k}")
                    expect(console == [], f"schedule#mb={k}: console messages: {console}")
                    kept = [mb for mb, dim in at.boxes if not dim]
                    expect(kept and set(kept) == {k}, f"schedule#mb={k}: the boxes left undimmed are {sorted(set(kept))}")
                    expect(len(at.boxes) - len(kept) > 0, f"schedule#mb={k}: no box dimmed")
                    expect(getattr(at, "shown", "") == k, f"schedule#mb={k}: the label says {getattr(at, 'shown', '')!r}")
            if name == "train":
                text = " ".join(dom.text)
                expect("check PASSED" in text, "train: the --check verdict is not on the page")
                expect("all_reduce" in text, "train: the timeline names no all_reduce")
        if len(sys.argv) == 4:
            out = pathlib.Path(sys.argv[3])
            out.mkdir(parents=True, exist_ok=True)
            for name, url in pages.items():
                with tempfile.TemporaryDirectory() as profile:
                    subprocess.run(chromium_args(chromium, profile) +
                                   ["--window-size=1200,900", f"--screenshot={out / f'html-{name}.png'}",
                                    url + ("#mb=2" if name == "schedule" else "")],
                                   capture_output=True, timeout=180)
    for f in failures:
        print("FAIL ", f)
    print(f"pages: {checked} checks, {len(failures)} failed (schedule, plan and train pages in Chromium)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
