#!/usr/bin/env python3
"""plan_llama_rows.py SOURCE_DIR PTDP — docs/plan.md's Llama 3 tables are
the planner's: every row `python3 docs/plan_validation.py PTDP --llama`
prints (405B in the Llama 3 paper's three layouts, what the differences
cost, 70B) stands in docs/plan.md as printed, so a planner that prices the
llama differently fails here until the page says the new numbers.

And the check can fail: the page with one number of a row changed, or a
row missing, is refused naming the row.
"""
import subprocess
import sys


def rows_of(ptdp, src):
    out = subprocess.run([sys.executable, f"{src}/docs/plan_validation.py", ptdp, "--llama"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        sys.exit(f"plan_validation.py --llama failed ({out.returncode}): {out.stderr.strip()}")
    rows = [line for line in out.stdout.splitlines() if line.startswith("|") and not line.startswith("|---")]
    if "failed" in out.stdout or len(rows) < 3 + 3 + 2 + 3:
        sys.exit("plan_validation.py --llama: a plan failed or rows are missing:\n" + out.stdout)
    return rows


def missing(page, rows):
    lines = set(page.splitlines())
    return [row for row in rows if row not in lines]


def main():
    src, ptdp = sys.argv[1], sys.argv[2]
    rows = rows_of(ptdp, src)
    page = open(f"{src}/docs/plan.md", encoding="utf-8").read()
    gone = missing(page, rows)
    if gone:
        print("docs/plan.md lacks these rows of `python3 docs/plan_validation.py build/cli/ptdp --llama` "
              "(the planner's numbers changed, or the page did):")
        for row in gone:
            print("  " + row)
        sys.exit(1)
    print(f"ok: the {len(rows)} rows of the Llama 3 tables are the planner's")
    # the check can fail: a number of run 1's row changed, run 3's row dropped
    data = [r for r in rows if r.startswith("| 1 |") or r.startswith("| 3 |")]
    changed = page.replace(data[0], data[0].replace(" GiB |", "1 GiB |"))
    dropped = page.replace(data[-1] + "\n", "")
    for what, doctored in (("a number changed", changed), ("a row dropped", dropped)):
        if doctored == page or not missing(doctored, rows):
            sys.exit(f"FAIL: the check accepted the page with {what}")
        print(f"ok: the page with {what} is refused")


if __name__ == "__main__":
    main()
