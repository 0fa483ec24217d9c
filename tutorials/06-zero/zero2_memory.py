#!/usr/bin/env python3
"""zero2_memory.py PTDP_F64 README — lesson 06's "ZeRO-2 peaks higher" is true.

The lesson's README runs ZeRO-1 and ZeRO-2 on the same model and batch
(4 ranks, 4 micro-batches) and quotes device 0's row of each memory table:
ZeRO-2, which shards the gradients, peaks HIGHER than ZeRO-1, and the text
says by how much and why — S/N, because the gradient shard (S/N) is kept
beside a full-size communication bucket (S) while a backward runs, against
ZeRO-1's full gradient buffer (S):

    ZeRO-1:  grads S                        -> S
    ZeRO-2:  grads S/N  +  comm bucket S    -> S + S/N

This script reruns both commands as the README writes them (plus
--report, for exact bytes), and fails unless
  - each command's row for device 0 is the one the README quotes,
  - ZeRO-2's peak total is higher than ZeRO-1's,
  - the difference is exactly S/N (S = ZeRO-1's gradient bytes, N = 4),
    the gradient shard ZeRO-2 keeps, and equals its bucket minus the
    gradient memory it saves,
  - the README states that difference as the CLI prints bytes.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

COMMANDS = {
    1: "./build/cli/ptdp-f64 train --dp 4 --zero 1 --micro-batches 4 --steps 3",
    2: "./build/cli/ptdp-f64 train --dp 4 --zero 2 --micro-batches 4 --steps 3",
}
N = 4


def fmt_bytes(b):
    """As ptdp_format_bytes prints them."""
    if b < 1024:
        return f"{b:.0f} B"
    if b < 1024 * 1024:
        return f"{b / 1024:.2f} KiB"
    if b < 1024 ** 3:
        return f"{b / 1024 ** 2:.2f} MiB"
    return f"{b / 1024 ** 3:.2f} GiB"


def quoted_row(readme, stage):
    """The README runs the two commands one after the other, then quotes
    device 0's row of each table in the same order: the stage-th such row
    after the first command."""
    at = readme.find(COMMANDS[1] + "\n" + COMMANDS[2] + "\n")
    if at < 0:
        sys.exit(f"zero2_memory: the README no longer runs, one after the other,\n  {COMMANDS[1]}\n  {COMMANDS[2]}")
    rows = [l for l in readme[at:].split("\n") if l.startswith("  0 (0,0,0)")]
    if len(rows) < stage:
        sys.exit(f"zero2_memory: the README quotes no row '  0 (0,0,0) …' for ZeRO-{stage}")
    return " ".join(rows[stage - 1].split())


def run(exe, command, report):
    args = shlex.split(command)[1:] + ["--report", report]
    proc = subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                          env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        sys.exit(f"zero2_memory: `{command}` failed ({proc.returncode}):\n{out}")
    rows = [" ".join(l.split()) for l in out.split("\n") if l.startswith("  0 (0,0,0)")]
    if not rows:
        sys.exit(f"zero2_memory: `{command}` printed no memory row for device 0:\n{out}")
    with open(report, encoding="utf-8") as f:
        mem = json.load(f)["devices"][0]["memory_peak_bytes"]
    return rows[0], mem   # the first such row is the memory table's


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: zero2_memory.py PTDP_F64 README")
    exe, readme_path = argv[1], argv[2]
    with open(readme_path, encoding="utf-8") as f:
        readme = f.read()
    problems = []
    mem = {}
    with tempfile.TemporaryDirectory() as tmp:
        for stage, command in COMMANDS.items():
            row, mem[stage] = run(exe, command, os.path.join(tmp, f"zero{stage}.json"))
            want = quoted_row(readme, stage)
            print(f"ZeRO-{stage}: {row}")
            if row != want:
                problems.append(f"ZeRO-{stage}'s row is now\n    {row}\n  the README quotes\n    {want}")
    one, two = mem[1], mem[2]
    S = one["grads"]
    diff = two["total"] - one["total"]
    print(f"peak total: ZeRO-1 {one['total']} B, ZeRO-2 {two['total']} B; difference {diff} B = {fmt_bytes(diff)}")
    print(f"S = {S} B of gradients, S/N = {S / N:.0f} B; ZeRO-2 keeps grads {two['grads']} B, comm {two['comm']} B")
    if diff <= 0:
        problems.append(f"ZeRO-2 does not peak higher than ZeRO-1 ({two['total']} B against {one['total']} B)")
    if S % N != 0 or diff != S // N or two["grads"] != S // N:
        problems.append(f"the difference {diff} B is not the gradient shard S/N = {S}/{N} B "
                        f"(ZeRO-2 grads {two['grads']} B)")
    if diff != two["comm"] - (one["grads"] - two["grads"]):
        problems.append(f"the difference {diff} B is not the bucket ({two['comm']} B) minus the gradient "
                        f"memory saved ({one['grads'] - two['grads']} B)")
    said = f"peaks {fmt_bytes(diff)} higher"
    if said not in readme:
        problems.append(f"the README does not say '{said}'")
    for p in problems:
        print(f"zero2_memory: {p}")
    if problems:
        return 1
    print("zero2_memory: ok — ZeRO-2 peaks higher than ZeRO-1 by S/N, as the README says")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
