#!/usr/bin/env python3
"""The explorer (web/index.html) in a real browser, against the CLI.

    explorer.py PTDP INDEX_HTML MODULE_JS [--screenshots DIR]

For each argument set below, headless Chromium opens the page with the
arguments in its hash (index.html#tool=schedule&pp=4&...), the page runs the
WebAssembly build of the command, and this test reads what the page shows
from its DOM (every number by its data-key), then runs the native CLI with
the very words the page says it ran (its "command" line) and compares:

    schedule   exit status, makespan, bubble (measured, formula, its words),
               peak micro-batches per stage (--report's JSON), and the whole
               printed drawing
    plan       exit status, how many layouts, and each one's dp tp pp cp b M
               schedule zero recompute memory/GPU step (--json), and the
               planner's own page (--html) inside the iframe
    refused    exit status 2 and the page's message equal to the CLI's stderr

Every page must load with no console message and no uncaught error.  The
test builds nothing: without Chromium or the built module it is skipped
(exit 77) with a message, unless PTDP_WEB_REQUIRED=1 (CI), where a skip is a
failure.  --screenshots DIR also saves a picture of each of the two tools.
"""
import html.parser
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import urllib.parse

from browser import find_chromium, skip

SCHEDULES = [
    {"schedule": "1f1b", "pp": "4", "micro-batches": "8"},
    {"schedule": "gpipe", "pp": "4", "micro-batches": "8"},
    {"schedule": "interleaved", "pp": "4", "micro-batches": "8", "virtual-stages": "2"},
    {"schedule": "zb-h1", "pp": "4", "micro-batches": "8", "backward-input-time": "1.5",
     "backward-weight-time": "0.5"},
    {"schedule": "dualpipev", "pp": "4", "micro-batches": "10"},
    {"schedule": "dualpipe", "pp": "4", "micro-batches": "10", "forward-time": "2", "backward-time": "3"},
    {"schedule": "1f1b", "pp": "8", "micro-batches": "16", "forward-time": "2", "backward-time": "3",
     "send-time": "0.5"},
]
PLANS = [
    {"model": "gpt", "layers": "24", "hidden": "2048", "heads": "16", "seq-len": "2048", "vocab": "51200",
     "batch": "512", "gpus": "64", "profile": "dgx-a100-80g", "top": "5"},
    # the 1T GPT of the PTD-P paper: buckets and messages past 4 GiB
    {"model": "gpt", "layers": "128", "hidden": "25600", "heads": "160", "seq-len": "2048", "vocab": "51200",
     "batch": "3072", "gpus": "3072", "profile": "dgx-a100-80g", "precision": "bf16", "top": "3"},
    {"model": "llama", "layers": "32", "hidden": "4096", "heads": "32", "seq-len": "4096", "vocab": "128256",
     "batch": "1024", "gpus": "256", "profile": "dgx-h100", "precision": "bf16", "top": "4"},
    {"model": "gpt", "layers": "12", "hidden": "768", "heads": "12", "seq-len": "1024", "vocab": "50304",
     "batch": "64", "gpus": "8", "profile": "h100-nvlink", "top": "6"},
]
REFUSED = [
    ("schedule", {"schedule": "1f1b", "pp": "0"}),
    ("schedule", {"schedule": "1f1b", "backward-weight-time": "1"}),
    ("plan", {"model": "gpt", "gpus": "0"}),
]


class Dom(html.parser.HTMLParser):
    """Each section's data-key texts; the plan's table rows; the iframe's page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.section, self.keys, self.rows, self.stack = None, {}, [], []
        self.ready, self.srcdoc = False, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body" and a.get("data-ready") == "yes":
            self.ready = True
        if tag == "section":
            self.section = a.get("id")
        if tag == "iframe":
            self.srcdoc = a.get("srcdoc")
        if tag == "tr" and "data-rank" in a:
            self.rows.append({})
        if "data-key" in a:
            self.stack.append([a["data-key"], tag == "td", []])
        elif self.stack and tag not in ("br", "img", "input", "meta"):
            self.stack.append(None)

    def handle_endtag(self, tag):
        if tag == "section":
            self.section = None
        if not self.stack:
            return
        top = self.stack.pop()
        if top is None:
            return
        key, in_row, parts = top
        text = "".join(parts)
        if in_row:
            self.rows[-1][key] = text
        else:
            self.keys[(self.section, key)] = text

    def handle_data(self, data):
        for top in self.stack:
            if top is not None:
                top[2].append(data)


def open_page(chromium, index, hash_args):
    url = pathlib.Path(index).resolve().as_uri() + "#" + urllib.parse.urlencode(hash_args)
    with tempfile.TemporaryDirectory() as profile:
        p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000", "--dump-dom", url],
                           capture_output=True, text=True, timeout=180)
    dom = Dom()
    dom.feed(p.stdout)
    console = [line for line in p.stderr.splitlines() if "CONSOLE" in line]
    return url, dom, console


def run_cli(ptdp, words, tmp):
    p = subprocess.run([ptdp] + words, capture_output=True, text=True, cwd=tmp, timeout=300)
    return p.returncode, p.stdout, p.stderr


def numbers_equal(page_text, value):
    return page_text != "" and float(page_text) == float(value)


class Check:
    def __init__(self):
        self.failures, self.compared = [], 0

    def equal(self, what, page, cli):
        self.compared += 1
        if page != cli:
            self.failures.append(f"{what}: the page shows {page!r}, the CLI {cli!r}")

    def true(self, what, ok):
        self.compared += 1
        if not ok:
            self.failures.append(what)


def page_words(check, dom, section, tool, hash_args):
    """The words the page ran (its command line), checked to hold the hash's."""
    command = dom.keys.get((section, "command"), "").split()
    check.true(f"{tool} {hash_args}: the page shows no command (page loaded? module built?)",
               command[:2] == ["ptdp", tool])
    for k, v in hash_args.items():
        if k != "tool":
            check.true(f"{tool}: the page ran {command} without --{k} {v}", f"--{k} {v}" in " ".join(command))
    return command[1:]


def check_schedule(check, ptdp, dom, args, tmp):
    sec = "schedule-section"
    words = page_words(check, dom, sec, "schedule", args)
    rc, out, err = run_cli(ptdp, words + ["--report", "r.json"], tmp)
    check.equal(f"schedule {args}: exit", dom.keys.get((sec, "exit")), str(rc))
    if rc != 0:
        return
    rep = json.loads((pathlib.Path(tmp) / "r.json").read_text())
    for key, want in (("makespan", rep["makespan"]), ("bubble.measured", rep["bubble"]["measured"]),
                      ("bubble.formula", rep["bubble"]["formula"])):
        page = dom.keys.get((sec, key), "")
        check.true(f"schedule {args}: {key} the page shows {page!r}, the CLI {want!r}", numbers_equal(page, want))
    check.equal(f"schedule {args}: formula words", dom.keys.get((sec, "bubble.formula_words")),
                rep["bubble"]["formula_words"])
    check.equal(f"schedule {args}: peak in flight", dom.keys.get((sec, "peak_in_flight")),
                " ".join(str(s["peak_in_flight"]) for s in rep["stages"]))
    drawn = [line for line in out.rstrip("\n").split("\n") if not line.startswith("wrote ")]
    shown = [line for line in dom.keys.get((sec, "stdout"), "").split("\n") if not line.startswith("wrote ")]
    check.equal(f"schedule {args}: the printed drawing", shown, drawn)


PLAN_KEYS = ("dp", "tp", "pp", "cp", "micro_batch_size", "micro_batches", "schedule", "zero", "recompute",
             "memory_per_gpu_bytes", "step_s")


def check_plan(check, ptdp, dom, args, tmp):
    sec = "plan-section"
    words = page_words(check, dom, sec, "plan", args)
    rc, out, err = run_cli(ptdp, words + ["--json"], tmp)
    check.equal(f"plan {args}: exit", dom.keys.get((sec, "exit")), str(rc))
    if rc != 0:
        return
    cands = json.loads(out)["candidates"]
    check.equal(f"plan {args}: layouts", dom.keys.get((sec, "count")), str(len(cands)))
    check.equal(f"plan {args}: table rows", len(dom.rows), len(cands))
    for i, (row, c) in enumerate(zip(dom.rows, cands)):
        for k in PLAN_KEYS:
            page, want = row.get(k, ""), c[k]
            if isinstance(want, (int, float)) and not isinstance(want, bool):
                check.true(f"plan {args} #{i + 1} {k}: the page shows {page!r}, the CLI {want!r}",
                           numbers_equal(page, want))
            else:
                check.equal(f"plan {args} #{i + 1} {k}", page, str(want))
    check.true(f"plan {args}: the planner's page (memory bars) is not in the iframe",
               dom.srcdoc is not None and "data-key" in dom.srcdoc and str(cands[0]["memory_per_gpu_bytes"])
               in dom.srcdoc)


def check_refused(check, ptdp, dom, tool, args, tmp):
    sec = f"{tool}-section"
    words = page_words(check, dom, sec, tool, args)
    rc, out, err = run_cli(ptdp, words, tmp)
    check.true(f"{tool} {args}: the CLI accepted it (exit {rc}), a refused input was expected", rc == 2)
    check.equal(f"{tool} {args}: exit", dom.keys.get((sec, "exit")), str(rc))
    check.equal(f"{tool} {args}: the message", dom.keys.get((sec, "error")), err.rstrip("\n"))


def screenshots(chromium, index, out):
    out.mkdir(parents=True, exist_ok=True)
    shots = {"explorer-schedule.png": ({"tool": "schedule", "schedule": "interleaved", "pp": "4",
                                        "micro-batches": "8", "virtual-stages": "2"}, "1200,900"),
             "explorer.png": (dict({"tool": "plan"}, **PLANS[3]), "1200,1400")}
    for name, (args, size) in shots.items():
        url = pathlib.Path(index).resolve().as_uri() + "#" + urllib.parse.urlencode(args)
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                            "--hide-scrollbars", "--virtual-time-budget=20000", f"--screenshot={out / name}",
                            f"--window-size={size}", url], capture_output=True, timeout=180, check=True)
        print(f"wrote {out / name}")


def main():
    if len(sys.argv) not in (4, 6):
        print(__doc__)
        return 2
    ptdp, index, module = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    chromium = find_chromium()
    if chromium is None:
        skip("no Chromium (Debian: apt-get install chromium)")
    if not os.path.exists(module):
        skip(f"{module} is not built (web/build.sh, with emscripten: apt-get install emscripten)")
    if len(sys.argv) == 6:
        screenshots(chromium, index, pathlib.Path(sys.argv[5]))
        return 0
    check, sets = Check(), 0
    cases = [("schedule", a, check_schedule) for a in SCHEDULES] + [("plan", a, check_plan) for a in PLANS]
    cases += [(tool, a, lambda c, p, d, a, t, tool=tool: check_refused(c, p, d, tool, a, t)) for tool, a in REFUSED]
    with tempfile.TemporaryDirectory() as tmp:
        for tool, args, fn in cases:
            url, dom, console = open_page(chromium, index, dict({"tool": tool}, **args))
            check.true(f"{url}: the page did not finish (data-ready)", dom.ready)
            check.equal(f"{url}: console messages", console, [])
            check.equal(f"{url}: uncaught errors", dom.keys.get((None, "page_errors"), ""), "")
            check.equal(f"{url}: loading the module", dom.keys.get((None, "load_error"), ""), "")
            fn(check, ptdp, dom, args, tmp)
            sets += 1
    for f in check.failures:
        print("FAIL:", f)
    print(f"{sets} argument sets, {check.compared} comparisons of the page with the CLI, "
          f"{len(check.failures)} failed")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
